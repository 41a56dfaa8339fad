// The CoAP gateway (seed §1, §5, §6, §8; wire §3): the only way to a user's dev kit. One UDP
// endpoint faces clients and kits' announcements (default port 5683); a second, ephemeral one talks
// to the kits, so nothing a client sends can pass for a kit's answer. Requests:
//   POST/DELETE/GET /sessions          open / close / show the session of this address and port
//   POST /kits (NON, from a kit)        an announcement: where the kit listens (src/coap/announce.ts)
//   PUT /sensor/arduino/time, PUT /sys/snsr?ev=rbt (NON, from a known kit's address): the kit's own
//                                       clock report and reboot event
//   anything with Proxy-Uri or Proxy-Scheme: forwarded to the named kit, only for a live session
//                                       whose tenant group has the kit provisioned in sandbox
// Everything else is refused. Kits are asked NON by default (seed §6) with an application deadline
// (seed §8: 5.04 when it passes); the client's own CON/NON choice is kept toward it (a CON gets a
// piggy-backed answer when the kit is quick, else an empty ACK and a CON separate response, RFC 7252
// §5.2.2). Observations of the same kit resource share one upstream observation (RFC 7641 §3.1 on
// the kit's side, which keeps one observer per resource), which the readings bridge also holds for
// each reachable kit's temperature so every notification is stored as an observation.
import type { Logger } from 'pino';
import {
  ACK,
  batchedUnavailable,
  PeerTokenMap,
  tokenKey,
  Code,
  CoapEndpoint,
  CoapMessage,
  CoapOption,
  CoapResetError,
  CoapTimeoutError,
  CON,
  DEFER,
  ContentFormat,
  codeClass,
  codeToString,
  decodeTimeTlv,
  encodeTimeTlv,
  EMPTY_BUFFER,
  type ExchangeCallback,
  getOption,
  getUintOption,
  isAnnouncement,
  Option,
  peerKey,
  serializeMessage,
  stringOption,
  uintOption,
  uriPath,
  uriQuery,
  type Peer,
  type ResponseSpec,
} from '../coap/index.ts';
import { ReefError, isReefError } from '../core/errors.ts';
import { SANDBOX, type DeviceRecord } from '../core/types.ts';
import type { Authenticator } from '../auth/accounts.ts';
import type { EventBus } from '../events/bus.ts';
import { KitKeyCache } from '../service/kit-keys.ts';
import type { ObservationQuota } from '../service/observations.ts';
import type { Store } from '../store/store.ts';
import { failure, text, upstreamFailure } from './answers.ts';
import { ClockKeeper } from './clock.ts';
import { Announcements } from './announcements.ts';
import { KitReadings, TEMP_PATH } from './kit-readings.ts';
import { ReadingWriter } from './reading-writer.ts';
import { KitDirectory, kitPath, type KitEntry, type StaticKit } from './kits.ts';
import { ObserveRelay, type Subscriber } from './observe-relay.ts';
import type { KitPayloadSink } from './readings.ts';
import { SessionTable, type Session } from './sessions.ts';
import { isProxyRequest, kitMac, requestTarget, TargetError } from './target.ts';

export interface GatewayOptions {
  host: string;
  port: number;
  meshDomain: string;
  /** Application deadline for a kit's answer (seed §8), then 5.04. */
  deadlineMs: number;
  sessionTtlMs: number;
  maxSessionsPerAccount: number;
  /** Kits at fixed addresses, besides those that announce themselves. */
  kits?: StaticKit[];
  /** Learn kits from their announcements (default true). */
  learnKits?: boolean;
  /** Keep an observation of every reachable kit's temperature and store the readings (default true). */
  readings?: boolean;
  /** A kit clock off by more than this is set right (default 10 s). */
  maxClockSkewMs?: number;
  /** At most one clock correction per kit per this long (default 10 min). */
  clockMinIntervalMs?: number;
  /** Ask kits with CON instead of NON (default false: NON, seed §6). */
  confirmableUpstream?: boolean;
  /** A CON request the kit answers within this long gets a piggy-backed response (default 1000 ms, under ACK_TIMEOUT). */
  piggybackMs?: number;
  /**
   * Both sockets on the batched addon when it is built (default true), else node:dgram: the same
   * behaviour at a higher cost per datagram (src/coap/datagrams.ts).
   */
  batchedUdp?: boolean;
  /** The clock of the gateway's log rate limits (default Date.now; tests inject one). */
  now?: () => number;
}

