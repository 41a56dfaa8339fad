// The scale-out store: PostgreSQL through pg's connection pool. Any number of stateless Reef nodes
// may share one database; everything they must agree on (accounts, signing keys, devices,
// observations, job state) lives here. Schema and partitioning: migrations.ts.
import { isDeepStrictEqual } from 'node:util';
import pg from 'pg';
import { deviceQuotaError, ReefError } from '../../core/errors.ts';
import { unpackObservations, type PackedObservations } from '../../core/observation-scan.ts';
import { latestJsonOfColumns } from '../../core/observation-json.ts';
import type { AlarmEvalState, AlarmRecord, AlarmRuleRecord, AlarmStatus, DeliveryStatus, WebhookDeliveryRecord } from '../../core/alarms.ts';
import type { Account, DeviceRecord, DeviceRef, DeviceTemplateRecord, DomainInfo, ObservationRecord } from '../../core/types.ts';
import type {
  AlarmQuery,
  Bucket,
  BucketQuery,
  InsertResult,
  MaintenanceReport,
  ManyInsertResult,
  NewDevice,
  ObservationPage,
  ObservationQuery,
  SigningKey,
  SolutionObservationPage,
  SolutionObservationQuery,
  Store,
  RaiseItem,
} from '../store.ts';
import { solutionPage } from '../store.ts';
import { isUnavailable, translate } from './errors.ts';
import { LOCK_MIGRATE, LOCK_PARTITIONS, MIGRATIONS } from './migrations.ts';
import { PartitionMap, parseRangeBound } from './partitions.ts';

export interface PostgresOptions {
  connectionString: string;
  /** Pool size per node (pg default 10). */
  maxConnections?: number;
  /** How long a request waits for a pooled connection before STORE_UNAVAILABLE. */
  connectTimeoutMs?: number;
  /** Told about errors of idle pooled connections (a restart of PostgreSQL), which are otherwise harmless. */
  onIdleError?: (e: Error) => void;
}

type Row = Record<string, any>;
const DAY = 86_400_000;

// bigint (int8) columns are epoch milliseconds and counts: well inside Number's exact range.
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === 20 && format !== 'binary' ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

function accountFromRow(r: Row): Account {
  return {
    tenantId: r.tenant_id,
    name: r.name,
    groupId: r.group_id,
    clientId: r.client_id,
    secretHash: r.secret_hash,
    disabled: r.disabled,
    createdAt: r.created_at,
  };
}

function deviceFromRow(r: Row): DeviceRecord {
  const d: DeviceRecord = {
    id: r.id,
    deviceType: r.device_type,
    domainInfo: r.domain_info,
    tenantId: r.tenant_id,
    groupId: r.group_id,
    solution: r.solution,
    mac: r.mac ?? null,
    createdAt: r.created_at,
  };
  if (r.provisioning_info) d.provisioningInfo = r.provisioning_info;
  return d;
}

const TEMPLATE_COLS = 'id, group_id, solution, name, sensors, created_at, updated_at';

function templateFromRow(r: Row): DeviceTemplateRecord {
  return { id: r.id, name: r.name, sensors: r.sensors, groupId: r.group_id, solution: r.solution, createdAt: Number(r.created_at), updatedAt: Number(r.updated_at) };
}

function obsFromRow(r: Row): ObservationRecord {
  return { ts: r.ts, temperature: r.temperature ?? null, extra: r.extra ?? null };
}

/** A PostgreSQL array literal of strings (each quoted, `"` and `\` escaped), null as NULL. */
function textArray(xs: readonly (string | null)[]): string {
  let s = '{';
  for (let i = 0; i < xs.length; i++) {
    if (i) s += ',';
    const x = xs[i];
    s += x === null || x === undefined ? 'NULL' : `"${x.replace(/[\\"]/g, '\\$&')}"`;
  }
  return s + '}';
}

/** A PostgreSQL array literal of numbers, built directly (pg's generic array encoder is slower); null, or NaN (a packed batch's missing temperature), is NULL. */
function numArray(xs: ArrayLike<number | null>): string {
  let s = '{';
  for (let i = 0; i < xs.length; i++) {
    if (i) s += ',';
    const x = xs[i];
    s += x === null || x === undefined || Number.isNaN(x) ? 'NULL' : String(x);
  }
  return s + '}';
}

/** Each device of a solution with its latest reading, in device order (latest of all, seed §4.2). */
const LATEST_OF_SOLUTION = `SELECT d.id, l.ts, l.temperature, l.extra FROM devices d JOIN latest l ON l.device_pk = d.pk
       WHERE d.group_id = $1 AND d.solution = $2 ORDER BY d.pk`;

const DEVICE_COLS = 'id, tenant_id, group_id, solution, device_type, domain_info, provisioning_info, mac, created_at';

/**
 * A device (or device template) of a group's solution by its id ($1 group, $2 solution, $3 id):
 * always a probe of the unique index on id. Written `group_id = $1 AND solution = $2 AND id = $3`,
 * the planner costs devices_by_solution (group_id, solution, pk) and the id index alike (8.29
 * against 8.30, EXPLAIN on PostgreSQL 15) and took the former while the table had no statistics
 * yet, or with statistics that make a tenant look small: each upload then read every device of its
 * solution (918 uploads read 918,000 index entries with 1,000 devices, pg_stat_user_indexes during
 * bench:ingest). IS NOT DISTINCT FROM is never an index condition, so the group and solution can
 * only filter the one row found by id; the columns are NOT NULL, so it means `=` here. Templates
 * have the same two indexes.
 */
export const BY_ID_IN_SOLUTION = 'id = $3 AND (group_id, solution) IS NOT DISTINCT FROM ($1, $2)';

/** An account's devices (the device quota): the count the trigger of migration 9 keeps. */
const COUNT_TENANT_DEVICES = 'SELECT n FROM device_counts WHERE tenant_id = $1';

// Concurrent uploads are written in groups, one transaction per group (group commit: one WAL
// flush for many batches), each batch still settling on its own. A group is three statements.
// The head finds (and share-locks, against a concurrent delete or retention change) each batch's
// device, moves each device's latest forward, and asks whether any stored row of the device lies
// in the batch's time span. Batches whose span is free go in together by one binary COPY
// (no statement per row, no per-row conflict check; see COPY_BATCH for how it inserts); the
// others are merged by an unnest upsert each (an upload of the same device and timestamp
// replaces). Two nodes racing one device into the same span both see it free: the second COPY
// meets the first's rows in the unique index, and its batches are redone one by one as merges.
// A batch whose device the node had read by group and solution (Pending.owner) is written only to a
// device of that group and solution: one made again under the same id elsewhere is not it.
const GROUP_HEAD = `
WITH u AS (
  SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::float8[], $6::text[], $7::text[], $8::text[]) WITH ORDINALITY AS u(id, lo, hi, nts, nt, nx, g, s, i)
),
d AS (
  SELECT u.i, v.pk, v.tier, u.lo, u.hi, u.nts, u.nt, u.nx FROM u JOIN devices v ON v.id = u.id COLLATE "C"
    AND (u.g IS NULL OR (v.group_id = u.g COLLATE "C" AND v.solution = u.s COLLATE "C")) FOR SHARE OF v
),
l AS (
  INSERT INTO latest (device_pk, ts, temperature, extra)
  SELECT pk, nts, nt, nx::jsonb FROM d ORDER BY pk
  ON CONFLICT (device_pk) DO UPDATE SET ts = excluded.ts, temperature = excluded.temperature, extra = excluded.extra
  WHERE excluded.ts >= latest.ts
)
SELECT d.i, d.pk, d.tier, EXISTS (SELECT 1 FROM observations o WHERE o.tier = d.tier AND o.device_pk = d.pk AND o.ts >= d.lo AND o.ts <= d.hi) AS taken FROM d`;

/**
 * A group's transaction starts with the head's plan fixed: PostgreSQL plans a prepared statement
 * anew on each run while it judges a plan for the actual values cheaper, and the head's EXISTS over
 * the partitioned observations table was planned for every group, partitions and all (7 % of
 * PostgreSQL's CPU during uploads, perf). The generic plan prunes partitions as it runs.
 * Without sequential scans, too: the generic plan cannot know a group names a handful of devices,
 * and with a thousand devices it hashed the whole devices table for every group (EXPLAIN ANALYZE:
 * a seq scan of 1,000 rows against an index probe per batch); a partition analyzed while nearly
 * empty would likewise be scanned whole until analyzed again. Every probe of the head is by key.
 */
const WRITE_SETTINGS = 'SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL enable_seqscan = off';
const BEGIN_WRITE = `BEGIN; ${WRITE_SETTINGS}`;

/**
 * The head of a group whose devices' keys (pk, tier) the node knows (from the route's device read
 * or an earlier group): sent in the same query as the COPY and COMMIT, one round trip for the group.
 * It locks the devices and moves their latest as GROUP_HEAD does, and fails the transaction, before
 * the COPY runs, when any device is gone or in another tier than the node thought (another node
 * deleted it or changed its solution's retention): the node forgets those keys and writes the group
 * the two-round-trip way. It does not ask whether a batch's span is taken: a batch repeating a stored
 * (device, time) fails the COPY on the unique index, and the group is written again batch by batch,
 * merging (writeGroup). A free span, the usual upload, pays nothing for the check.
 */
const GROUP_HEAD_KNOWN = `
WITH u AS (
  SELECT * FROM unnest($1::text[], $2::bigint[], $3::int[], $4::bigint[], $5::float8[], $6::text[]) AS u(id, pk, tier, nts, nt, nx)
),
d AS (
  SELECT u.pk, u.nts, u.nt, u.nx FROM u JOIN devices v ON v.id = u.id COLLATE "C" AND v.pk = u.pk AND v.tier = u.tier FOR SHARE OF v
),
l AS (
  INSERT INTO latest (device_pk, ts, temperature, extra)
  SELECT pk, nts, nt, nx::jsonb FROM d ORDER BY pk
  ON CONFLICT (device_pk) DO UPDATE SET ts = excluded.ts, temperature = excluded.temperature, extra = excluded.extra
  WHERE excluded.ts >= latest.ts
)
SELECT reef_expect_devices((SELECT count(*) FROM d), cardinality($1::text[]))`;

