// The SQLite store's observations, kept in per-device blocks: one row of
// `obs_blocks` holds up to BLOCK_MAX consecutive readings of one device — their timestamps and
// temperatures in the compact forms below, their free fields (if any) as a JSON list of the stored
// texts. A batch of 1,000 readings is then one B-tree insert instead of 1,000 inserts into the
// middle of a (device, time) key, which was most of the writer thread's time (docs/performance.md,
// "SQLite: per-device blocks"). The rules the rows kept still hold:
//   - one observation per device per millisecond: a reading at a stored timestamp replaces it;
//   - within a batch the last reading of a timestamp wins;
//   - a device's blocks never overlap in time, and each block's timestamps strictly ascend.
// The writer thread (writer-thread.ts) and this thread (writer.ts, retention.ts, migration 10) write
// through the same functions, so both write alike (docs/storage.md "SQLite: blocks").
import type Database from 'better-sqlite3';

/** One device's readings as columns: ascending unique timestamps, temperatures (NaN: none), free-field texts. */
export interface Columns {
  n: number;
  ts: Float64Array;
  t: Float64Array;
  extra: (string | null)[] | null;
}
/** A block row as the statements return it (raw): first_ts, last_ts, n, ts, t, extra. */
export type BlockRow = [first: number, last: number, n: number, ts: Buffer, t: Buffer, extra: string | null];
export type BlockStatements = ReturnType<typeof blockStatements>;
/**
 * One device's batch as the store hands it to the writer (writer.ts packBatch): timestamps,
 * temperatures (NaN: none), free-field texts or null, the index of its newest reading and that
 * reading's JSON (for `latest`). The arrays are moved to the writer thread, not copied.
 */
export interface HandedBatch {
  ts: Float64Array;
  temperature: Float64Array;
  extra: (string | null)[] | null;
  newest: number;
  wire: string;
}

/** Most readings in one block: a batch of 1,000 is one block, a newest-1,000 page reads one or two. */
export const BLOCK_MAX = 1024;
/**
 * A device's last block smaller than this takes the readings that follow it (it is rewritten with
 * them), so a device reporting one reading at a time fills blocks instead of making one per reading.
 * Rewriting stops at this size, which bounds the bytes rewritten per reading.
 */
const APPEND_BELOW = 256;
/**
 * The same bound in bytes: a last block whose free fields take this much text (as stored) is not
 * rewritten either. Readings carry up to REEF_MAX_OBSERVATION_EXTRA of fields each, so 256 of them
 * could be megabytes, rewritten whole for every reading that follows (docs/performance.md,
 * "SQLite: per-device blocks").
 */
const APPEND_EXTRA_BELOW = 64 * 1024;

/** The statements the writer needs on a connection. */
export function blockStatements(db: Database.Database) {
  const cols = 'first_ts, last_ts, n, ts, t, extra';
  return {
    // A device's latest reading, also as its whole element of latest of all (migration 9, its
    // device id read here); it only moves forward in time.
    latest: db.prepare(`INSERT INTO latest (device_pk, ts, temperature, extra, wire, item)
      VALUES (@pk, @ts, @t, @extra, @wire, '{"deviceId":"' || (SELECT id FROM devices WHERE pk = @pk) || '","observations":[' || @wire || ']}')
      ON CONFLICT (device_pk) DO UPDATE SET ts = excluded.ts, temperature = excluded.temperature, extra = excluded.extra, wire = excluded.wire, item = excluded.item
      WHERE excluded.ts >= latest.ts`),
    // The block that starts at or before `ts`, latest first: with `before`, a walk backwards
    // through a device's blocks, one index probe per step.
    atOrBefore: db.prepare(`SELECT ${cols} FROM obs_blocks WHERE device_pk = ? AND first_ts <= ? ORDER BY first_ts DESC LIMIT 1`).raw(true),
    before: db.prepare(`SELECT ${cols} FROM obs_blocks WHERE device_pk = ? AND first_ts < ? ORDER BY first_ts DESC LIMIT 1`).raw(true),
    remove: db.prepare('DELETE FROM obs_blocks WHERE device_pk = ? AND first_ts = ?'),
    insert: db.prepare('INSERT INTO obs_blocks (device_pk, first_ts, last_ts, n, ts, t, extra) VALUES (?, ?, ?, ?, ?, ?, ?)'),
  };
}