export interface GatewayDeps {
  store: Store;
  events: EventBus | null;
  auth: Authenticator;
  log: Logger;
  /** Receives every reading payload a kit sends (observe notifications and answers to GETs), raw. */
  payloads?: KitPayloadSink | null;
  /** The owners' observation quotas: readings past a kit owner's quota are not stored. */
  quota?: ObservationQuota;
}

/** A request to a kit, from a CoAP client or the HTTP bridge. */
export interface KitRequest {
  method: number;
  /** Uri-Path segments, with or without the kit's prefix. */
  path: string[];
  query: string[];
  options?: CoapOption[];
  payload?: Buffer;
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

// Moved to their own modules; re-exported for existing callers.
export { kitPath } from './kits.ts';
export type { Subscriber };

/** A forward on its way to a kit, and the clients' answers waiting for it. */
interface Inflight {
  code: number;
  mac: string;
  resource: string;
  waiting: ((r: ResponseSpec) => void)[];
}

export class Gateway {
  front!: CoapEndpoint;
  back!: CoapEndpoint;
  readonly sessions: SessionTable;
  readonly kits: KitDirectory;
  readonly clock: ClockKeeper;
  readonly stats = {
    requests: 0,
    forwarded: 0,
    refusedNoSession: 0,
    refusedTarget: 0,
    refusedKit: 0,
    timeouts: 0,
    kitErrors: 0,
    announcements: 0,
    announcementsRefused: 0,
    notificationsIn: 0,
    notificationsRelayed: 0,
    readingsStored: 0,
    /** Of readingsStored, those of added sensors (each at its own timestamp). */
    sensorReadingsStored: 0,
    storeErrors: 0,
    clockReports: 0,
    clockSets: 0,
    separateResponses: 0,
  };
  /** Shared upstream observations of kit resources and who subscribes to them. */
  readonly relay: ObserveRelay;
  /** (client, token) → the forward on its way and who waits for its answer: the same request re-sent is not forwarded twice. */
  private readonly inflight = new PeerTokenMap<Inflight>();
  private readonly deviceCache = new Map<string, { d: DeviceRecord | null; at: number }>();
  /** Proxy-Uri (its bytes, latin1) → the kit MAC and resource it names (see target()). */
  private readonly targets = new Map<string, Target>();
  /** Encoded Uri-Path and Uri-Query options of a (cached, shared) path array, for the kit prefix they were made for. */
  private readonly uriOptionCache = new WeakMap<string[], { prefix: string; query: string[]; options: CoapOption[] }>();
  /** Kit readings into the store and to the payload sink. */
  private readonly readingsOut: KitReadings;
  private readonly log: Logger;
  /** Kit announcements: checked, learned, answered. */
  private readonly announcements: Announcements;
  private readonly o: Required<Omit<GatewayOptions, 'kits'>>;
  private stopping = false;

