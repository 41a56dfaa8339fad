// Reading observations on SQLite: a device's blocks (blocks.ts, docs/storage.md "SQLite: blocks")
// walked through the (device_pk, first_ts) key, and the `latest` table for latest of all. Writes
// go through writer.ts.
import { pageJsonOfColumns } from '../../core/observation-json.ts';
import { ReefError } from '../../core/errors.ts';
import type { ObservationRecord } from '../../core/types.ts';
import type { Bucket, BucketQuery, ObservationPage, ObservationQuery, SolutionCursor, SolutionObservationPage, SolutionObservationQuery } from '../store.ts';
import { solutionPage } from '../store.ts';
import { blockStatements, decodeBlock, type BlockRow, type BlockStatements, type Columns } from './blocks.ts';
import type { Row, SqliteContext } from './context.ts';

/** Solutions whose latest-of-all text is remembered at once (latestObservationsJson). */
const LATEST_CACHE = 16;
/** Blocks (up to 1,024 readings each) a bucketed read aggregates per turn of the event loop: about a millisecond. */
const BUCKET_CHUNK = 64;

function obsFromRow(r: Row): ObservationRecord {
  return { ts: r.ts, temperature: r.temperature ?? null, extra: r.extra ? JSON.parse(r.extra) : null };
}

function statements(c: SqliteContext) {
  const p = (sql: string) => c.db.prepare(sql);
  return {
    devicePk: p('SELECT pk FROM devices WHERE id = ?').pluck(),
    // The whole response body in one row, built in SQLite's C code from the rendered rows, and
    // handed over as its UTF-8 bytes (a Buffer; no JavaScript string of it is made).
    // The subquery's order comes from the covering index (no sort step; an ORDER BY inside
    // group_concat would sort the strings); the conformance suite checks it matches pk order.
    latestJson: p(`SELECT CAST('[' || coalesce(group_concat(g, ','), '') || ']' AS BLOB) FROM (
                     SELECT coalesce(l.item, '{"deviceId":"' || d.id || '","observations":[' || l.wire || ']}') AS g
                     FROM devices d JOIN latest l ON l.device_pk = d.pk WHERE d.group_id = ? AND d.solution = ? ORDER BY d.pk)`).pluck(),
    // Rows as arrays: for 10,000 devices, not building a keyed object per row is a measurable share.
    latestOfSolution: p(`SELECT d.id, l.ts, l.temperature, l.extra FROM devices d JOIN latest l ON l.device_pk = d.pk
                         WHERE d.group_id = ? AND d.solution = ? ORDER BY d.pk`).raw(true),
    // A device's blocks that start before `to`, newest first (a page walks them until it has its
    // rows or reaches blocks that end before its range).
    blocksDesc: p('SELECT first_ts, last_ts, n, ts, t, extra FROM obs_blocks WHERE device_pk = ? AND first_ts < ? ORDER BY first_ts DESC').raw(true),
    // A device's blocks that start in [from, to), oldest first (buckets walk forwards).
    blocksAsc: p('SELECT first_ts, last_ts, n, ts, t, extra FROM obs_blocks WHERE device_pk = ? AND first_ts >= ? AND first_ts < ? ORDER BY first_ts LIMIT ?').raw(true),
    blocksAscAfter: p('SELECT first_ts, last_ts, n, ts, t, extra FROM obs_blocks WHERE device_pk = ? AND first_ts > ? AND first_ts < ? ORDER BY first_ts LIMIT ?').raw(true),
    // Solution-wide pages: the solution's devices in pk order from the covering index.
    solDevices: p('SELECT pk, id FROM devices WHERE group_id = ? AND solution = ? AND pk > ? ORDER BY pk LIMIT 256').raw(true),
    countObs: p('SELECT coalesce(sum(n), 0) FROM obs_blocks WHERE device_pk = ?').pluck(),
    dataVersion: p('PRAGMA data_version').pluck(),
    totalChanges: p('SELECT total_changes()').pluck(),
  };
}

export class SqliteObservationReads {
  private readonly s: ReturnType<typeof statements>;
  private readonly blocks: BlockStatements;
  private readonly db;
  constructor(
    private readonly c: SqliteContext,
    private readonly bucketChunk = BUCKET_CHUNK,
  ) {
    this.s = statements(c);
    this.blocks = blockStatements(c.db);
    this.db = c.db;
  }

