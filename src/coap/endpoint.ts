// A small CoAP endpoint over UDP (RFC 7252 §4, §5): Message ID allocation, CON
// retransmission with exponential back-off (§4.2, §4.8), de-duplication of received CON/NON by
// (peer, MID) for EXCHANGE_LIFETIME / NON_LIFETIME (§4.5), request/response matching by token
// (§5.3.2), piggy-backed and separate responses, the RFC answers to malformed datagrams
// (classifyDatagram), and a client-side observe (RFC 7641 §3). Used by the kit's network module,
// by tests and by the gateway.
import { EventEmitter } from 'node:events';
import { Code, codeClass, isRequestCode, isResponseCode } from './codes.ts';
import { type Datagrams, openDatagrams } from './datagrams.ts';
import { Deadlines } from './deadlines.ts';
import { type MemoryRef, MessageMemory } from './memory.ts';
import { PeerTokenMap, type TokenKey, tokenKey } from './peer-token-map.ts';
import {
  ACK,
  classifyDatagram,
  CoapMessage,
  CoapOption,
  CON,
  emptyMessage,
  getUintOption,
  NON,
  parseMessage,
  responseTo,
  RST,
  serializeMessage,
  SUGGESTED_MAX_MESSAGE_SIZE,
  uintOption,
  uriOptions,
} from './message.ts';
import { Option, RECOGNIZED_OPTIONS } from './options.ts';
import { derivedTimes, DerivedTimes, initialTimeout, TransmissionParams, transmissionParams } from './timing.ts';

export interface Peer {
  address: string;
  port: number;
}

/** A peer as the endpoint hands it out: one object per address and port, its key made once. */
interface KnownPeer extends Peer {
  readonly key: string;
}

export function peerKey(p: Peer): string {
  return (p as Partial<KnownPeer>).key ?? `${p.address}|${p.port}`;
}

export interface ResponseSpec {
  code: number;
  options?: CoapOption[];
  payload?: Buffer;
}

/** A handler's promise to answer later through `reply` (once), without a Promise per request. */
export const DEFER: unique symbol = Symbol('defer');

/**
 * Returns the response, or undefined for none (a CON then gets an empty ACK, a NON nothing), or a
 * promise of either, or DEFER after which it calls `reply` once with either.
 */
export type RequestHandler = (req: CoapMessage, peer: Peer, reply: (r: ResponseSpec | undefined) => void) => ResponseSpec | undefined | Promise<ResponseSpec | undefined> | typeof DEFER;

/** Called once with a request's response, or with the error that ended it. */
export type ExchangeCallback = (err: Error | undefined, res?: CoapMessage) => void;

export interface EndpointOptions {
  transmission?: Partial<TransmissionParams>;
  recognizedOptions?: ReadonlySet<number>;
  random?: () => number;
  /** Larger datagrams are refused: 4.13 with Size1 for a request, dropped otherwise (RFC 7252 §4.6, §5.9.2.9). */
  maxMessageSize?: number;
  /** Bound on remembered (peer, MID) pairs (received messages: the newest twice this many; sent NON MIDs: the newest this many, at most twice as many), so a flood of distinct MIDs cannot grow memory without end. */
  dedupCapacity?: number;
  /** Called for every message sent and received, for debug traces. */
  trace?: (dir: 'in' | 'out', msg: CoapMessage, peer: Peer) => void;
  /** Called for every datagram refused, with the reason (format error, bad option, oversized). */
  onRefused?: (reason: string, peer: Peer, action: 'reset' | 'ignore' | 'respond') => void;
  /**
   * Which peers may be heard at all. A datagram from any other peer is dropped before it is parsed:
   * no answer, no RST, no ACK (a kit reached only through its gateway, seed §5). Default: everyone.
   */
  accept?: (peer: Peer) => boolean;
}

