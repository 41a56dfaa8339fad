// The plot's data from the API: every observation of a range up to a day, per-bucket min/avg/max
// beyond it (the server aggregates temperature; other fields are fetched raw and bucketed here
// alike).
import type { Connection } from './api.ts';
import { TEMPERATURE, valueAt } from './fields.ts';
import type { Series } from './plot.ts';

/** Up to this span the plot shows every observation; beyond it, per-bucket min/avg/max. */
export const RAW_MAX_SECONDS = 86400;
const TARGET_BUCKETS = 1500;

/** The bucket (ms) that gives about TARGET_BUCKETS over a span, rounded to a nice length. */
export function bucketFor(spanSeconds: number): number {
  const nice = [10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
  const want = spanSeconds / TARGET_BUCKETS;
  return (nice.find((n) => n >= want) ?? Math.ceil(want / 86400) * 86400) * 1000;
}

/**
 * Per-bucket min/avg/max of raw points, for fields the server does not aggregate (its `bucket`
 * query covers temperature): the same shape as the server's buckets, empty buckets omitted.
 */
function bucketise(deviceId: string, x: number[], y: (number | null)[], from: number, bucketS: number): Series {
  const out: Series = { deviceId, bucketed: true, x: [], y: [], min: [], max: [], observations: 0 };
  let cur = -1,
    sum = 0,
    n = 0,
    lo = Infinity,
    hi = -Infinity;
  const flush = () => {
    if (n) {
      out.x.push(from + cur * bucketS);
      out.y.push(sum / n);
      out.min!.push(lo);
      out.max!.push(hi);
      out.observations += n;
    }
  };
  for (let i = 0; i < x.length; i++) {
    const v = y[i];
    if (v === null || v === undefined) continue;
    const b = Math.floor((x[i]! - from) / bucketS);
    if (b !== cur) {
      flush();
      [cur, sum, n, lo, hi] = [b, 0, 0, Infinity, -Infinity];
    }
    sum += v;
    n++;
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
  }
  flush();
  return out;
}

/** Each device's data of [from, to] (seconds): raw up to a day, per-bucket min/avg/max beyond. */
export async function fetchSeries(conn: Connection, ids: string[], from: number, to: number, field: string, signal: AbortSignal): Promise<Series[]> {
  const span = to - from;
  const f = new Date(from * 1000);
  const t = new Date(to * 1000 + 1);
  return Promise.all(
    ids.map(async (deviceId): Promise<Series> => {
      if (span <= RAW_MAX_SECONDS || field !== TEMPERATURE) {
        const obs = await conn.range(deviceId, f, t, signal);
        const x: number[] = [];
        const y: (number | null)[] = [];
        for (const o of obs) {
          x.push(Date.parse(o.timestamp) / 1000);
          y.push(valueAt(o, field));
        }
        if (span > RAW_MAX_SECONDS) return bucketise(deviceId, x, y, from, bucketFor(span) / 1000);
        return { deviceId, bucketed: false, x, y, observations: obs.length };
      }
      const bs = await conn.buckets(deviceId, f, t, bucketFor(span), signal);
      return {
        deviceId,
        bucketed: true,
        x: bs.map((b) => Date.parse(b.timestamp) / 1000),
        y: bs.map((b) => b.avg),
        min: bs.map((b) => b.min),
        max: bs.map((b) => b.max),
        observations: bs.reduce((n, b) => n + b.count, 0),
      };
    }),
  );
}
