// The gateway's forward proxy (seed §5, §8; RFC 7252 §5.7): a proxied request of a live session is
// checked (the target named by Proxy-Uri or Proxy-Scheme, the kit provisioned in the session's group's
// sandbox, the kit reachable) and sent to the kit under the application deadline; the kit's answer,
// or 5.04 / 5.02, goes back to the client. The client's CON/NON choice is kept toward it: a CON gets
// a piggy-backed answer when the kit is quick, else an empty ACK and a CON separate response
// (RFC 7252 §5.2.2). Observe registrations go to the shared upstream observation (observe-relay.ts).
import type { Logger } from 'pino';
import {
  PeerTokenMap,
  tokenKey,
  Code,
  type CoapEndpoint,
  type CoapMessage,
  type CoapOption,
  CoapResetError,
  CoapTimeoutError,
  CON,
  DEFER,
  codeClass,
  EMPTY_BUFFER,
  type ExchangeCallback,
  getOption,
  getUintOption,
  Option,
  peerKey,
  stringOption,
  type Peer,
  type ResponseSpec,
} from '../coap/index.ts';
import { ReefError, isReefError } from '../core/errors.ts';
import { SANDBOX, type DeviceRecord } from '../core/types.ts';
import { boundedFailure, failure, upstreamFailure } from './answers.ts';
import type { DeviceCache } from './device-cache.ts';
import { isTempPath, type KitReadings } from './kit-readings.ts';
import { kitPath, type KitDirectory, type KitEntry } from './kits.ts';
import type { ObserveRelay } from './observe-relay.ts';
import type { Session, SessionTable } from './sessions.ts';
import { kitMac, requestTarget, TargetError } from './target.ts';

/** A request to a kit, from a CoAP client or the HTTP bridge. */
export interface KitRequest {
  method: number;
  /** Uri-Path segments, with or without the kit's prefix. */
  path: string[];
  query: string[];
  options?: CoapOption[];
  payload?: Buffer;
}

export interface ForwardDeps {
  sessions: SessionTable;
  kits: KitDirectory;
  devices: DeviceCache;
  relay: ObserveRelay;
  /** Answers to GETs of a temperature go to the payload sink too. */
  readings: KitReadings;
  log: Logger;
  stats: { forwarded: number; refusedNoSession: number; refusedTarget: number; refusedKit: number; timeouts: number; separateResponses: number };
  front(): CoapEndpoint;
  back(): CoapEndpoint;
  stopping(): boolean;
  /** A payload sink is set: the answers to GETs are handed to it. */
  payloads: boolean;
  meshDomain: string;
  /** Application deadline for a kit's answer (seed §8), then 5.04. */
  deadlineMs: number;
  confirmableUpstream: boolean;
  /** A CON request the kit answers within this long gets a piggy-backed response. */
  piggybackMs: number;
}

/** Options a proxy passes on to the kit (RFC 7252 §5.7.2: the Uri-* come from the target). */
const FORWARD_REQUEST = new Set<number>([Option.IF_MATCH, Option.ETAG, Option.IF_NONE_MATCH, Option.CONTENT_FORMAT, Option.ACCEPT, Option.BLOCK2, Option.BLOCK1, Option.SIZE2, Option.SIZE1]);

/** The kit and resource a proxied request names; `resource` is path and query as one string, a key. */
interface Target {
  mac: string;
  path: string[];
  query: string[];
  resource: string;
}
const SEPARATE = Symbol('separate');

/** A forward on its way to a kit, and the clients' answers waiting for it. */
interface Inflight {
  code: number;
  mac: string;
  resource: string;
  waiting: ((r: ResponseSpec) => void)[];
}

export class ForwardProxy {
  /** (client, token) → the forward on its way and who waits for its answer: the same request re-sent is not forwarded twice. */
  private readonly inflight = new PeerTokenMap<Inflight>();
  /** Proxy-Uri (its bytes, latin1) → the kit MAC and resource it names (see target()). */
  private readonly targets = new Map<string, Target>();
  /** Encoded Uri-Path and Uri-Query options of a (cached, shared) path array, for the kit prefix they were made for. */
  private readonly uriOptionCache = new WeakMap<string[], { prefix: string; query: string[]; options: CoapOption[] }>();

  constructor(private readonly d: ForwardDeps) {}

  /**
   * A proxied request. The usual one is answered from what is cached (the session and its account,
   * the kit's device record): no wait before the request leaves for the kit. Anything not cached,
   * or not valid, takes the checking path, which also says why.
   */
  proxy(req: CoapMessage, peer: Peer, reply: (r: ResponseSpec) => void): Promise<ResponseSpec | undefined> | typeof DEFER {
    const session = this.d.sessions.cachedCheck(peer);
    if (!session) return this.answer(req, peer, this.proxyChecked(req, peer));
    // The usual request, a NON, is answered through `reply` when the kit's answer comes: no promise,
    // no timer of its own (answer() needs both for a CON: piggy-backed or separate).
    if (req.type !== CON) {
      this.proxyFor(req, peer, session, reply);
      return DEFER;
    }
    return this.answer(req, peer, new Promise((done) => this.proxyFor(req, peer, session, done)));
  }