  /**
   * Device by device, each count one range of the (device_pk, ts) key, yielding to the event loop
   * every ~10 ms: better-sqlite3 runs on the main thread, and one statement over every row kept a
   * 100,000,000-row server from answering (or, at start, from listening) for 41–95 s at each upkeep
   * (bench:scale's start-up figures). Rows a device gains or loses
   * meanwhile may be counted or not: the quota is approximate between counts anyway.
   */
  async countObservationsByTenant() {
    const devices = (await this.c.run(() => this.db.prepare('SELECT pk, tenant_id AS t FROM devices').all())) as { pk: number; t: string }[];
    const count = this.s.countObs;
    const out = new Map<string, number>();
    let sliceStart = performance.now();
    for (const d of devices) {
      const n = (await this.c.run(() => count.get(d.pk))) as number;
      if (n) out.set(d.t, (out.get(d.t) ?? 0) + n);
      if (performance.now() - sliceStart > 10) {
        await new Promise<void>((resolve) => setImmediate(resolve));
        sliceStart = performance.now();
      }
    }
    return out;
  }

  latestObservations(groupId: string, solution: string) {
    return this.c.run(() =>
      (this.s.latestOfSolution.all(groupId, solution) as [string, number, number | null, string | null][]).map(([deviceId, ts, temperature, extra]) => ({
        deviceId,
        observation: { ts, temperature: temperature ?? null, extra: extra ? JSON.parse(extra) : null },
      })),
    );
  }

  /**
   * Latest of all, remembered per solution until the database changes: a dashboard polling it
   * between uploads gets the same text without SQLite assembling 10,000 rows again. The database's
   * version is PRAGMA data_version (moves when any other connection commits: the writer thread,
   * another process such as `reef provision` or a second `reef serve`) with this connection's own
   * total_changes() (its own writes, which data_version does not count). Each upload's commit
   * moves it, so under constant uploads every read builds the text afresh. Kept as bytes: see
   * Store.latestObservationsJson.
   */
  latestObservationsJson(groupId: string, solution: string) {
    return this.c.run(() => {
      const version = `${this.s.dataVersion.get() as number}:${this.s.totalChanges.get() as number}`;
      const key = `${groupId}\u0000${solution}`;
      const hit = this.latestCache.get(key);
      if (hit && hit.version === version) return hit.json;
      const json = this.s.latestJson.get(groupId, solution) as Buffer;
      if (this.latestCache.size >= LATEST_CACHE) this.latestCache.clear();
      this.latestCache.set(key, { version, json });
      return json;
    });
  }
  private latestCache = new Map<string, { version: string; json: Buffer }>();

  private pkOf(deviceId: string): number {
    const pk = this.s.devicePk.get(deviceId) as number | undefined;
    if (pk === undefined) throw new ReefError('DEVICE_NOT_FOUND');
    return pk;
  }

  /**
   * Up to `limit` of device `pk`'s readings with from <= ts < to, newest first, that have the tag
   * if one is given: the device's blocks walked backwards from the last one starting before `to`
   * until enough are found or the blocks end before `from`.
   */
  private newestFirst(
    pk: number,
    from: number,
    to: number,
    limit: number,
    tag?: string,
    maxScan = Number.POSITIVE_INFINITY,
  ): Columns & { scannedTo: number | null; scanned: number; lastExamined: number } {
    // Room for what is found, grown as needed: a solution-wide page asks every device for up to a
    // page, and most answer with few readings or none.
    let ts = new Float64Array(Math.min(limit, 1024));
    let t = new Float64Array(ts.length);
    let extra: (string | null)[] | null = null;
    let m = 0;
    // A filtered walk examines at most maxScan readings (ObservationQuery.maxScan).
    let scanned = 0;
    let scannedTo: number | null = null;
    let lastExamined = 0;
    const quotedTag = tag === undefined ? '' : JSON.stringify(tag);
    if (limit > 0 && from < to) {
      for (const row of this.s.blocksDesc.iterate(pk, to) as IterableIterator<BlockRow>) {
        if (row[1] < from) break;
        // A block without free fields has no tag: wholly in range and within the budget, its
        // readings count as examined without decoding them.
        if (tag !== undefined && row[5] === null && row[0] >= from && row[1] < to && scanned + row[2] <= maxScan) {
          scanned += row[2];
          lastExamined = row[0];
          continue;
        }
        const b = decodeBlock(row);
        let i = below(b.ts, to) - 1;
        for (; i >= 0 && m < limit; i--) {
          const time = b.ts[i]!;
          if (time < from) break;
          const fields = b.extra === null ? null : b.extra[i]!;
          if (tag !== undefined) {
            if (scanned === maxScan) {
              scannedTo = lastExamined;
              break;
            }
            scanned++;
            lastExamined = time;
            if (!hasTag(fields, tag, quotedTag)) continue;
          }
          if (m === ts.length) {
            const size = Math.min(limit, ts.length * 2);
            const ts2 = new Float64Array(size);
            ts2.set(ts);
            ts = ts2;
            const t2 = new Float64Array(size);
            t2.set(t);
            t = t2;
          }
          ts[m] = time;
          t[m] = b.t[i]!;
          if (fields !== null) {
            extra ??= [];
            while (extra.length < m) extra.push(null);
            extra[m] = fields;
          }
          m++;
        }
        if (m === limit || i >= 0 || scannedTo !== null) break;
      }
    }
    if (extra !== null) while (extra.length < m) extra.push(null);
    return { n: m, ts, t, extra, scannedTo, scanned, lastExamined };
  }

