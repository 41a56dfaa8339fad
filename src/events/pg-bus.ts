// Live-update events across nodes through PostgreSQL LISTEN/NOTIFY, behind the EventBus interface
// of bus.ts. A node delivers its own events in process at once (as LocalEventBus does) and NOTIFYs
// the others; each node LISTENs on one dedicated connection and skips what it sent itself.
//
// Live updates are best effort, as on one node: while PostgreSQL is unreachable events are dropped,
// and the listening connection comes back by itself, to the new primary after a failover.
// Stored observations are never affected.
//
// A large upload is not copied into the notification: the observations are already stored (events
// are published after the insert commits), so other nodes are told the device and time span and
// read them back, and only when they have a subscriber. Such an event carries the device's stored
// observations over the batch's time span: the batch itself whenever an upload appends.
//
// Nothing is sent while no other node listens: a node alone on its database (the common case, and
// every upload's NOTIFY would be a transaction of its own) publishes in
// process only. A node learns of the others from PostgreSQL's own list of sessions (the listening
// connections, by application_name) when its listener connects and every few seconds after, and at
// once from any message of another node: each listener says hello when it (re)connects.
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { observeEventLag } from '../metrics/metrics.ts';
import { LocalEventBus, markFromOtherNode, spanOf, type EventBus, type EventKind, type Listener, type ObservationSpan, type ReefEvent } from './bus.ts';

export const CHANNEL = 'reef_events';
/** The application_name of every node's listening connection: how nodes find each other. */
const LISTENER_NAME = 'reef-events';
/** The longest wait between attempts to make the listening connection again: events are lost until it is back (a failover's new primary is found at the next attempt). */
const MAX_BACKOFF_MS = 2000;
/** How often a node that knows of others checks whether they are still there. */
const PRESENCE_EVERY_MS = 5000;
/** NOTIFY payloads must stay under 8000 bytes; a larger event travels through event_payloads (migration 2). */
const MAX_INLINE = 7000;
/** Observations events larger than this go by reference (a wire observation is ~60 bytes). */
const INLINE_OBSERVATIONS = 40;
/** A stored payload is kept this long for the other nodes to read, then removed. */
const PAYLOAD_TTL_MS = 5 * 60_000;

type ObservationsEvent = Extract<ReefEvent, { kind: 'observations' }>;

/** A large observations event, by reference: the stored observations of the device in [from, to]. */
interface ObservationsRef {
  groupId: string;
  solution: string;
  deviceId: string;
  from: number;
  to: number;
  count: number;
}

interface Envelope {
  /** Sending node. */
  n: string;
  /** A listener's hello on (re)connecting: nothing to deliver. */
  hello?: 1;
  /** The sender's clock at publishing (ms; a large event's when it was stored): the event-bus lag on /metrics. */
  t?: number;
  /** The event itself, the id of its row in event_payloads, or a reference to stored observations. */
  e?: ReefEvent;
  ref?: number;
  obs?: ObservationsRef;
}

/** Reads stored observations back for an ObservationsRef, oldest first, in wire form. */
export type ObservationReader = (deviceId: string, from: number, to: number, count: number) => Promise<ObservationsEvent['observations']>;

export interface PgEventBusOptions {
  /**
   * A client for the listening connection, not yet connected: the store's way of connecting
   * (src/store/postgres/hosts.ts), so that it follows the writable host through a failover.
   */
  newClient: (config: pg.ClientConfig) => pg.Client;
  /** A pool of the same database for sending (the store's); the listener has its own connection. */
  pool: pg.Pool;
  /** Reads observations announced by reference (large uploads on another node). */
  readObservations: ObservationReader;
  nodeId?: string;
  onError?: (e: unknown, what: string) => void;
}

export class PgEventBus implements EventBus {
  readonly nodeId: string;
  private readonly local = new LocalEventBus();
  private subscribers = 0;
  private listener: pg.Client | null = null;
  private closed = false;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private backoff = 250;
  private queue: string[] = [];
  private flushing = false;
  private lastSweep = 0;
  /** Whether another node may be listening; until known, assume so. */
  private others = true;
  /** Messages of other nodes received: a presence check that saw none meanwhile may say "alone". */
  private heard = 0;
  private presenceTimer: NodeJS.Timeout | null = null;