export interface RequestOptions {
  method: number;
  /** Path and query, e.g. "/snsr/arduino/temp?sens". */
  uri?: string;
  options?: CoapOption[];
  payload?: Buffer;
  /** CON (default) or NON. */
  confirmable?: boolean;
  /** Application deadline for the response (default: EXCHANGE_LIFETIME for CON, NON_LIFETIME for NON). */
  timeoutMs?: number;
  token?: Buffer;
}

export class CoapTimeoutError extends Error {
  constructor(message = 'no response before the deadline') {
    super(message);
    this.name = 'CoapTimeoutError';
  }
}

export class CoapResetError extends Error {
  constructor(message = 'the peer answered RST') {
    super(message);
    this.name = 'CoapResetError';
  }
}

export type DeliveryResult = 'ack' | 'reset' | 'timeout';

export interface EndpointStats {
  received: number;
  sent: number;
  retransmitted: number;
  duplicates: number;
  refused: number;
  resets: number;
  /** Datagrams from peers `accept` turned away, dropped unanswered. */
  filtered: number;
}

interface Transaction {
  peer: Peer;
  data: Buffer;
  timer: NodeJS.Timeout | undefined;
  timeout: number;
  tries: number;
  done: (r: DeliveryResult, ack?: CoapMessage) => void;
}

interface Pending {
  /** Where it is among the pending: the peer's key and the token's (tokenKey). */
  peerKey: string;
  token: TokenKey;
  peer: Peer;
  done: ExchangeCallback;
  /** Its application deadline, which runs until the first response (Deadlines). */
  due: number;
  lane: number;
  /** Observe: keeps the token alive across notifications. */
  onNotify?: (m: CoapMessage) => void;
  answered: boolean;
}

export interface Observation {
  token: Buffer;
  /** The registration's first response. */
  first: Promise<CoapMessage>;
  /** Proactive cancellation (RFC 7641 §3.6): GET with Observe=1 and the same token. */
  cancel(): Promise<CoapMessage | undefined>;
  /** Forget the token locally; the next notification is answered RST (reactive cancellation). */
  forget(): void;
}

/**
 * What an endpoint remembers for a while of the NON messages it sent (received ones: MessageMemory): the newest `capacity`
 * entries at least, twice that at most, in two generations of maps, the older dropped whole when
 * the newer reaches `capacity`. O(1)
 * per message, where evicting the oldest entry of one Map one at a time walks the deleted slots V8
 * keeps at its front. Entries carry their own expiry, checked by the reader.
 */
class RecentMap<V> {
  private current = new Map<string, V>();
  private previous = new Map<string, V>();
  constructor(private readonly capacity: number) {}

  get(key: string): V | undefined {
    return this.current.get(key) ?? this.previous.get(key);
  }

  set(key: string, value: V): void {
    // An older entry of the key left in `previous` is shadowed by this one (get() looks here first)
    // and dropped with it; removing it would cost a second hash lookup for every message.
    this.current.set(key, value);
    if (this.current.size >= this.capacity) {
      this.previous = this.current;
      this.current = new Map();
    }
  }

  delete(key: string): void {
    this.current.delete(key);
    this.previous.delete(key);
  }
}

