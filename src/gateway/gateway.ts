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
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import {
  ACK,
  Code,
  CoapEndpoint,
  CoapMessage,
  CoapOption,
  CoapResetError,
  CoapTimeoutError,
  CON,
  ContentFormat,
  codeClass,
  codeToString,
  decodeAnnouncement,
  decodeTimeTlv,
  encodeTimeTlv,
  getUintOption,
  isAnnouncement,
  NON,
  Option,
  peerKey,
  serializeMessage,
  stringOption,
  uintOption,
  uriPath,
  uriQuery,
  verifyAnnouncement,
  type Observation as CoapObservation,
  type Peer,
  type ResponseSpec,
} from '../coap/index.ts';
import { ReefError, isReefError } from '../core/errors.ts';
import { SANDBOX, type DeviceRecord } from '../core/types.ts';
import type { Authenticator } from '../auth/accounts.ts';
import type { EventBus } from '../events/bus.ts';
import { KitKeyCache } from '../service/kit-keys.ts';
import { storeObservations } from '../service/observations.ts';
import type { Store } from '../store/store.ts';
import { ClockKeeper } from './clock.ts';
import { KitDirectory, type KitEntry, type StaticKit } from './kits.ts';
import { readingObservation, sensorTypeOf, tryReading, type KitPayloadSink } from './readings.ts';
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
}