  constructor(
    private readonly deps: GatewayDeps,
    opts: GatewayOptions,
  ) {
    this.o = {
      learnKits: true,
      readings: true,
      maxClockSkewMs: 10_000,
      clockMinIntervalMs: 600_000,
      confirmableUpstream: false,
      piggybackMs: 1000,
      now: Date.now,
      batchedUdp: true,
      ...opts,
    } as Required<Omit<GatewayOptions, 'kits'>>;
    this.log = deps.log;
    this.kits = new KitDirectory(opts.kits ?? []);
    this.announcements = new Announcements({
      kits: this.kits,
      kitKeys: new KitKeyCache(deps.store),
      device: (mac) => this.device(mac),
      log: this.log,
      stats: this.stats,
      now: this.o.now,
      backPort: () => this.back.address().port,
      stopping: () => this.stopping,
    });
    this.sessions = new SessionTable(deps.auth, { ttlMs: opts.sessionTtlMs, maxPerAccount: opts.maxSessionsPerAccount }, (s, why) => this.sessionEnded(s, why));
    this.relay = new ObserveRelay({
      kits: this.kits,
      log: this.log,
      stats: this.stats,
      front: () => this.front,
      back: () => this.back,
      stopping: () => this.stopping,
      onBridgeNotification: (mac, m, sensor) => (sensor ? this.readingsOut.sensor(mac, sensor, m) : this.readingsOut.temperature(mac, m)),
      onClientNotification: (mac, path, m) => {
        if (isTempPath(path)) this.readingsOut.bubble(mac, m, { path });
      },
      upstreamError: (e) => this.upstreamError(e),
      deadlineMs: this.o.deadlineMs,
      confirmableUpstream: this.o.confirmableUpstream,
    });
    this.clock = new ClockKeeper(
      deps.store,
      { maxSkewMs: this.o.maxClockSkewMs, minIntervalMs: this.o.clockMinIntervalMs },
      (mac) => this.setKitClock(mac),
      (e) => this.log.warn({ err: e }, 'gateway clock keeping failed'),
    );
    this.readingsOut = new KitReadings({
      kits: this.kits,
      clock: this.clock,
      payloads: deps.payloads ?? null,
      log: this.log,
      stats: this.stats,
      maxClockSkewMs: this.o.maxClockSkewMs,
      cachedDevice: (mac) => this.cachedDevice(mac),
      device: (mac) => this.device(mac),
      writer: new ReadingWriter({ store: deps.store, events: deps.events, log: deps.log, stats: this.stats, quota: deps.quota }),
    });
  }

  async start(): Promise<void> {
    this.front = await CoapEndpoint.create({
      host: this.o.host,
      port: this.o.port,
      batched: this.o.batchedUdp,
      onRefused: (reason, peer, action) => this.log.debug({ peer: peerKey(peer), action }, `gateway refused a datagram: ${reason}`),
    });
    // The kit-facing socket binds the gateway's own host: a kit answers only datagrams from the
    // address it announces to (docs/device.md "Reach"), and on the wildcard the kernel would pick
    // the source address by route instead (127.0.0.1 toward a kit on loopback, whatever the host).
    this.back = await CoapEndpoint.create({ host: this.o.host, port: 0, batched: this.o.batchedUdp });
    if (this.o.batchedUdp && this.front.socket.kind !== 'batched') this.log.warn(`gateway: batched UDP unavailable (${batchedUnavailable()}); using node:dgram, one system call per datagram`);
    // Bursts (a fleet announcing after a power cut, notifications of thousands of kits) overflow the
    // default ~200 KiB socket buffer; ask for more, as far as the OS allows (net.core.rmem_max).
    for (const e of [this.front, this.back]) {
      try {
        e.socket.setRecvBufferSize(4 << 20);
      } catch {
        // keep the default
      }
    }
    this.front.handle((req, peer, reply) => this.onFront(req, peer, reply));
    this.front.on('reset', (mid: number, peer: Peer) => this.relay.clientReset(mid, peer));
    this.front.on('error', (e: Error) => this.log.warn({ err: e }, 'gateway socket error'));
    this.back.on('error', (e: Error) => this.log.warn({ err: e }, 'gateway upstream socket error'));
    if (this.o.readings) for (const k of this.kits.all()) this.ensureBridge(k);
  }

  address(): Peer {
    return this.front.address();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.sessions.closeAll();
    this.relay.endAll('the gateway is stopping');
    await Promise.all([this.front?.close(), this.back?.close()]);
    // Readings already received are written before the store may be closed.
    await this.readingsOut.flush();
  }

  /** Upstream observations and their subscribers (for operators and tests). */
  observations(): { mac: string; path: string; subscribers: number; bridge: boolean; state: string }[] {
    return this.relay.list();
  }

