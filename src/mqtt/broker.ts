// Reef's MQTT broker (docs/mqtt.md), built on Aedes (MQTT 3.1 and 3.1.1). It carries
// kit payloads "bubbling up" from the CoAP gateway to subscribers of their owner's tenant, and takes
// observation uploads published by devices and edge routers. Aedes does the protocol; this module
// decides who may connect, subscribe and publish, and what an ingest message does:
// - CONNECT: an access token, or client id + secret (src/mqtt/auth.ts); the account is re-checked
//   on every SUBSCRIBE and PUBLISH, every second, and at the token's expiry, and the connection
//   closed when HTTP would now refuse it. Client ids are the tenant's own: the broker keys a
//   client by tenant and client id, so no tenant can take, hold or cut off another's.
// - Limits (docs/mqtt.md "Limits and hostile input"): connections per node, source address and
//   account (connections.ts), the TLS handshake and CONNECT deadline, keep-alive, packet size, QoS 2
//   in flight, each client's unsent queue (guard.ts) and what persistent sessions hold (sessions.ts).
// - SUBSCRIBE: a filter must start with a literal tenant id of the subscriber's tenant group;
//   anything else ('#', '+/alert/#', another group's tenant, '$SYS/...') gets the SUBACK failure
//   return code 0x80 (MQTT 3.1.1 §3.9.3), never a narrower or wider subscription.
// - PUBLISH: only to `<tenantId>/solutions/<s>/devices/<id>/observations`, validated and stored as an
//   HTTP upload before the PUBACK. MQTT 3.1.1 has no negative PUBACK: a server that refuses a
//   PUBLISH "MUST either make a positive acknowledgement ... or close the Network Connection"
//   (§3.3.5). A message that can never succeed is acknowledged, not stored and not forwarded, and
//   the reason is published on `<tenantId>/errors/<clientId>` (closing would make a QoS 1 client
//   re-send the same message forever); a store failure closes the connection without PUBACK, so the
//   client sends the message again and the stored batch is de-duplicated (device, timestamp).
import net from 'node:net';
import tls from 'node:tls';
import { randomUUID } from 'node:crypto';
import { Aedes, type AedesPublishPacket, type AuthenticateError, type Client, type PublishPacket, type Subscription } from 'aedes';
import type { Logger } from 'pino';
import type { Authenticator } from '../auth/accounts.ts';
import { ReefError, isReefError, type ErrorCode } from '../core/errors.ts';
import type { EventBus, KitPayloadEvent } from '../events/bus.ts';
import { errorBody } from '../http/errors.ts';
import { findUploadDevice } from '../service/devices.ts';
import { parseBatch, storeObservations } from '../service/observations.ts';
import type { QuotaService } from '../service/quotas.ts';
import type { Store } from '../store/store.ts';
import type { MqttLimits } from '../config/config.ts';
import { MAX_JSON_DEPTH, nestedDeeperThan } from '../http/content-types.ts';
import { authenticateConnect, recheck, type Principal } from './auth.ts';
import { ConnectionGate, connectionCap, openFileLimit } from './connections.ts';
import { guardSocket, SlowReader } from './guard.ts';
import { SessionStore } from './sessions.ts';
import { alarmTopic, alertTopic, errorsTopic, ingestTarget, topicTenant } from './topics.ts';

export interface BrokerOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** When `port` is taken, try the next ones (up to 9 more), then any free port. */
  portFallback: boolean;
  tlsPort: number;
  tlsPortFallback: boolean;
  /** Certificate and key of the TLS listener; null: no TLS listener. */
  tls: { cert: Buffer | string; key: Buffer | string } | null;
  /** Kit payloads are published retained. */
  retain: boolean;
  /** Connected clients are re-checked this often. */
  recheckMs: number;
  /** Largest ingest payload (REEF_BODY_LIMIT, as an HTTP upload body). */
  maxPayloadBytes: number;
  /** Most observations in one ingest message (REEF_MAX_OBSERVATIONS). */
  maxObservations: number;
  /** Largest JSON of one observation's other fields (REEF_MAX_OBSERVATION_EXTRA, as HTTP). */
  maxObservationExtraBytes: number;
  /** Connections, deadlines, packets, queues and sessions (REEF_MQTT_*, src/config/config.ts). */
  limits: MqttLimits;
  /** The clock of session expiry (tests inject one). */
  now?: () => number;
}