  /** CON: piggy-backed when quick, else empty ACK now and a CON separate response later; NON: a NON answer. */
  private answer(req: CoapMessage, peer: Peer, work: Promise<ResponseSpec>): Promise<ResponseSpec | undefined> {
    if (req.type !== CON) return work;
    let timer: NodeJS.Timeout | undefined;
    const early = new Promise<typeof SEPARATE>((resolve) => {
      timer = setTimeout(() => resolve(SEPARATE), this.d.piggybackMs);
    });
    return Promise.race([work, early]).then((r) => {
      clearTimeout(timer);
      if (r !== SEPARATE) return r;
      this.d.stats.separateResponses++;
      void work.then((spec) => {
        if (this.d.stopping()) return;
        const front = this.d.front();
        front.responseCodes[spec.code]!++;
        const msg: CoapMessage = { type: CON, code: spec.code, mid: front.nextMid(), token: req.token, options: spec.options ?? [], payload: spec.payload ?? Buffer.alloc(0) };
        void front.sendCon(peer, msg).then(({ result }) => {
          if (result !== 'ack') this.d.relay.dropClient(peer, req.token, `separate response ${result}`);
        });
      });
      return undefined;
    });
  }

  private async proxyChecked(req: CoapMessage, peer: Peer): Promise<ResponseSpec> {
    let session: Session;
    try {
      session = await this.d.sessions.check(peer);
    } catch (e) {
      // A failed check answers from the catalogue: no session 4.01, a store outage 5.03 + Max-Age.
      if (isReefError(e) && e.status === 401) this.d.stats.refusedNoSession++;
      if (isReefError(e)) return boundedFailure(req, e, this.d.sessions.peek(peer) !== undefined);
      throw e;
    }
    return new Promise((done) => this.proxyFor(req, peer, session, done));
  }

  /** Forwards a proxied request of a live session; `done` is called once with the client's answer (at once for a refusal). */
  private proxyFor(req: CoapMessage, peer: Peer, session: Session, done: (r: ResponseSpec) => void): void {
    let t: Target;
    try {
      t = this.target(req);
    } catch (e) {
      if (!(e instanceof TargetError)) throw e;
      this.d.stats.refusedTarget++;
      return done(failure(new ReefError(e.kind === 'malformed' ? 'VALIDATION_FAILED' : 'PROXYING_NOT_SUPPORTED', e.message)));
    }
    const mac = t.mac;
    const d = this.d.devices.cached(mac);
    if (d === undefined) {
      this.authorize(session.groupId, mac)
        .then(
          (k) => this.proxyTo(req, peer, session, k, t, done),
          (e: unknown) => done(isReefError(e) ? failure(e) : this.internal(e)),
        )
        .catch((e: unknown) => done(this.internal(e)));
      return;
    }
    let k: KitEntry;
    try {
      k = this.authorizeDevice(d, session.groupId, mac);
    } catch (e) {
      return done(isReefError(e) ? failure(e) : this.internal(e));
    }
    this.proxyTo(req, peer, session, k, t, done);
  }

  private internal(e: unknown): ResponseSpec {
    this.d.log.error({ err: e }, 'gateway request failed');
    return failure(new ReefError('INTERNAL', 'internal error'));
  }

  private proxyTo(req: CoapMessage, peer: Peer, session: Session, k: KitEntry, t: Target, done: (r: ResponseSpec) => void): void {
    const { path, query } = t;
    const observe = getUintOption(req, Option.OBSERVE);
    if (observe === 0 && req.code === Code.GET) {
      this.d.relay
        .observeForClient(k, session.key, peer, req, path, query)
        .then(done, (e: unknown) => done(this.internal(e)))
        .catch((e: unknown) => done(this.internal(e)));
      return;
    }
    // Any other request with the token of a subscription of this client ends it (RFC 7641 §3.6).
    this.d.relay.dropClient(peer, req.token, 'deregistered');
    // The same request again from the same client with the same token (a client's own retry with
    // a new Message ID) waits for the answer already on its way. Only the very same request: a
    // client that reuses one token for another kit, resource or method is not merged.
    const pk = peerKey(peer);
    const tk = tokenKey(req.token);
    const prior = this.inflight.get(pk, tk);
    if (prior && prior.code === req.code && prior.mac === t.mac && prior.resource === t.resource) {
      prior.waiting.push(done);
      return;
    }
    const options = req.options.filter((o) => FORWARD_REQUEST.has(o.number));
    const entry: Inflight | undefined = prior ? undefined : { code: req.code, mac: t.mac, resource: t.resource, waiting: [done] };
    if (entry) this.inflight.set(pk, tk, entry);
    try {
      this.send(k, { method: req.code, path, query, options, payload: req.payload }, (e, m) => {
        if (entry && this.inflight.get(pk, tk) === entry) this.inflight.delete(pk, tk);
        // Called from the endpoint's receive path: a throw here must become an answer, not escape.
        let spec: ResponseSpec;
        try {
          spec = e ? this.upstreamError(e) : this.d.relay.relayed(m!);
        } catch (err) {
          spec = this.internal(err);
        }
        if (entry) for (const w of entry.waiting) w(spec);
        else done(spec);
      });
    } catch (e) {
      // Not sent (it could not be encoded): later requests must not wait on its entry; the caller answers this one.
      if (entry) this.inflight.delete(pk, tk);
      throw e;
    }
  }