  /** Attaches a subscriber to the shared observation of a kit resource (the HTTP bridge's streams). */
  subscribe(kit: KitEntry, path: string[], query: string[], accept: number | undefined, sub: Subscriber): Promise<{ msg: CoapMessage; seq: number | undefined }> {
    return this.relay.subscribe(kit, path, query, accept, sub);
  }

  /** Removes a subscriber wherever it is. */
  release(sub: Subscriber): void {
    this.relay.release(sub);
  }

  // ---- the client-facing endpoint -------------------------------------------------------------

  private onFront(req: CoapMessage, peer: Peer, reply: (r: ResponseSpec) => void): ResponseSpec | undefined | Promise<ResponseSpec | undefined> | typeof DEFER {
    this.stats.requests++;
    try {
      if (isProxyRequest(req)) return this.proxy(req, peer, reply);
      const path = uriPath(req);
      if (path.length === 1 && path[0] === 'sessions') return this.sessionRequest(req, peer);
      if (isAnnouncement(req)) return this.onAnnouncement(req, peer);
      const kit = this.kits.byAddress(peer);
      if (kit && req.code === Code.PUT) {
        this.onKitMessage(kit, req, path);
        return req.type === CON ? { code: Code.CHANGED } : undefined;
      }
      return this.small(req, peer, new ReefError('NOT_FOUND', 'no such resource: reach kits with Proxy-Uri'));
    } catch (e) {
      this.log.error({ err: e }, 'gateway request failed');
      return this.small(req, peer, new ReefError('INTERNAL', 'internal error'));
    }
  }

  /**
   * An answer for a peer that may have no session: never larger than the request that caused it,
   * so the gateway cannot be used to amplify traffic toward a spoofed address.
   */
  private small(req: CoapMessage, peer: Peer, e: ReefError): ResponseSpec {
    if (this.sessions.peek(peer)) return failure(e);
    // The header, token and payload marker are fixed; options (a Max-Age) and the diagnostic share the rest.
    const budget = serializeMessage(req).length - (4 + req.token.length) - 1 - (e.retryAfter !== undefined ? 3 : 0);
    return failure(e, Math.max(0, budget));
  }

  /** CON: piggy-backed when quick, else empty ACK now and a CON separate response later; NON: a NON answer. */
  private answer(req: CoapMessage, peer: Peer, work: Promise<ResponseSpec>): Promise<ResponseSpec | undefined> {
    if (req.type !== CON) return work;
    let timer: NodeJS.Timeout | undefined;
    const early = new Promise<typeof SEPARATE>((resolve) => {
      timer = setTimeout(() => resolve(SEPARATE), this.o.piggybackMs);
    });
    return Promise.race([work, early]).then((r) => {
      clearTimeout(timer);
      if (r !== SEPARATE) return r;
      this.stats.separateResponses++;
      void work.then((spec) => {
        if (this.stopping) return;
        const msg: CoapMessage = { type: CON, code: spec.code, mid: this.front.nextMid(), token: req.token, options: spec.options ?? [], payload: spec.payload ?? Buffer.alloc(0) };
        void this.front.sendCon(peer, msg).then(({ result }) => {
          if (result !== 'ack') this.relay.dropClient(peer, req.token, `separate response ${result}`);
        });
      });
      return undefined;
    });
  }

  // ---- sessions --------------------------------------------------------------------------------

  private async sessionRequest(req: CoapMessage, peer: Peer): Promise<ResponseSpec> {
    // The original Java client opens a session with POST or PUT: both carry the token.
    if (req.code === Code.POST || req.code === Code.PUT) {
      const cf = getUintOption(req, Option.CONTENT_FORMAT);
      if (cf !== undefined && cf !== ContentFormat.TEXT_PLAIN) return this.small(req, peer, new ReefError('UNSUPPORTED_MEDIA_TYPE', 'send the token as text (content-format 0)'));
      try {
        const s = await this.sessions.open(peer, req.payload.toString('utf8'));
        this.log.info({ peer: s.key, tenantId: s.tenantId }, 'gateway session opened');
        return text(Code.CREATED, `session open until ${new Date(s.expiresAt).toISOString()}`);
      } catch (e) {
        if (isReefError(e)) return this.small(req, peer, e);
        throw e;
      }
    }
    if (req.code === Code.DELETE) {
      this.sessions.close(peer);
      return { code: Code.DELETED };
    }
    if (req.code === Code.GET) {
      try {
        const s = await this.sessions.check(peer);
        return text(Code.CONTENT, `${s.tenantId} until ${new Date(s.expiresAt).toISOString()}`);
      } catch (e) {
        if (isReefError(e)) return this.small(req, peer, e);
        throw e;
      }
    }
    return this.small(req, peer, new ReefError('METHOD_NOT_ALLOWED', 'POST or PUT, GET or DELETE'));
  }