/** The group heads, prepared once per connection (SQL PREPARE, so that EXECUTE can share a round trip with BEGIN). */
const PREPARE_HEADS = `PREPARE reef_group_head(text[], bigint[], bigint[], bigint[], float8[], text[], text[], text[]) AS ${GROUP_HEAD};
PREPARE reef_group_head_known(text[], bigint[], int[], bigint[], float8[], text[]) AS ${GROUP_HEAD_KNOWN}`;

/** Device keys (pk, tier) a node remembers for GROUP_HEAD_KNOWN; past this many it starts afresh. */
const KNOWN_DEVICES = 100_000;

/** A device's key changed since the node learnt it (GROUP_HEAD_KNOWN's check). */
function isKeyChanged(e: unknown): boolean {
  const cause = (e instanceof ReefError ? e.cause : e) as { code?: string } | undefined;
  return cause?.code === 'RF001';
}

/**
 * Groups in flight at once per node, and a group's size. Groups of devices whose keys the node
 * knows (the usual upload) are pipelined on one connection (PostgresStore.pipelined); the others
 * each take a pooled connection. Three, not two: with four uploads in flight on two shared cores, a
 * third group keeps PostgreSQL working while one commits and the node parses; the machine's cores
 * were busy 1.63–1.70 of 2 against 1.50–1.60 with two, and uploads were faster in 4 of 5
 * alternated pairs. Four did no better than three.
 */
const WRITERS = 3;
const GROUP_BATCHES = 64;
/**
 * While a group is being written, another starts only with at least this many batches: a group
 * costs PostgreSQL CPU whatever its size (the head, the COPY's setup, the commit's WAL flush: about
 * 0.3 ms one after another, and about 1 ms when groups ran at once on pooled connections), and with
 * four uploads in flight and a writer free for each, every group held one batch (1,000 groups per
 * million rows). A lone batch waits for the group in flight, whose end pumps again, and goes with
 * the batches that arrived meanwhile: half as many groups. On pooled connections PostgreSQL spent
 * 2.29–2.57 µs per observation uploaded against 2.56–3.11; pipelined, 1.63–1.67 against 1.82–1.97
 * (docs/performance.md, "PostgreSQL: groups, binary COPY, one pipelined connection").
 */
const MIN_EXTRA_GROUP = 2;
const GROUP_ROWS = 100_000;

/**
 * A batch waiting for its group: its rows (repeated timestamps collapsed) as records, or as the
 * upload scanner's numbers (no free fields, timestamps strictly ascending), and what the head needs.
 */
interface Pending {
  deviceId: string;
  /**
   * The device as the node last read it (Store.uploadDevice may have answered the upload from that
   * read): the batch is written to no device of another group or solution. Undefined when unknown.
   */
  owner: DeviceRef | undefined;
  rows: ObservationRecord[] | null;
  /** The caller's count (before repeated timestamps were collapsed). */
  written: number;
  ts: ArrayLike<number> & Iterable<number>;
  /** Temperatures: null (records) or NaN (packed) where there is none. */
  temps: ArrayLike<number | null>;
  /** The rows' free-form fields as a JSON list, '[]' when none has any. */
  extras: string;
  from: number;
  to: number;
  newestTs: number;
  newestT: number | null;
  /** The newest row's free-form fields as JSON, or null. */
  newestX: string | null;
  resolve(r: InsertResult): void;
  reject(e: unknown): void;
}

const MERGE_BATCH = `
INSERT INTO observations (device_pk, ts, temperature, extra, tier)
SELECT $1::bigint, u.ts, u.t, NULLIF(u.x, 'null'::jsonb), $2::int
FROM ROWS FROM (unnest($3::bigint[]), unnest($4::float8[]), jsonb_array_elements($5::jsonb)) AS u(ts, t, x)
ON CONFLICT (device_pk, ts, tier) DO UPDATE SET temperature = excluded.temperature, extra = excluded.extra`;

/**
 * The group's COPY, with a marker row (FLUSH_TUPLE) after every FLUSH_EVERY rows. A COPY into a
 * partitioned table buffers rows per partition and inserts each buffer with multi-row heap inserts
 * (one WAL record per page instead of one per row); it writes every buffer out early when a row goes
 * to a partition that cannot take buffered inserts, such as one with a BEFORE ROW trigger
 * (PostgreSQL's copyfrom.c, CopyFrom). The marker goes to such a partition, whose trigger drops it
 * (migration 10), so a buffer holds at most FLUSH_EVERY rows. That bound is the point: each buffered
 * row takes a tuple slot that PostgreSQL 15 pins in the statement's resource owner, kept as a plain
 * array up to 64 entries and past that as a hash table in which identical pointers are probed one
 * after another, so filling and emptying a buffer of n slots costs on the order of n² probes. A
 * group of one or two uploads fills its buffer to 1,000 rows, and paid for that on every COPY: 24 %
 * of PostgreSQL's CPU during uploads (perf: table_slot_create, ExecDropSingleTupleTableSlot). Inserting
 * row by row instead (an always-true volatile WHERE, which copyfrom.c takes to mean one row at a
 * time) pays a heap insert and a WAL record per row. Buffers of FLUSH_EVERY rows pay neither:
 * docs/performance.md, "PostgreSQL: the COPY's buffers kept small".
 */
const COPY_BATCH = 'COPY observations (device_pk, ts, temperature, extra, tier) FROM STDIN (FORMAT binary)';
/** Rows between two markers: a buffer stays near the resource owner's 64-entry array and still fills about half a heap page per write-out. */
const FLUSH_EVERY = 60;
/**
 * The marker: device_pk 0, ts 0, no temperature, no extra, tier -1 (obs_copy_flush, migration 10),
 * as a COPY binary tuple (field count, then each field's length and bytes, -1 for NULL).
 */
const FLUSH_TUPLE = Buffer.from([0, 5, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff]);

/** PGCOPY binary signature, flags and header extension length (COPY, "Binary Format"). */
const COPY_HEADER = Buffer.from([0x50, 0x47, 0x43, 0x4f, 0x50, 0x59, 0x0a, 0xff, 0x0d, 0x0a, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]);
const COPY_TRAILER = Buffer.from([0xff, 0xff]);
const TWO_32 = 4_294_967_296;

/** Each record's free fields in jsonb's binary form (a version byte, then the JSON text); null when no record has any. */
function jsonbExtras(rows: readonly ObservationRecord[]): (Buffer | null)[] | null {
  if (!rows.some((r) => r.extra)) return null;
  return rows.map((r) => (r.extra ? Buffer.from(`\x01${JSON.stringify(r.extra)}`, 'utf8') : null));
}

/** One batch's rows in a group's COPY: its device's key, timestamps, temperatures and free fields. */
interface CopyRows {
  pk: number;
  tier: number;
  ts: ArrayLike<number>;
  /** null (records) or NaN (the upload scanner's numbers) where there is no temperature. */
  temps: ArrayLike<number | null>;
  /** Each row's jsonb, or null when no row has free fields. */
  extras: readonly (Buffer | null)[] | null;
}

/** A waiting batch's rows for the group's COPY, under its device's key. */
function copyRowsOf(p: Pending, key: { pk: number; tier: number }): CopyRows {
  return { pk: key.pk, tier: key.tier, ts: p.ts, temps: p.temps, extras: p.rows && jsonbExtras(p.rows) };
}

const noTemperature = (x: number | null | undefined) => x === null || x === undefined || Number.isNaN(x);

/** The bytes of a batch's COPY binary tuples: 50 a row (field count, four length-prefixed fixed fields, the extra's length), less 8 without a temperature, plus the extra. */
function tupleBytes(r: CopyRows): number {
  const n = r.ts.length;
  let size = n * 50;
  for (let i = 0; i < n; i++) {
    if (noTemperature(r.temps[i])) size -= 8;
    const e = r.extras?.[i];
    if (e) size += e.length;
  }
  return size;
}

/**
 * Writes a batch's rows as COPY binary tuples at `at` (device_pk int8, ts int8, temperature float8,
 * extra jsonb, tier int4) through one DataView, no record or string per row, with the marker before
 * each row whose place in the group's stream (`before` rows precede the batch) is a multiple of
 * FLUSH_EVERY, the first excepted; returns where they end.
 */
function writeTuples(buf: Buffer, v: DataView, at: number, r: CopyRows, before: number): number {
  const { ts, temps, extras, tier } = r;
  const n = ts.length;
  const pkHi = Math.floor(r.pk / TWO_32);
  const pkLo = r.pk - pkHi * TWO_32;
  for (let i = 0, k = before; i < n; i++, k++) {
    if (k && k % FLUSH_EVERY === 0) at += FLUSH_TUPLE.copy(buf, at);
    v.setInt16(at, 5);
    v.setInt32(at + 2, 8);
    v.setInt32(at + 6, pkHi);
    v.setUint32(at + 10, pkLo);
    const t = ts[i]!;
    const hi = Math.floor(t / TWO_32);
    v.setInt32(at + 14, 8);
    v.setInt32(at + 18, hi);
    v.setUint32(at + 22, t - hi * TWO_32);
    const x = temps[i];
    if (noTemperature(x)) {
      v.setInt32(at + 26, -1);
      at += 30;
    } else {
      v.setInt32(at + 26, 8);
      v.setFloat64(at + 30, x!);
      at += 38;
    }
    const e = extras?.[i];
    if (e) {
      v.setInt32(at, e.length);
      at += 4 + e.copy(buf, at + 4);
    } else {
      v.setInt32(at, -1); // extra: NULL
      at += 4;
    }
    v.setInt32(at, 4);
    v.setInt32(at + 4, tier);
    at += 8;
  }
  return at;
}

/**
 * A group's round trip as one buffer, for one write: the simple Query message holding `text`, then
 * one CopyData message with the whole COPY binary stream (signature, every batch's tuples and the markers between them, trailer),
 * then CopyDone (PostgreSQL protocol, "Message Formats"). Built in place: before, the tuples of each
 * batch, their concatenation and pg's framing of it were three copies of the group's rows, and the
 * three messages three writes to the socket, each waking the backend.
 */
