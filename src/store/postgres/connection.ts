// What every aggregate of the PostgreSQL store (accounts.ts, devices.ts, ...) shares: the pool and
// its two ways of running SQL (q, tx), the cache of the observations' partitions (partitions.ts),
// and the node's memory of device keys (pk, tier) that uploads and reads use without a round trip.
// Every connection, pooled or not, goes to the writable host of the URL's list (hosts.ts), except
// the read pool's, which goes to the standby of `readConnectionString` when one is given (`read`).
import pg from 'pg';
import type { DeviceRef } from '../../core/types.ts';
import { ReefError } from '../../core/errors.ts';
import { countStandbyRead } from '../../metrics/metrics.ts';
import { translate } from './errors.ts';
import { PgHosts } from './hosts.ts';
import { PartitionMap, parseRangeBound } from './partitions.ts';

export interface PostgresOptions {
  /** One host or several (a primary and its standbys: src/core/database-url.ts); the writable one is used. */
  connectionString: string;
  /** Pool size per node (pg default 10). */
  maxConnections?: number;
  /** How long a request waits for a pooled connection before STORE_UNAVAILABLE. */
  connectTimeoutMs?: number;
  /** Told about errors of idle pooled connections (a restart of PostgreSQL), which are otherwise harmless. */
  onIdleError?: (e: Error) => void;
  /** How long migrate() looks for a writable host before STORE_UNAVAILABLE (a node started during a failover); 0 or unset: one look. */
  startWaitMs?: number;
  /** Told of each look at start-up that found no writable host, with what each host is, before the next one. */
  onStartWait?: (message: string, detail: { attempt: number; retryInMs: number }) => void;
  /** Told when the writable host changes or is given up (several hosts). */
  onHostChange?: (message: string, detail: { host: string; state?: string }) => void;
  /** One standby (or a pooler in front of several) that serves observation reads (PostgresConnection.read). */
  readConnectionString?: string;
  /** Told when a read failed on the standby and was made on the primary instead. */
  onReadFallback?: (e: Error) => void;
}

export type Row = Record<string, any>;
export const DAY = 86_400_000;

// bigint (int8) columns are epoch milliseconds and counts: well inside Number's exact range.
export const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === 20 && format !== 'binary' ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

/** A PostgreSQL array literal of strings (each quoted, `"` and `\` escaped), null as NULL. */
export function textArray(xs: readonly (string | null)[]): string {
  let s = '{';
  for (let i = 0; i < xs.length; i++) {
    if (i) s += ',';
    const x = xs[i];
    s += x === null || x === undefined ? 'NULL' : `"${x.replace(/[\\"]/g, '\\$&')}"`;
  }
  return s + '}';
}

/** A PostgreSQL array literal of numbers, built directly (pg's generic array encoder is slower); null, or NaN (a packed batch's missing temperature), is NULL. */
export function numArray(xs: ArrayLike<number | null>): string {
  let s = '{';
  for (let i = 0; i < xs.length; i++) {
    if (i) s += ',';
    const x = xs[i];
    s += x === null || x === undefined || Number.isNaN(x) ? 'NULL' : String(x);
  }
  return s + '}';
}

/** What the store's connections share (the host and the connect timeout come from PgHosts). */
const BASE: pg.ClientConfig = { keepAlive: true, application_name: 'reef', types };

/**
 * With a read standby, every commit of the node waits until the synchronous standby has applied it
 * (PostgreSQL's `synchronous_commit = remote_apply`), so a reading that was acknowledged is there
 * for the next read (docs/operations.md "Reads from a standby").
 */
const READ_YOUR_WRITES = '-c synchronous_commit=remote_apply';

/** After a read fails on the standby, reads go to the primary for this long before the standby is tried again. */
export const READ_STANDBY_RETRY_MS = 5_000;

/** Device keys (pk, tier) a node remembers (KnownKey); past this many it starts afresh. */
const KNOWN_DEVICES = 100_000;