export class CoapEndpoint extends EventEmitter {
  readonly socket: Datagrams;
  readonly params: TransmissionParams;
  readonly times: DerivedTimes;
  readonly stats: EndpointStats = { received: 0, sent: 0, retransmitted: 0, duplicates: 0, refused: 0, resets: 0, filtered: 0 };
  /** Responses to requests, by code byte (RFC 7252 §3): the gateway's requests by code on /metrics. */
  readonly responseCodes = new Uint32Array(256);
  private handler: RequestHandler | undefined;
  /** The last Message ID sent: a counter, from a random start. */
  private mid: number;
  private readonly random: () => number;
  private readonly recognized: ReadonlySet<number>;
  private readonly maxSize: number;
  private readonly dedupCap: number;
  private readonly traceFn: EndpointOptions['trace'];
  private readonly refusedFn: EndpointOptions['onRefused'];
  private readonly acceptFn: EndpointOptions['accept'];
  private readonly transactions = new Map<string, Transaction>();
  /** Requests waiting for a response, by peer and token (§5.3.2). */
  private readonly pending = new PeerTokenMap<Pending>();
  /** The application deadlines of requests waiting for their first response (one timer for all). */
  private readonly deadlines = new Deadlines<Pending>((p) => {
    if (this.pending.get(p.peerKey, p.token) === p) this.pending.delete(p.peerKey, p.token);
    p.done(new CoapTimeoutError());
  });
  /** Received messages, for duplicates (§4.5). */
  private readonly seen: MessageMemory;
  /** MIDs of NON messages we sent recently (→ when they expire), so a RST to one can be reported (RFC 7641 §3.6). */
  private readonly sentNon: RecentMap<number>;
  private closed = false;
  private readonly peers = new Map<string, Map<number, KnownPeer>>();
  private peerCount = 0;

  constructor(socket: Datagrams, opts: EndpointOptions = {}) {
    super();
    this.socket = socket;
    this.params = transmissionParams(opts.transmission);
    this.times = derivedTimes(this.params);
    this.random = opts.random ?? Math.random;
    this.mid = Math.floor(this.random() * 0x10000);
    this.recognized = opts.recognizedOptions ?? RECOGNIZED_OPTIONS;
    this.maxSize = opts.maxMessageSize ?? SUGGESTED_MAX_MESSAGE_SIZE;
    this.dedupCap = opts.dedupCapacity ?? 8192;
    this.seen = new MessageMemory(2 * this.dedupCap);
    this.sentNon = new RecentMap(this.dedupCap);
    this.traceFn = opts.trace;
    this.refusedFn = opts.onRefused;
    this.acceptFn = opts.accept;
    socket.listen(
      (buf, address, port) => this.receive(buf, this.peerOf(address, port)),
      (e) => this.emit('error', e),
    );
  }

  /**
   * Binds a new UDP socket (port 0 for an ephemeral one) and wraps it; `batched` asks for the
   * batched socket (src/coap/datagrams.ts), for a server carrying many requests.
   */
  static async create(opts: EndpointOptions & { port?: number; host?: string; batched?: boolean } = {}): Promise<CoapEndpoint> {
    const socket = await openDatagrams({ host: opts.host ?? '127.0.0.1', port: opts.port ?? 0, batched: opts.batched, maxMessageSize: opts.maxMessageSize ?? SUGGESTED_MAX_MESSAGE_SIZE });
    return new CoapEndpoint(socket, opts);
  }

  address(): Peer {
    return this.socket.address();
  }

  /** The largest datagram this endpoint takes (larger: 4.13 for a request, RFC 7252 §4.6). */
  get maxMessageSize(): number {
    return this.maxSize;
  }

  /** The options this endpoint recognizes (RFC 7252 §5.4.1). */
  get recognizedOptions(): ReadonlySet<number> {
    return this.recognized;
  }

  /**
   * The same Peer object for every datagram of an address and port, so the maps keyed by peer (the
   * gateway's sessions, pending requests) hash a string made once, not one built per datagram.
   * Bounded: past 65,536 peers (forged sources) it starts again.
   */
  private peerOf(address: string, port: number): Peer {
    let ports = this.peers.get(address);
    if (ports === undefined) {
      if (this.peerCount >= 65_536) {
        this.peers.clear();
        this.peerCount = 0;
      }
      ports = new Map();
      this.peers.set(address, ports);
    }
    let p = ports.get(port);
    if (p === undefined) {
      p = { address, port, key: `${address}|${port}` };
      ports.set(port, p);
      this.peerCount++;
    }
    return p;
  }

  /** Installs the server-side request handler. */
  handle(handler: RequestHandler): this {
    this.handler = handler;
    return this;
  }

