// Reading observations on PostgreSQL: a device's rows through its partition's (device_pk, ts)
// unique index, newest first; latest of all from the `latest` table (docs/storage.md
// "PostgreSQL: read paths"). Writes go through writer.ts. With a read standby, these reads go to it
// (PostgresConnection.read) unless the instance is made for the primary.
import { latestJsonOfColumns, pageJsonOfColumns } from '../../core/observation-json.ts';
import type { ObservationRecord } from '../../core/types.ts';
import type { Bucket, BucketQuery, ObservationPage, ObservationQuery, SolutionCursor, SolutionObservationPage, SolutionObservationQuery } from '../store.ts';
import { solutionPage } from '../store.ts';
import { numArray, type PostgresConnection, type Row } from './connection.ts';

function obsFromRow(r: Row): ObservationRecord {
  return { ts: r.ts, temperature: r.temperature ?? null, extra: r.extra ?? null };
}

/** Each device of a solution with its latest reading, in device order (latest of all, seed §4.2). */
const LATEST_OF_SOLUTION = `SELECT d.id, l.ts, l.temperature, l.extra FROM devices d JOIN latest l ON l.device_pk = d.pk
       WHERE d.group_id = $1 AND d.solution = $2 ORDER BY d.pk`;

const TWO_32 = 4_294_967_296;

/** A device page as columns: timestamps, temperatures (NaN: none), free fields (null when no row has any). */
interface PageColumns {
  n: number;
  ts: Float64Array;
  t: Float64Array;
  x: (Record<string, unknown> | null)[] | null;
}

export class PostgresObservationReads {
  /** How a read runs: on the read standby if there is one, or always on the primary. */
  private readonly run: PostgresConnection['q'];

  constructor(
    private readonly c: PostgresConnection,
    on: 'standby' | 'primary' = 'standby',
  ) {
    this.run = on === 'standby' ? c.read.bind(c) : c.q.bind(c);
  }

  async countObservationsByTenant(): Promise<Map<string, number>> {
    const r = await this.c.q('SELECT d.tenant_id AS t, count(*)::bigint AS n FROM observations o JOIN devices d ON d.pk = o.device_pk GROUP BY d.tenant_id', [], 'count-observations');
    return new Map(r.rows.map((row) => [String(row.t), Number(row.n)] as [string, number]));
  }