/** A block row's columns as returned by the statements above (raw). */
const FIRST = 0;
const LAST = 1;
const N = 2;
const EXTRA = 5;

// How a block's numbers are written. Every exact: what is read back is the same double, bit for bit.
// Each BLOB starts with its form's byte; numbers start at an offset their width divides.
//   timestamps  STEP:   every reading `step` ms after the one before (periodic sensors: 16 bytes);
//               DELTA:  each the one before plus a 32-bit whole number of ms (4 bytes each);
//               RAW:    doubles (8 bytes each).
//   temperature SCALED: each a 32-bit whole number m read as m / 10^k, k in 0..6, when that gives
//                       back every temperature exactly (sensors report a few decimals: 4 bytes
//                       each; none is NONE); RAW: doubles, NaN for none.
// Half the bytes or less per reading than doubles: less for SQLite to write to its WAL and copy at
// each checkpoint, which was most of the writer's time left after blocks (a million observations: 36 → 9 MiB).
const STEP = 1;
const DELTA = 2;
const RAW = 3;
const SCALED = 4;
const NONE = -2147483648;
const POW10 = [1, 10, 100, 1000, 10000, 100000, 1000000];

/**
 * Where a block's two BLOBs are written: one scratch buffer each, reused, as better-sqlite3 binds a
 * BLOB as a copy (SQLITE_TRANSIENT) and both are bound in the one insert that follows. New buffers
 * per block were fresh memory for the kernel to zero (seen in a profile of the writer thread).
 */
function scratch(size: number) {
  const buf = new ArrayBuffer(size);
  // A DataView writes little-endian whatever the machine (the decoders read little-endian).
  return { buf, bytes: new Uint8Array(buf), dv: new DataView(buf) };
}
const timesOut = scratch(8 + BLOCK_MAX * 8);
const tempsOut = scratch(8 + BLOCK_MAX * 8);
type Scratch = ReturnType<typeof scratch>;
const view = (out: Scratch, length: number) => Buffer.from(out.buf, 0, length);

/** Timestamps `ts[i..j)` (ascending, at most BLOCK_MAX) as a BLOB (a view of timesOut). */
function encodeTimes(ts: Float64Array, i: number, j: number): Buffer {
  const n = j - i;
  const out = timesOut;
  if (n >= 2) {
    const step = ts[i + 1]! - ts[i]!;
    let uniform = true;
    let small = true;
    for (let k = i + 1; k < j; k++) {
      const d = ts[k]! - ts[k - 1]!;
      if (d !== step) uniform = false;
      if (d > 2147483647 || !Number.isInteger(d)) small = false;
    }
    if (uniform && Number.isInteger(step)) {
      out.bytes.fill(0, 0, 8);
      out.bytes[0] = STEP;
      out.dv.setFloat64(8, step, true);
      return view(out, 16);
    }
    if (small && Number.isInteger(ts[i])) {
      out.bytes.fill(0, 0, 8);
      out.bytes[0] = DELTA;
      for (let k = i + 1; k < j; k++) out.dv.setInt32(4 + (k - i) * 4, ts[k]! - ts[k - 1]!, true);
      return view(out, 4 + n * 4);
    }
  }
  out.bytes.fill(0, 0, 8);
  out.bytes[0] = RAW;
  for (let k = i; k < j; k++) out.dv.setFloat64(8 + (k - i) * 8, ts[k]!, true);
  return view(out, 8 + n * 8);
}

/** The fewest decimals k (0..6) such that every temperature of t[i..j) is a 32-bit m with m / 10^k === it; -1 if none. */
function decimals(t: Float64Array, i: number, j: number): number {
  let k = 0;
  for (let x = i; x < j; x++) {
    const v = t[x]!;
    // biome-ignore lint/suspicious/noSelfCompare: NaN (none) is the one value unequal to itself; a compare, not a call, per reading
    if (v !== v) continue; // none
    for (;;) {
      const p = POW10[k]!;
      const m = Math.round(v * p);
      if (m / p === v && Math.abs(m) <= 2147483647 && m !== NONE && !Object.is(v, -0)) break;
      if (++k > 6) return -1;
    }
  }
  return k;
}