  /**
   * Idle for a kind while no other node listens and no subscriber here takes that kind: an upload
   * then builds no observations event at all (src/service/observations.ts). `idle` stays undefined:
   * another node may start listening at any time (the alarm engine listens for rule changes
   * whatever this says).
   */
  idleFor(kind: EventKind): boolean {
    return !this.others && this.local.idleFor(kind);
  }

  /** Whether events are sent to other nodes now (false: no other node's listener is connected). */
  get othersListening(): boolean {
    return this.others;
  }
  private readyResolve!: () => void;
  /** Resolves once the first LISTEN is in place. */
  readonly ready: Promise<void> = new Promise((r) => (this.readyResolve = r));

  constructor(private readonly opts: PgEventBusOptions) {
    this.nodeId = opts.nodeId ?? randomUUID();
  }

  static async open(opts: PgEventBusOptions): Promise<PgEventBus> {
    const bus = new PgEventBus(opts);
    bus.connect();
    // Start serving even if PostgreSQL is slow to accept the LISTEN: it will follow.
    await Promise.race([bus.ready, new Promise((r) => setTimeout(r, 5000).unref())]);
    return bus;
  }

  private connect(): void {
    if (this.closed) return;
    const client = this.opts.newClient({ keepAlive: true, application_name: LISTENER_NAME });
    this.listener = client;
    let failed = false;
    const fail = (e: unknown) => {
      if (failed) return;
      failed = true;
      if (this.listener === client) this.listener = null;
      client.removeAllListeners('notification');
      client.end().catch(() => undefined);
      if (!this.closed) {
        this.opts.onError?.(e, 'event listener connection lost; reconnecting');
        this.reconnectTimer = setTimeout(() => this.connect(), this.backoff);
        this.reconnectTimer.unref();
        this.backoff = Math.min(this.backoff * 2, MAX_BACKOFF_MS);
      }
    };
    client.on('error', fail);
    client.on('end', () => fail(new Error('connection ended')));
    client.on('notification', (m) => {
      if (m.channel === CHANNEL && m.payload) void this.receive(m.payload);
    });
    client
      .connect()
      .then(() => client.query(`LISTEN ${CHANNEL}`))
      // Other nodes learn of this one at once (they may have thought themselves alone).
      .then(() => client.query('SELECT pg_notify($1, $2)', [CHANNEL, JSON.stringify({ n: this.nodeId, hello: 1 })]))
      .then(() => this.checkPresence(client))
      .then(() => {
        this.backoff = 250;
        this.readyResolve();
        if (!this.presenceTimer && !this.closed) {
          this.presenceTimer = setInterval(() => {
            if (this.others && this.listener) void this.checkPresence(this.listener);
          }, PRESENCE_EVERY_MS);
          this.presenceTimer.unref();
        }
      })
      .catch(fail);
  }

  /** Asks PostgreSQL whether another node's listener is connected to the database. */
  private async checkPresence(client: pg.Client): Promise<void> {
    const heard = this.heard;
    try {
      const r = await client.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1 AND pid <> pg_backend_pid()', [LISTENER_NAME]);
      const n = r.rows[0]?.n as number;
      // A message of another node meanwhile outranks a count taken before it.
      if (n > 0) this.others = true;
      else if (this.heard === heard) this.others = false;
    } catch {
      this.others = true; // cannot tell: send
    }
  }

  private async receive(payload: string): Promise<void> {
    let env: Envelope;
    try {
      env = JSON.parse(payload) as Envelope;
    } catch {
      return;
    }
    if (env.n === this.nodeId) return; // delivered locally when published
    this.heard++;
    this.others = true;
    if (env.hello) return;
    if (this.subscribers === 0) return; // nobody here to tell
    // Nobody here takes this kind (an alarm engine with no rules takes rule changes only): the
    // stored observations an upload announces are not read back for nothing.
    if (env.obs && this.local.idleFor('observations')) return;
    if (env.e && this.local.idleFor(env.e.kind)) return;
    let e = env.e;
    if (!e && env.obs) {
      const r = env.obs;
      try {
        e = { kind: 'observations', groupId: r.groupId, solution: r.solution, deviceId: r.deviceId, observations: await this.opts.readObservations(r.deviceId, r.from, r.to, r.count) };
      } catch (err) {
        this.opts.onError?.(err, 'reading announced observations failed');
      }
    }
    if (!e && typeof env.ref === 'number') {
      try {
        const r = await this.opts.pool.query('SELECT payload FROM event_payloads WHERE id = $1', [env.ref]);
        if (r.rows[0]) e = JSON.parse(r.rows[0].payload as string) as ReefEvent;
      } catch (err) {
        this.opts.onError?.(err, 'reading a large event failed');
      }
    }
    if (e && env.t) observeEventLag(env.t);
    if (e) this.local.publish(markFromOtherNode(e));
  }