  async latestObservations(groupId: string, solution: string) {
    const r = await this.run(LATEST_OF_SOLUTION, [groupId, solution], 'latest-of-solution');
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
    const r = await this.run(LATEST_OF_SOLUTION, [groupId, solution], 'latest-of-solution-rows', true);
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

  /**
   * A device's page, newest first, one more than asked (which tells whether another page exists),
   * as columns. The device's key (pk, tier) is the one the route's device read left
   * (PostgresConnection.keys), checked in the same statement: a device deleted, or moved to another
   * tier by a retention change, answers no rows, and then, as for a device the node does not know,
   * the key is read by id and the page asked again. One round trip for the usual page instead of two
   * (docs/storage.md "PostgreSQL: read paths").
   */
  private async page(deviceId: string, q: ObservationQuery): Promise<PageColumns & { nextBefore: number | null }> {
    const from = q.from ?? 0;
    const to = Math.min(q.to ?? Number.MAX_SAFE_INTEGER, q.before ?? Number.MAX_SAFE_INTEGER);
    let key = this.c.keys.get(deviceId);
    let p = key ? await this.pageQuery(key, from, to, q, true) : null;
    if (!p?.n) {
      key = await this.c.devicePk(deviceId);
      this.c.knowKey(deviceId, key.pk, key.tier);
      p = await this.pageQuery(key, from, to, q, false);
    }
    let nextBefore = p.n > q.limit ? p.ts[q.limit - 1]! : null;
    if (nextBefore === null && q.tag !== undefined && q.maxScan !== undefined) {
      // A short page: did the examined readings run out (ObservationQuery.maxScan) before the range did?
      const w = await this.run(
        'SELECT ts FROM observations WHERE tier = $1 AND device_pk = $2 AND ts >= $3 AND ts < $4 ORDER BY ts DESC OFFSET $5 LIMIT 2',
        [key!.tier, key!.pk, from, to, q.maxScan - 1],
        'page-tagged-window',
      );
      if (w.rows.length === 2) nextBefore = w.rows[0]!.ts as number;
    }
    return { ...p, nextBefore };
  }

  /**
   * The page's rows as one row of columns: timestamps and temperatures as the big-endian bytes of
   * int8send and float8send (NaN for none), the free fields as one json list, so the driver decodes
   * three values, not three per row (a page of 1,000 rows decoded row by row cost the node more
   * than rendering it: docs/performance.md "PostgreSQL: a device page in one round trip").
   */
  private async pageQuery(key: { pk: number; tier: number }, from: number, to: number, q: ObservationQuery, check: boolean): Promise<PageColumns> {
    // The check is uncorrelated: PostgreSQL runs it once, before the index scan (a one-time filter).
    const still = check ? ' AND EXISTS (SELECT 1 FROM devices WHERE pk = $2 AND tier = $1)' : '';
    const name = `page${check ? '-known' : ''}${q.tag === undefined ? '' : '-tagged'}`;
    const values: unknown[] = [key.tier, key.pk, from, to, q.limit + 1];
    // With a tag, the newest maxScan rows of the range are examined (ObservationQuery.maxScan; null: all).
    let rows = `SELECT ts, temperature, extra FROM observations WHERE tier = $1 AND device_pk = $2 AND ts >= $3 AND ts < $4${still} ORDER BY ts DESC LIMIT $5`;
    if (q.tag !== undefined) {
      values.push(q.tag, q.maxScan ?? null);
      rows = `SELECT ts, temperature, extra FROM (SELECT ts, temperature, extra FROM observations WHERE tier = $1 AND device_pk = $2 AND ts >= $3 AND ts < $4${still}
              ORDER BY ts DESC LIMIT $7) s WHERE extra -> 'tags' ? $6 ORDER BY ts DESC LIMIT $5`;
    }
    const r = await this.run(
      `SELECT count(*)::int AS n, string_agg(int8send(ts), ''::bytea ORDER BY ts DESC) AS ts,
         string_agg(coalesce(float8send(temperature), '\\x7ff8000000000000'::bytea), ''::bytea ORDER BY ts DESC) AS t,
         CASE WHEN bool_or(extra IS NOT NULL) THEN json_agg(extra ORDER BY ts DESC) END AS x
       FROM (${rows}) o`,
      values,
      name,
      true,
    );
    const [n, tsBytes, tBytes, x] = r.rows[0] as unknown as [number, Buffer | null, Buffer | null, (Record<string, unknown> | null)[] | null];
    const ts = new Float64Array(n);
    const t = new Float64Array(n);
    if (n) {
      const tv = new DataView(tsBytes!.buffer, tsBytes!.byteOffset, n * 8);
      const vv = new DataView(tBytes!.buffer, tBytes!.byteOffset, n * 8);
      for (let i = 0; i < n; i++) {
        ts[i] = tv.getInt32(i * 8) * TWO_32 + tv.getUint32(i * 8 + 4);
        t[i] = vv.getFloat64(i * 8);
      }
    }
    return { n, ts, t, x };
  }

  async queryObservations(deviceId: string, q: ObservationQuery): Promise<ObservationPage> {
    const p = await this.page(deviceId, q);
    const n = Math.min(p.n, q.limit);
    const observations: ObservationRecord[] = new Array(n);
    for (let i = 0; i < n; i++) {
      const t = p.t[i]!;
      observations[i] = { ts: p.ts[i]!, temperature: Number.isNaN(t) ? null : t, extra: p.x?.[i] ?? null };
    }
    return { observations, nextBefore: p.nextBefore };
  }

  /**
   * Store.observationPageJson: the page's columns written as its bytes (pageJsonOfColumns), no
   * record per row; free fields, parsed from json by the driver, are written as JSON.stringify
   * gives them, as pageJson does.
   */
  async observationPageJson(deviceId: string, q: ObservationQuery): Promise<{ json: string; nextBefore: number | null }> {
    const p = await this.page(deviceId, q);
    const n = Math.min(p.n, q.limit);
    let extras: (string | null)[] | null = null;
    if (p.x) {
      extras = new Array<string | null>(n);
      for (let i = 0; i < n; i++) {
        const x = p.x[i];
        extras[i] = x ? JSON.stringify(x) : null;
      }
    }
    return { json: pageJsonOfColumns(p.ts, p.t, extras, n), nextBefore: p.nextBefore };
  }

  async querySolutionObservations(groupId: string, solution: string, q: SolutionObservationQuery): Promise<SolutionObservationPage> {
    const from = q.from ?? 0;
    const to = q.to ?? Number.MAX_SAFE_INTEGER;
    const tag = q.tag ?? null;
    if (q.tag !== undefined && q.maxScan !== undefined) return this.scanBoundedSolutionPage(groupId, solution, q, from, to, q.tag, q.maxScan);
    // One more than asked tells whether another page exists.
    const want = q.limit + 1;
    const rows: Row[] = [];
    if (q.after) {
      // The cursor's own device: the rest of it below the cursor, one index range scan.
      const r = await this.run(
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
      const devs = await this.run('SELECT pk FROM devices WHERE group_id = $1 AND solution = $2 AND pk > $3 ORDER BY pk LIMIT $4', [groupId, solution, afterPk, chunk], 'solution-page-devices');
      if (devs.rows.length === 0) break;
      const pks = devs.rows.map((x) => Number(x.pk));
      const r = await this.run(
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

  /**
   * A tag-filtered solution page that examines at most maxScan readings over all the devices it
   * walks (SolutionObservationQuery.maxScan). The devices are walked in growing chunks as above;
   * each chunk's statement takes the next readings in page order, one more than the budget left,
   * and answers the matches among those within the budget, the last reading within it, and how
   * many it took. The cursor's device is a chunk of its own, read below the cursor.
   */
  private async scanBoundedSolutionPage(groupId: string, solution: string, q: SolutionObservationQuery, from: number, to: number, tag: string, maxScan: number): Promise<SolutionObservationPage> {
    const want = q.limit + 1;
    const rows: Row[] = [];
    let budget = maxScan;
    let examined: SolutionCursor | null = null;
    const chunk = async (pks: number[], upTo: number): Promise<SolutionCursor | null> => {
      const r = await this.run(
        `WITH e AS MATERIALIZED (
           SELECT d.pk, d.id, o.ts, o.temperature, o.extra, row_number() OVER (ORDER BY k.n, o.ts DESC) AS rn
           FROM unnest($1::bigint[]) WITH ORDINALITY AS k(pk, n)
           JOIN devices d ON d.pk = k.pk AND d.group_id = $7 AND d.solution = $8
           CROSS JOIN LATERAL (
             SELECT ts, temperature, extra FROM observations o
             WHERE o.tier = d.tier AND o.device_pk = d.pk AND o.ts >= $2 AND o.ts < $3
             ORDER BY o.ts DESC LIMIT $6) o
           ORDER BY k.n, o.ts DESC LIMIT $6)
         (SELECT 0 AS kind, pk, id, ts, temperature, extra, rn FROM e WHERE rn < $6 AND extra -> 'tags' ? $5 ORDER BY rn LIMIT $4)
         UNION ALL (SELECT 1, pk, id, ts, NULL, NULL, rn FROM e WHERE rn < $6 ORDER BY rn DESC LIMIT 1)
         UNION ALL (SELECT 2, NULL, NULL, NULL, NULL, NULL, count(*) FROM e)`,
        [numArray(pks), from, upTo, want - rows.length, tag, budget + 1, groupId, solution],
        'solution-page-scan',
      );
      let last: Row | undefined;
      let taken = 0;
      for (const x of r.rows) {
        const kind = Number(x.kind);
        if (kind === 0) rows.push(x);
        else if (kind === 1) last = x;
        else taken = Number(x.rn);
      }
      if (rows.length >= want) return null;
      // More readings than the budget left: the page stops at the last one examined, or at the
      // one before this chunk when the budget ran out exactly where the chunk starts.
      if (taken > budget) return budget === 0 ? examined : { device: Number(last!.pk), ts: Number(last!.ts) };
      budget -= taken;
      if (last) examined = { device: Number(last.pk), ts: Number(last.ts) };
      return null;
    };
    let stopped: SolutionCursor | null = null;
    if (q.after) stopped = await chunk([q.after.device], Math.min(to, q.after.ts));
    let afterPk = q.after?.device ?? -1;
    let size = 2;
    while (rows.length < want && stopped === null) {
      const devs = await this.run('SELECT pk FROM devices WHERE group_id = $1 AND solution = $2 AND pk > $3 ORDER BY pk LIMIT $4', [groupId, solution, afterPk, size], 'solution-page-devices');
      if (devs.rows.length === 0) break;
      const pks = devs.rows.map((x) => Number(x.pk));
      stopped = await chunk(pks, to);
      if (pks.length < size) break;
      afterPk = pks[pks.length - 1]!;
      size = Math.min(size * 4, 8192);
    }
    return solutionPage(rows as { pk: number; id: string; ts: number }[], q.limit, obsFromRow, stopped);
  }

  async bucketObservations(deviceId: string, q: BucketQuery): Promise<Bucket[]> {
    const { pk, tier } = await this.c.devicePk(deviceId);
    const r = await this.run(
      `SELECT (ts - $3) / $5 * $5 + $3 AS b, count(*) AS n, min(temperature) AS lo, avg(temperature) AS mean, max(temperature) AS hi
       FROM observations WHERE tier = $1 AND device_pk = $2 AND ts >= $3 AND ts < $4 GROUP BY b ORDER BY b`,
      [tier, pk, q.from, q.to, q.bucketMs],
      'buckets',
    );
    return r.rows.map((x) => ({ ts: x.b, count: x.n, min: x.lo, avg: x.mean, max: x.hi }));
  }
}