/** Temperatures `t[i..j)` (NaN: none; at most BLOCK_MAX) as a BLOB (a view of tempsOut). */
function encodeTemperatures(t: Float64Array, i: number, j: number): Buffer {
  const n = j - i;
  const out = tempsOut;
  const k = decimals(t, i, j);
  out.bytes.fill(0, 0, 8);
  if (k >= 0) {
    const p = POW10[k]!;
    out.bytes[0] = SCALED;
    out.bytes[1] = k;
    for (let x = i; x < j; x++) {
      const v = t[x]!;
      // biome-ignore lint/suspicious/noSelfCompare: NaN (none) is the one value unequal to itself
      out.dv.setInt32(4 + (x - i) * 4, v === v ? Math.round(v * p) : NONE, true);
    }
    return view(out, 4 + n * 4);
  }
  out.bytes[0] = RAW;
  for (let x = i; x < j; x++) out.dv.setFloat64(8 + (x - i) * 8, t[x]!, true);
  return view(out, 8 + n * 8);
}

function decodeTimes(buf: Buffer, first: number, n: number): Float64Array {
  const ts = new Float64Array(n);
  switch (buf[0]) {
    case STEP: {
      const step = buf.readDoubleLE(8);
      for (let k = 0; k < n; k++) ts[k] = first + k * step;
      return ts;
    }
    case DELTA: {
      let v = first;
      ts[0] = v;
      for (let k = 1; k < n; k++) {
        v += buf.readInt32LE(4 + k * 4);
        ts[k] = v;
      }
      return ts;
    }
    case RAW:
      for (let k = 0; k < n; k++) ts[k] = buf.readDoubleLE(8 + k * 8);
      return ts;
  }
  throw new Error(`obs_blocks: unknown timestamp form ${buf[0]}`);
}

function decodeTemperatures(buf: Buffer, n: number): Float64Array {
  const t = new Float64Array(n);
  switch (buf[0]) {
    case SCALED: {
      const p = POW10[buf[1]!]!;
      for (let k = 0; k < n; k++) {
        const m = buf.readInt32LE(4 + k * 4);
        t[k] = m === NONE ? Number.NaN : m / p;
      }
      return t;
    }
    case RAW:
      for (let k = 0; k < n; k++) t[k] = buf.readDoubleLE(8 + k * 8);
      return t;
  }
  throw new Error(`obs_blocks: unknown temperature form ${buf[0]}`);
}

/** A block row (raw: first_ts, last_ts, n, ts, t, extra) as columns. */
export function decodeBlock(row: BlockRow): Columns {
  const n = row[N];
  return { n, ts: decodeTimes(row[3], row[FIRST], n), t: decodeTemperatures(row[4], n), extra: row[5] === null ? null : JSON.parse(row[5]) };
}

/**
 * A batch's columns (timestamps, temperatures with NaN for none, free-field texts or null) in
 * ascending time with one reading per timestamp, the last given winning. Already-ascending batches
 * (nearly all) are returned as they are.
 */
function normalize(ts: Float64Array, t: Float64Array, extra: (string | null)[] | null): Columns {
  const n = ts.length;
  let ascending = true;
  for (let i = 1; i < n; i++) {
    if (!(ts[i]! > ts[i - 1]!)) {
      ascending = false;
      break;
    }
  }
  if (ascending) return { n, ts, t, extra };
  const order = Array.from({ length: n }, (_, i) => i);
  // Stable by timestamp, then by position: of equal timestamps the last given sorts last.
  order.sort((a, b) => ts[a]! - ts[b]! || a - b);
  const outTs = new Float64Array(n);
  const outT = new Float64Array(n);
  const outExtra: (string | null)[] | null = extra === null ? null : [];
  let m = 0;
  for (let k = 0; k < n; k++) {
    const i = order[k]!;
    if (k + 1 < n && ts[order[k + 1]!] === ts[i]) continue; // a later reading of this timestamp wins
    outTs[m] = ts[i]!;
    outT[m] = t[i]!;
    if (outExtra !== null) outExtra.push(extra![i]!);
    m++;
  }
  return { n: m, ts: outTs.subarray(0, m), t: outT.subarray(0, m), extra: outExtra };
}

/** Columns of several ascending, non-overlapping parts, in the order given, as one. */
function concat(parts: Columns[]): Columns {
  let n = 0;
  let withExtra = false;
  for (const p of parts) {
    n += p.n;
    if (p.extra !== null) withExtra = true;
  }
  const ts = new Float64Array(n);
  const t = new Float64Array(n);
  const extra = withExtra ? new Array(n).fill(null) : null;
  let o = 0;
  for (const p of parts) {
    ts.set(p.ts.subarray(0, p.n), o);
    t.set(p.t.subarray(0, p.n), o);
    if (extra !== null && p.extra !== null) for (let i = 0; i < p.n; i++) extra[o + i] = p.extra[i];
    o += p.n;
  }
  return { n, ts, t, extra };
}