  nextMid(): number {
    this.mid = (this.mid + 1) & 0xffff;
    return this.mid;
  }

  newToken(len = 4): Buffer {
    const t = Buffer.alloc(len);
    for (let i = 0; i < len; i++) t[i] = Math.floor(this.random() * 256);
    return t;
  }

  /** Sends a message as it is (no reliability, no bookkeeping). */
  sendRaw(peer: Peer, msg: CoapMessage): void {
    this.write(peer, serializeMessage(msg), msg);
  }

  /** Sends a NON and remembers its MID for NON_LIFETIME so a RST to it is reported as 'reset'. */
  sendNon(peer: Peer, msg: CoapMessage): void {
    msg.type = NON;
    // Only worth remembering for someone told of the RST (a gateway's upstream side has nobody).
    if (this.listenerCount('reset') > 0) this.sentNon.set(`${peerKey(peer)}|${msg.mid}`, Date.now() + this.times.nonLifetimeMs);
    this.sendRaw(peer, msg);
  }

  /**
   * Sends a CON and retransmits it (RFC 7252 §4.2) until an ACK or RST arrives or MAX_RETRANSMIT
   * is exhausted. Resolves 'ack', 'reset' or 'timeout'.
   */
  sendCon(peer: Peer, msg: CoapMessage, o: { maxRetransmit?: number } = {}): Promise<{ result: DeliveryResult; ack?: CoapMessage }> {
    const maxRetransmit = o.maxRetransmit ?? this.params.maxRetransmit;
    msg.type = CON;
    const key = `${peerKey(peer)}|${msg.mid}`;
    return new Promise((resolve) => {
      const t: Transaction = {
        peer,
        data: serializeMessage(msg),
        timer: undefined,
        timeout: initialTimeout(this.params, this.random),
        tries: 0,
        done: (result, ack) => {
          if (t.timer) clearTimeout(t.timer);
          this.transactions.delete(key);
          resolve(ack ? { result, ack } : { result });
        },
      };
      this.transactions.get(key)?.done('timeout');
      this.transactions.set(key, t);
      const fire = (): void => {
        if (this.closed) return t.done('timeout');
        if (t.tries > maxRetransmit) return t.done('timeout');
        if (t.tries > 0) this.stats.retransmitted++;
        this.write(peer, t.data, t.tries === 0 ? msg : undefined);
        t.tries++;
        // After the last retransmission one more (doubled) timeout is waited for the ACK, which
        // makes the whole span MAX_TRANSMIT_WAIT (§4.8.2).
        t.timer = setTimeout(fire, t.timeout);
        t.timeout *= 2;
      };
      fire();
    });
  }

  /** Client request; resolves with the response (piggy-backed or separate), matched by token. */
  request(peer: Peer, o: RequestOptions): Promise<CoapMessage> {
    return new Promise((resolve, reject) => this.startRequest(peer, o, (e, m) => (e ? reject(e) : resolve(m!))));
  }

  /** request() with a callback, called once, instead of a promise (a proxy's many forwards). */
  exchange(peer: Peer, o: RequestOptions, done: ExchangeCallback): void {
    this.startRequest(peer, o, done);
  }

  /** Registers an observation (RFC 7641 §3.1): GET with Observe=0; onNotify sees every later notification. */
  observe(peer: Peer, o: Omit<RequestOptions, 'method'> & { method?: number }, onNotify: (m: CoapMessage) => void): Observation {
    const token = o.token ?? this.newToken();
    const options = [...(o.options ?? []).filter((x) => x.number !== Option.OBSERVE), uintOption(Option.OBSERVE, 0)];
    const promise = new Promise<CoapMessage>((resolve, reject) => this.startRequest(peer, { ...o, method: o.method ?? Code.GET, token, options }, (e, m) => (e ? reject(e) : resolve(m!)), onNotify));
    const pk = peerKey(peer);
    const tk = tokenKey(token);
    const forget = (): void => {
      const p = this.pending.get(pk, tk);
      if (!p) return;
      this.deadlines.remove(p);
      this.pending.delete(pk, tk);
    };
    return {
      token,
      first: promise,
      forget,
      cancel: async () => {
        forget();
        const opts = [...(o.options ?? []).filter((x) => x.number !== Option.OBSERVE), uintOption(Option.OBSERVE, 1)];
        try {
          return await this.request(peer, { ...o, method: o.method ?? Code.GET, token, options: opts });
        } catch {
          return undefined;
        }
      },
    };
  }