export interface BrokerDeps {
  store: Store;
  events: EventBus | null;
  auth: Authenticator;
  /** Per-account quotas, checked on ingest as on an HTTP upload. */
  quotas: QuotaService;
  log: Logger;
}

export interface Listening {
  host: string;
  port: number;
  /** The port asked for, when another one was taken instead. */
  wanted?: number;
}

/** A connected client's identity and what it may see. */
interface Session extends Principal {
  /** The client id the client sent (the broker keys the client by tenant and this id). */
  clientId: string;
  /** Tenant ids of the subscriber's group that it subscribed under: deliveries outside them are dropped. */
  tenants: Set<string>;
  expiry?: NodeJS.Timeout;
}

/** The CONNECT of the first packet: a token (≤ 4 KiB) and a will fit easily in 64 KiB. */
const FIRST_PACKET_MAX = 64 * 1024;
/** A topic (≤ 65,535 bytes, §1.5.3) and a message id around the payload. */
const PUBLISH_OVERHEAD = 65_535 + 4;
/** Where a refused message goes: '$' topics reach no wildcard subscriber (§4.7.2) and no one may subscribe to them here. */
const DROPPED = '$reef/dropped';

/** Failures of the server, not of the message: the connection closes without PUBACK and the client sends again. */
const TRANSIENT: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['STORE_UNAVAILABLE', 'SERVER_BUSY', 'INTERNAL']);

export class MqttBroker {
  readonly aedes: Aedes;
  readonly stats = {
    connects: 0,
    connectsRefused: 0,
    subscriptionsRefused: 0,
    published: 0,
    ingestStored: 0,
    ingestObservations: 0,
    ingestRefused: 0,
    publishesRefused: 0,
    closedByRecheck: 0,
    oversizedPackets: 0,
    slowReadersCut: 0,
    connectsOverAccountCap: 0,
  };
  private readonly sessions = new WeakMap<Client, Session>();
  /** Connected clients per tenant (the per-account cap). */
  private readonly perAccount = new Map<string, Set<Client>>();
  /** Clients that sent an empty client id with clean session 0 (refused: §3.1.3-8). */
  private readonly anonymousPersistent = new WeakSet<Client>();
  readonly gate: ConnectionGate;
  readonly stored: SessionStore;
  private servers: { server: net.Server; listening: Listening }[] = [];
  private sweep: NodeJS.Timeout | undefined;
  private readonly log: Logger;