  private sessionEnded(s: Session, why: string): void {
    if (why !== 'replaced') this.log.info({ peer: s.key, tenantId: s.tenantId, why }, 'gateway session ended');
    this.relay.sessionEnded(s.key);
  }

  // ---- the forward proxy -----------------------------------------------------------------------

  /**
   * A proxied request. The usual one is answered from what is cached (the session and its account,
   * the kit's device record): no wait before the request leaves for the kit. Anything not cached,
   * or not valid, takes the checking path, which also says why.
   */
  private proxy(req: CoapMessage, peer: Peer, reply: (r: ResponseSpec) => void): Promise<ResponseSpec | undefined> | typeof DEFER {
    const session = this.sessions.cachedCheck(peer);
    if (!session) return this.answer(req, peer, this.proxyChecked(req, peer));
    // The usual request, a NON, is answered through `reply` when the kit's answer comes: no promise,
    // no timer of its own (answer() needs both for a CON: piggy-backed or separate).
    if (req.type !== CON) {
      this.proxyFor(req, peer, session, reply);
      return DEFER;
    }
    return this.answer(req, peer, new Promise((done) => this.proxyFor(req, peer, session, done)));
  }

  private async proxyChecked(req: CoapMessage, peer: Peer): Promise<ResponseSpec> {
    let session: Session;
    try {
      session = await this.sessions.check(peer);
    } catch (e) {
      // A failed check answers from the catalogue: no session 4.01, a store outage 5.03 + Max-Age.
      if (isReefError(e) && e.status === 401) this.stats.refusedNoSession++;
      if (isReefError(e)) return this.small(req, peer, e);
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
      this.stats.refusedTarget++;
      return done(failure(new ReefError(e.kind === 'malformed' ? 'VALIDATION_FAILED' : 'PROXYING_NOT_SUPPORTED', e.message)));
    }
    const mac = t.mac;
    const d = this.cachedDevice(mac);
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
    this.log.error({ err: e }, 'gateway request failed');
    return failure(new ReefError('INTERNAL', 'internal error'));
  }

  private proxyTo(req: CoapMessage, peer: Peer, session: Session, k: KitEntry, t: Target, done: (r: ResponseSpec) => void): void {
    const { path, query } = t;
    const observe = getUintOption(req, Option.OBSERVE);
    if (observe === 0 && req.code === Code.GET) {
      this.relay
        .observeForClient(k, session.key, peer, req, path, query)
        .then(done, (e: unknown) => done(this.internal(e)))
        .catch((e: unknown) => done(this.internal(e)));
      return;
    }
    // Any other request with the token of a subscription of this client ends it (RFC 7641 §3.6).
    this.relay.dropClient(peer, req.token, 'deregistered');
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
          spec = e ? this.upstreamError(e) : this.relay.relayed(m!);
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
    const v: Target = { mac: kitMac(t, this.o.meshDomain), path: t.path, query: t.query, resource: `${t.path.join('/')}?${t.query.join('&')}` };
    if (key !== undefined) {
      if (this.targets.size >= 4096) this.targets.clear();
      this.targets.set(key, v);
    }
    return v;
  }

  /** The kit of this MAC if the group has it provisioned in sandbox and it is reachable; ReefError otherwise. */
  async authorize(groupId: string, mac: string): Promise<KitEntry> {
    return this.authorizeDevice(await this.device(mac), groupId, mac);
  }