  /** A page: one more reading than asked tells whether another page exists. */
  private page(deviceId: string, q: ObservationQuery): { c: Columns; nextBefore: number | null } {
    const pk = this.pkOf(deviceId);
    const from = q.from ?? 0;
    const to = Math.min(q.to ?? Number.MAX_SAFE_INTEGER, q.before ?? Number.MAX_SAFE_INTEGER);
    const c = this.newestFirst(pk, from, to, q.limit + 1, q.tag, q.maxScan);
    const more = c.n > q.limit;
    if (more) c.n = q.limit;
    return { c, nextBefore: more ? c.ts[q.limit - 1]! : c.scannedTo };
  }

  queryObservations(deviceId: string, q: ObservationQuery): Promise<ObservationPage> {
    return this.c.run(() => {
      const { c, nextBefore } = this.page(deviceId, q);
      return { observations: recordsOfColumns(c), nextBefore };
    });
  }

  /** The page rendered from the blocks' numbers; the stored free-field text is spliced in, not parsed. */
  observationPageJson(deviceId: string, q: ObservationQuery) {
    return this.c.run(() => {
      const { c, nextBefore } = this.page(deviceId, q);
      return { json: pageJsonOfColumns(c.ts, c.t, c.extra, c.n), nextBefore };
    });
  }

  querySolutionObservations(groupId: string, solution: string, q: SolutionObservationQuery): Promise<SolutionObservationPage> {
    return this.c.run(() => {
      const from = q.from ?? 0;
      const to = q.to ?? Number.MAX_SAFE_INTEGER;
      // One more than asked tells whether another page exists.
      const want = q.limit + 1;
      const rows: { pk: number; id: string; ts: number; temperature: number | null; extra: string | null }[] = [];
      // A tag-filtered page examines at most maxScan readings over all its devices
      // (SolutionObservationQuery.maxScan): SQLite reads on the main thread, and a filter that
      // matches nothing would otherwise walk every reading of the solution in the range.
      let budget = q.tag !== undefined && q.maxScan !== undefined ? q.maxScan : Number.POSITIVE_INFINITY;
      let examined: SolutionCursor | null = null;
      let stopped: SolutionCursor | null = null;
      const take = (pk: number, id: string, upTo: number) => {
        const c = this.newestFirst(pk, from, upTo, want - rows.length, q.tag, budget);
        for (let i = 0; i < c.n; i++) {
          const t = c.t[i]!;
          rows.push({ pk, id, ts: c.ts[i]!, temperature: Number.isNaN(t) ? null : t, extra: c.extra === null ? null : c.extra[i]! });
        }
        // Out of budget with this device's readings left: the cursor is the last reading examined,
        // on an earlier device when the budget ran out exactly where this one starts.
        if (c.scannedTo !== null) stopped = c.scanned === 0 ? examined : { device: pk, ts: c.scannedTo };
        else if (c.scanned > 0) examined = { device: pk, ts: c.lastExamined };
        budget -= c.scanned;
      };
      // The cursor's own device first, its upper bound moved to the cursor; then the devices after it.
      // Devices are read 256 at a time: better-sqlite3 runs no other statement while one iterates.
      let after = q.after ? q.after.device - 1 : -1;
      while (rows.length < want && stopped === null) {
        const devices = this.s.solDevices.all(groupId, solution, after) as [number, string][];
        for (const [pk, id] of devices) {
          if (rows.length >= want || stopped !== null) break;
          take(pk, id, q.after && pk === q.after.device ? Math.min(to, q.after.ts) : to);
        }
        if (devices.length < 256) break;
        after = devices[devices.length - 1]![0];
      }
      return solutionPage(rows, q.limit, obsFromRow, stopped);
    });
  }