/**
 * A device's key as the node last read it: what the group writer's GROUP_HEAD_KNOWN checks rather
 * than looks up (writer.ts), and, when getDevice read it, the device as an upload needs it
 * (Store.uploadDevice). pk is never reused, so a key that is gone is noticed, never mistaken.
 */
export interface KnownKey {
  pk: number;
  tier: number;
  ref?: DeviceRef;
}

/** A statement on a pool, prepared under `name` if given; `arrays`: rows as arrays (rowMode 'array'). */
function run(pool: pg.Pool, text: string, values: unknown[] | undefined, name: string | undefined, arrays: boolean): Promise<pg.QueryResult<Row>> {
  if (arrays) return pool.query({ name, text, values, rowMode: 'array' });
  return pool.query(name ? { name, text, values } : { text, values });
}

export class PostgresConnection {
  readonly pool: pg.Pool;
  readonly parts = new PartitionMap();
  partsLoaded = false;
  /** Device id → its key as last read (KnownKey). */
  readonly keys = new Map<string, KnownKey>();

  /** The hosts of the URL and which is writable: how every connection is made. */
  readonly hosts: PgHosts;
  /** Connections to the read standby, if one is given. */
  readonly readPool: pg.Pool | null;
  /** Until when reads skip the standby after a failure there (READ_STANDBY_RETRY_MS). */
  private readStandbyDownUntil = 0;
  private readonly base: pg.ClientConfig;

  constructor(readonly opts: PostgresOptions) {
    this.base = opts.readConnectionString ? { ...BASE, options: READ_YOUR_WRITES } : BASE;
    const connectTimeoutMs = opts.connectTimeoutMs ?? 5000;
    this.hosts = new PgHosts(opts.connectionString, { connectTimeoutMs, ...(opts.onHostChange ? { onChange: opts.onHostChange } : {}) });
    this.pool = this.hosts.pool({ ...this.base, max: opts.maxConnections ?? 10, idleTimeoutMillis: 30_000 });
    // An idle connection dies when PostgreSQL restarts; without a listener pg would throw it
    // out of the process. The pool drops it and opens a new one on the next request.
    this.pool.on('error', (e) => opts.onIdleError?.(e));
    this.readPool = opts.readConnectionString
      ? new pg.Pool({
          ...BASE,
          application_name: 'reef-reads',
          connectionString: opts.readConnectionString,
          connectionTimeoutMillis: connectTimeoutMs,
          max: opts.maxConnections ?? 10,
          idleTimeoutMillis: 30_000,
        })
      : null;
    this.readPool?.on('error', (e) => opts.onIdleError?.(e));
  }

  /** A connection of the store's own besides the pool (the pipelined writer's), to the writable host; not yet connected. */
  client(config: pg.ClientConfig = {}): pg.Client {
    return this.hosts.client({ ...this.base, ...config });
  }

  /**
   * A read a standby may answer (observation pages, latest of all, buckets): on the read standby
   * when one is given and has not failed in the last READ_STANDBY_RETRY_MS, else on the primary.
   * Any failure there (the standby down, a query cancelled by a recovery conflict) runs the read
   * again on the primary: a reader never sees the standby's trouble, only its lag.
   */
  async read(text: string, values?: unknown[], name?: string, arrays = false): Promise<pg.QueryResult<Row>> {
    const standby = this.readPool;
    if (standby && Date.now() >= this.readStandbyDownUntil) {
      try {
        const r = await run(standby, text, values, name, arrays);
        countStandbyRead('served');
        return r;
      } catch (e) {
        countStandbyRead('failed');
        this.readStandbyDownUntil = Date.now() + READ_STANDBY_RETRY_MS;
        this.opts.onReadFallback?.(e as Error);
      }
    }
    return this.q(text, values, name, arrays);
  }

  /** `arrays`: each row as an array of its columns (pg's rowMode 'array'), not a keyed object. */
  async q(text: string, values?: unknown[], name?: string, arrays = false): Promise<pg.QueryResult<Row>> {
    try {
      return await run(this.pool, text, values, name, arrays);
    } catch (e) {
      translate(e);
    }
  }