  private startRequest(peer: Peer, o: RequestOptions, done: ExchangeCallback, onNotify?: (m: CoapMessage) => void): void {
    const token = o.token ?? this.newToken();
    const confirmable = o.confirmable ?? true;
    const msg: CoapMessage = {
      type: confirmable ? CON : NON,
      code: o.method,
      mid: this.nextMid(),
      token,
      // Never written to afterwards, so a caller's array is used as it is (a proxy's cached Uri-* options).
      options: o.uri !== undefined ? [...uriOptions(o.uri), ...(o.options ?? [])] : (o.options ?? []),
      payload: o.payload ?? Buffer.alloc(0),
    };
    const pk = peerKey(peer);
    const tk = tokenKey(token);
    const p: Pending = { peerKey: pk, token: tk, peer, done, due: 0, lane: 0, answered: false };
    if (onNotify) p.onNotify = onNotify;
    const prior = this.pending.get(pk, tk);
    this.pending.set(pk, tk, p);
    if (prior) {
      this.deadlines.remove(prior);
      prior.done(new CoapResetError('superseded by a request with the same token'));
    }
    this.deadlines.add(p, o.timeoutMs ?? (confirmable ? this.times.exchangeLifetimeMs : this.times.nonLifetimeMs));
    if (confirmable) {
      void this.sendCon(peer, msg).then(({ result }) => {
        const p = this.pending.get(pk, tk);
        if (!p || p.answered) return;
        if (result === 'reset') this.fail(p, new CoapResetError());
        else if (result === 'timeout') this.fail(p, new CoapTimeoutError('no ACK after MAX_RETRANSMIT retransmissions'));
      });
    } else {
      this.sendNon(peer, msg);
    }
  }

  private fail(p: Pending, e: Error): void {
    this.deadlines.remove(p);
    this.pending.delete(p.peerKey, p.token);
    p.done(e);
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    for (const t of this.transactions.values()) t.done('timeout');
    for (const p of this.pending.values()) this.fail(p, new CoapTimeoutError('endpoint closed'));
    this.deadlines.clear();
    return this.socket.close();
  }

  // ---- receiving ------------------------------------------------------------------------------

  private write(peer: Peer, data: Buffer, msg?: CoapMessage): void {
    if (this.closed) return;
    this.stats.sent++;
    if (msg && this.traceFn) this.traceFn('out', msg, peer);
    this.socket.send(data, peer.port, peer.address);
  }

  private refuse(reason: string, peer: Peer, action: 'reset' | 'ignore' | 'respond'): void {
    this.stats.refused++;
    this.refusedFn?.(reason, peer, action);
  }