function copyAndCommitMessage(text: string, batches: readonly CopyRows[]): Buffer {
  const textBytes = Buffer.byteLength(text);
  // Room for the stream with a marker after every FLUSH_EVERY rows (at most one more than
  // writeTuples puts in); the CopyData's length is taken from what was written.
  let room = COPY_HEADER.length + COPY_TRAILER.length;
  let rows = 0;
  for (const r of batches) {
    room += tupleBytes(r);
    rows += r.ts.length;
  }
  room += Math.floor(rows / FLUSH_EVERY) * FLUSH_TUPLE.length;
  const size = 5 + textBytes + 1 + 5 + room + 5;
  const buf = Buffer.allocUnsafe(size);
  const v = new DataView(buf.buffer, buf.byteOffset, size);
  buf[0] = 0x51; // 'Q'
  v.setInt32(1, 4 + textBytes + 1);
  let at = 5 + buf.write(text, 5, 'utf8');
  buf[at++] = 0;
  const copyData = at;
  buf[copyData] = 0x64; // 'd'
  at += 5;
  at += COPY_HEADER.copy(buf, at);
  let before = 0;
  for (const r of batches) {
    at = writeTuples(buf, v, at, r, before);
    before += r.ts.length;
  }
  at += COPY_TRAILER.copy(buf, at);
  v.setInt32(copyData + 1, at - copyData - 1);
  buf[at] = 0x63; // 'c'
  v.setInt32(at + 1, 4);
  return buf.subarray(0, at + 5);
}

/**
 * A group head's arguments as SQL literals, comma-separated: the devices, two numbers per batch (its
 * span for GROUP_HEAD, its device's pk and tier for GROUP_HEAD_KNOWN), then each batch's newest row,
 * and with `owners` (GROUP_HEAD) the group and solution each batch's device is expected in.
 */
function headArgs(c: pg.ClientBase, group: Pending[], second: readonly number[], third: readonly number[], owners = false): string {
  const args = [
    textArray(group.map((p) => p.deviceId)),
    numArray(second),
    numArray(third),
    numArray(group.map((p) => p.newestTs)),
    numArray(group.map((p) => p.newestT)),
    textArray(group.map((p) => p.newestX)),
  ];
  if (owners) args.push(textArray(group.map((p) => p.owner?.groupId ?? null)), textArray(group.map((p) => p.owner?.solution ?? null)));
  return args.map((a) => c.escapeLiteral(a)).join(', ');
}

/** Every timestamp of a group, for the partitions it needs. */
function* groupTimestamps(group: Pending[]): Generator<number> {
  for (const p of group) yield* p.ts;
}

/** A COPY met a row already stored (a concurrent upload of the same device and time span). */
function isRowConflict(e: unknown): boolean {
  const cause = (e instanceof ReefError ? e.cause : e) as { code?: string; table?: string } | undefined;
  return cause?.code === '23505' && typeof cause.table === 'string' && cause.table.startsWith('obs_');
}

export class PostgresStore implements Store {
  readonly kind = 'postgres' as const;
  readonly pool: pg.Pool;
  private readonly parts = new PartitionMap();
  private partsLoaded = false;

  constructor(private readonly opts: PostgresOptions) {
    this.pool = new pg.Pool({ ...this.clientConfig(), max: opts.maxConnections ?? 10, idleTimeoutMillis: 30_000 });
    // An idle connection dies when PostgreSQL restarts; without a listener pg would throw it
    // out of the process. The pool drops it and opens a new one on the next request.
    this.pool.on('error', (e) => opts.onIdleError?.(e));
  }

  /** How every connection of the store is made: the pool's and the pipelined writer's. */
  private clientConfig(): pg.ClientConfig {
    return { connectionString: this.opts.connectionString, connectionTimeoutMillis: this.opts.connectTimeoutMs ?? 5000, keepAlive: true, application_name: 'reef', types };
  }

  /** The connection string, for companions that need their own connection (LISTEN, leadership). */
  get connectionString(): string {
    return this.opts.connectionString;
  }

  /** `arrays`: each row as an array of its columns (pg's rowMode 'array'), not a keyed object. */
  private async q(text: string, values?: unknown[], name?: string, arrays = false): Promise<pg.QueryResult<Row>> {
    try {
      if (arrays) return await this.pool.query({ name, text, values, rowMode: 'array' });
      return await this.pool.query(name ? { name, text, values } : { text, values });
    } catch (e) {
      translate(e);
    }
  }