  /**
   * Count, min, mean and max per interval, oldest first, empty intervals left out; min/mean/max over
   * the readings that have a temperature (null when none has), the mean summed as SQLite's avg()
   * does (Kahan-Babuska-Neumaier).
   */
  async bucketObservations(deviceId: string, q: BucketQuery): Promise<Bucket[]> {
    const pk = await this.c.run(() => this.pkOf(deviceId));
    const out: Bucket[] = [];
    if (!(q.from < q.to)) return out;
    let cur: { ts: number; count: number; n: number; sum: number; err: number; min: number; max: number } | null = null;
    const close = () => {
      if (cur) out.push({ ts: cur.ts, count: cur.count, min: cur.n ? cur.min : null, avg: cur.n ? (cur.sum + cur.err) / cur.n : null, max: cur.n ? cur.max : null });
    };
    // The newest reading aggregated: a block rewritten between chunks by a concurrent upload is
    // not counted twice (readings stored since the read began may be left out).
    let seen = Number.NEGATIVE_INFINITY;
    const add = (row: BlockRow) => {
      const b = decodeBlock(row);
      for (let i = 0; i < b.n; i++) {
        const time = b.ts[i]!;
        if (time < q.from || time <= seen) continue;
        if (time >= q.to) break;
        seen = time;
        const start = Math.trunc((time - q.from) / q.bucketMs) * q.bucketMs + q.from;
        if (!cur || cur.ts !== start) {
          close();
          cur = { ts: start, count: 0, n: 0, sum: 0, err: 0, min: Infinity, max: -Infinity };
        }
        cur.count++;
        const v = b.t[i]!;
        if (!Number.isNaN(v)) {
          cur.n++;
          // Neumaier's compensated sum.
          const s = cur.sum + v;
          cur.err += Math.abs(cur.sum) >= Math.abs(v) ? cur.sum - s + v : v - s + cur.sum;
          cur.sum = s;
          if (v < cur.min) cur.min = v;
          if (v > cur.max) cur.max = v;
        }
      }
    };
    // The block the range starts inside, then those starting in the range, a chunk of blocks per
    // turn of the event loop: SQLite reads on the main thread, and a long range of dense readings
    // would otherwise hold every other request for as long as it takes (docs/security.md "Reads").
    const chunk = this.bucketChunk;
    let lastFirst: number | null = null;
    for (;;) {
      const taken = await this.c.run(() => {
        let k = 0;
        if (lastFirst === null) {
          const first = this.blocks.before.get(pk, q.from) as BlockRow | undefined;
          if (first !== undefined && first[1] >= q.from) add(first);
        }
        const rows = lastFirst === null ? this.s.blocksAsc.iterate(pk, q.from, q.to, chunk) : this.s.blocksAscAfter.iterate(pk, lastFirst, q.to, chunk);
        for (const row of rows as IterableIterator<BlockRow>) {
          add(row);
          lastFirst = row[0];
          k++;
        }
        return k;
      });
      if (taken < chunk) break;
      await new Promise((resolve) => setImmediate(resolve));
    }
    close();
    return out;
  }
}

/** How many of the ascending timestamps are below `to` (binary search). */
function below(ts: Float64Array, to: number): number {
  let lo = 0;
  let hi = ts.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ts[mid]! < to) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Whether stored free fields carry `tag` in their `tags` list (wire §1: a list of strings). */
function hasTag(fields: string | null, tag: string, quoted = JSON.stringify(tag)): boolean {
  if (fields === null || !fields.includes('"tags"')) return false;
  // Text without a backslash holds every string literally: no "tag" in it, no such tag. Saves the
  // parse for almost every reading a filter walks past.
  if (!fields.includes(quoted) && !fields.includes('\\')) return false;
  const tags = (JSON.parse(fields) as { tags?: unknown }).tags;
  return Array.isArray(tags) ? tags.includes(tag) : tags === tag;
}

function recordsOfColumns(c: Columns): ObservationRecord[] {
  const out: ObservationRecord[] = new Array(c.n);
  for (let i = 0; i < c.n; i++) {
    const t = c.t[i]!;
    const fields = c.extra === null ? null : c.extra[i]!;
    out[i] = { ts: c.ts[i]!, temperature: Number.isNaN(t) ? null : t, extra: fields ? JSON.parse(fields) : null };
  }
  return out;
}