  constructor(
    private readonly deps: BrokerDeps,
    private readonly o: BrokerOptions,
  ) {
    this.log = deps.log;
    const l = o.limits;
    const cap = connectionCap(l.maxConnections, openFileLimit());
    if (cap < l.maxConnections) {
      this.log.warn({ configured: l.maxConnections, cap }, 'REEF_MQTT_MAX_CONNECTIONS leaves too few open files for the rest of the node (ulimit -n): MQTT connections are capped lower');
    }
    this.gate = new ConnectionGate({ maxConnections: cap, maxPerAddress: l.maxPerAddress });
    this.stored = new SessionStore(l, o.now ?? Date.now);
    this.aedes = new Aedes({
      // A connection that has not sent its CONNECT in time is closed (Aedes' default is 30 s).
      connectTimeout: l.connectTimeoutMs,
      // Incoming QoS 2 messages awaiting PUBREL; one more closes the connection (3.1.1 has no code for it).
      maxInflightInbound: l.maxInflight,
      preConnect: (client, packet, done) => {
        // §3.1.3-8: an empty client id asks for a clean session; with clean = 0 it gets CONNACK 0x02
        // (answered by authenticate, the hook that can send a return code).
        if (!packet.clientId && !packet.clean) this.anonymousPersistent.add(client);
        // §3.1.2.10: a server closes a client silent for 1.5 times its keep-alive. Aedes does that;
        // keep-alive 0 (never) or one past the bound is held to the bound, so no connection sits idle forever.
        if (!packet.keepalive || packet.keepalive > l.maxKeepAliveSeconds) packet.keepalive = l.maxKeepAliveSeconds;
        done(null, true);
      },
      authenticate: (client, username, password, done) => this.onConnect(client, username, password, done),
      authorizeSubscribe: (client, sub, done) => this.onSubscribe(client, sub, done),
      authorizePublish: (client, packet, done) => this.onPublish(client, packet, done),
      authorizeForward: (client, packet) => this.forward(client, packet),
    });
    this.aedes.on('client', (c) => {
      this.stats.connects++;
      this.stored.connected(c);
      const s = this.sessions.get(c);
      if (s?.expiresAt !== undefined) {
        // A token connection ends when its token does (HTTP would refuse the next request): the
        // re-check at that moment closes it. Timers cap at 2^31-1 ms (~24.8 days); a longer-lived
        // token is re-checked then, and again by the periodic sweep.
        s.expiry = setTimeout(() => void this.current(c).catch(() => undefined), Math.min(2 ** 31 - 1, Math.max(0, s.expiresAt - Date.now())));
        s.expiry.unref();
      }
    });
    this.aedes.on('clientDisconnect', (c) => {
      const tenantId = this.sessions.get(c)?.account.tenantId ?? c.id.slice(0, c.id.indexOf('/'));
      this.stored.disconnected(c, tenantId);
      this.forget(c);
    });
    // On a client error the session stays until 'clientDisconnect': the will (keep-alive timeout,
    // broken connection) is authorized with it, after the error.
    this.aedes.on('clientError', (c, err) => this.log.debug({ clientId: c.id, err: err.message }, 'mqtt client error'));
    this.aedes.on('connectionError', (c, err) => this.log.debug({ clientId: c?.id, err: err.message }, 'mqtt connection error'));
  }

  async start(): Promise<void> {
    await this.aedes.listen();
    this.stored.attach(this.aedes);
    const l = this.o.limits;
    // Later packets: the configured maximum, and never more than an ingest message needs.
    const packet = Math.min(l.maxPacketBytes, this.o.maxPayloadBytes + PUBLISH_OVERHEAD);
    const handle = (socket: net.Socket) => {
      const conn = guardSocket(socket, { firstPacket: FIRST_PACKET_MAX, packet, queuedPackets: l.maxQueuedMessages, queuedBytes: l.maxQueuedBytes }, (e) => {
        if (e instanceof SlowReader) this.stats.slowReadersCut++;
        else this.stats.oversizedPackets++;
        this.log.debug({ peer: socket.remoteAddress, err: e.message }, 'mqtt connection cut');
      });
      this.aedes.handle(conn);
    };
    const plain = net.createServer((socket) => {
      if (this.gate.admit(socket)) handle(socket);
    });
    this.servers.push({ server: plain, listening: await listen(plain, this.o.host, this.o.port, this.o.portFallback) });
    if (this.o.tls) {
      const secure = tls.createServer({ cert: this.o.tls.cert, key: this.o.tls.key, minVersion: 'TLSv1.2', handshakeTimeout: l.connectTimeoutMs }, handle);
      // Counted (and refused past a cap) as accepted, before any TLS work.
      secure.on('connection', (raw: net.Socket) => this.gate.admit(raw));
      // A failed or timed-out handshake (a plain client on the TLS port, a scanner, a silent
      // connection) closes the connection: with this listener present Node leaves it open.
      secure.on('tlsClientError', (e, socket) => {
        this.log.debug({ err: e.message }, 'mqtt TLS handshake failed');
        socket.destroy();
      });
      this.servers.push({ server: secure, listening: await listen(secure, this.o.host, this.o.tlsPort, this.o.tlsPortFallback) });
    }
    for (const s of this.servers) s.server.on('error', (e) => this.log.warn({ err: e }, 'mqtt listener error'));
    // One timer: authority re-checks every recheckMs, session expiry every second.
    let last = 0;
    this.sweep = setInterval(
      () => {
        void this.stored.expire().catch((err: unknown) => this.log.warn({ err }, 'mqtt could not expire sessions'));
        if (Date.now() - last < this.o.recheckMs) return;
        last = Date.now();
        void this.recheckAll();
      },
      Math.min(1000, this.o.recheckMs),
    );
    this.sweep.unref();
  }