export interface GatewayDeps {
  store: Store;
  events: EventBus | null;
  auth: Authenticator;
  log: Logger;
  /** Receives every reading payload a kit sends (observe notifications and answers to GETs), raw. */
  payloads?: KitPayloadSink | null;
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

/** Who receives an upstream observation's notifications. */
export interface Subscriber {
  /** Called with each notification (options as the kit sent them, Observe replaced by `seq`). */
  notify(m: CoapMessage, seq: number): void;
  /** The observation ended: the kit ended it, the upstream was lost, or the gateway stopped. */
  ended(why: string): void;
  /** A CoAP client's subscription: its session, address and token. */
  session?: string;
  peer?: Peer;
  token?: string;
  /** MID of the last NON notification sent to the client, so its RST can be matched. */
  lastMid?: number;
}

interface Upstream {
  key: string;
  mac: string;
  path: string[];
  query: string[];
  accept: number | undefined;
  obs: CoapObservation | undefined;
  first: Promise<CoapMessage> | undefined;
  state: 'registering' | 'active' | 'failed' | 'ended';
  latest: { msg: CoapMessage; at: number } | undefined;
  lastNotified: number;
  seq: number;
  subscribers: Set<Subscriber>;
  bridge: boolean;
  retry: NodeJS.Timeout | undefined;
  retryMs: number;
}

/** Options a proxy passes on to the kit (RFC 7252 §5.7.2: the Uri-* come from the target). */
const FORWARD_REQUEST = new Set<number>([
  Option.IF_MATCH,
  Option.ETAG,
  Option.IF_NONE_MATCH,
  Option.CONTENT_FORMAT,
  Option.ACCEPT,
  Option.BLOCK2,
  Option.BLOCK1,
  Option.SIZE2,
  Option.SIZE1,
]);

const TEMP_PATH = ['arduino', 'temp'];
const SEPARATE = Symbol('separate');

function text(code: number, s: string, max = 96): ResponseSpec {
  return { code, payload: Buffer.from(s.slice(0, max), 'utf8') };
}

/** The kit-side path: the client's first segment replaced by (or prefixed with) the kit's own prefix (seed §9). */
export function kitPath(kit: KitEntry, path: string[]): string[] {
  if (path.length === 2 && path[0] === '.well-known' && path[1] === 'core') return path;
  if (path[0] === 'snsr' || path[0] === 'sensor') return [kit.prefix, ...path.slice(1)];
  return [kit.prefix, ...path];
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
    storeErrors: 0,
    clockReports: 0,
    clockSets: 0,
    separateResponses: 0,
  };
  private readonly upstreams = new Map<string, Upstream>();
  /** CoAP clients' subscriptions by (address, port, token), so a request ends its token's subscription cheaply. */
  private readonly clientSubs = new Map<string, { up: Upstream; sub: Subscriber }>();
  /** (client address, port, token) → the answer in progress: a re-sent request is not forwarded twice. */
  private readonly inflight = new Map<string, Promise<ResponseSpec>>();
  private readonly deviceCache = new Map<string, { d: DeviceRecord | null; at: number }>();
  private readonly kitKeys: KitKeyCache;
  private readonly log: Logger;
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
      ...opts,
    } as Required<Omit<GatewayOptions, 'kits'>>;
    this.kitKeys = new KitKeyCache(deps.store);
    this.log = deps.log;
    this.kits = new KitDirectory(opts.kits ?? []);
    this.sessions = new SessionTable(deps.auth, { ttlMs: opts.sessionTtlMs, maxPerAccount: opts.maxSessionsPerAccount }, (s, why) => this.sessionEnded(s, why));
    this.clock = new ClockKeeper(deps.store, { maxSkewMs: this.o.maxClockSkewMs, minIntervalMs: this.o.clockMinIntervalMs }, (mac) => this.setKitClock(mac), (e) =>
      this.log.warn({ err: e }, 'gateway clock keeping failed'),
    );
  }

  async start(): Promise<void> {
    this.front = await CoapEndpoint.create({
      host: this.o.host,
      port: this.o.port,
      onRefused: (reason, peer, action) => this.log.debug({ peer: peerKey(peer), action }, `gateway refused a datagram: ${reason}`),
    });
    this.back = await CoapEndpoint.create({ host: this.o.host.includes(':') ? '::' : '0.0.0.0', port: 0 });
    // Bursts (a fleet announcing after a power cut, notifications of thousands of kits) overflow the
    // default ~200 KiB socket buffer; ask for more, as far as the OS allows (net.core.rmem_max).
    for (const e of [this.front, this.back]) {
      try {
        e.socket.setRecvBufferSize(4 << 20);
      } catch {
        // keep the default
      }
    }
    this.front.handle((req, peer) => this.onFront(req, peer));
    this.front.on('reset', (mid: number, peer: Peer) => this.clientReset(mid, peer));
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
    for (const up of [...this.upstreams.values()]) this.endUpstream(up, 'the gateway is stopping', true);
    await Promise.all([this.front?.close(), this.back?.close()]);
  }

  /** Upstream observations and their subscribers (for operators and tests). */
  observations(): { mac: string; path: string; subscribers: number; bridge: boolean; state: string }[] {
    return [...this.upstreams.values()].map((u) => ({
      mac: u.mac,
      path: '/' + u.path.join('/') + (u.query.length ? '?' + u.query.join('&') : ''),
      subscribers: u.subscribers.size,
      bridge: u.bridge,
      state: u.state,
    }));
  }

  // ---- the client-facing endpoint -------------------------------------------------------------

  private onFront(req: CoapMessage, peer: Peer): ResponseSpec | undefined | Promise<ResponseSpec | undefined> {
    this.stats.requests++;
    try {
      if (isProxyRequest(req)) return this.answer(req, peer, this.proxy(req, peer));
      const path = uriPath(req);
      if (path.length === 1 && path[0] === 'sessions') return this.sessionRequest(req, peer);
      if (isAnnouncement(req)) return this.onAnnouncement(req, peer);
      const kit = this.kits.byAddress(peer);
      if (kit && req.code === Code.PUT) {
        this.onKitMessage(kit, req, path);
        return req.type === CON ? { code: Code.CHANGED } : undefined;
      }
      return this.small(req, peer, Code.NOT_FOUND, 'no such resource: reach kits with Proxy-Uri');
    } catch (e) {
      this.log.error({ err: e }, 'gateway request failed');
      return this.small(req, peer, Code.INTERNAL_SERVER_ERROR, 'internal error');
    }
  }

  /**
   * An answer for a peer that may have no session: never larger than the request that caused it,
   * so the gateway cannot be used to amplify traffic toward a spoofed address.
   */
  private small(req: CoapMessage, peer: Peer, code: number, diagnostic: string): ResponseSpec {
    if (this.sessions.peek(peer)) return text(code, diagnostic);
    const budget = serializeMessage(req).length - (4 + req.token.length) - 1;
    return budget > 0 ? text(code, diagnostic, budget) : { code };
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
          if (result !== 'ack') this.dropClient(peer, req.token.toString('hex'), `separate response ${result}`);
        });
      });
      return undefined;
    });
  }

  // ---- sessions --------------------------------------------------------------------------------

  private async sessionRequest(req: CoapMessage, peer: Peer): Promise<ResponseSpec> {
    if (req.code === Code.POST) {
      const cf = getUintOption(req, Option.CONTENT_FORMAT);
      if (cf !== undefined && cf !== ContentFormat.TEXT_PLAIN) return this.small(req, peer, Code.UNSUPPORTED_CONTENT_FORMAT, 'send the token as text (content-format 0)');
      try {
        const s = await this.sessions.open(peer, req.payload.toString('utf8'));
        this.log.info({ peer: s.key, tenantId: s.tenantId }, 'gateway session opened');
        return text(Code.CREATED, `session open until ${new Date(s.expiresAt).toISOString()}`);
      } catch (e) {
        if (isReefError(e)) return this.small(req, peer, Code.UNAUTHORIZED, e.message);
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
        if (isReefError(e)) return this.small(req, peer, Code.UNAUTHORIZED, e.message);
        throw e;
      }
    }
    return this.small(req, peer, Code.METHOD_NOT_ALLOWED, 'POST, GET or DELETE');
  }

  private sessionEnded(s: Session, why: string): void {
    if (why !== 'replaced') this.log.info({ peer: s.key, tenantId: s.tenantId, why }, 'gateway session ended');
    for (const up of [...this.upstreams.values()]) {
      for (const sub of [...up.subscribers]) if (sub.session === s.key) this.unsubscribe(up, sub);
    }
  }

  // ---- the forward proxy -----------------------------------------------------------------------

  private async proxy(req: CoapMessage, peer: Peer): Promise<ResponseSpec> {
    let session: Session;
    try {
      session = await this.sessions.check(peer);
    } catch (e) {
      this.stats.refusedNoSession++;
      if (isReefError(e)) return this.small(req, peer, Code.UNAUTHORIZED, e.message);
      throw e;
    }
    let mac: string;
    let path: string[];
    let query: string[];
    try {
      const t = requestTarget(req);
      mac = kitMac(t, this.o.meshDomain);
      path = t.path;
      query = t.query;
    } catch (e) {
      if (!(e instanceof TargetError)) throw e;
      this.stats.refusedTarget++;
      return text(e.kind === 'malformed' ? Code.BAD_REQUEST : Code.PROXYING_NOT_SUPPORTED, e.message);
    }
    const kit = await this.authorize(session.groupId, mac).catch((e: unknown) => e);
    if (isReefError(kit)) return text(kit.code === 'KIT_OFFLINE' ? Code.SERVICE_UNAVAILABLE : Code.NOT_FOUND, kit.message);
    if (!kit || kit instanceof Error) throw kit;
    const k = kit as KitEntry;
    const token = req.token.toString('hex');
    const observe = getUintOption(req, Option.OBSERVE);
    const options = req.options.filter((o) => FORWARD_REQUEST.has(o.number));
    if (observe === 0 && req.code === Code.GET) return this.observeForClient(k, session, peer, req, path, query);
    // Any other request with the token of a subscription of this client ends it (RFC 7641 §3.6).
    this.dropClient(peer, token, 'deregistered');
    // Keyed by the request too: a client that reuses one token for different requests is not merged.
    const fkey = `${peerKey(peer)}|${token}|${req.code}|${path.join('/')}?${query.join('&')}`;
    const prior = this.inflight.get(fkey);
    if (prior) return prior;
    const work = this.forward(k, { method: req.code, path, query, options, payload: req.payload }).then(
      (m) => this.relayed(m),
      (e) => this.upstreamError(e),
    );
    this.inflight.set(fkey, work);
    void work.finally(() => this.inflight.delete(fkey));
    return work;
  }

  /** The kit of this MAC if the group has it provisioned in sandbox and it is reachable; ReefError otherwise. */
  async authorize(groupId: string, mac: string): Promise<KitEntry> {
    const d = await this.device(mac);
    // Another group's kit answers exactly like an unprovisioned MAC: no hint that it exists.
    if (!d || d.groupId !== groupId || d.solution !== SANDBOX) {
      this.stats.refusedKit++;
      throw new ReefError('DEVICE_NOT_FOUND', 'no such kit in your sandbox');
    }
    const kit = this.kits.get(mac);
    if (!kit) throw new ReefError('KIT_OFFLINE', 'the kit has not announced itself to the gateway: is it on?');
    return kit;
  }

  private async device(mac: string): Promise<DeviceRecord | null> {
    const now = Date.now();
    const hit = this.deviceCache.get(mac);
    if (hit && now - hit.at < 1000) return hit.d;
    const d = await this.deps.store.getDeviceByMac(mac);
    if (this.deviceCache.size > 50_000) this.deviceCache.clear();
    this.deviceCache.set(mac, { d, at: now });
    return d;
  }

  /** Sends one request to a kit under the application deadline; rejects CoapTimeoutError / CoapResetError. */
  forward(kit: KitEntry, r: KitRequest): Promise<CoapMessage> {
    this.stats.forwarded++;
    const options: CoapOption[] = [
      ...kitPath(kit, r.path).map((s) => stringOption(Option.URI_PATH, s)),
      ...r.query.map((q) => stringOption(Option.URI_QUERY, q)),
      ...(r.options ?? []),
    ];
    const answer = this.back.request(kit.peer, {
      method: r.method,
      options,
      payload: r.payload ?? Buffer.alloc(0),
      confirmable: this.o.confirmableUpstream,
      timeoutMs: this.o.deadlineMs,
    });
    if (this.deps.payloads && r.method === Code.GET) {
      const path = kitPath(kit, r.path);
      if (isTempPath(path)) answer.then((m) => codeClass(m.code) === 2 && this.bubble(kit.mac, path, m), () => undefined);
    }
    return answer;
  }

  /** The kit's response as the client's: every option but Observe passes (Block2, Size2, Max-Age, ETag...). */
  private relayed(m: CoapMessage, seq?: number): ResponseSpec {
    if (codeClass(m.code) !== 2) this.stats.kitErrors++;
    const options = m.options.filter((o) => o.number !== Option.OBSERVE);
    if (seq !== undefined) options.push(uintOption(Option.OBSERVE, seq));
    return { code: m.code, options, payload: m.payload };
  }

  private upstreamError(e: unknown): ResponseSpec {
    if (e instanceof CoapTimeoutError) {
      this.stats.timeouts++;
      return text(Code.GATEWAY_TIMEOUT, `the kit did not answer within ${Math.round(this.o.deadlineMs / 100) / 10} s`);
    }
    if (e instanceof CoapResetError) return text(Code.BAD_GATEWAY, 'the kit rejected the request (RST)');
    this.log.warn({ err: e }, 'gateway forward failed');
    return text(Code.BAD_GATEWAY, 'the kit could not be reached');
  }

  // ---- observe relay ---------------------------------------------------------------------------

  private upstreamKey(mac: string, path: string[], query: string[], accept: number | undefined): string {
    return `${mac}|${path.join('/')}|${query.join('&')}|${accept ?? ''}`;
  }

  /** The shared upstream observation of a kit resource, started when new. */
  private upstream(kit: KitEntry, path: string[], query: string[], accept: number | undefined): Upstream {
    const p = kitPath(kit, path);
    const key = this.upstreamKey(kit.mac, p, query, accept);
    let up = this.upstreams.get(key);
    if (up && up.state !== 'ended') {
      if (up.state === 'failed') this.register(up);
      return up;
    }
    up = {
      key,
      mac: kit.mac,
      path: p,
      query,
      accept,
      obs: undefined,
      first: undefined,
      state: 'registering',
      latest: undefined,
      lastNotified: 0,
      seq: 1,
      subscribers: new Set(),
      bridge: false,
      retry: undefined,
      retryMs: 1000,
    };
    this.upstreams.set(key, up);
    this.register(up);
    return up;
  }

  /** (Re-)registers an upstream observation with the kit; subscribers stay attached. */
  private register(up: Upstream): void {
    if (this.stopping) return;
    if (up.retry) clearTimeout(up.retry);
    up.retry = undefined;
    up.obs?.forget();
    const kit = this.kits.get(up.mac);
    if (!kit) {
      up.state = 'failed';
      up.first = Promise.reject(new ReefError('KIT_OFFLINE', 'the kit has not announced itself to the gateway'));
      up.first.catch(() => undefined);
      return;
    }
    up.state = 'registering';
    const options: CoapOption[] = [...up.path.map((s) => stringOption(Option.URI_PATH, s)), ...up.query.map((q) => stringOption(Option.URI_QUERY, q))];
    if (up.accept !== undefined) options.push(uintOption(Option.ACCEPT, up.accept));
    this.stats.forwarded++;
    const obs = this.back.observe(kit.peer, { options, confirmable: this.o.confirmableUpstream, timeoutMs: this.o.deadlineMs }, (m) => {
      if (up.obs === obs) this.notification(up, m);
    });
    up.obs = obs;
    up.first = obs.first.then(
      (m) => {
        if (up.obs !== obs) return m;
        if (codeClass(m.code) === 2 && getUintOption(m, Option.OBSERVE) !== undefined) {
          up.state = 'active';
          up.retryMs = 1000;
          this.remember(up, m);
        } else if (up.bridge && codeClass(m.code) === 5) {
          // A kit still booting answers 5.xx (its module's 5.04): the bridge tries again.
          this.registrationFailed(up, new Error(`the kit answered ${codeToString(m.code)}`));
        } else {
          // The kit answered without registering (an error, or a resource that is not observable).
          up.state = 'ended';
          this.upstreams.delete(up.key);
          obs.forget();
        }
        return m;
      },
      (e: unknown) => {
        if (up.obs === obs) this.registrationFailed(up, e);
        throw e;
      },
    );
    up.first.catch(() => undefined);
  }

  private registrationFailed(up: Upstream, e: unknown): void {
    up.state = 'failed';
    up.obs?.forget();
    up.obs = undefined;
    this.log.debug({ mac: up.mac, err: e }, 'gateway upstream observation failed');
    if (!up.bridge) {
      // Nobody retries for the clients: they are told the observation ended (RFC 7641 §3.2).
      if (up.subscribers.size > 0 && up.latest) this.endUpstream(up, 'the kit did not answer the re-registration', false);
      return;
    }
    if (!this.stopping) {
      // The bridge keeps trying while the kit is known; an announcement also restarts it.
      up.retry = setTimeout(() => {
        if (this.kits.get(up.mac)) this.register(up);
      }, up.retryMs);
      up.retry.unref();
      up.retryMs = Math.min(up.retryMs * 2, 60_000);
    }
  }

  private remember(up: Upstream, m: CoapMessage): void {
    up.latest = { msg: m, at: Date.now() };
    up.lastNotified = up.latest.at;
    if (up.bridge) this.storeReading(up, m);
    else if (isTempPath(up.path)) this.bubble(up.mac, up.path, m);
  }

  /** Hands a reading payload, unchanged, to the payload sink, for the kit's owner (sandbox kits only). */
  private bubble(mac: string, path: string[], m: CoapMessage, d?: DeviceRecord | null): void {
    const sink = this.deps.payloads;
    if (!sink || m.payload.length === 0) return;
    if (!tryReading(m.payload, getUintOption(m, Option.CONTENT_FORMAT) ?? this.kits.get(mac)?.cf)) return;
    const hand = (dev: DeviceRecord | null) => {
      if (!dev || dev.solution !== SANDBOX) return;
      try {
        sink({ device: dev, mac, sensorType: sensorTypeOf(m.payload, path), payload: m.payload });
      } catch (e) {
        this.log.warn({ err: e, mac }, 'gateway payload sink failed');
      }
    };
    if (d !== undefined) return hand(d);
    void this.device(mac).then(hand, (e: unknown) => this.log.warn({ err: e, mac }, 'gateway could not look up a kit'));
  }

  private notification(up: Upstream, m: CoapMessage): void {
    this.stats.notificationsIn++;
    const live = codeClass(m.code) === 2 && getUintOption(m, Option.OBSERVE) !== undefined;
    up.seq = (up.seq + 1) & 0xffffff;
    if (live) this.remember(up, m);
    for (const sub of [...up.subscribers]) {
      this.stats.notificationsRelayed++;
      try {
        sub.notify(m, up.seq);
      } catch (e) {
        this.log.warn({ err: e }, 'gateway subscriber failed');
      }
    }
    if (!live) {
      // RFC 7641 §3.2: a notification with an error code or without Observe ends the observation;
      // the subscribers have just been given it, so they are not told a second time.
      for (const s of up.subscribers) this.unindex(s);
      up.subscribers.clear();
      this.endUpstream(up, `the kit ended the observation (${codeToString(m.code)})`, false);
    }
  }

  /** Attaches a subscriber to the shared observation of a kit resource; resolves with the first response. */
  async subscribe(kit: KitEntry, path: string[], query: string[], accept: number | undefined, sub: Subscriber): Promise<{ msg: CoapMessage; seq: number | undefined }> {
    const up = this.upstream(kit, path, query, accept);
    up.subscribers.add(sub);
    if (sub.peer && sub.token !== undefined) this.clientSubs.set(`${peerKey(sub.peer)}|${sub.token}`, { up, sub });
    let first: CoapMessage;
    try {
      first = await up.first!;
    } catch (e) {
      this.unsubscribe(up, sub);
      throw e;
    }
    if (!up.subscribers.has(sub)) return { msg: first, seq: undefined };
    if (up.state !== 'active') {
      this.unsubscribe(up, sub);
      return { msg: first, seq: undefined };
    }
    const latest = up.latest?.msg ?? first;
    return { msg: this.aged(latest, up.latest?.at), seq: up.seq };
  }

  /** RFC 7252 §5.6.1: a representation served from the gateway's copy carries its remaining Max-Age. */
  private aged(m: CoapMessage, at: number | undefined): CoapMessage {
    const maxAge = getUintOption(m, Option.MAX_AGE);
    if (maxAge === undefined || at === undefined) return m;
    const left = Math.max(0, maxAge - Math.floor((Date.now() - at) / 1000));
    return { ...m, options: [...m.options.filter((o) => o.number !== Option.MAX_AGE), uintOption(Option.MAX_AGE, left)] };
  }

  unsubscribe(up: Upstream, sub: Subscriber): void {
    this.unindex(sub);
    if (!up.subscribers.delete(sub)) return;
    this.maybeRelease(up);
  }

  private unindex(sub: Subscriber): void {
    if (!sub.peer || sub.token === undefined) return;
    const k = `${peerKey(sub.peer)}|${sub.token}`;
    if (this.clientSubs.get(k)?.sub === sub) this.clientSubs.delete(k);
  }

  /** Finds and removes a subscriber anywhere (by its handle). */
  release(sub: Subscriber): void {
    for (const up of this.upstreams.values()) if (up.subscribers.has(sub)) return this.unsubscribe(up, sub);
  }

  private maybeRelease(up: Upstream): void {
    if (up.subscribers.size > 0 || up.bridge || up.state === 'ended') return;
    this.endUpstream(up, 'no observers left', true);
  }

  private endUpstream(up: Upstream, why: string, cancel: boolean): void {
    if (up.state === 'ended' && !this.upstreams.has(up.key)) return;
    up.state = 'ended';
    if (up.retry) clearTimeout(up.retry);
    if (this.upstreams.get(up.key) === up) this.upstreams.delete(up.key);
    const obs = up.obs;
    up.obs = undefined;
    if (obs) {
      // RFC 7641 §3.6: proactive cancellation, so the kit stops sending into the mesh.
      if (cancel && !this.stopping) void obs.cancel();
      else obs.forget();
    }
    const subs = [...up.subscribers];
    up.subscribers.clear();
    for (const s of subs) this.unindex(s);
    for (const s of subs) {
      try {
        s.ended(why);
      } catch {
        // a subscriber's failure must not stop the others being told
      }
    }
  }

  private async observeForClient(kit: KitEntry, session: Session, peer: Peer, req: CoapMessage, path: string[], query: string[]): Promise<ResponseSpec> {
    const token = req.token.toString('hex');
    // RFC 7641 §4.1: a registration with the same token replaces the client's earlier one.
    this.dropClient(peer, token, 'replaced');
    const con = req.type === CON;
    const sub: Subscriber = {
      session: session.key,
      peer,
      token,
      notify: (m, seq) => {
        const live = codeClass(m.code) === 2 && getUintOption(m, Option.OBSERVE) !== undefined;
        const spec = this.relayed(m, live ? seq : undefined);
        const msg: CoapMessage = { type: con ? CON : NON, code: spec.code, mid: this.front.nextMid(), token: req.token, options: spec.options ?? [], payload: spec.payload ?? Buffer.alloc(0) };
        if (con) {
          void this.front.sendCon(peer, msg).then(({ result }) => {
            // RFC 7641 §4.5: a CON notification answered RST or never acknowledged ends the subscription.
            if (result !== 'ack') this.release(sub);
          });
        } else {
          sub.lastMid = msg.mid;
          this.front.sendNon(peer, msg);
        }
      },
      ended: (why) => {
        if (this.stopping) return;
        // RFC 7641 §3.2: an error response without Observe tells the client its observation ended.
        const msg: CoapMessage = { type: con ? CON : NON, code: Code.SERVICE_UNAVAILABLE, mid: this.front.nextMid(), token: req.token, options: [], payload: Buffer.from(why.slice(0, 64)) };
        if (con) void this.front.sendCon(peer, msg);
        else this.front.sendNon(peer, msg);
      },
    };
    const accept = getUintOption(req, Option.ACCEPT);
    try {
      const { msg, seq } = await this.subscribe(kit, path, query, accept, sub);
      return this.relayed(msg, seq);
    } catch (e) {
      if (isReefError(e)) return text(e.code === 'KIT_OFFLINE' ? Code.SERVICE_UNAVAILABLE : Code.NOT_FOUND, e.message);
      return this.upstreamError(e);
    }
  }

  /** Ends the subscription of a client's token (deregistration, a new request with the token, RST). */
  private dropClient(peer: Peer, token: string, why: string): void {
    const hit = this.clientSubs.get(`${peerKey(peer)}|${token}`);
    if (!hit) return;
    this.log.debug({ peer: peerKey(peer), token, why }, 'gateway observer removed');
    this.unsubscribe(hit.up, hit.sub);
  }

  /** A RST from a client to one of our NON notifications (RFC 7641 §3.6). */
  private clientReset(mid: number, peer: Peer): void {
    const pk = peerKey(peer);
    for (const up of [...this.upstreams.values()]) {
      for (const sub of [...up.subscribers]) {
        if (sub.peer && peerKey(sub.peer) === pk && sub.lastMid === mid) this.unsubscribe(up, sub);
      }
    }
  }

  // ---- kits: announcements, their own messages, the readings bridge, clocks -------------------

  /**
   * A kit announcement (src/coap/announce.ts). Learned only when it is signed with the kit key of a
   * provisioned MAC and comes from the very address and port it names: an outsider can neither move
   * a kit nor replay a captured announcement from elsewhere. An accepted announcement is answered
   * 2.04 (the kit then knows it is in); anything else gets no answer at all, whether the MAC is
   * unknown, the signature wrong or the payload garbage, after the same work (a throw-away key
   * stands in for a missing one), so silence tells an outsider nothing about which MACs exist.
   */
  private async onAnnouncement(req: CoapMessage, peer: Peer): Promise<ResponseSpec | undefined> {
    if (!this.o.learnKits) return undefined;
    let ann;
    try {
      ann = decodeAnnouncement(req.payload);
    } catch (e) {
      this.stats.announcementsRefused++;
      this.log.debug({ peer: peerKey(peer), err: (e as Error).message }, 'gateway ignored a bad announcement');
      return undefined;
    }
    let d: DeviceRecord | null;
    let key: Buffer | null;
    try {
      d = await this.device(ann.mac);
      key = d ? await this.kitKeys.get(ann.mac) : null;
    } catch (e) {
      this.log.warn({ err: (e as Error).message }, 'gateway announcement lookup failed');
      return undefined;
    }
    const signed = verifyAnnouncement(ann, key ?? THROWAWAY_KEY);
    if (this.stopping) return undefined;
    if (!d || !key || !signed) {
      this.stats.announcementsRefused++;
      // Debug only: a flood of forged announcements must not flood the log either.
      this.log.debug({ peer: peerKey(peer), mac: ann.mac, why: !d ? 'not provisioned' : !key ? 'no kit key issued' : 'bad signature' }, 'gateway ignored an announcement');
      return undefined;
    }
    const { outcome, entry } = this.kits.announce(ann, peer);
    if (!entry) {
      this.stats.announcementsRefused++;
      this.log.warn({ peer: peerKey(peer), mac: ann.mac, outcome }, 'gateway refused an announcement');
      return undefined;
    }
    this.stats.announcements++;
    if (outcome !== 'refreshed') this.log.info({ mac: entry.mac, at: peerKey(entry.peer), prefix: entry.prefix, outcome }, 'gateway learned a kit');
    if (outcome === 'moved' || outcome === 'rebooted') this.kitRestarted(entry);
    else this.ensureBridge(entry);
    return { code: Code.CHANGED };
  }

  /** A kit that restarted or moved lost its observers: every upstream of it registers again. */
  private kitRestarted(kit: KitEntry): void {
    for (const up of this.upstreams.values()) if (up.mac === kit.mac && up.state !== 'ended') this.register(up);
    this.ensureBridge(kit);
  }

  /** The readings bridge: one observation of the kit's temperature, held while the kit is reachable. */
  private ensureBridge(kit: KitEntry): void {
    if (!this.o.readings || this.stopping) return;
    const up = this.upstream(kit, [kit.prefix, ...TEMP_PATH], ['sens'], undefined);
    up.bridge = true;
    // A registration that went quiet (the kit lost it without rebooting): register again.
    const quietMs = 3 * Math.max(kit.periodMs === Number.POSITIVE_INFINITY ? 0 : kit.periodMs, (getUintOption(up.latest?.msg ?? EMPTY, Option.MAX_AGE) ?? 60) * 1000);
    if (up.state === 'active' && Date.now() - up.lastNotified > quietMs) this.register(up);
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
      const m = await this.forward(kit, { method: Code.PUT, path: [kit.prefix, 'system', 'time'], query: [], options: [uintOption(Option.CONTENT_FORMAT, ContentFormat.OCTET_STREAM)], payload: encodeTimeTlv(Date.now()) });
      const ok = m.code === Code.CHANGED;
      this.log.info({ mac, ok, code: codeToString(m.code) }, 'gateway set a kit clock');
      return ok;
    } catch {
      return false;
    }
  }

  private storeReading(up: Upstream, m: CoapMessage): void {
    const kit = this.kits.get(up.mac);
    const r = tryReading(m.payload, getUintOption(m, Option.CONTENT_FORMAT) ?? kit?.cf);
    if (!r) return;
    const at = Date.now();
    this.clock.report(up.mac, r.epoch * 1000, 'reading', at);
    void this.device(up.mac)
      .then(async (d) => {
        if (!d || d.solution !== SANDBOX) return;
        // The raw payload bubbles up whether or not the store takes the reading.
        this.bubble(up.mac, up.path, m, d);
        await storeObservations(this.deps.store, this.deps.events, d, [readingObservation(r, at, up.mac)]);
        this.stats.readingsStored++;
      })
      .catch((e: unknown) => {
        this.stats.storeErrors++;
        this.log.warn({ err: e, mac: up.mac }, 'gateway could not store a reading');
      });
  }
}

/** Stands in for the key of a MAC that has none, so a refused announcement costs what an accepted one does. */
const THROWAWAY_KEY = randomBytes(32);

/** The kit's temperature resource (any prefix): its payloads are readings. */
function isTempPath(path: string[]): boolean {
  return path.length >= 2 && path[path.length - 2] === TEMP_PATH[0] && path[path.length - 1] === TEMP_PATH[1];
}

const EMPTY: CoapMessage = { type: ACK, code: 0, mid: 0, token: Buffer.alloc(0), options: [], payload: Buffer.alloc(0) };

/** The Proxy-Uri option value a client uses for a kit resource. */
export function proxyUri(mac: string, meshDomain: string, pathAndQuery: string): string {
  return `coap://SSN${mac.toUpperCase()}.${meshDomain}:4849${pathAndQuery.startsWith('/') ? '' : '/'}${pathAndQuery}`;
}

