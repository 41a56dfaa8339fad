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
// - State: in this node's memory, or with REEF_REDIS_URL in Redis, shared by the nodes (redis.ts,
//   generations.ts): a lost Redis moves the node to a fresh in-memory state and Redis back moves it
//   back, each state on an Aedes instance of its own (docs/mqtt.md "Several nodes").
import type { EventEmitter } from 'node:events';
import type net from 'node:net';
import { Aedes, type AedesPublishPacket, type AuthenticateError, type Client, type PublishPacket, type Subscription } from 'aedes';
import type { Logger } from 'pino';
import type { Authenticator } from '../auth/accounts.ts';
import { ReefError, isReefError, type ErrorCode } from '../core/errors.ts';
import type { EventBus, KitPayloadEvent } from '../events/bus.ts';
import type { QuotaService } from '../service/quotas.ts';
import type { Store } from '../store/store.ts';
import type { MqttLimits } from '../config/config.ts';
import { authenticateConnect, recheck, type Principal } from './auth.ts';
import { ConnectionGate, connectionCap, openFileLimit } from './connections.ts';
import { guardSocket, MESSAGE_WINDOW, SlowReader } from './guard.ts';
import { ingest, report } from './ingest.ts';
import { openListeners, type ListenOptions, type Listening } from './listen.ts';
import { connectedClients, StateKeeper, type Generation } from './generations.ts';
import type { SharedEngines } from './redis.ts';
import { RedisSessions } from './redis-sessions.ts';
import { SessionStore, type SessionBook } from './sessions.ts';
import { alarmTopic, alertTopic, ingestTarget, topicTenant } from './topics.ts';

/** The listeners' options (listen.ts), and what the broker itself needs. */
export interface BrokerOptions extends ListenOptions {
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
  /** redis:// URL of the state shared by the nodes (REEF_REDIS_URL); null or unset: in memory. */
  redisUrl?: string | null;
  /** Aedes' heartbeat between nodes (60 s); a dead node's wills are sent after three missed ones (tests shorten it). */
  heartbeatMs?: number;
}

export interface BrokerDeps {
  store: Store;
  events: EventBus | null;
  auth: Authenticator;
  /** Per-account quotas, checked on ingest as on an HTTP upload. */
  quotas: QuotaService;
  log: Logger;
}