  /** Where the plain listener listens. */
  address(): Listening {
    return this.servers[0]!.listening;
  }

  /** Where the TLS listener listens, if there is one. */
  tlsAddress(): Listening | null {
    return this.servers[1]?.listening ?? null;
  }

  async stop(): Promise<void> {
    if (this.sweep) clearInterval(this.sweep);
    const closed = this.servers.map(({ server }) => new Promise<void>((r) => server.close(() => r())));
    await new Promise<void>((r) => this.aedes.close(() => r()));
    await Promise.all(closed);
  }

  /** A kit payload from the gateway (of any node, through the event bus) to its owner's subscribers. */
  /** An alarm event (docs/alarms.md) on `<tenantId>/alarms/<deviceId>`: QoS 1, not retained. */
  publishAlarm(tenantId: string, deviceId: string, body: unknown): void {
    if (this.aedes.closed) return;
    this.stats.published++;
    const packet = { cmd: 'publish', topic: alarmTopic(tenantId, deviceId), payload: Buffer.from(JSON.stringify(body)), qos: 1, retain: false, dup: false } as PublishPacket;
    this.aedes.publish(packet, (err) => {
      if (err) this.log.warn({ err, deviceId }, 'mqtt could not publish an alarm');
    });
  }

  publishKitPayload(e: KitPayloadEvent): void {
    if (this.aedes.closed) return;
    this.stats.published++;
    const packet = { cmd: 'publish', topic: alertTopic(e.tenantId, e.mac, e.sensorType), payload: Buffer.from(e.payload, 'base64'), qos: 1, retain: this.o.retain, dup: false } as PublishPacket;
    this.aedes.publish(packet, (err) => {
      if (err) this.log.warn({ err, mac: e.mac }, 'mqtt could not publish a kit payload');
    });
  }

  // ---- CONNECT -------------------------------------------------------------------------------------