  private receive(buf: Buffer, peer: Peer): void {
    if (this.closed) return;
    if (this.acceptFn && !this.acceptFn(peer)) {
      this.stats.filtered++;
      return;
    }
    this.stats.received++;
    if (buf.length > this.maxSize) return this.oversized(buf, peer);
    const c = classifyDatagram(buf, this.recognized);
    if (c.kind === 'ignore') return this.refuse(c.reason, peer, 'ignore');
    if (c.kind === 'reset') {
      this.refuse(c.reason, peer, 'reset');
      return this.sendRaw(peer, emptyMessage(RST, c.mid));
    }
    if (c.kind === 'respond') {
      this.refuse(c.diagnostic, peer, 'respond');
      // The diagnostic is cut so the answer is never larger than the request (RFC 7252 §11.3: no
      // amplification toward a forged source address): a request of many one-byte unknown options
      // would otherwise draw a diagnostic many times its size.
      const room = buf.length - 4 - c.msg.token.length - 1;
      const diagnostic = room > 0 ? Buffer.from(c.diagnostic).subarray(0, room) : Buffer.alloc(0);
      this.responseCodes[c.code]!++;
      return this.sendRaw(peer, { type: ACK, code: c.code, mid: c.msg.mid, token: c.msg.token, options: [], payload: diagnostic });
    }
    const m = c.msg;
    this.traceFn?.('in', m, peer);
    if (m.code === Code.EMPTY) return this.receiveEmpty(m, peer);
    if (isRequestCode(m.code)) return this.receiveRequest(m, peer);
    if (isResponseCode(m.code)) return this.receiveResponse(m, peer);
    // Class 0 codes 0.08-0.31 are unassigned methods: a server answers 4.05 (§5.8), via the handler.
    return this.receiveRequest(m, peer);
  }

  private oversized(buf: Buffer, peer: Peer): void {
    let m: CoapMessage | undefined;
    try {
      m = parseMessage(buf);
    } catch {
      m = undefined;
    }
    if (m && isRequestCode(m.code) && (m.type === CON || m.type === NON)) {
      this.refuse(`datagram of ${buf.length} bytes exceeds ${this.maxSize}`, peer, 'respond');
      // §5.9.2.9: 4.13 with Size1 telling the largest acceptable size.
      return this.sendRaw(
        peer,
        responseTo(m, Code.REQUEST_ENTITY_TOO_LARGE, () => this.nextMid(), [uintOption(Option.SIZE1, this.maxSize)]),
      );
    }
    this.refuse(`datagram of ${buf.length} bytes exceeds ${this.maxSize}`, peer, 'ignore');
  }

  private receiveEmpty(m: CoapMessage, peer: Peer): void {
    if (m.type === CON) {
      // §4.3: an empty CON is a ping; the answer is RST.
      return this.sendRaw(peer, emptyMessage(RST, m.mid));
    }
    const key = `${peerKey(peer)}|${m.mid}`;
    const t = this.transactions.get(key);
    if (m.type === RST) this.stats.resets++;
    if (t) return t.done(m.type === ACK ? 'ack' : 'reset', m);
    if (m.type === RST && (this.sentNon.get(key) ?? 0) > Date.now()) {
      this.sentNon.delete(key);
      this.emit('reset', m.mid, peer);
    }
  }

  private receiveRequest(m: CoapMessage, peer: Peer): void {
    const now = Date.now();
    const dkey = this.seen.key(peer.address, peer.port, m.mid);
    const prior = this.seen.find(dkey, m.token, now);
    if (prior >= 0) {
      // §4.5: a duplicate CON gets the same answer again; a duplicate NON is ignored, as is a
      // duplicate whose answer is still being worked on.
      this.stats.duplicates++;
      const again = this.seen.reply(prior);
      if (again && m.type === CON) this.write(peer, again);
      return;
    }
    const life = m.type === CON ? this.times.exchangeLifetimeMs : this.times.nonLifetimeMs;
    const entry = this.seen.remember(dkey, m.token, now + life);
    const handler = this.handler;
    if (!handler) {
      if (m.type === CON) this.sendRaw(peer, emptyMessage(RST, m.mid));
      return;
    }
    let out: ResponseSpec | undefined | Promise<ResponseSpec | undefined> | typeof DEFER;
    let replied = false;
    try {
      // The reply callback is written in the call, not assigned to a name first: tsx's keepNames
      // names every named closure with Object.defineProperty as it is made, once per request here.
      out = handler(m, peer, (r: ResponseSpec | undefined): void => {
        if (replied) return;
        replied = true;
        this.respond(m, peer, entry, r);
      });
    } catch (e) {
      out = { code: Code.INTERNAL_SERVER_ERROR, payload: Buffer.from(String((e as Error).message ?? e).slice(0, 64)) };
    }
    if (out === DEFER) return;
    replied = true;
    if (out instanceof Promise) {
      out.then(
        (r) => this.respond(m, peer, entry, r),
        (e) => this.respond(m, peer, entry, { code: Code.INTERNAL_SERVER_ERROR, payload: Buffer.from(String((e as Error)?.message ?? e).slice(0, 64)) }),
      );
    } else this.respond(m, peer, entry, out);
  }