  /** authorize() with the device record at hand; throws the ReefError. */
  private authorizeDevice(d: DeviceRecord | null, groupId: string, mac: string): KitEntry {
    // Another group's kit answers exactly like an unprovisioned MAC: no hint that it exists.
    if (!d || d.groupId !== groupId || d.solution !== SANDBOX) {
      this.stats.refusedKit++;
      throw new ReefError('DEVICE_NOT_FOUND', 'no such kit in your sandbox');
    }
    const kit = this.kits.get(mac);
    if (!kit) throw new ReefError('KIT_OFFLINE', 'the kit has not announced itself to the gateway: is it on?');
    return kit;
  }

  /** The device record of a MAC from the cache when fresh (up to DEVICE_FRESH_MS old); undefined when it must be read. */
  private cachedDevice(mac: string): DeviceRecord | null | undefined {
    const hit = this.deviceCache.get(mac);
    return hit && Date.now() - hit.at < DEVICE_FRESH_MS ? hit.d : undefined;
  }

  private async device(mac: string): Promise<DeviceRecord | null> {
    const hit = this.cachedDevice(mac);
    if (hit !== undefined) return hit;
    const now = Date.now();
    const d = await this.deps.store.getDeviceByMac(mac);
    if (this.deviceCache.size > 50_000) this.deviceCache.clear();
    this.deviceCache.set(mac, { d, at: now });
    return d;
  }

  /** Sends one request to a kit under the application deadline; rejects CoapTimeoutError / CoapResetError. */
  forward(kit: KitEntry, r: KitRequest): Promise<CoapMessage> {
    return new Promise((resolve, reject) => this.send(kit, r, (e, m) => (e ? reject(e) : resolve(m!))));
  }

  /** forward() with a callback, called once. */
  private send(kit: KitEntry, r: KitRequest, done: ExchangeCallback): void {
    this.stats.forwarded++;
    let uri = this.uriOptionCache.get(r.path);
    if (!uri || uri.prefix !== kit.prefix || uri.query !== r.query) {
      uri = { prefix: kit.prefix, query: r.query, options: [...kitPath(kit, r.path).map((s) => stringOption(Option.URI_PATH, s)), ...r.query.map((q) => stringOption(Option.URI_QUERY, q))] };
      this.uriOptionCache.set(r.path, uri);
    }
    const options: CoapOption[] = r.options?.length ? [...uri.options, ...r.options] : uri.options;
    const path = this.deps.payloads && r.method === Code.GET ? kitPath(kit, r.path) : undefined;
    const bubble = path !== undefined && isTempPath(path);
    this.back.exchange(kit.peer, { method: r.method, options, payload: r.payload ?? EMPTY_BUFFER, confirmable: this.o.confirmableUpstream, timeoutMs: this.o.deadlineMs }, (e, m) => {
      if (bubble && m && codeClass(m.code) === 2) this.readingsOut.bubble(kit.mac, m, { path });
      done(e, m);
    });
  }

  private upstreamError(e: unknown): ResponseSpec {
    if (e instanceof CoapTimeoutError) this.stats.timeouts++;
    else if (!(e instanceof CoapResetError) && !isReefError(e)) this.log.warn({ err: e }, 'gateway forward failed');
    return failure(upstreamFailure(e, this.o.deadlineMs));
  }

  // ---- kits: announcements, their own messages, the readings bridge, clocks -------------------

  /** A kit announcement (src/gateway/announcements.ts); once answered, the kit is (re-)observed. */
  private async onAnnouncement(req: CoapMessage, peer: Peer): Promise<ResponseSpec | undefined> {
    if (!this.o.learnKits) return undefined;
    const r = await this.announcements.receive(req, peer);
    if (!r || this.stopping) return undefined;
    const { outcome, entry } = r;
    // After the answer has left: it tells the kit the port our requests come from (a kit answers
    // only its gateway, docs/device.md), so a request sent before it would be dropped. A kit that is
    // 'new' to the directory may be one it forgot after its announcements stopped (src/gateway/kits.ts):
    // it restarted meanwhile and lost its observers, while the bridge's observation of its previous
    // run still counts as active; left to the quiet check, its readings would stop for minutes.
    setImmediate(() => {
      if (this.stopping) return;
      if (outcome === 'moved' || outcome === 'rebooted' || outcome === 'new') this.kitRestarted(entry);
      else this.ensureBridge(entry);
    });
    return r.answer;
  }