  /**
   * The kit and resource a proxied request names. A client asks for the same few Proxy-Uris over
   * and over: each one's decomposition (RFC 7252 §6.4) and MAC check is kept, by its exact bytes,
   * and its arrays are shared (never written to). A Proxy-Uri that comes with Uri-* options is
   * refused every time (§5.10.2), before the cache is looked at.
   */
  private target(req: CoapMessage): Target {
    const pu = getOption(req, Option.PROXY_URI);
    let key: string | undefined;
    if (pu !== undefined && !req.options.some((o) => o.number === Option.URI_HOST || o.number === Option.URI_PORT || o.number === Option.URI_PATH || o.number === Option.URI_QUERY)) {
      key = pu.toString('latin1');
      const hit = this.targets.get(key);
      if (hit) return hit;
    }
    const t = requestTarget(req);
    const v: Target = { mac: kitMac(t, this.d.meshDomain), path: t.path, query: t.query, resource: `${t.path.join('/')}?${t.query.join('&')}` };
    if (key !== undefined) {
      if (this.targets.size >= 4096) this.targets.clear();
      this.targets.set(key, v);
    }
    return v;
  }

  /** The kit of this MAC if the group has it provisioned in sandbox and it is reachable; ReefError otherwise. */
  async authorize(groupId: string, mac: string): Promise<KitEntry> {
    return this.authorizeDevice(await this.d.devices.get(mac), groupId, mac);
  }

  /** authorize() with the device record at hand; throws the ReefError. */
  private authorizeDevice(d: DeviceRecord | null, groupId: string, mac: string): KitEntry {
    // Another group's kit answers exactly like an unprovisioned MAC: no hint that it exists.
    if (!d || d.groupId !== groupId || d.solution !== SANDBOX) {
      this.d.stats.refusedKit++;
      throw new ReefError('DEVICE_NOT_FOUND', 'no such kit in your sandbox');
    }
    const kit = this.d.kits.get(mac);
    if (!kit) throw new ReefError('KIT_OFFLINE', 'the kit has not announced itself to the gateway: is it on?');
    return kit;
  }

  /** Sends one request to a kit under the application deadline; rejects CoapTimeoutError / CoapResetError. */
  forward(kit: KitEntry, r: KitRequest): Promise<CoapMessage> {
    return new Promise((resolve, reject) => this.send(kit, r, (e, m) => (e ? reject(e) : resolve(m!))));
  }

  /** forward() with a callback, called once. */
  private send(kit: KitEntry, r: KitRequest, done: ExchangeCallback): void {
    this.d.stats.forwarded++;
    let uri = this.uriOptionCache.get(r.path);
    if (!uri || uri.prefix !== kit.prefix || uri.query !== r.query) {
      uri = { prefix: kit.prefix, query: r.query, options: [...kitPath(kit, r.path).map((s) => stringOption(Option.URI_PATH, s)), ...r.query.map((q) => stringOption(Option.URI_QUERY, q))] };
      this.uriOptionCache.set(r.path, uri);
    }
    const options: CoapOption[] = r.options?.length ? [...uri.options, ...r.options] : uri.options;
    const path = this.d.payloads && r.method === Code.GET ? kitPath(kit, r.path) : undefined;
    const bubble = path !== undefined && isTempPath(path);
    this.d.back().exchange(kit.peer, { method: r.method, options, payload: r.payload ?? EMPTY_BUFFER, confirmable: this.d.confirmableUpstream, timeoutMs: this.d.deadlineMs }, (e, m) => {
      if (bubble && m && codeClass(m.code) === 2) this.d.readings.bubble(kit.mac, m, { path });
      done(e, m);
    });
  }

  /** A failed exchange with a kit as the client's answer (5.04 past the deadline, 5.02 otherwise). */
  upstreamError(e: unknown): ResponseSpec {
    if (e instanceof CoapTimeoutError) this.d.stats.timeouts++;
    else if (!(e instanceof CoapResetError) && !isReefError(e)) this.d.log.warn({ err: e }, 'gateway forward failed');
    return failure(upstreamFailure(e, this.d.deadlineMs));
  }
}
