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
// The parts: sessions.ts and session-resource.ts (the sessions and their resource), forward.ts (the
// forward proxy), observe-relay.ts (shared observations), kit-messages.ts (announcements, the kits'
// own messages, the readings bridge, clocks); this class wires them to the two endpoints.
import type { Logger } from 'pino';
import { batchedUnavailable, Code, CoapEndpoint, CON, type CoapMessage, type DEFER, isAnnouncement, peerKey, uriPath, type Peer, type ResponseSpec } from '../coap/index.ts';
import { ReefError } from '../core/errors.ts';
import type { Authenticator } from '../auth/accounts.ts';
import type { EventBus } from '../events/bus.ts';
import { KitKeyCache } from '../service/kit-keys.ts';
import type { ObservationQuota } from '../service/observations.ts';
import type { Store } from '../store/store.ts';
import { boundedFailure } from './answers.ts';
import { ClockKeeper } from './clock.ts';
import { Announcements } from './announcements.ts';
import { DeviceCache } from './device-cache.ts';
import { ForwardProxy, type KitRequest } from './forward.ts';
import { isTempPath, KitReadings } from './kit-readings.ts';
import { KitMessages } from './kit-messages.ts';
import { ReadingWriter } from './reading-writer.ts';
import { KitDirectory, type KitEntry, type StaticKit } from './kits.ts';
import { ObserveRelay, type Subscriber } from './observe-relay.ts';
import type { KitPayloadSink } from './readings.ts';
import { SessionResource } from './session-resource.ts';
import { SessionTable, type Session } from './sessions.ts';
import { isProxyRequest } from './target.ts';

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