  private onConnect(client: Client, username: string | undefined, password: Buffer | undefined, done: (e: AuthenticateError | null, ok: boolean | null) => void): void {
    const remote = (client.conn as { remoteAddress?: string }).remoteAddress;
    if (this.anonymousPersistent.has(client)) {
      this.stats.connectsRefused++;
      return done(refusal(2, 'an empty client id needs clean session 1'), false);
    }
    const clientId = client.id;
    authenticateConnect(this.deps.auth, username, password, remote).then(
      (p) => {
        const tenant = p.account.tenantId;
        // The broker keys the client by tenant and client id (a tenant id holds no '/'): a client id
        // is the tenant's own, so a tenant's CONNECT can take over only its own client's session
        // (§3.1.4-2), never hold or cut off another tenant's. The client never sees the key.
        const key = `${tenant}/${clientId}`;
        const mine = this.perAccount.get(tenant) ?? new Set<Client>();
        const resumes = this.clients()[key] !== undefined || this.stored.isAway(key);
        if (!resumes && mine.size + this.stored.awayOf(tenant) >= this.o.limits.maxPerAccount) {
          this.stats.connectsRefused++;
          this.stats.connectsOverAccountCap++;
          this.log.info({ clientId, tenantId: tenant }, 'mqtt connection refused: the account has as many connections and stored sessions as it may');
          return done(refusal(3, 'this account has as many MQTT connections and stored sessions on this node as it may'), false);
        }
        client.id = key;
        mine.add(client);
        this.perAccount.set(tenant, mine);
        client.conn.once('close', () => {
          mine.delete(client);
          if (!mine.size && this.perAccount.get(tenant) === mine) this.perAccount.delete(tenant);
        });
        this.sessions.set(client, { ...p, clientId, tenants: new Set() });
        this.log.info({ clientId, tenantId: tenant, via: p.via }, 'mqtt client connected');
        done(null, true);
      },
      (e: unknown) => {
        this.stats.connectsRefused++;
        if (!isReefError(e)) this.log.error({ err: e }, 'mqtt authentication failed');
        else this.log.info({ clientId, code: e.code }, 'mqtt connection refused');
        // CONNACK 0x04 bad user name or password; 0x05 not authorized (disabled); 0x03 server
        // unavailable (the store, login shedding, the login throttle: try again later).
        const code = !isReefError(e) || e.status >= 500 || e.code === 'RATE_LIMITED' ? 3 : e.code === 'ACCOUNT_DISABLED' ? 5 : 4;
        done(refusal(code, isReefError(e) ? e.message : 'server unavailable'), false);
      },
    );
  }

  /** Connected clients by id (Aedes keeps this map; its types do not declare it). */
  private clients(): Record<string, Client | undefined> {
    return (this.aedes as unknown as { clients: Record<string, Client | undefined> }).clients;
  }

  // ---- re-checks -----------------------------------------------------------------------------------

  /** The session of a connected client after checking its account and token again; null when it was closed. */
  private async current(client: Client): Promise<Session | null> {
    const s = this.sessions.get(client);
    if (!s) return null;
    try {
      await recheck(this.deps.auth, s);
      return s;
    } catch (e) {
      if (!isReefError(e) || TRANSIENT.has(e.code)) {
        // The store is down: the client keeps its connection; what it asks for now fails below.
        this.log.warn({ err: e }, 'mqtt could not re-check a client');
        throw e;
      }
      this.end(client, e);
      return null;
    }
  }

  private sweeping = false;

  private async recheckAll(): Promise<void> {
    // One sweep at a time: with a slow store, the next tick finds this one still running.
    if (this.sweeping) return;
    this.sweeping = true;
    try {
      // As the event streams' sweep: every client at once (accounts are cached a second, so one
      // store read per account), so a disabled account's connections end within about a second.
      await Promise.all(Object.values(this.clients()).map((c) => (c ? this.current(c).catch(() => undefined) : undefined)));
    } finally {
      this.sweeping = false;
    }
  }

  /** Closes a connection HTTP would now refuse (MQTT 3.1.1 has no server DISCONNECT: the network connection is closed). */
  private end(client: Client, why: ReefError): void {
    if (!this.sessions.has(client)) return;
    this.stats.closedByRecheck++;
    this.log.info({ clientId: this.sessions.get(client)?.clientId, code: why.code }, `mqtt connection closed: ${why.message}`);
    this.forget(client);
    client.close();
  }

  private forget(client: Client): void {
    const s = this.sessions.get(client);
    if (s?.expiry) clearTimeout(s.expiry);
    this.sessions.delete(client);
  }

  // ---- SUBSCRIBE -----------------------------------------------------------------------------------