  /**
   * Runs f in one transaction on one pooled connection. With `begin` null, f begins it (in its first
   * round trip); with `commits`, f ends it with its last statement (see CopyAndCommit).
   */
  private async tx<T>(f: (c: pg.PoolClient) => Promise<T>, begin: string | null = 'BEGIN', commits = false): Promise<T> {
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

  async migrate(): Promise<void> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (e) {
      translate(e);
    }
    let broken: Error | undefined;
    try {
      // A session lock: a second node starting at the same moment waits here, then finds every
      // migration applied. Each migration commits with its version row, so a crash midway leaves
      // either all of a migration or none of it.
      await client.query('SELECT pg_advisory_lock($1)', [LOCK_MIGRATE.toString()]);
      try {
        await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)');
        const done = new Set((await client.query('SELECT version FROM schema_migrations')).rows.map((r) => r.version as number));
        for (const m of MIGRATIONS) {
          if (done.has(m.version)) continue;
          await client.query('BEGIN');
          try {
            await client.query(m.sql);
            await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [m.version, m.name, Date.now()]);
            await client.query('COMMIT');
          } catch (e) {
            await client.query('ROLLBACK');
            throw e;
          }
        }
      } finally {
        await client.query('SELECT pg_advisory_unlock($1)', [LOCK_MIGRATE.toString()]);
      }
    } catch (e) {
      broken = e as Error;
      translate(e);
    } finally {
      client.release(broken);
    }
    await this.loadPartitions();
    await this.ensureRanges(this.parts.ahead(Date.now()));
  }

  async close(): Promise<void> {
    // Batches already accepted are written (or fail) before the pool goes.
    if (this.writers || this.pending.length) await new Promise<void>((r) => this.drained.push(r));
    const writer = this.writer;
    this.writer = null;
    await writer?.then((c) => c.end()).catch(() => {});
    await this.pool.end();
  }

  async ping(): Promise<void> {
    await this.q('SELECT 1');
  }

  // ---- partitions -------------------------------------------------------------------------

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
  private async ensureRanges(ranges: { tier: number; start: number; end: number }[], client?: pg.PoolClient): Promise<number> {
    if (ranges.length === 0) return 0;
    const sql = `SELECT reef_ensure_partition(t, s, e) AS made FROM unnest($1::int[], $2::bigint[], $3::bigint[]) AS u(t, s, e)`;
    const values = [numArray(ranges.map((r) => r.tier)), numArray(ranges.map((r) => r.start)), numArray(ranges.map((r) => r.end))];
    let res: pg.QueryResult<Row>;
    if (client) res = await client.query(sql, values);
    else res = await this.q(sql, values);
    for (const r of ranges) this.parts.add(r.tier, { start: r.start, end: r.end });
    return res.rows.filter((r) => r.made).length;
  }

  // ---- accounts -----------------------------------------------------------------------------

  async createAccount(a: Account): Promise<Account> {
    await this.q('INSERT INTO accounts (tenant_id, name, group_id, client_id, secret_hash, disabled, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
      a.tenantId,
      a.name,
      a.groupId,
      a.clientId,
      a.secretHash,
      a.disabled,
      a.createdAt,
    ]);
    return a;
  }
  async getAccountByClientId(clientId: string): Promise<Account | null> {
    const r = await this.q('SELECT * FROM accounts WHERE client_id = $1', [clientId], 'account-by-client');
    return r.rows[0] ? accountFromRow(r.rows[0]) : null;
  }
  async getAccountByTenantId(tenantId: string): Promise<Account | null> {
    const r = await this.q('SELECT * FROM accounts WHERE tenant_id = $1', [tenantId], 'account-by-tenant');
    return r.rows[0] ? accountFromRow(r.rows[0]) : null;
  }
  async listAccounts(): Promise<Account[]> {
    return (await this.q('SELECT * FROM accounts ORDER BY created_at, tenant_id')).rows.map(accountFromRow);
  }
  async setAccountSecret(tenantId: string, secretHash: string): Promise<void> {
    if ((await this.q('UPDATE accounts SET secret_hash = $1 WHERE tenant_id = $2', [secretHash, tenantId])).rowCount === 0) throw new ReefError('ACCOUNT_NOT_FOUND');
  }
  async setAccountDisabled(tenantId: string, disabled: boolean): Promise<void> {
    if ((await this.q('UPDATE accounts SET disabled = $1 WHERE tenant_id = $2', [disabled, tenantId])).rowCount === 0) throw new ReefError('ACCOUNT_NOT_FOUND');
  }
  async countAccounts(): Promise<number> {
    return (await this.q('SELECT count(*) AS n FROM accounts')).rows[0]!.n;
  }

  // ---- signing keys -------------------------------------------------------------------------

  async listSigningKeys(): Promise<SigningKey[]> {
    const r = await this.q('SELECT kid, secret, created_at FROM signing_keys ORDER BY created_at, kid');
    return r.rows.map((x) => ({ kid: x.kid, secret: x.secret, createdAt: x.created_at }));
  }
  async addSigningKey(k: SigningKey): Promise<void> {
    await this.q('INSERT INTO signing_keys (kid, secret, created_at) VALUES ($1, $2, $3) ON CONFLICT (kid) DO NOTHING', [k.kid, k.secret, k.createdAt]);
  }

  async deleteSigningKey(kid: string): Promise<void> {
    await this.q('DELETE FROM signing_keys WHERE kid = $1', [kid]);
  }

  // ---- solutions and devices ----------------------------------------------------------------

  async solutionExists(groupId: string, solution: string): Promise<boolean> {
    return (await this.q('SELECT 1 FROM solutions WHERE group_id = $1 AND name = $2', [groupId, solution], 'solution-exists')).rowCount! > 0;
  }

  async solutionVersion(groupId: string, solution: string): Promise<number | null> {
    const r = await this.q('SELECT version FROM solutions WHERE group_id = $1 AND name = $2', [groupId, solution], 'solution-version');
    return r.rows[0] ? Number(r.rows[0].version) : null;
  }

  async ensureSolution(groupId: string, solution: string): Promise<void> {
    await this.q('INSERT INTO solutions (group_id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (group_id, name) DO NOTHING', [groupId, solution, Date.now()], 'ensure-solution');
  }

  async createDevice(d: NewDevice, maxForTenant?: number): Promise<DeviceRecord> {
    const now = Date.now();
    // The solution row is made (or locked, against a concurrent retention change) in the same
    // statement, and the device takes the solution's retention tier.
    const text = `WITH s AS (
         INSERT INTO solutions (group_id, name, created_at, version) VALUES ($3, $4, $9, 1)
         ON CONFLICT (group_id, name) DO UPDATE SET version = solutions.version + 1
         RETURNING retention_days)
       INSERT INTO devices (${DEVICE_COLS}, tier)
       SELECT $1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8, $9, COALESCE(s.retention_days, 0) FROM s`;
    const values = [d.id, d.tenantId, d.groupId, d.solution, d.deviceType, JSON.stringify(d.domainInfo), d.provisioningInfo ? JSON.stringify(d.provisioningInfo) : null, d.mac ?? null, now];
    if (maxForTenant === undefined) await this.q(text, values);
    else {
      await this.tx(async (c) => {
        await c.query(text, values);
        // The insert's trigger has moved the account's count on and holds its row until this
        // transaction ends: the account's creators, on every node, pass here one at a time, and
        // one past the quota is undone. Locks are taken in one order by every device write
        // (solution, then count; deleteDevice too), so two writers never wait on each other.
        const n = (await c.query(COUNT_TENANT_DEVICES, [d.tenantId])).rows[0].n as number;
        if (n > maxForTenant) throw deviceQuotaError(maxForTenant, n - 1, 1);
      });
    }
    const rec: DeviceRecord = {
      id: d.id,
      deviceType: d.deviceType,
      domainInfo: d.domainInfo,
      tenantId: d.tenantId,
      groupId: d.groupId,
      solution: d.solution,
      mac: d.mac ?? null,
      createdAt: now,
    };
    if (d.provisioningInfo) rec.provisioningInfo = d.provisioningInfo;
    return rec;
  }

  async listTemplates(groupId: string, solution: string): Promise<DeviceTemplateRecord[]> {
    const r = await this.q(`SELECT ${TEMPLATE_COLS} FROM device_templates WHERE group_id = $1 AND solution = $2 ORDER BY pk`, [groupId, solution], 'list-templates');
    return r.rows.map(templateFromRow);
  }
  async getTemplate(groupId: string, solution: string, id: string): Promise<DeviceTemplateRecord | null> {
    const r = await this.q(`SELECT ${TEMPLATE_COLS} FROM device_templates WHERE ${BY_ID_IN_SOLUTION}`, [groupId, solution, id], 'get-template');
    return r.rows[0] ? templateFromRow(r.rows[0]) : null;
  }
  async createTemplate(t: { id: string; groupId: string; solution: string; name: string; sensors: unknown[] }, maxPerSolution: number): Promise<DeviceTemplateRecord> {
    const now = Date.now();
    return this.tx(async (c) => {
      // The solution row, made or locked first, serialises creators of one solution: the count and
      // the insert then agree (no two writers past the cap).
      await c.query('INSERT INTO solutions (group_id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (group_id, name) DO NOTHING', [t.groupId, t.solution, now]);
      await c.query('SELECT 1 FROM solutions WHERE group_id = $1 AND name = $2 FOR UPDATE', [t.groupId, t.solution]);
      const n = (await c.query('SELECT count(*)::int AS n FROM device_templates WHERE group_id = $1 AND solution = $2', [t.groupId, t.solution])).rows[0].n as number;
      if (n >= maxPerSolution) throw new ReefError('TOO_MANY_TEMPLATES', `a solution holds at most ${maxPerSolution} device templates`);
      await c.query('INSERT INTO device_templates (id, group_id, solution, name, sensors, created_at, updated_at) VALUES ($1, $2, $3, $4, $5::jsonb, $6, $6)', [
        t.id,
        t.groupId,
        t.solution,
        t.name,
        JSON.stringify(t.sensors),
        now,
      ]);
      return { ...t, createdAt: now, updatedAt: now };
    });
  }
  async updateTemplate(groupId: string, solution: string, id: string, t: { name: string; sensors: unknown[] }): Promise<DeviceTemplateRecord | null> {
    const r = await this.q(
      `UPDATE device_templates SET name = $4, sensors = $5::jsonb, updated_at = $6 WHERE ${BY_ID_IN_SOLUTION} RETURNING ${TEMPLATE_COLS}`,
      [groupId, solution, id, t.name, JSON.stringify(t.sensors), Date.now()],
      'update-template',
    );
    return r.rows[0] ? templateFromRow(r.rows[0]) : null;
  }
  async deleteTemplate(groupId: string, solution: string, id: string): Promise<DeviceTemplateRecord | null> {
    const r = await this.q(`DELETE FROM device_templates WHERE ${BY_ID_IN_SOLUTION} RETURNING ${TEMPLATE_COLS}`, [groupId, solution, id], 'delete-template');
    return r.rows[0] ? templateFromRow(r.rows[0]) : null;
  }

  async listDevices(groupId: string, solution: string, deviceType?: string): Promise<DeviceRecord[]> {
    const r =
      deviceType === undefined
        ? await this.q(`SELECT ${DEVICE_COLS} FROM devices WHERE group_id = $1 AND solution = $2 ORDER BY pk`, [groupId, solution], 'list-devices')
        : await this.q(`SELECT ${DEVICE_COLS} FROM devices WHERE group_id = $1 AND solution = $2 AND device_type = $3 ORDER BY pk`, [groupId, solution, deviceType], 'list-devices-type');
    return r.rows.map(deviceFromRow);
  }
  async countDevices(tenantId: string): Promise<number> {
    const r = await this.q(COUNT_TENANT_DEVICES, [tenantId], 'count-devices');
    return (r.rows[0]?.n as number | undefined) ?? 0;
  }
  async countObservationsByTenant(): Promise<Map<string, number>> {
    const r = await this.q('SELECT d.tenant_id AS t, count(*)::bigint AS n FROM observations o JOIN devices d ON d.pk = o.device_pk GROUP BY d.tenant_id', [], 'count-observations');
    return new Map(r.rows.map((row) => [String(row.t), Number(row.n)] as [string, number]));
  }
  async getDevice(groupId: string, solution: string, id: string): Promise<DeviceRecord | null> {
    const r = await this.q(`SELECT pk, tier, ${DEVICE_COLS} FROM devices WHERE ${BY_ID_IN_SOLUTION}`, [groupId, solution, id], 'get-device');
    const row = r.rows[0];
    if (!row) return null;
    // An upload reads its device first: its group then needs no round trip to learn the key.
    const d = deviceFromRow(row);
    this.knowKey(id, row.pk as number, row.tier as number, { id: d.id, tenantId: d.tenantId, groupId: d.groupId, solution: d.solution, deviceType: d.deviceType, mac: d.mac });
    return d;
  }

  /**
   * Store.uploadDevice: the device as getDevice last read it in this group and solution, without a
   * round trip; else getDevice. What it answers cannot go stale unnoticed: its batch is written by
   * GROUP_HEAD_KNOWN only while the device's pk (never reused) is still there, else by GROUP_HEAD
   * only to a device of that group and solution (Pending.owner), and fails with DEVICE_NOT_FOUND
   * when there is none. Deleting the device here, or a retention change, forgets it at once.
   */
  async uploadDevice(groupId: string, solution: string, id: string): Promise<DeviceRef | null> {
    const ref = this.keys.get(id)?.ref;
    if (ref && ref.groupId === groupId && ref.solution === solution) return ref;
    return this.getDevice(groupId, solution, id);
  }
  async getDeviceByMac(mac: string): Promise<DeviceRecord | null> {
    const r = await this.q(`SELECT ${DEVICE_COLS} FROM devices WHERE mac = $1`, [mac], 'device-by-mac');
    return r.rows[0] ? deviceFromRow(r.rows[0]) : null;
  }
  async deleteDevice(groupId: string, solution: string, id: string): Promise<boolean> {
    return this.tx(async (c) => {
      // FOR UPDATE waits for inserts in flight (they hold FOR SHARE) so none leaves orphans behind.
      const r = await c.query(`SELECT pk, tier FROM devices WHERE ${BY_ID_IN_SOLUTION} FOR UPDATE`, [groupId, solution, id]);
      const dev = r.rows[0];
      if (!dev) return false;
      this.keys.delete(id);
      await c.query('DELETE FROM observations WHERE tier = $1 AND device_pk = $2', [dev.tier, dev.pk]);
      await c.query('DELETE FROM latest WHERE device_pk = $1', [dev.pk]);
      // The solution before the device: the delete's trigger then locks the account's count last,
      // in the order createDevice takes them (solution, then count), so the two cannot deadlock.
      await c.query('UPDATE solutions SET version = version + 1 WHERE group_id = $1 AND name = $2', [groupId, solution]);
      await c.query('DELETE FROM devices WHERE pk = $1', [dev.pk]);
      return true;
    });
  }

  async updateDevice(groupId: string, solution: string, id: string, expected: DomainInfo, next: { deviceType: string; domainInfo: DomainInfo }): Promise<DeviceRecord | 'missing' | 'changed'> {
    return this.tx(async (c) => {
      const r = await c.query(`SELECT pk, ${DEVICE_COLS} FROM devices WHERE ${BY_ID_IN_SOLUTION} FOR UPDATE`, [groupId, solution, id]);
      if (!r.rows[0]) return 'missing';
      // Compared as values: jsonb keeps its own order of keys.
      if (!isDeepStrictEqual(deviceFromRow(r.rows[0]).domainInfo, expected)) return 'changed';
      const u = await c.query(`UPDATE devices SET device_type = $1, domain_info = $2 WHERE pk = $3 RETURNING ${DEVICE_COLS}`, [next.deviceType, JSON.stringify(next.domainInfo), r.rows[0].pk]);
      await c.query('UPDATE solutions SET version = version + 1 WHERE group_id = $1 AND name = $2', [groupId, solution]);
      return deviceFromRow(u.rows[0]);
    });
  }

  // ---- observations -------------------------------------------------------------------------

  async insertObservations(deviceId: string, batch: ObservationRecord[]): Promise<InsertResult> {
    if (!batch.length) {
      await this.devicePk(deviceId); // DEVICE_NOT_FOUND as for any batch; nothing to write
      return { written: 0 };
    }
    // ON CONFLICT cannot touch one row twice in a statement, nor COPY add one twice: collapse
    // repeated timestamps first, the later one winning, as when the rows are written one after another.
    let rows = batch;
    let ascending = true;
    for (let i = 1; i < batch.length && ascending; i++) ascending = batch[i]!.ts > batch[i - 1]!.ts;
    if (!ascending) {
      // Only an unordered batch can repeat a timestamp.
      const seen = new Map<number, number>();
      for (let i = 0; i < batch.length; i++) seen.set(batch[i]!.ts, i);
      if (seen.size < batch.length) rows = [...seen.values()].sort((a, b) => a - b).map((i) => batch[i]!);
    }
    let newest = rows[0]!;
    let anyExtra = false;
    let from = newest.ts;
    let to = newest.ts;
    const ts: number[] = new Array(rows.length);
    const temps: (number | null)[] = new Array(rows.length);
    for (let i = 0; i < rows.length; i++) {
      const o = rows[i]!;
      ts[i] = o.ts;
      temps[i] = o.temperature;
      if (o.extra) anyExtra = true;
      if (o.ts >= newest.ts) newest = o;
      if (o.ts < from) from = o.ts;
      if (o.ts > to) to = o.ts;
    }
    // ROWS FROM pads a shorter function with NULLs: with no free-form fields, send an empty list.
    const extras = anyExtra ? JSON.stringify(rows.map((o) => o.extra ?? null)) : '[]';
    const newestX = newest.extra ? JSON.stringify(newest.extra) : null;
    return new Promise((resolve, reject) => {
      this.pending.push({
        deviceId,
        owner: this.keys.get(deviceId)?.ref,
        rows,
        written: batch.length,
        ts,
        temps,
        extras,
        from,
        to,
        newestTs: newest.ts,
        newestT: newest.temperature,
        newestX,
        resolve,
        reject,
      });
      this.pump();
    });
  }

  /**
   * The upload scanner's numbers as they are: the COPY tuples are written straight from the typed
   * arrays (no record, no JSON per row). A batch whose timestamps do not strictly ascend (it may
   * repeat one) takes insertObservations' way, which collapses repeats.
   */
  insertPackedObservations(deviceId: string, batch: PackedObservations): Promise<InsertResult> {
    const { ts, temperature } = batch;
    const n = ts.length;
    let ascending = n > 0;
    for (let i = 1; i < n && ascending; i++) ascending = ts[i]! > ts[i - 1]!;
    if (!ascending) return this.insertObservations(deviceId, unpackObservations(batch));
    const t = temperature[n - 1]!;
    return new Promise((resolve, reject) => {
      this.pending.push({
        deviceId,
        owner: this.keys.get(deviceId)?.ref,
        rows: null,
        written: n,
        ts,
        temps: temperature,
        extras: '[]',
        from: ts[0]!,
        to: ts[n - 1]!,
        newestTs: ts[n - 1]!,
        newestT: Number.isNaN(t) ? null : t,
        newestX: null,
        resolve,
        reject,
      });
      this.pump();
    });
  }

  /** Batches waiting for a group, in call order. */
  private pending: Pending[] = [];
  /** Devices with a batch in a group in flight: their next batch waits, so call order is kept. */
  private readonly busy = new Set<string>();
  private writers = 0;
  private readonly drained: (() => void)[] = [];

  /**
   * Starts a group of the waiting batches (call order, one per device) while fewer than WRITERS
   * are in flight, a second or third one only with MIN_EXTRA_GROUP batches or more: batches that
   * arrive meanwhile join the next group rather than each taking a transaction. Several in flight
   * keep PostgreSQL busy while another group waits on its commit, or, pipelined, is on its way (on
   * pooled connections one writer spent less CPU per row but uploaded more slowly).
   */
  private pump(): void {
    while (this.writers < WRITERS && this.pending.length) {
      const group: Pending[] = [];
      const rest: Pending[] = [];
      const inGroup = new Set<string>();
      let rows = 0;
      for (const p of this.pending) {
        if (group.length < GROUP_BATCHES && rows < GROUP_ROWS && !this.busy.has(p.deviceId) && !inGroup.has(p.deviceId)) {
          group.push(p);
          inGroup.add(p.deviceId);
          rows += p.ts.length;
        } else rest.push(p);
      }
      if (!group.length) return; // every waiting batch's device is in flight: its group's end pumps again
      if (this.writers > 0 && group.length < MIN_EXTRA_GROUP) return; // the group in flight pumps again when it ends
      this.pending = rest;
      this.writers++;
      for (const id of inGroup) this.busy.add(id);
      void this.writeGroup(group).finally(() => {
        this.writers--;
        for (const id of inGroup) this.busy.delete(id);
        if (!this.writers && !this.pending.length) for (const r of this.drained.splice(0)) r();
        this.pump();
      });
    }
  }

  /**
   * Writes a group and settles each of its batches; never rejects. `fast`: in one round trip when
   * every device's key is known (writeKnown); a group written again batch by batch after a failure
   * takes the head's way, which merges a batch into rows already stored.
   */
  private async writeGroup(group: Pending[], fast = true): Promise<void> {
    try {
      if (!this.partsLoaded) await this.loadPartitions();
      // Only a batch that no existing range holds whole has timestamps worth looking at one by one.
      const spill = group.filter((p) => !this.parts.holds(p.from, p.to));
      if (spill.length) {
        const missing = this.parts.missing(groupTimestamps(spill), Date.now());
        if (missing.length) await this.ensureRanges(missing);
      }
      const found = (fast && (await this.writeKnown(group))) || (await this.writeTx(group, false));
      await this.learnTiers(group, found);
      for (let i = 0; i < group.length; i++) {
        if (found[i]) group[i]!.resolve({ written: group[i]!.written });
        else group[i]!.reject(new ReefError('DEVICE_NOT_FOUND'));
      }
    } catch (e) {
      if (group.length > 1) {
        // One batch's failure must not fail the others: write them one by one.
        for (const p of group) await this.writeGroup([p], false);
        return;
      }
      const p = group[0]!;
      if (!isRowConflict(e)) return p.reject(e);
      try {
        const found = await this.writeTx(group, true);
        await this.learnTiers(group, found);
        if (found[0]) p.resolve({ written: p.written });
        else p.reject(new ReefError('DEVICE_NOT_FOUND'));
      } catch (e2) {
        p.reject(e2);
      }
    }
  }

  /** Connections (pooled clients) on which the group heads are prepared: PREPARE lasts a session. */
  private readonly headPrepared = new WeakSet<pg.PoolClient>();
  /**
   * Device id → (pk, tier) as last read: what GROUP_HEAD_KNOWN checks rather than looks up; and,
   * when getDevice read it, the device as an upload needs it (uploadDevice).
   */
  private readonly keys = new Map<string, { pk: number; tier: number; ref?: DeviceRef }>();

  /** `ref`: the device as getDevice read it; kept from before while the pk is the same. */
  private knowKey(id: string, pk: number, tier: number, ref?: DeviceRef): void {
    const before = this.keys.get(id);
    if (this.keys.size >= KNOWN_DEVICES && !before) this.keys.clear();
    this.keys.set(id, { pk, tier, ref: ref ?? (before?.pk === pk ? before.ref : undefined) });
  }

  private async prepareHeads(c: pg.PoolClient): Promise<void> {
    if (this.headPrepared.has(c)) return;
    await c.query(PREPARE_HEADS);
    this.headPrepared.add(c);
  }

  /**
   * A group whose every device's key is known, in one round trip: BEGIN, GROUP_HEAD_KNOWN, the COPY
   * and COMMIT in one simple query, the COPY's data behind it (CopyAndCommit). Undefined, having
   * written nothing, when a key is unknown or has changed (forgotten then); a row conflict rejects
   * as the COPY of writeTx does.
   */
  private async writeKnown(group: Pending[]): Promise<({ pk: number; tier: number } | undefined)[] | undefined> {
    const found: { pk: number; tier: number }[] = new Array(group.length);
    for (let i = 0; i < group.length; i++) {
      const k = this.keys.get(group[i]!.deviceId);
      if (!k) return undefined;
      found[i] = k;
    }
    const opened = this.pipelined();
    try {
      const c = await opened;
      const args = headArgs(
        c,
        group,
        found.map((k) => k.pk),
        found.map((k) => k.tier),
      );
      const batches = group.map((p, i) => copyRowsOf(p, found[i]!));
      // No BEGIN and COMMIT: the statements of one simple query are one transaction, committed
      // when the last succeeds and rolled back whole when one fails, after which the connection
      // is idle again for the group written behind it (PostgreSQL protocol, "Multiple Statements
      // in a Simple Query"). An explicit transaction would stay open, failed, under the next group.
      await sendCopy(c, copyAndCommitMessage(`${WRITE_SETTINGS}; EXECUTE reef_group_head_known(${args}); ${COPY_BATCH}`, batches));
    } catch (e) {
      if (isUnavailable(e)) {
        // The pipelined connection broke or could not be opened (PostgreSQL restarting, or it
        // ended the connection): the group is written again the two-round-trip way, through the
        // pool, whose head finds the spans taken by a commit that made it before the break, and
        // merges the batch over its own rows.
        if (this.writer === opened) this.writer = null;
        opened.then((c) => c.end()).catch(() => {});
        return undefined;
      }
      if (!isKeyChanged(e)) translate(e);
      for (const p of group) this.keys.delete(p.deviceId);
      return undefined;
    }
    return found;
  }

  /**
   * The connection groups of known devices are written on, in pipeline mode: a group's round trip
   * is written as soon as the group forms, behind those still in flight, and PostgreSQL starts it
   * the moment the one before commits. One backend, never waiting on this process between groups:
   * with a pooled connection per group, three backends inserting into the same partitions at once
   * spent a quarter more CPU per row (WAL insertion and buffer locks, and the sleeps and wake-ups
   * around them) and one such connection sat idle for each round trip (docs/performance.md,
   * "PostgreSQL: groups, binary COPY, one pipelined connection"). Opened on first use; a connection that fails fails the groups in
   * flight on it (each is then written again through the pool) and is replaced.
   */
  private pipelined(): Promise<pg.Client> {
    if (this.writer) return this.writer;
    const client = new pg.Client({ ...this.clientConfig(), pipeline: true });
    // Rejects with pg's own error: writeKnown tells a connection that cannot be had from others.
    const opened = (async () => {
      try {
        await client.connect();
        await client.query(PREPARE_HEADS);
        return client;
      } catch (e) {
        client.end().catch(() => {});
        throw e;
      }
    })();
    const forget = () => {
      if (this.writer === opened) this.writer = null;
    };
    // The groups in flight get the error themselves (pg fails every query sent on the connection).
    client.on('error', forget);
    client.on('end', forget);
    opened.catch(forget);
    this.writer = opened;
    return opened;
  }
  private writer: Promise<pg.Client> | null = null;

  /**
   * One transaction: the head, one COPY of the batches whose span is free, a merge for each other
   * one. Two round trips when no batch is merged (the driver alone would need five): the
   * transaction's start and the head go as one simple query (the head prepared once per connection,
   * its arrays sent as literals), and the COPY's data and the COMMIT go with the COPY
   * (CopyAndCommit). With four uploads in
   * flight the groups wait on round trips more than on PostgreSQL's CPU.
   */
  private writeTx(group: Pending[], merge: boolean): Promise<({ pk: number; tier: number } | undefined)[]> {
    return this.tx(
      async (c) => {
        await this.prepareHeads(c);
        const args = headArgs(
          c,
          group,
          group.map((p) => p.from),
          group.map((p) => p.to),
          true,
        );
        // A simple query of several statements answers one result per statement: the head's is the last.
        const results = (await c.query(`${BEGIN_WRITE}; EXECUTE reef_group_head(${args})`)) as unknown as pg.QueryResult[];
        const head = results[results.length - 1]!;
        const found: ({ pk: number; tier: number } | undefined)[] = new Array(group.length);
        const batches: CopyRows[] = [];
        for (const d of head.rows as { i: number; pk: number; tier: number; taken: boolean }[]) {
          const p = group[d.i - 1]!;
          found[d.i - 1] = d;
          this.knowKey(p.deviceId, d.pk, d.tier);
          if (merge || d.taken) await c.query({ name: 'insert-merge', text: MERGE_BATCH, values: [d.pk, d.tier, numArray(p.ts), numArray(p.temps), p.extras] });
          else batches.push(copyRowsOf(p, d));
        }
        if (batches.length) await copyInAndCommit(c, batches);
        else await c.query('COMMIT');
        return found;
      },
      null,
      true,
    );
  }

  /** A retention tier made by another node: learn it, and make the batches' partitions there (which moves their rows out of its default partition). */
  private async learnTiers(group: Pending[], found: ({ pk: number; tier: number } | undefined)[]): Promise<void> {
    for (let i = 0; i < group.length; i++) {
      const d = found[i];
      if (!d || this.parts.hasTier(d.tier)) continue;
      try {
        await this.loadPartitions();
        await this.ensureRanges(this.parts.missing(group[i]!.ts, Date.now()).filter((m) => m.tier === d.tier));
      } catch {
        // The rows are stored (in the tier's default partition); upkeep makes the partitions.
      }
    }
  }

  async insertObservationsMany(items: { deviceId: string; batch: ObservationRecord[] }[]): Promise<ManyInsertResult> {
    // Queued together, so they share groups (and commits) as far as one batch per device allows.
    const results = await Promise.allSettled(items.map((it) => this.insertObservations(it.deviceId, it.batch)));
    const missing: string[] = [];
    let written = 0;
    for (let i = 0; i < items.length; i++) {
      const r = results[i]!;
      if (r.status === 'fulfilled') written += r.value.written;
      else if (r.reason instanceof ReefError && r.reason.code === 'DEVICE_NOT_FOUND') missing.push(items[i]!.deviceId);
      else throw r.reason;
    }
    return { written, missing };
  }

  async latestObservations(groupId: string, solution: string) {
    const r = await this.q(LATEST_OF_SOLUTION, [groupId, solution], 'latest-of-solution');
    return r.rows.map((x) => ({ deviceId: x.id as string, observation: obsFromRow(x) }));
  }

  /**
   * Store.latestObservationsJson: the rows as arrays (no keyed object per device), written straight
   * into UTF-8 bytes. For 10,000 devices the records and their rendering as a string took about as
   * long as the query, and the string about as long again to send (docs/performance.md,
   * "Latest of all as bytes"). Free fields arrive parsed (jsonb) and are written as JSON.stringify
   * gives them, as latestJson does.
   */
  async latestObservationsJson(groupId: string, solution: string): Promise<Buffer> {
    const r = await this.q(LATEST_OF_SOLUTION, [groupId, solution], 'latest-of-solution-rows', true);
    const n = r.rows.length;
    const ids = new Array<string>(n);
    const ts = new Float64Array(n);
    const temps = new Float64Array(n);
    let extras: (string | null)[] | null = null;
    for (let i = 0; i < n; i++) {
      const row = r.rows[i]!;
      ids[i] = row[0] as string;
      ts[i] = row[1] as number;
      temps[i] = (row[2] as number | null) ?? Number.NaN;
      if (row[3]) (extras ??= new Array<string | null>(n).fill(null))[i] = JSON.stringify(row[3]);
    }
    return latestJsonOfColumns(ids, ts, temps, extras, n);
  }

  private async devicePk(deviceId: string): Promise<{ pk: number; tier: number }> {
    const r = await this.q('SELECT pk, tier FROM devices WHERE id = $1', [deviceId], 'device-pk');
    if (!r.rows[0]) throw new ReefError('DEVICE_NOT_FOUND');
    return r.rows[0] as { pk: number; tier: number };
  }

  async queryObservations(deviceId: string, q: ObservationQuery): Promise<ObservationPage> {
    const { pk, tier } = await this.devicePk(deviceId);
    const from = q.from ?? 0;
    const to = Math.min(q.to ?? Number.MAX_SAFE_INTEGER, q.before ?? Number.MAX_SAFE_INTEGER);
    // One more than asked tells whether another page exists without a second query.
    const r =
      q.tag === undefined
        ? await this.q(
            `SELECT ts, temperature, extra FROM observations WHERE tier = $1 AND device_pk = $2 AND ts >= $3 AND ts < $4 ORDER BY ts DESC LIMIT $5`,
            [tier, pk, from, to, q.limit + 1],
            'page',
          )
        : await this.q(
            `SELECT ts, temperature, extra FROM (SELECT ts, temperature, extra FROM observations WHERE tier = $1 AND device_pk = $2 AND ts >= $3 AND ts < $4
         ORDER BY ts DESC LIMIT $7) s WHERE extra -> 'tags' ? $6 ORDER BY ts DESC LIMIT $5`,
            [tier, pk, from, to, q.limit + 1, q.tag, q.maxScan ?? null],
            'page-tagged',
          );
    const rows = r.rows;
    const more = rows.length > q.limit;
    if (more) rows.pop();
    let nextBefore = more ? (rows[rows.length - 1]!.ts as number) : null;
    if (!more && q.tag !== undefined && q.maxScan !== undefined) {
      // A short page: did the examined readings run out (ObservationQuery.maxScan) before the range did?
      const w = await this.q(
        `SELECT ts FROM observations WHERE tier = $1 AND device_pk = $2 AND ts >= $3 AND ts < $4 ORDER BY ts DESC OFFSET $5 LIMIT 2`,
        [tier, pk, from, to, q.maxScan - 1],
        'page-tagged-window',
      );
      if (w.rows.length === 2) nextBefore = w.rows[0]!.ts as number;
    }
    return { observations: rows.map(obsFromRow), nextBefore };
  }

  async querySolutionObservations(groupId: string, solution: string, q: SolutionObservationQuery): Promise<SolutionObservationPage> {
    const from = q.from ?? 0;
    const to = q.to ?? Number.MAX_SAFE_INTEGER;
    const tag = q.tag ?? null;
    // One more than asked tells whether another page exists.
    const want = q.limit + 1;
    const rows: Row[] = [];
    if (q.after) {
      // The cursor's own device: the rest of it below the cursor, one index range scan.
      const r = await this.q(
        `SELECT d.pk, d.id, o.ts, o.temperature, o.extra FROM devices d JOIN observations o ON o.tier = d.tier AND o.device_pk = d.pk
         WHERE d.group_id = $1 AND d.solution = $2 AND d.pk = $3 AND o.ts >= $4 AND o.ts < $5
         AND ($7::text IS NULL OR o.extra -> 'tags' ? $7) ORDER BY o.ts DESC LIMIT $6`,
        [groupId, solution, q.after.device, from, Math.min(to, q.after.ts), want, tag],
        'solution-page-device',
      );
      rows.push(...r.rows);
    }
    // The rest, device by device in pk order, in chunks of devices that grow fourfold while pages
    // stay unfilled (empty ranges walk 10,000 devices in seven round trips). A single statement
    // over every device of the solution depended on the planner seeing that the devices come out in
    // pk order: on a table not yet analyzed it sorted every device's rows (10,000,000 at 10,000 ×
    // 1,000) to answer one page of 1,000 in ~1.4 s. A chunk bounds the work whatever the plan: at
    // most (devices in the chunk) × (rows still wanted) rows, each device read through its own
    // (device_pk, ts DESC) index range.
    let afterPk = q.after?.device ?? -1;
    let chunk = 2;
    while (rows.length < want) {
      const devs = await this.q('SELECT pk FROM devices WHERE group_id = $1 AND solution = $2 AND pk > $3 ORDER BY pk LIMIT $4', [groupId, solution, afterPk, chunk], 'solution-page-devices');
      if (devs.rows.length === 0) break;
      const pks = devs.rows.map((x) => Number(x.pk));
      const r = await this.q(
        `SELECT d.pk, d.id, o.ts, o.temperature, o.extra FROM unnest($1::bigint[]) WITH ORDINALITY AS k(pk, n)
         JOIN devices d ON d.pk = k.pk
         CROSS JOIN LATERAL (
           SELECT ts, temperature, extra FROM observations o
           WHERE o.tier = d.tier AND o.device_pk = d.pk AND o.ts >= $2 AND o.ts < $3 AND ($5::text IS NULL OR o.extra -> 'tags' ? $5)
           ORDER BY o.ts DESC LIMIT $4) o
         ORDER BY k.n, o.ts DESC LIMIT $4`,
        [numArray(pks), from, to, want - rows.length, tag],
        'solution-page-chunk',
      );
      rows.push(...r.rows);
      if (pks.length < chunk) break;
      afterPk = pks[pks.length - 1]!;
      chunk = Math.min(chunk * 4, 8192);
    }
    return solutionPage(rows as { pk: number; id: string; ts: number }[], q.limit, obsFromRow);
  }

  async bucketObservations(deviceId: string, q: BucketQuery): Promise<Bucket[]> {
    const { pk, tier } = await this.devicePk(deviceId);
    const r = await this.q(
      `SELECT (ts - $3) / $5 * $5 + $3 AS b, count(*) AS n, min(temperature) AS lo, avg(temperature) AS mean, max(temperature) AS hi
       FROM observations WHERE tier = $1 AND device_pk = $2 AND ts >= $3 AND ts < $4 GROUP BY b ORDER BY b`,
      [tier, pk, q.from, q.to, q.bucketMs],
      'buckets',
    );
    return r.rows.map((x) => ({ ts: x.b, count: x.n, min: x.lo, avg: x.mean, max: x.hi }));
  }

  // ---- retention and upkeep -----------------------------------------------------------------

  async setRetention(groupId: string, solution: string, days: number | null): Promise<void> {
    if (days !== null && (!Number.isInteger(days) || days < 1 || days > 36500)) {
      throw new ReefError('VALIDATION_FAILED', 'retention must be a whole number of days from 1 to 36500, or null', { field: 'retention' });
    }
    const tier = days ?? 0;
    try {
      await this.tx(async (c) => {
        await c.query('SELECT reef_ensure_tier($1)', [tier]);
        const s = await c.query('UPDATE solutions SET retention_days = $1 WHERE group_id = $2 AND name = $3', [days, groupId, solution]);
        if (s.rowCount === 0) throw new ReefError('SOLUTION_NOT_FOUND');
        // RETURNING sees the new row: the old tier comes from the locked pre-image.
        const moved = await c.query(
          `UPDATE devices d SET tier = $1
           FROM (SELECT pk, tier FROM devices WHERE group_id = $2 AND solution = $3 AND tier <> $1 FOR UPDATE) o
           WHERE d.pk = o.pk RETURNING d.pk, o.tier AS old`,
          [tier, groupId, solution],
        );
        if (moved.rowCount === 0) return;
        this.keys.clear();
        // The devices' rows change tier: make the new tier's partitions for their times, then let
        // PostgreSQL move the rows (an UPDATE of the partition key moves them between partitions).
        const pks = moved.rows.map((x) => x.pk as number);
        const olds = [...new Set(moved.rows.map((x) => x.old as number))];
        const dayRows = await c.query('SELECT DISTINCT ts / 86400000 AS day FROM observations WHERE tier = ANY($1::int[]) AND device_pk = ANY($2::bigint[])', [numArray(olds), numArray(pks)]);
        this.parts.addTier(tier);
        const need = new Map<number, { tier: number; start: number; end: number }>();
        const now = Date.now();
        for (const x of dayRows.rows) {
          const ts = (x.day as number) * DAY;
          for (const m of this.parts.missing([ts], now)) if (m.tier === tier) need.set(m.start, m);
        }
        for (const m of this.parts.ahead(now)) if (m.tier === tier) need.set(m.start, m);
        await this.ensureRanges([...need.values()], c);
        await c.query('UPDATE observations SET tier = $1 WHERE tier = ANY($2::int[]) AND device_pk = ANY($3::bigint[])', [tier, numArray(olds), numArray(pks)]);
      });
    } finally {
      // The cache may have noted partitions of a transaction that rolled back: read it afresh.
      await this.loadPartitions().catch(() => undefined);
    }
  }

  async getRetention(groupId: string, solution: string): Promise<number | null> {
    const r = await this.q('SELECT retention_days FROM solutions WHERE group_id = $1 AND name = $2', [groupId, solution]);
    if (!r.rows[0]) throw new ReefError('SOLUTION_NOT_FOUND');
    return r.rows[0].retention_days ?? null;
  }

  async maintain(now = Date.now()): Promise<MaintenanceReport> {
    await this.loadPartitions();
    const report: MaintenanceReport = { partitionsCreated: 0, partitionsDropped: 0, rowsDeleted: 0 };
    report.partitionsCreated = await this.ensureRanges(this.parts.ahead(now));
    for (const tier of this.parts.tierList()) {
      if (tier === 0) continue;
      const cutoff = now - tier * DAY;
      let boundary = cutoff;
      for (const r of this.parts.ranges(tier)) {
        if (r.end <= cutoff) {
          const name = `obs_t${tier}_${new Date(r.start).toISOString().slice(0, 10).replace(/-/g, '')}`;
          // DROP takes a brief ACCESS EXCLUSIVE lock on the tier; never queue behind a long
          // reader (which would stall every insert queued behind us): give up, retry next run.
          await this.tx(async (c) => {
            await c.query(`SET LOCAL lock_timeout = '2s'`);
            await c.query('SELECT pg_advisory_xact_lock($1)', [LOCK_PARTITIONS.toString()]);
            await c.query(`DROP TABLE IF EXISTS ${pg.escapeIdentifier(name)}`);
          });
          report.partitionsDropped++;
        } else if (r.start < boundary) boundary = r.start;
      }
      // Out-of-window timestamps live in the default partition: expire those row by row.
      const d = await this.q(`DELETE FROM ${pg.escapeIdentifier(`obs_t${tier}_default`)} WHERE ts < $1`, [cutoff]);
      report.rowsDeleted += d.rowCount ?? 0;
      // Every observation of the tier older than `boundary` is gone, so is a latest that old.
      await this.q('DELETE FROM latest l USING devices d WHERE d.pk = l.device_pk AND d.tier = $1 AND l.ts < $2', [tier, boundary]);
    }
    await this.loadPartitions();
    return report;
  }

  // ---- job state ----------------------------------------------------------------------------

  async getState(key: string): Promise<string | null> {
    const r = await this.q('SELECT value FROM state WHERE key = $1', [key], 'get-state');
    return r.rows[0] ? (r.rows[0].value as string) : null;
  }
  async setState(key: string, value: string): Promise<void> {
    await this.q('INSERT INTO state (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value', [key, value], 'set-state');
  }
  async deleteState(key: string): Promise<void> {
    await this.q('DELETE FROM state WHERE key = $1', [key]);
  }
  async listState(prefix: string): Promise<{ key: string; value: string }[]> {
    const r = await this.q('SELECT key, value FROM state WHERE starts_with(key, $1) ORDER BY key', [prefix]);
    return r.rows as { key: string; value: string }[];
  }

  // ---- alarms (docs/alarms.md) ----------------------------------------------------------------

  async createAlarmRule(r: AlarmRuleRecord): Promise<void> {
    await this.q('INSERT INTO alarm_rules (id, group_id, tenant_id, solution, device_id, spec, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)', [
      r.id,
      r.groupId,
      r.tenantId,
      r.solution,
      r.deviceId,
      JSON.stringify(r.spec),
      r.createdAt,
      r.updatedAt,
    ]);
  }
  async updateAlarmRule(r: AlarmRuleRecord): Promise<boolean> {
    const res = await this.q('UPDATE alarm_rules SET device_id = $1, spec = $2, updated_at = $3 WHERE id = $4 AND group_id = $5 AND solution = $6', [
      r.deviceId,
      JSON.stringify(r.spec),
      r.updatedAt,
      r.id,
      r.groupId,
      r.solution,
    ]);
    return (res.rowCount ?? 0) > 0;
  }
  async deleteAlarmRule(groupId: string, solution: string, id: string): Promise<boolean> {
    return this.tx(async (c) => {
      const res = await c.query('DELETE FROM alarm_rules WHERE id = $1 AND group_id = $2 AND solution = $3', [id, groupId, solution]);
      if (!res.rowCount) return false;
      await c.query('DELETE FROM alarm_states WHERE rule_id = $1', [id]);
      return true;
    });
  }
  async getAlarmRule(groupId: string, solution: string, id: string): Promise<AlarmRuleRecord | null> {
    const r = await this.q('SELECT * FROM alarm_rules WHERE id = $1 AND group_id = $2 AND solution = $3', [id, groupId, solution]);
    return r.rows[0] ? pgRuleFromRow(r.rows[0]) : null;
  }
  async listAlarmRules(groupId: string, solution: string): Promise<AlarmRuleRecord[]> {
    const r = await this.q('SELECT * FROM alarm_rules WHERE group_id = $1 AND solution = $2 ORDER BY created_at, id', [groupId, solution]);
    return r.rows.map(pgRuleFromRow);
  }
  async countGroupObjects(groupId: string): Promise<{ solutions: number; templates: number; alarmRules: number }> {
    const r = await this.q(
      `SELECT (SELECT count(*) FROM solutions WHERE group_id = $1)::int AS solutions, (SELECT count(*) FROM device_templates WHERE group_id = $1)::int AS templates,
              (SELECT count(*) FROM alarm_rules WHERE group_id = $1)::int AS "alarmRules"`,
      [groupId],
    );
    return r.rows[0] as { solutions: number; templates: number; alarmRules: number };
  }
  async countAlarmRules(groupId: string, solution: string): Promise<number> {
    return (await this.q('SELECT count(*)::int AS n FROM alarm_rules WHERE group_id = $1 AND solution = $2', [groupId, solution])).rows[0]!.n as number;
  }
  async allAlarmRules(): Promise<AlarmRuleRecord[]> {
    return (await this.q('SELECT * FROM alarm_rules ORDER BY created_at, id')).rows.map(pgRuleFromRow);
  }
  async insertAlarm(a: AlarmRecord): Promise<boolean> {
    const r = await this.q(
      `INSERT INTO alarms (id, group_id, solution, device_id, rule_id, status, raised_at, doc) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                            ON CONFLICT (rule_id, device_id) WHERE status IN ('raised', 'acknowledged') DO NOTHING`,
      [a.id, a.groupId, a.solution, a.deviceId, a.ruleId, a.status, a.raisedAt, JSON.stringify(a)],
    );
    return (r.rowCount ?? 0) > 0;
  }
  async raiseAlarms(items: readonly RaiseItem[]): Promise<boolean[]> {
    if (!items.length) return [];
    return this.tx(async (c) => {
      const out: boolean[] = [];
      for (const { alarm: a, state, delivery: d } of items) {
        const r = await c.query(
          `INSERT INTO alarms (id, group_id, solution, device_id, rule_id, status, raised_at, doc) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                            ON CONFLICT (rule_id, device_id) WHERE status IN ('raised', 'acknowledged') DO NOTHING`,
          [a.id, a.groupId, a.solution, a.deviceId, a.ruleId, a.status, a.raisedAt, JSON.stringify(a)],
        );
        const inserted = (r.rowCount ?? 0) > 0;
        out.push(inserted);
        if (!inserted) continue;
        await c.query('INSERT INTO alarm_states (rule_id, device_id, state) VALUES ($1, $2, $3) ON CONFLICT (rule_id, device_id) DO UPDATE SET state = excluded.state', [
          a.ruleId,
          a.deviceId,
          JSON.stringify(state),
        ]);
        if (d) {
          await c.query('INSERT INTO alarm_deliveries (id, group_id, solution, status, next_at, created_at, doc) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
            d.id,
            d.groupId,
            d.solution,
            d.status,
            d.nextAt,
            d.createdAt,
            JSON.stringify(d),
          ]);
        }
      }
      return out;
    });
  }
  async updateAlarm(a: AlarmRecord, expect: AlarmStatus): Promise<boolean> {
    const r = await this.q('UPDATE alarms SET status = $1, doc = $2 WHERE id = $3 AND status = $4', [a.status, JSON.stringify(a), a.id, expect]);
    return (r.rowCount ?? 0) > 0;
  }
  async updateAlarms(items: readonly { alarm: AlarmRecord; expect: AlarmStatus }[]): Promise<boolean[]> {
    if (!items.length) return [];
    return this.tx(async (c) => {
      const out: boolean[] = [];
      for (const { alarm: a, expect } of items) {
        const r = await c.query('UPDATE alarms SET status = $1, doc = $2 WHERE id = $3 AND status = $4', [a.status, JSON.stringify(a), a.id, expect]);
        out.push((r.rowCount ?? 0) > 0);
      }
      return out;
    });
  }
  async getAlarm(groupId: string, solution: string, id: string): Promise<AlarmRecord | null> {
    const r = await this.q('SELECT doc FROM alarms WHERE id = $1 AND group_id = $2 AND solution = $3', [id, groupId, solution]);
    return r.rows[0] ? (r.rows[0].doc as AlarmRecord) : null;
  }
  async listAlarms(groupId: string, solution: string, q: AlarmQuery): Promise<AlarmRecord[]> {
    const args: unknown[] = [groupId, solution];
    const where = ['group_id = $1', 'solution = $2'];
    if (q.deviceId !== undefined) where.push(`device_id = $${args.push(q.deviceId)}`);
    if (q.ruleId !== undefined) where.push(`rule_id = $${args.push(q.ruleId)}`);
    if (q.statuses?.length) where.push(`status = ANY($${args.push(q.statuses)}::text[])`);
    if (q.after) where.push(`(raised_at, id) < ($${args.push(q.after.raisedAt)}::bigint, $${args.push(q.after.id)}::text COLLATE "C")`);
    const r = await this.q(`SELECT doc FROM alarms WHERE ${where.join(' AND ')} ORDER BY raised_at DESC, id DESC LIMIT $${args.push(q.limit)}`, args);
    return r.rows.map((x) => x.doc as AlarmRecord);
  }
  async activeAlarms(): Promise<AlarmRecord[]> {
    return (await this.q("SELECT doc FROM alarms WHERE status IN ('raised', 'acknowledged')")).rows.map((x) => x.doc as AlarmRecord);
  }
  async activeAlarmCounts(groupId: string, solution: string): Promise<{ deviceId: string; count: number }[]> {
    const r = await this.q(
      `SELECT device_id AS d, count(*)::int AS n FROM alarms WHERE group_id = $1 AND solution = $2 AND status IN ('raised', 'acknowledged')
                            GROUP BY device_id ORDER BY device_id`,
      [groupId, solution],
    );
    return r.rows.map((x) => ({ deviceId: x.d as string, count: x.n as number }));
  }
  async listAlarmStates(): Promise<{ ruleId: string; deviceId: string; state: AlarmEvalState }[]> {
    return (await this.q('SELECT rule_id, device_id, state FROM alarm_states')).rows.map((x) => ({ ruleId: x.rule_id, deviceId: x.device_id, state: x.state as AlarmEvalState }));
  }
  async setAlarmState(ruleId: string, deviceId: string, state: AlarmEvalState | null): Promise<void> {
    if (state === null) await this.q('DELETE FROM alarm_states WHERE rule_id = $1 AND device_id = $2', [ruleId, deviceId]);
    else {
      await this.q('INSERT INTO alarm_states (rule_id, device_id, state) VALUES ($1, $2, $3) ON CONFLICT (rule_id, device_id) DO UPDATE SET state = excluded.state', [
        ruleId,
        deviceId,
        JSON.stringify(state),
      ]);
    }
  }
  async insertDelivery(d: WebhookDeliveryRecord): Promise<void> {
    await this.q('INSERT INTO alarm_deliveries (id, group_id, solution, status, next_at, created_at, doc) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
      d.id,
      d.groupId,
      d.solution,
      d.status,
      d.nextAt,
      d.createdAt,
      JSON.stringify(d),
    ]);
  }
  async updateDelivery(d: WebhookDeliveryRecord): Promise<void> {
    await this.q('UPDATE alarm_deliveries SET status = $1, next_at = $2, doc = $3 WHERE id = $4', [d.status, d.nextAt, JSON.stringify(d), d.id]);
  }
  async getDelivery(groupId: string, solution: string, id: string): Promise<WebhookDeliveryRecord | null> {
    const r = await this.q('SELECT doc FROM alarm_deliveries WHERE id = $1 AND group_id = $2 AND solution = $3', [id, groupId, solution]);
    return r.rows[0] ? (r.rows[0].doc as WebhookDeliveryRecord) : null;
  }
  async dueDeliveries(now: number, limit: number): Promise<WebhookDeliveryRecord[]> {
    const r = await this.q("SELECT doc FROM alarm_deliveries WHERE status = 'pending' AND next_at <= $1 ORDER BY next_at, id LIMIT $2", [now, limit]);
    return r.rows.map((x) => x.doc as WebhookDeliveryRecord);
  }
  async listDeliveries(groupId: string, solution: string, status: DeliveryStatus, limit: number, before?: { createdAt: number; id: string }): Promise<WebhookDeliveryRecord[]> {
    const r = before
      ? await this.q(
          `SELECT doc FROM alarm_deliveries WHERE group_id = $1 AND solution = $2 AND status = $3 AND (created_at, id) < ($4::bigint, $5::text COLLATE "C")
                      ORDER BY created_at DESC, id DESC LIMIT $6`,
          [groupId, solution, status, before.createdAt, before.id, limit],
        )
      : await this.q('SELECT doc FROM alarm_deliveries WHERE group_id = $1 AND solution = $2 AND status = $3 ORDER BY created_at DESC, id DESC LIMIT $4', [groupId, solution, status, limit]);
    return r.rows.map((x) => x.doc as WebhookDeliveryRecord);
  }
}

