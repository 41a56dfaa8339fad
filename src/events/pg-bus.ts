// Live-update events across nodes through PostgreSQL LISTEN/NOTIFY, behind the EventBus interface
// of bus.ts. A node delivers its own events in process at once (as LocalEventBus does) and NOTIFYs
// the others; each node LISTENs on one dedicated connection and skips what it sent itself.
//
// Live updates are best effort, as on one node: while PostgreSQL is unreachable events are dropped,
// and the listening connection comes back by itself. Stored observations are never affected.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { LocalEventBus, type EventBus, type Listener, type ReefEvent } from './bus.ts';

export const CHANNEL = 'reef_events';
/** NOTIFY payloads must stay under 8000 bytes; a larger event travels through event_payloads (migration 2). */
const MAX_INLINE = 7000;
/** A stored payload is kept this long for the other nodes to read, then removed. */
const PAYLOAD_TTL_MS = 5 * 60_000;

interface Envelope {
  /** Sending node. */
  n: string;
  /** The event itself, or the id of its row in event_payloads. */
  e?: ReefEvent;
  ref?: number;
}

export interface PgEventBusOptions {
  connectionString: string;
  /** A pool of the same database for sending (the store's); the listener has its own connection. */
  pool: pg.Pool;
  nodeId?: string;
  onError?: (e: unknown, what: string) => void;
}

export class PgEventBus implements EventBus {
  readonly nodeId: string;
  private readonly local = new LocalEventBus();
  private listener: pg.Client | null = null;
  private closed = false;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private backoff = 250;
  private queue: string[] = [];
  private flushing = false;
  private lastSweep = 0;
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
    const client = new pg.Client({ connectionString: this.opts.connectionString, keepAlive: true, application_name: 'reef-events' });
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
        this.backoff = Math.min(this.backoff * 2, 5000);
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
      .then(() => {
        this.backoff = 250;
        this.readyResolve();
      })
      .catch(fail);
  }

  private async receive(payload: string): Promise<void> {
    let env: Envelope;
    try {
      env = JSON.parse(payload) as Envelope;
    } catch {
      return;
    }
    if (env.n === this.nodeId) return; // delivered locally when published
    let e = env.e;
    if (!e && typeof env.ref === 'number') {
      try {
        const r = await this.opts.pool.query('SELECT payload FROM event_payloads WHERE id = $1', [env.ref]);
        if (r.rows[0]) e = JSON.parse(r.rows[0].payload as string) as ReefEvent;
      } catch (err) {
        this.opts.onError?.(err, 'reading a large event failed');
      }
    }
    if (e) this.local.publish(e);
  }

  publish(e: ReefEvent): void {
    this.local.publish(e);
    if (this.closed) return;
    this.queue.push(JSON.stringify(e));
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
        const batch = this.queue.splice(0, 500);
        try {
          const large = batch.filter((json) => Buffer.byteLength(json) > MAX_INLINE);
          const envelopes: string[] = [];
          if (large.length === 0) {
            for (const json of batch) envelopes.push(`{"n":${JSON.stringify(this.nodeId)},"e":${json}}`);
          } else {
            const ids = await this.opts.pool.query('INSERT INTO event_payloads (created_at, payload) SELECT $1, p FROM unnest($2::text[]) WITH ORDINALITY AS u(p, i) ORDER BY i RETURNING id', [Date.now(), large]);
            let k = 0;
            for (const json of batch) {
              if (Buffer.byteLength(json) > MAX_INLINE) envelopes.push(JSON.stringify({ n: this.nodeId, ref: ids.rows[k++]!.id as number }));
              else envelopes.push(`{"n":${JSON.stringify(this.nodeId)},"e":${json}}`);
            }
            if (Date.now() - this.lastSweep > 60_000) {
              this.lastSweep = Date.now();
              await this.opts.pool.query('DELETE FROM event_payloads WHERE created_at < $1', [Date.now() - PAYLOAD_TTL_MS]);
            }
          }
          await this.opts.pool.query(`SELECT pg_notify('${CHANNEL}', p) FROM unnest($1::text[]) WITH ORDINALITY AS u(p, i) ORDER BY i`, [envelopes]);
        } catch (err) {
          // PostgreSQL unreachable: other nodes miss these live updates; nothing else is lost.
          this.opts.onError?.(err, 'sending events to other nodes failed');
        }
      }
    } finally {
      this.flushing = false;
    }
  }

  subscribe(fn: Listener): () => void {
    return this.local.subscribe(fn);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    const c = this.listener;
    this.listener = null;
    if (c) {
      c.removeAllListeners('end');
      await c.end().catch(() => undefined);
    }
    await this.local.close();
  }
}
