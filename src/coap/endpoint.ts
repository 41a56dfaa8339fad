// A small CoAP endpoint over UDP (RFC 7252 §4, §5): Message ID allocation, de-duplication of
// received CON/NON by (peer, MID) for EXCHANGE_LIFETIME / NON_LIFETIME (§4.5, memory.ts), the server
// side (a handler's piggy-backed or empty-ACK answers), and the RFC answers to malformed datagrams
// (classifyDatagram). Its parts: retransmit.ts (CON retransmission with exponential back-off, §4.2,
// §4.8), exchanges.ts (the client side: requests matched by token, §5.3.2, and observe, RFC 7641
// §3), peers.ts (one Peer object per address and port), datagrams.ts (the socket). Used by the
// kit's network module, by tests and by the gateway.
import { EventEmitter } from 'node:events';
import { Code, isRequestCode, isResponseCode } from './codes.ts';
import { type Datagrams, openDatagrams } from './datagrams.ts';
import { type ExchangeCallback, Exchanges, type Observation, type RequestOptions, CoapTimeoutError } from './exchanges.ts';
import { type MemoryRef, MessageMemory, RecentMap } from './memory.ts';
import {
  ACK,
  classifyDatagram,
  type CoapMessage,
  type CoapOption,
  CON,
  emptyMessage,
  NON,
  parseMessage,
  responseTo,
  RST,
  serializeMessage,
  SUGGESTED_MAX_MESSAGE_SIZE,
  uintOption,
} from './message.ts';
import { Option, RECOGNIZED_OPTIONS } from './options.ts';
import { type Peer, peerKey, PeerTable } from './peers.ts';
import { type DeliveryResult, Retransmissions } from './retransmit.ts';
import { derivedTimes, type DerivedTimes, type TransmissionParams, transmissionParams } from './timing.ts';

// The endpoint's vocabulary from its parts, exported with it (src/coap/index.ts exports this file).
export { type Peer, peerKey } from './peers.ts';
export type { DeliveryResult } from './retransmit.ts';
export { type ExchangeCallback, type Observation, type RequestOptions, CoapResetError, CoapTimeoutError } from './exchanges.ts';

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
  /** CON messages sent, until their ACK or RST (§4.2). */
  private readonly retransmissions: Retransmissions;
  /** Requests and observations waiting for responses (§5.3.2). */
  private readonly exchanges: Exchanges;
  /** Received messages, for duplicates (§4.5). */
  private readonly seen: MessageMemory;
  /** MIDs of NON messages we sent recently (→ when they expire), so a RST to one can be reported (RFC 7641 §3.6). */
  private readonly sentNon: RecentMap<number>;
  private closed = false;
  private readonly peers = new PeerTable();

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
    this.retransmissions = new Retransmissions({
      params: this.params,
      random: this.random,
      write: (peer, data, msg) => this.write(peer, data, msg),
      stats: this.stats,
      closed: () => this.closed,
    });
    this.exchanges = new Exchanges(this);
    socket.listen(
      (buf, address, port) => this.receive(buf, this.peers.of(address, port)),
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
    msg.type = CON;
    return this.retransmissions.send(peer, `${peerKey(peer)}|${msg.mid}`, msg, serializeMessage(msg), o.maxRetransmit ?? this.params.maxRetransmit);
  }

  /** Client request; resolves with the response (piggy-backed or separate), matched by token. */
  request(peer: Peer, o: RequestOptions): Promise<CoapMessage> {
    return new Promise((resolve, reject) => this.exchanges.start(peer, o, (e, m) => (e ? reject(e) : resolve(m!))));
  }

  /** request() with a callback, called once, instead of a promise (a proxy's many forwards). */
  exchange(peer: Peer, o: RequestOptions, done: ExchangeCallback): void {
    this.exchanges.start(peer, o, done);
  }

  /** Registers an observation (RFC 7641 §3.1): GET with Observe=0; onNotify sees every later notification. */
  observe(peer: Peer, o: Omit<RequestOptions, 'method'> & { method?: number }, onNotify: (m: CoapMessage) => void): Observation {
    return this.exchanges.observe(peer, o, onNotify);
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    this.retransmissions.closeAll();
    this.exchanges.failAll(() => new CoapTimeoutError('endpoint closed'));
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
    if (m.type === RST) this.stats.resets++;
    if (this.retransmissions.settle(key, m.type === ACK ? 'ack' : 'reset', m)) return;
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
      this.retransmissions.settle(`${peerKey(peer)}|${m.mid}`, 'ack', m);
      this.exchanges.deliver(m, peer);
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
    const known = this.exchanges.deliver(m, peer);
    // §5.3.2: a separate response or notification nobody waits for is rejected with RST, which
    // also ends an unwanted observation (RFC 7641 §3.6); a wanted CON one is acknowledged.
    const reply = emptyMessage(known ? ACK : RST, m.mid);
    if (known && m.type === NON) return;
    const data = serializeMessage(reply);
    this.seen.setReply(entry, data);
    this.write(peer, data, reply);
  }
}