  /** A kit that restarted or moved lost its observers: every upstream of it registers again. */
  private kitRestarted(kit: KitEntry): void {
    this.relay.kitRestarted(kit.mac);
    this.ensureBridge(kit);
  }

  /** The readings bridge: one observation of the kit's temperature, held while the kit is reachable. */
  private ensureBridge(kit: KitEntry): void {
    if (!this.o.readings || this.stopping) return;
    // The temperature, and every added sensor the kit announced (each stored as its own field).
    const targets: { path: string[]; sensor?: string }[] = [{ path: TEMP_PATH }, ...kit.sensors.map((s) => ({ path: s.path.split('/'), sensor: s.type }))];
    for (const t of targets) {
      const up = this.relay.upstream(kit, [kit.prefix, ...t.path], ['sens'], undefined);
      up.bridge = true;
      if (t.sensor) up.sensor = t.sensor;
      // A registration that went quiet (the kit lost it without rebooting): register again.
      const quietMs = 3 * Math.max(kit.periodMs === Number.POSITIVE_INFINITY ? 0 : kit.periodMs, (getUintOption(up.latest?.msg ?? EMPTY, Option.MAX_AGE) ?? 60) * 1000);
      if (up.state === 'active' && Date.now() - up.lastNotified > quietMs) this.relay.register(up);
    }
  }

  private onKitMessage(kit: KitEntry, req: CoapMessage, path: string[]): void {
    const q = uriQuery(req);
    if (path.join('/') === 'sensor/arduino/time' || path.join('/') === 'snsr/arduino/time') {
      // The kit's own time PUT (seed §4.4): recorded, and the clock set right when it is off.
      let t: number;
      try {
        t = decodeTimeTlv(req.payload);
      } catch {
        return;
      }
      this.stats.clockReports++;
      this.clock.report(kit.mac, t, 'time-put');
      return;
    }
    if (path.join('/') === 'sys/snsr' && q.includes('ev=rbt')) {
      this.log.info({ mac: kit.mac }, 'gateway: kit rebooted');
      this.kitRestarted(kit);
    }
  }

  private async setKitClock(mac: string): Promise<boolean> {
    const kit = this.kits.get(mac);
    if (!kit) return false;
    this.stats.clockSets++;
    try {
      const m = await this.forward(kit, {
        method: Code.PUT,
        path: [kit.prefix, 'system', 'time'],
        query: [],
        options: [uintOption(Option.CONTENT_FORMAT, ContentFormat.OCTET_STREAM)],
        payload: encodeTimeTlv(Date.now()),
      });
      const ok = m.code === Code.CHANGED;
      this.log.info({ mac, ok, code: codeToString(m.code) }, 'gateway set a kit clock');
      return ok;
    } catch {
      return false;
    }
  }
}

/** How long a kit's device record is used from the cache: a kit removed or given to another group is refused after at most this long. */
const DEVICE_FRESH_MS = 1000;

/** The kit's temperature resource (any prefix): its payloads are readings. */
function isTempPath(path: string[]): boolean {
  return path.length >= 2 && path[path.length - 2] === TEMP_PATH[0] && path[path.length - 1] === TEMP_PATH[1];
}

const EMPTY: CoapMessage = { type: ACK, code: 0, mid: 0, token: Buffer.alloc(0), options: [], payload: Buffer.alloc(0) };

/** The Proxy-Uri option value a client uses for a kit resource. */
export function proxyUri(mac: string, meshDomain: string, pathAndQuery: string): string {
  return `coap://SSN${mac.toUpperCase()}.${meshDomain}:4849${pathAndQuery.startsWith('/') ? '' : '/'}${pathAndQuery}`;
}