export type { Listening } from './listen.ts';

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
    /** Moves to in-memory state because Redis was lost. */
    redisLost: 0,
  };
  private readonly sessions = new WeakMap<Client, Session>();
  /** Connected clients per tenant (the per-account cap). */
  private readonly perAccount = new Map<string, Set<Client>>();
  /** Clients that sent an empty client id with clean session 0 (refused: §3.1.3-8). */
  private readonly anonymousPersistent = new WeakSet<Client>();
  readonly gate: ConnectionGate;
  private readonly keeper: StateKeeper;
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
    this.keeper = new StateKeeper(
      this.log,
      (engines) => this.build(engines),
      () => this.stats.redisLost++,
    );
  }

  private get gen(): Generation {
    return this.keeper.gen;
  }

  /** The Aedes instance taking connections now. */
  get aedes(): Aedes {
    return this.gen.aedes;
  }

  /** The persistent sessions' bookkeeping of the state in use. */
  get stored(): SessionBook {
    return this.gen.stored;
  }

  /** Whether the state in use is Redis, shared by the nodes (false: this node's memory). */
  get shared(): boolean {
    return this.gen.engines !== null;
  }

  async start(): Promise<void> {
    await this.keeper.start(this.o.redisUrl ?? null, Math.ceil(this.o.limits.sessionExpiryMs / 1000));
    const l = this.o.limits;
    // Later packets: the configured maximum, and never more than an ingest message needs.
    const packet = Math.min(l.maxPacketBytes, this.o.maxPayloadBytes + PUBLISH_OVERHEAD);
    const handle = (socket: net.Socket) => {
      const conn = guardSocket(socket, { firstPacket: FIRST_PACKET_MAX, packet, queuedPackets: l.maxQueuedMessages, queuedBytes: l.maxQueuedBytes }, (e) => {
        if (e instanceof SlowReader) this.stats.slowReadersCut++;
        else this.stats.oversizedPackets++;
        this.log.debug({ peer: socket.remoteAddress, err: e.message }, 'mqtt connection cut');
      });
      this.gen.aedes.handle(conn);
    };
    this.servers = await openListeners(this.o, this.gate, handle, this.log);
    // One timer: authority re-checks every recheckMs; session expiry and the Redis health check every second.
    let last = 0;
    let checking = false;
    this.sweep = setInterval(
      () => {
        const gen = this.gen;
        void gen.stored.expire(connectedClients(gen)).catch((err: unknown) => this.log.debug({ err }, 'mqtt could not expire sessions'));
        if (gen.engines && !checking) {
          // A Redis that stopped answering (not only one that closed the connection) is lost too.
          checking = true;
          void gen.engines
            .check()
            .catch(() => undefined)
            .finally(() => (checking = false));
        }
        if (Date.now() - last < this.o.recheckMs) return;
        last = Date.now();
        void this.recheckAll();
      },
      Math.min(1000, this.o.recheckMs),
    );
    this.sweep.unref();
  }

  /** An Aedes instance on the given state, with Reef's hooks, listening. */
  private async build(engines: SharedEngines | null): Promise<Generation> {
    const l = this.o.limits;
    const now = this.o.now ?? Date.now;
    const aedes = new Aedes({
      ...(engines ? { persistence: engines.persistence, mq: engines.mq } : {}),
      concurrency: MESSAGE_WINDOW,
      ...(this.o.heartbeatMs ? { heartbeatInterval: this.o.heartbeatMs } : {}),
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
      authenticate: (client, username, password, done) => this.onConnect(gen, client, username, password, done),
      authorizeSubscribe: (client, sub, done) => this.onSubscribe(client, sub, done),
      authorizePublish: (client, packet, done) => this.onPublish(gen, client, packet, done),
      authorizeForward: (client, packet) => this.forward(client, packet),
    });
    const stored: SessionBook = engines ? new RedisSessions(engines.db, l, now) : new SessionStore(l, now);
    const gen: Generation = { aedes, stored, engines, retiring: false };
    aedes.on('client', (c) => {
      this.stats.connects++;
      void Promise.resolve(stored.connected(c)).catch((err: unknown) => this.log.debug({ err }, 'mqtt could not record a connected session'));
      const s = this.sessions.get(c);
      if (s?.expiresAt !== undefined) {
        // A token connection ends when its token does (HTTP would refuse the next request): the
        // re-check at that moment closes it. Timers cap at 2^31-1 ms (~24.8 days); a longer-lived
        // token is re-checked then, and again by the periodic sweep.
        s.expiry = setTimeout(() => void this.current(c).catch(() => undefined), Math.min(2 ** 31 - 1, Math.max(0, s.expiresAt - Date.now())));
        s.expiry.unref();
      }
    });
    aedes.on('clientDisconnect', (c) => {
      const tenantId = this.sessions.get(c)?.account.tenantId ?? c.id.slice(0, c.id.indexOf('/'));
      void Promise.resolve(stored.disconnected(c, tenantId)).catch((err: unknown) => this.log.debug({ err }, 'mqtt could not record a session away'));
      this.forget(c);
    });
    // On a client error the session stays until 'clientDisconnect': the will (keep-alive timeout,
    // broken connection) is authorized with it, after the error.
    aedes.on('clientError', (c, err) => this.log.debug({ clientId: c.id, err: err.message }, 'mqtt client error'));
    aedes.on('connectionError', (c, err) => this.log.debug({ clientId: c?.id, err: err.message }, 'mqtt connection error'));
    // Aedes reports a failed persistence call (a message not queued, wills not swept) as a broker
    // error: with Redis going away they come by the hundred, and the move to memory is logged once.
    (aedes as unknown as EventEmitter).on('error', (err: Error) => this.log.debug({ err }, 'mqtt broker error'));
    await aedes.listen();
    stored.attach(aedes);
    engines?.onLost((why) => void this.keeper.degrade(gen, why));
    return gen;
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
    await this.keeper.stop();
    await Promise.all(closed);
  }

  /** An alarm event (docs/alarms.md) on `<tenantId>/alarms/<deviceId>`: QoS 1, not retained. */
  publishAlarm(tenantId: string, deviceId: string, body: unknown): void {
    if (this.aedes.closed) return;
    this.stats.published++;
    const packet = { cmd: 'publish', topic: alarmTopic(tenantId, deviceId), payload: Buffer.from(JSON.stringify(body)), qos: 1, retain: false, dup: false } as PublishPacket;
    this.aedes.publish(packet, (err) => {
      if (err) this.log.warn({ err, deviceId }, 'mqtt could not publish an alarm');
    });
  }

  /** A kit payload from the gateway (of any node, through the event bus) to its owner's subscribers. */
  publishKitPayload(e: KitPayloadEvent): void {
    if (this.aedes.closed) return;
    this.stats.published++;
    const packet = { cmd: 'publish', topic: alertTopic(e.tenantId, e.mac, e.sensorType), payload: Buffer.from(e.payload, 'base64'), qos: 1, retain: this.o.retain, dup: false } as PublishPacket;
    this.aedes.publish(packet, (err) => {
      if (err) this.log.warn({ err, mac: e.mac }, 'mqtt could not publish a kit payload');
    });
  }

  // ---- CONNECT -------------------------------------------------------------------------------------

  private onConnect(gen: Generation, client: Client, username: string | undefined, password: Buffer | undefined, done: (e: AuthenticateError | null, ok: boolean | null) => void): void {
    const remote = (client.conn as { remoteAddress?: string }).remoteAddress;
    if (this.anonymousPersistent.has(client)) {
      this.stats.connectsRefused++;
      return done(refusal(2, 'an empty client id needs clean session 1'), false);
    }
    const clientId = client.id;
    authenticateConnect(this.deps.auth, username, password, remote)
      .then(
        async (p) => {
          const tenant = p.account.tenantId;
          // The broker keys the client by tenant and client id (a tenant id holds no '/'): a client id
          // is the tenant's own, so a tenant's CONNECT can take over only its own client's session
          // (§3.1.4-2), never hold or cut off another tenant's. The client never sees the key.
          const key = `${tenant}/${clientId}`;
          const mine = this.perAccount.get(tenant) ?? new Set<Client>();
          // Sessions in Redis that cannot be read now (Redis going away) count as none.
          const resumes = this.clients(gen)[key] !== undefined || (await Promise.resolve(gen.stored.isAway(key)).catch(() => false));
          const away = resumes ? 0 : await Promise.resolve(gen.stored.awayOf(tenant)).catch(() => 0);
          if (!resumes && mine.size + away >= this.o.limits.maxPerAccount) {
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
      )
      .catch((err: unknown) => {
        this.log.error({ err }, 'mqtt could not admit a client');
        done(refusal(3, 'server unavailable'), false);
      });
  }

  /** Connected clients by id (Aedes keeps this map; its types do not declare it). */
  private clients(gen = this.gen): Record<string, Client | undefined> {
    return (gen.aedes as unknown as { clients: Record<string, Client | undefined> }).clients;
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

  private onPublish(gen: Generation, client: Client | null, packet: PublishPacket, done: (e?: Error | null) => void): void {
    const drop = () => {
      packet.topic = DROPPED;
      packet.retain = false;
      done(null);
    };
    if (gen.retiring && client) {
      // The state is being replaced and this client disconnected to come back to the new one: its
      // will is not sent (it is not gone), and a message is not acknowledged (it sends it again there).
      if (packet === (client as { will?: unknown }).will) return drop();
      return done(new Error('the broker is moving its MQTT state; send again'));
    }
    if (!client) {
      // A will left behind by a node that died (Redis), found by this one: checked against the
      // account as it is now, its tenant read from the broker-side client id. Anything else: not delivered.
      const key = (packet as { clientId?: string }).clientId ?? '';
      if (!gen.engines || key.indexOf('/') <= 0) return drop();
      void this.orphanWill(key, packet).then(
        () => done(null),
        (e: unknown) => done(e as Error),
      );
      return;
    }
    void this.current(client)
      .then((s) => {
        if (!s) throw new Error('connection closed');
        return this.publish(s, packet);
      })
      .then(
        () => done(null),
        (e: unknown) => done(e as Error),
      );
  }

  private async orphanWill(key: string, packet: PublishPacket): Promise<void> {
    const i = key.indexOf('/');
    const account = await this.deps.auth.account(key.slice(0, i));
    if (!account || account.disabled) {
      packet.topic = DROPPED;
      packet.retain = false;
      return;
    }
    await this.publish({ account, via: 'secret', secretHash: account.secretHash, clientId: key.slice(i + 1), tenants: new Set() }, packet);
  }

  private async publish(s: Session, packet: PublishPacket): Promise<void> {
    const target = ingestTarget(packet.topic);
    try {
      if (!target) {
        throw new ReefError('FORBIDDEN', 'clients publish only observations, to <tenantId>/solutions/<solution>/devices/<deviceId>/observations', { field: 'topic' });
      }
      if (!(await this.inGroup(s, target.tenantId))) throw new ReefError('FORBIDDEN', 'the topic must start with your tenant id', { field: 'topic' });
      const stored = await ingest(this.deps, this.o, s.account, target.solution, target.deviceId, packet.payload as Buffer);
      this.stats.ingestStored++;
      this.stats.ingestObservations += stored;
      // Stored: acknowledged, and passed on to subscribers of the topic, never kept as retained.
      packet.retain = false;
    } catch (e) {
      const err = isReefError(e) ? e : new ReefError('INTERNAL', 'something went wrong; the request id identifies it in our logs', { cause: e });
      if (!target) this.stats.publishesRefused++;
      else this.stats.ingestRefused++;
      await report(this.aedes, this.log, s.account.tenantId, s.clientId, packet.topic, err);
      // Nothing was stored. A failure of ours closes the connection without acknowledgement (the
      // client sends again); a message that can never succeed is acknowledged and dropped.
      if (TRANSIENT.has(err.code)) throw err;
      packet.topic = DROPPED;
      packet.retain = false;
    }
  }
}

function refusal(returnCode: number, message: string): AuthenticateError {
  return Object.assign(new Error(message), { returnCode }) as AuthenticateError;
}
