// The PostgreSQL binary COPY encoder (docs/storage.md "PostgreSQL: the write path"): a group's
// batches as one COPY ... FROM STDIN (FORMAT binary) stream, built in one buffer together with the
// query that starts it, and sent with the transaction's end in one round trip (CopyAndCommit).
// Pure encoding and pg protocol handling: which batches go by COPY is writer.ts's decision.
import pg from 'pg';

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
export const COPY_BATCH = 'COPY observations (device_pk, ts, temperature, extra, tier) FROM STDIN (FORMAT binary)';
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

/** Each row's free fields in jsonb's binary form (a version byte, then the JSON text); null when no row has any. */
export function jsonbExtras(extras: readonly (Record<string, unknown> | null)[]): (Buffer | null)[] | null {
  if (!extras.some((x) => x)) return null;
  return extras.map((x) => (x ? Buffer.from(`\x01${JSON.stringify(x)}`, 'utf8') : null));
}

/** One batch's rows in a group's COPY: its device's key, timestamps, temperatures and free fields. */
export interface CopyRows {
  pk: number;
  tier: number;
  ts: ArrayLike<number>;
  /** NaN where there is no temperature. */
  temps: ArrayLike<number>;
  /** Each row's jsonb, or null when no row has free fields. */
  extras: readonly (Buffer | null)[] | null;
}

const noTemperature = (x: number | undefined) => x === undefined || Number.isNaN(x);

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
export function copyAndCommitMessage(text: string, batches: readonly CopyRows[]): Buffer {
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
export function copyInAndCommit(c: pg.ClientBase, batches: readonly CopyRows[]): Promise<void> {
  return sendCopy(c, copyAndCommitMessage(`${COPY_BATCH}; COMMIT`, batches));
}

/** Sends a round trip built by copyAndCommitMessage; settles on its ReadyForQuery or first error. */
export function sendCopy(c: pg.ClientBase, message: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    c.query(new CopyAndCommit(message, (e) => (e ? reject(e) : resolve())));
  });
}