  private onSubscribe(client: Client, sub: Subscription, done: (e: Error | null, s?: Subscription | null) => void): void {
    void (async () => {
      const s = await this.current(client);
      if (!s) return done(null, null);
      const tenant = topicTenant(sub.topic);
      if (!tenant || !(await this.inGroup(s, tenant))) {
        this.stats.subscriptionsRefused++;
        this.log.info({ clientId: s.clientId, tenantId: s.account.tenantId, filter: sub.topic.slice(0, 200) }, 'mqtt subscription refused');
        return done(null, null); // SUBACK 0x80
      }
      s.tenants.add(tenant);
      // Granted as asked (0, 1 or 2); kit payloads are published at QoS 1, so a subscriber gets
      // them at QoS 0 or 1 (§3.8.4: the lower of the two).
      done(null, sub);
    })().catch((e: unknown) => done(e as Error));
  }

  /** A tenant id of the account's group: its own, or another account's in the same tenant group (docs/mqtt.md). */
  private async inGroup(s: Session, tenantId: string): Promise<boolean> {
    if (tenantId === s.account.tenantId) return true;
    const other = await this.deps.auth.account(tenantId);
    return other !== null && other.groupId === s.account.groupId;
  }

  /** The last check before a message leaves: only topics of tenants the client subscribed under (never another group's). */
  private forward(client: Client, packet: AedesPublishPacket): AedesPublishPacket | null {
    const s = this.sessions.get(client);
    const tenant = topicTenant(packet.topic);
    if (!s || !tenant || !s.tenants.has(tenant)) return null;
    // Authority ends at once, not at the next sweep: an account this node already knows to be
    // disabled, removed or rotated gets nothing more, and its connection is closed now.
    const now = this.deps.auth.cachedAccount(s.account.tenantId);
    // (A token from before secret versions, without `sv`, outlives a rotation over HTTP too.)
    const rotated = now && now.secretHash !== s.secretHash && (s.via === 'secret' || s.caller?.claims.sv !== undefined);
    if (now === null || now?.disabled || rotated) {
      void this.current(client).catch(() => undefined);
      return null;
    }
    return packet;
  }

  // ---- PUBLISH ------------------------------------------------------------------------------------

  private onPublish(client: Client | null, packet: PublishPacket, done: (e?: Error | null) => void): void {
    if (!client) {
      // A will left behind with no client to check: not delivered.
      packet.topic = DROPPED;
      packet.retain = false;
      done(null);
      return;
    }
    void this.publish(client, packet).then(
      () => done(null),
      (e: unknown) => done(e as Error),
    );
  }

  private async publish(client: Client, packet: PublishPacket): Promise<void> {
    const s = await this.current(client);
    if (!s) throw new Error('connection closed');
    const target = ingestTarget(packet.topic);
    try {
      if (!target) {
        throw new ReefError('FORBIDDEN', 'clients publish only observations, to <tenantId>/solutions/<solution>/devices/<deviceId>/observations', { field: 'topic' });
      }
      if (!(await this.inGroup(s, target.tenantId))) throw new ReefError('FORBIDDEN', 'the topic must start with your tenant id', { field: 'topic' });
      const stored = await this.ingest(s, target.solution, target.deviceId, packet.payload as Buffer);
      this.stats.ingestStored++;
      this.stats.ingestObservations += stored;
      // Stored: acknowledged, and passed on to subscribers of the topic, never kept as retained.
      packet.retain = false;
    } catch (e) {
      const err = isReefError(e) ? e : new ReefError('INTERNAL', 'something went wrong; the request id identifies it in our logs', { cause: e });
      if (!target) this.stats.publishesRefused++;
      else this.stats.ingestRefused++;
      await this.report(s, packet.topic, err);
      // Nothing was stored. A failure of ours closes the connection without acknowledgement (the
      // client sends again); a message that can never succeed is acknowledged and dropped.
      if (TRANSIENT.has(err.code)) throw err;
      packet.topic = DROPPED;
      packet.retain = false;
    }
  }