  publish(e: ReefEvent): void {
    this.local.publish(e);
    if (this.closed || !this.others) return;
    // An in-process publisher attaches the batch's time span (src/service/observations.ts): the
    // reference is made from it, and neither records nor the wire form is built unless a local
    // listener reads them.
    const span = e.kind === 'observations' ? (e as { span?: ObservationSpan }).span : undefined;
    if (e.kind === 'observations' && (span ? span.count : e.observations.length) > INLINE_OBSERVATIONS) {
      // An event published without a span (as a plain object) has its wire form to read it from.
      const { from, to, count } = span ?? spanOf(e.observations.length, (i) => Date.parse(e.observations[i]!.timestamp));
      const obs: ObservationsRef = { groupId: e.groupId, solution: e.solution, deviceId: e.deviceId, from, to, count };
      this.queue.push(JSON.stringify({ n: this.nodeId, t: Date.now(), obs }));
    } else {
      const json = JSON.stringify(e);
      this.queue.push(Buffer.byteLength(json) > MAX_INLINE ? json : `{"n":${JSON.stringify(this.nodeId)},"t":${Date.now()},"e":${json}}`);
    }
    if (!this.flushing) void this.flush();
  }

  /**
   * Sends queued events in order, many per round trip: NOTIFYs of one transaction are delivered
   * in order, and one sender at a time keeps the order between batches.
   */
  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.queue.length && !this.closed) {
        // Queued items are envelopes, except large events (bare, not starting with {"n":) which
        // are stored in event_payloads first and sent as a reference to their row.
        const batch = this.queue.splice(0, 500);
        try {
          const isBare = (s: string) => !s.startsWith('{"n":');
          const large = batch.filter(isBare);
          let envelopes = batch;
          if (large.length) {
            const ids = await this.opts.pool.query('INSERT INTO event_payloads (created_at, payload) SELECT $1, p FROM unnest($2::text[]) WITH ORDINALITY AS u(p, i) ORDER BY i RETURNING id', [
              Date.now(),
              large,
            ]);
            let k = 0;
            envelopes = batch.map((s) => (isBare(s) ? JSON.stringify({ n: this.nodeId, t: Date.now(), ref: ids.rows[k++]!.id as number }) : s));
            if (Date.now() - this.lastSweep > 60_000) {
              this.lastSweep = Date.now();
              await this.opts.pool.query('DELETE FROM event_payloads WHERE created_at < $1', [Date.now() - PAYLOAD_TTL_MS]);
            }
          }
          // A commit that does not wait for its WAL flush (set_config(..., true) holds until this
          // statement's own commit): a NOTIFY is delivered at commit either way, and a live update
          // lost in a crash is what best effort allows (nothing stored depends on it). Waiting would
          // cost a WAL flush per upload.
          await this.opts.pool.query(`SELECT pg_notify('${CHANNEL}', p) FROM (SELECT set_config('synchronous_commit', 'off', true)) AS s, unnest($1::text[]) WITH ORDINALITY AS u(p, i) ORDER BY i`, [
            envelopes,
          ]);
        } catch (err) {
          // PostgreSQL unreachable: other nodes miss these live updates; nothing else is lost.
          this.opts.onError?.(err, 'sending events to other nodes failed');
        }
      }
    } finally {
      this.flushing = false;
    }
  }

  subscribe(fn: Listener, kinds?: readonly EventKind[]): () => void {
    const off = this.local.subscribe(fn, kinds);
    this.subscribers++;
    let on = true;
    return () => {
      if (on) this.subscribers--;
      on = false;
      off();
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    if (this.presenceTimer) clearInterval(this.presenceTimer);
    const c = this.listener;
    this.listener = null;
    if (c) {
      c.removeAllListeners('end');
      await c.end().catch(() => undefined);
    }
    await this.local.close();
  }
}