/**
 * COPY ... FROM STDIN and the transaction's end in one round trip: one simple query holding the
 * COPY (and a COMMIT, or no transaction block at all, which commits when the query ends), its
 * CopyData and CopyDone written right behind it. PostgreSQL reads them once the COPY is under way;
 * if the COPY fails first, it drops copy messages that arrive outside a COPY and skips the rest of
 * the query, COMMIT included (PostgreSQL protocol, "COPY Operations"); the caller then rolls back
 * an explicit transaction.
 * pg-copy-streams waits for CopyInResponse before sending data and needs a round trip of its own
 * for COMMIT: two round trips more per group. Settles once, on the first error or on ReadyForQuery.
 */
class CopyAndCommit extends pg.Query {
  private settled = false;
  constructor(
    /** The query, the COPY's data and its end (copyAndCommitMessage). */
    private readonly message: Buffer,
    private readonly done: (e: unknown) => void,
  ) {
    // A pg.Query, not a bare Submittable: a client in pipeline mode refuses other query classes
    // (they may hold a portal open across round trips; this one does not).
    super({ text: '' });
    this.submit = (connection: pg.Connection) => {
      // Written to the connection's socket as pg-copy-streams writes its COPY data; pg's types do not list `stream`.
      (connection as unknown as { stream: { write(b: Buffer): boolean } }).stream.write(this.message);
    };
  }
  private settle(e: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.done(e);
  }
  handleError(e: unknown): void {
    this.settle(e);
  }
  handleReadyForQuery(): void {
    this.settle(null);
  }
  // The COPY's CopyInResponse and the statements' CommandCompletes carry nothing this needs.
  handleCopyInResponse(): void {}
  handleCommandComplete(): void {}
  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyData(): void {}
}

/** Writes a group's batches by binary COPY and commits the transaction begun on `c` (CopyAndCommit). */
function copyInAndCommit(c: pg.ClientBase, batches: readonly CopyRows[]): Promise<void> {
  return sendCopy(c, copyAndCommitMessage(`${COPY_BATCH}; COMMIT`, batches));
}

/** Sends a round trip built by copyAndCommitMessage; settles on its ReadyForQuery or first error. */
function sendCopy(c: pg.ClientBase, message: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    c.query(new CopyAndCommit(message, (e) => (e ? reject(e) : resolve())));
  });
}

function pgRuleFromRow(r: Row): AlarmRuleRecord {
  return { id: r.id, groupId: r.group_id, tenantId: r.tenant_id, solution: r.solution, deviceId: r.device_id ?? null, spec: r.spec, createdAt: r.created_at, updatedAt: r.updated_at };
}