  /**
   * Runs f in one transaction on one pooled connection. With `begin` null, f begins it (in its first
   * round trip); with `commits`, f ends it with its last statement (see CopyAndCommit).
   */
  async tx<T>(f: (c: pg.PoolClient) => Promise<T>, begin: string | null = 'BEGIN', commits = false): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (e) {
      translate(e);
    }
    let broken: Error | undefined;
    // A checked-out client has no pool listener: PostgreSQL ending the connection between two
    // statements (a restart) would otherwise be an unhandled 'error' event. The next statement
    // fails on the dead connection, and it is not returned to the pool.
    const lost = (e: Error) => {
      broken = e;
    };
    client.on('error', lost);
    try {
      if (begin !== null) await client.query(begin);
      const out = await f(client);
      if (!commits) await client.query('COMMIT');
      return out;
    } catch (e) {
      try {
        await client.query('ROLLBACK');
      } catch (re) {
        broken = re as Error; // the connection is gone: do not return it to the pool
      }
      translate(e);
    } finally {
      client.off('error', lost);
      client.release(broken);
    }
  }

  /** `ref`: the device as getDevice read it; kept from before while the pk is the same. */
  knowKey(id: string, pk: number, tier: number, ref?: DeviceRef): void {
    const before = this.keys.get(id);
    if (this.keys.size >= KNOWN_DEVICES && !before) this.keys.clear();
    this.keys.set(id, { pk, tier, ref: ref ?? (before?.pk === pk ? before.ref : undefined) });
  }

  /** A device's key (pk, tier), read by id; DEVICE_NOT_FOUND when there is none. */
  async devicePk(deviceId: string): Promise<{ pk: number; tier: number }> {
    const r = await this.q('SELECT pk, tier FROM devices WHERE id = $1', [deviceId], 'device-pk');
    if (!r.rows[0]) throw new ReefError('DEVICE_NOT_FOUND');
    return r.rows[0] as { pk: number; tier: number };
  }

  /** Reads the partition tree from the catalogue into the cache. */
  async loadPartitions(): Promise<void> {
    const r = await this.q(`
      SELECT c.relname AS name, p.level, pc.relname AS parent, pg_get_expr(c.relpartbound, c.oid) AS bound
      FROM pg_partition_tree('observations') p
      JOIN pg_class c ON c.oid = p.relid
      LEFT JOIN pg_class pc ON pc.oid = p.parentrelid
      WHERE p.level > 0`);
    const rows: { tier: number; start: number | null; end: number | null }[] = [];
    for (const x of r.rows) {
      if (x.level === 1) {
        const m = /^obs_t(\d+)$/.exec(x.name);
        if (m) rows.push({ tier: Number(m[1]), start: null, end: null });
      } else if (x.level === 2) {
        const m = /^obs_t(\d+)$/.exec(x.parent ?? '');
        const range = parseRangeBound(x.bound ?? '');
        if (m && range) rows.push({ tier: Number(m[1]), ...range });
      }
    }
    this.parts.load(rows);
    this.partsLoaded = true;
  }

  /** Makes the given range partitions (idempotent; one round trip), and notes them in the cache. */
  async ensureRanges(ranges: { tier: number; start: number; end: number }[], client?: pg.PoolClient): Promise<number> {
    if (ranges.length === 0) return 0;
    const sql = `SELECT reef_ensure_partition(t, s, e) AS made FROM unnest($1::int[], $2::bigint[], $3::bigint[]) AS u(t, s, e)`;
    const values = [numArray(ranges.map((r) => r.tier)), numArray(ranges.map((r) => r.start)), numArray(ranges.map((r) => r.end))];
    let res: pg.QueryResult<Row>;
    if (client) res = await client.query(sql, values);
    else res = await this.q(sql, values);
    for (const r of ranges) this.parts.add(r.tier, { start: r.start, end: r.end });
    return res.rows.filter((r) => r.made).length;
  }
}