/** Stored readings `old` and a batch `b` (both ascending, unique) merged; the batch wins a tie. */
function merge(old: Columns, b: Columns): Columns {
  const n = old.n + b.n;
  const ts = new Float64Array(n);
  const t = new Float64Array(n);
  const extra = old.extra !== null || b.extra !== null ? new Array(n).fill(null) : null;
  let i = 0;
  let j = 0;
  let m = 0;
  while (i < old.n || j < b.n) {
    const takeOld = j >= b.n || (i < old.n && old.ts[i]! < b.ts[j]!);
    if (takeOld) {
      ts[m] = old.ts[i]!;
      t[m] = old.t[i]!;
      if (extra !== null) extra[m] = old.extra === null ? null : old.extra[i];
      i++;
    } else {
      if (i < old.n && old.ts[i] === b.ts[j]) i++; // replaced
      ts[m] = b.ts[j]!;
      t[m] = b.t[j]!;
      if (extra !== null) extra[m] = b.extra === null ? null : b.extra[j];
      j++;
    }
    m++;
  }
  return { n: m, ts: ts.subarray(0, m), t: t.subarray(0, m), extra };
}

/** Readings `c` (ascending, unique) written as blocks of at most BLOCK_MAX. */
export function insertBlocks(st: BlockStatements, pk: number, c: Columns): void {
  for (let i = 0; i < c.n; i += BLOCK_MAX) {
    const j = Math.min(c.n, i + BLOCK_MAX);
    let extra = null;
    if (c.extra !== null) {
      for (let k = i; k < j; k++) {
        if (c.extra[k] !== null) {
          extra = JSON.stringify(c.extra.slice(i, j));
          break;
        }
      }
    }
    st.insert.run(pk, c.ts[i], c.ts[j - 1], j - i, encodeTimes(c.ts, i, j), encodeTemperatures(c.t, i, j), extra);
  }
}

/**
 * Stores one device's batch as the store hands it over ({ts, temperature (NaN: none), extra texts
 * or null, newest: the index of its newest reading, wire: that reading's JSON}): its readings into
 * the device's blocks, and the device's latest reading moved forward. The caller holds a write
 * transaction. Both the writer thread and the store's own thread write through this.
 */
export function storeBatch(st: BlockStatements, pk: number, b: HandedBatch): void {
  writeBlocks(st, pk, normalize(b.ts, b.temperature, b.extra));
  const k = b.newest;
  const t = b.temperature[k];
  st.latest.run({ pk, ts: b.ts[k], t: Number.isNaN(t) ? null : t, extra: b.extra === null ? null : b.extra[k], wire: b.wire });
}

/**
 * Stores one device's normalized batch `b` (see normalize): the blocks it overlaps are read,
 * merged with it (its readings replacing stored ones of the same timestamp) and written again;
 * a small last block before it takes it in. The caller holds a write transaction.
 */
function writeBlocks(st: BlockStatements, pk: number, b: Columns): void {
  if (b.n === 0) return;
  const lo = b.ts[0]!;
  const hi = b.ts[b.n - 1]!;
  // Walk back from the last block starting at or before the batch's end while blocks reach into
  // it; the first that ends before the batch is the one it may join.
  let row = st.atOrBefore.get(pk, hi) as BlockRow | undefined;
  const overlapping: BlockRow[] = [];
  while (row !== undefined && row[LAST] >= lo) {
    overlapping.push(row);
    row = st.before.get(pk, row[FIRST]) as BlockRow | undefined;
  }
  let c = b;
  if (overlapping.length) {
    overlapping.reverse();
    c = merge(concat(overlapping.map(decodeBlock)), b);
    for (const r of overlapping) st.remove.run(pk, r[FIRST]);
  }
  if (row !== undefined && row[N] < APPEND_BELOW && row[N] + c.n <= BLOCK_MAX && (row[EXTRA] === null || row[EXTRA].length < APPEND_EXTRA_BELOW)) {
    c = concat([decodeBlock(row), c]);
    st.remove.run(pk, row[FIRST]);
  }
  insertBlocks(st, pk, c);
}