  /** One ingest message, exactly as an HTTP upload of the same body (src/http/routes/observations.ts). */
  private async ingest(s: Session, solution: string, deviceId: string, payload: Buffer): Promise<number> {
    if (payload.length > this.o.maxPayloadBytes) throw new ReefError('PAYLOAD_TOO_LARGE', `the message is larger than ${this.o.maxPayloadBytes} bytes`);
    const text = payload.toString('utf8');
    // The HTTP body rule (src/http/content-types.ts): no Reef document nests deeper.
    if (nestedDeeperThan(text, MAX_JSON_DEPTH)) throw new ReefError('VALIDATION_FAILED', `the JSON body is nested deeper than ${MAX_JSON_DEPTH} levels`, { field: 'body' });
    let body: unknown;
    try {
      // As Fastify does for HTTP bodies: a __proto__ key is refused, not merged into an object's prototype.
      body = JSON.parse(text, (k, v: unknown) => {
        if (k === '__proto__') throw new ReefError('VALIDATION_FAILED', 'the property __proto__ is not allowed');
        return v;
      });
    } catch (e) {
      if (isReefError(e)) throw e;
      throw new ReefError('MALFORMED_JSON', 'the message is not valid JSON: send {"observations":[...]}');
    }
    const device = await findUploadDevice(this.deps.store, s.account, solution, deviceId);
    const batch = parseBatch(body, this.o.maxObservations, this.o.maxObservationExtraBytes);
    // Reserved against the device owner's quota before the store commits (src/service/quotas.ts).
    return storeObservations(this.deps.store, this.deps.events, device, batch, this.deps.quotas, 'mqtt');
  }

  /**
   * Why a message was refused, on the publisher's errors topic: the HTTP error body plus the topic.
   * Resolves once it is written to the topic's subscribers (Aedes calls back after delivery), so a
   * publisher subscribed to its errors topic receives the reason before the PUBACK.
   */
  private report(s: Session, topic: string, e: ReefError): Promise<void> {
    const requestId = randomUUID();
    const level = e.status >= 500 ? 'error' : 'info';
    this.log[level]({ clientId: s.clientId, tenantId: s.account.tenantId, code: e.code, requestId, ...(e.status >= 500 ? { err: e.cause ?? e } : {}) }, `mqtt message refused: ${e.message}`);
    const payload = Buffer.from(JSON.stringify({ ...errorBody(e, requestId), topic: topic.slice(0, 512) }));
    return new Promise((resolve) => {
      this.aedes.publish({ cmd: 'publish', topic: errorsTopic(s.account.tenantId, s.clientId), payload, qos: 1, retain: false, dup: false } as PublishPacket, () => resolve());
    });
  }
}

function refusal(returnCode: number, message: string): AuthenticateError {
  return Object.assign(new Error(message), { returnCode }) as AuthenticateError;
}

/**
 * Listens on `port`; when it is taken and `fallback` is set (the default port, not one the operator
 * chose), on the next free one of the following nine, else on any free port, and says so.
 */
async function listen(server: net.Server, host: string, port: number, fallback: boolean): Promise<Listening> {
  const tries = port === 0 || !fallback ? [port] : [...Array.from({ length: 10 }, (_, i) => port + i).filter((p) => p <= 65535), 0];
  for (const p of tries) {
    try {
      await new Promise<void>((resolve, reject) => {
        const onError = (e: Error) => reject(e);
        server.once('error', onError);
        server.listen({ host, port: p }, () => {
          server.off('error', onError);
          resolve();
        });
      });
      const a = server.address() as net.AddressInfo;
      return { host, port: a.port, ...(a.port !== port && port !== 0 ? { wanted: port } : {}) };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw e;
      if (!fallback || p === tries[tries.length - 1]) {
        throw new Error(`MQTT port ${port} on ${host} is taken (another broker?): set REEF_MQTT_PORT (--mqtt-port) to a free port, or REEF_MQTT=false`);
      }
    }
  }
  throw new Error('unreachable');
}