  private respond(req: CoapMessage, peer: Peer, entry: MemoryRef, r: ResponseSpec | undefined): void {
    if (this.closed) return;
    let msg: CoapMessage;
    if (r === undefined) {
      if (req.type !== CON) return;
      msg = emptyMessage(ACK, req.mid);
    } else {
      msg = responseTo(req, r.code, () => this.nextMid(), r.options, r.payload);
    }
    if (r) this.responseCodes[r.code]!++;
    const data = serializeMessage(msg);
    // Only a duplicate CON is answered again (§4.5); a duplicate NON is ignored.
    if (req.type === CON) this.seen.setReply(entry, data);
    // A RST matters for a response that starts notifications (RFC 7641 §3.6: it cancels them); to a
    // plain NON response it says nothing anyone acts on, so only the former is remembered.
    if (msg.type === NON && this.listenerCount('reset') > 0 && msg.options.some((o) => o.number === Option.OBSERVE)) {
      this.sentNon.set(`${peerKey(peer)}|${msg.mid}`, Date.now() + this.times.nonLifetimeMs);
    }
    this.write(peer, data, msg);
  }

  private receiveResponse(m: CoapMessage, peer: Peer): void {
    if (m.type === ACK) {
      const t = this.transactions.get(`${peerKey(peer)}|${m.mid}`);
      if (t) t.done('ack', m);
      this.deliver(m, peer);
      return;
    }
    if (m.type === RST) return;
    // receiveRequest's duplicate check, written out again: one shared helper costs 2–8 % more
    // instructions per proxied request (bench:gateway --instructions).
    const now = Date.now();
    const dkey = this.seen.key(peer.address, peer.port, m.mid);
    const prior = this.seen.find(dkey, m.token, now);
    if (prior >= 0) {
      this.stats.duplicates++;
      const again = this.seen.reply(prior);
      if (again) this.write(peer, again);
      return;
    }
    const entry = this.seen.remember(dkey, m.token, now + (m.type === CON ? this.times.exchangeLifetimeMs : this.times.nonLifetimeMs));
    const known = this.deliver(m, peer);
    // §5.3.2: a separate response or notification nobody waits for is rejected with RST, which
    // also ends an unwanted observation (RFC 7641 §3.6); a wanted CON one is acknowledged.
    const reply = emptyMessage(known ? ACK : RST, m.mid);
    if (known && m.type === NON) return;
    const data = serializeMessage(reply);
    this.seen.setReply(entry, data);
    this.write(peer, data, reply);
  }

  private deliver(m: CoapMessage, peer: Peer): boolean {
    const pk = peerKey(peer);
    const tk = tokenKey(m.token);
    const p = this.pending.get(pk, tk);
    if (!p) return false;
    if (p.onNotify && p.answered) {
      p.onNotify(m);
      return true;
    }
    p.answered = true;
    this.deadlines.remove(p);
    // An observation stays registered while responses carry Observe and are successful (RFC 7641 §3.2).
    if (!(p.onNotify && getUintOption(m, Option.OBSERVE) !== undefined && codeClass(m.code) === 2)) this.pending.delete(pk, tk);
    p.done(undefined, m);
    return true;
  }
}