// Moved to their own modules; re-exported for existing callers.
export { kitPath } from './kits.ts';
export type { KitRequest, Subscriber };

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
  /** The kits' device records, kept briefly. */
  private readonly devices: DeviceCache;
  /** Kit readings into the store and to the payload sink. */
  private readonly readingsOut: KitReadings;
  private readonly log: Logger;
  /** The /sessions resource. */
  private readonly sessionResource: SessionResource;
  /** Proxied requests to kits. */
  private readonly proxy: ForwardProxy;
  /** Announcements, the kits' own messages, the readings bridge, clock setting. */
  private readonly kitMessages: KitMessages;
  private readonly o: Required<Omit<GatewayOptions, 'kits'>>;
  private stopping = false;

  constructor(deps: GatewayDeps, opts: GatewayOptions) {
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
    this.devices = new DeviceCache(deps.store);
    const stopping = () => this.stopping;
    const announcements = new Announcements({
      kits: this.kits,
      kitKeys: new KitKeyCache(deps.store),
      device: (mac) => this.devices.get(mac),
      log: this.log,
      stats: this.stats,
      now: this.o.now,
      backPort: () => this.back.address().port,
      stopping,
    });
    this.sessions = new SessionTable(deps.auth, { ttlMs: opts.sessionTtlMs, maxPerAccount: opts.maxSessionsPerAccount }, (s, why) => this.sessionEnded(s, why));
    this.sessionResource = new SessionResource(this.sessions, this.log);
    this.relay = new ObserveRelay({
      kits: this.kits,
      log: this.log,
      stats: this.stats,
      front: () => this.front,
      back: () => this.back,
      stopping,
      onBridgeNotification: (mac, m, sensor) => (sensor ? this.readingsOut.sensor(mac, sensor, m) : this.readingsOut.temperature(mac, m)),
      onClientNotification: (mac, path, m) => {
        if (isTempPath(path)) this.readingsOut.bubble(mac, m, { path });
      },
      upstreamError: (e) => this.proxy.upstreamError(e),
      deadlineMs: this.o.deadlineMs,
      confirmableUpstream: this.o.confirmableUpstream,
    });
    this.clock = new ClockKeeper(
      deps.store,
      { maxSkewMs: this.o.maxClockSkewMs, minIntervalMs: this.o.clockMinIntervalMs },
      (mac) => this.kitMessages.setKitClock(mac),
      (e) => this.log.warn({ err: e }, 'gateway clock keeping failed'),
    );
    this.readingsOut = new KitReadings({
      kits: this.kits,
      clock: this.clock,
      payloads: deps.payloads ?? null,
      log: this.log,
      stats: this.stats,
      maxClockSkewMs: this.o.maxClockSkewMs,
      cachedDevice: (mac) => this.devices.cached(mac),
      device: (mac) => this.devices.get(mac),
      writer: new ReadingWriter({ store: deps.store, events: deps.events, log: deps.log, stats: this.stats, quota: deps.quota }),
    });
    this.proxy = new ForwardProxy({
      sessions: this.sessions,
      kits: this.kits,
      devices: this.devices,
      relay: this.relay,
      readings: this.readingsOut,
      log: this.log,
      stats: this.stats,
      front: () => this.front,
      back: () => this.back,
      stopping,
      payloads: !!deps.payloads,
      meshDomain: this.o.meshDomain,
      deadlineMs: this.o.deadlineMs,
      confirmableUpstream: this.o.confirmableUpstream,
      piggybackMs: this.o.piggybackMs,
    });
    this.kitMessages = new KitMessages({
      kits: this.kits,
      announcements,
      relay: this.relay,
      clock: this.clock,
      log: this.log,
      stats: this.stats,
      forward: (kit, r) => this.proxy.forward(kit, r),
      stopping,
      learnKits: this.o.learnKits,
      readings: this.o.readings,
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
    if (this.o.readings) for (const k of this.kits.all()) this.kitMessages.ensureBridge(k);
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
      if (isProxyRequest(req)) return this.proxy.proxy(req, peer, reply);
      const path = uriPath(req);
      if (path.length === 1 && path[0] === 'sessions') return this.sessionResource.handle(req, peer);
      if (isAnnouncement(req)) return this.kitMessages.onAnnouncement(req, peer);
      const kit = this.kits.byAddress(peer);
      if (kit && req.code === Code.PUT) {
        this.kitMessages.onKitMessage(kit, req, path);
        return req.type === CON ? { code: Code.CHANGED } : undefined;
      }
      return this.small(req, peer, new ReefError('NOT_FOUND', 'no such resource: reach kits with Proxy-Uri'));
    } catch (e) {
      this.log.error({ err: e }, 'gateway request failed');
      return this.small(req, peer, new ReefError('INTERNAL', 'internal error'));
    }
  }

  /** A refusal no larger than the request for a peer without a session (answers.ts). */
  private small(req: CoapMessage, peer: Peer, e: ReefError): ResponseSpec {
    return boundedFailure(req, e, this.sessions.peek(peer) !== undefined);
  }

  private sessionEnded(s: Session, why: string): void {
    if (why !== 'replaced') this.log.info({ peer: s.key, tenantId: s.tenantId, why }, 'gateway session ended');
    this.relay.sessionEnded(s.key);
  }

  // ---- for the HTTP bridge (routes.ts) ---------------------------------------------------------

  /** The kit of this MAC if the group has it provisioned in sandbox and it is reachable; ReefError otherwise. */
  authorize(groupId: string, mac: string): Promise<KitEntry> {
    return this.proxy.authorize(groupId, mac);
  }

  /** Sends one request to a kit under the application deadline; rejects CoapTimeoutError / CoapResetError. */
  forward(kit: KitEntry, r: KitRequest): Promise<CoapMessage> {
    return this.proxy.forward(kit, r);
  }
}

/** The Proxy-Uri option value a client uses for a kit resource. */
export function proxyUri(mac: string, meshDomain: string, pathAndQuery: string): string {
  return `coap://SSN${mac.toUpperCase()}.${meshDomain}:4849${pathAndQuery.startsWith('/') ? '' : '/'}${pathAndQuery}`;
}
