// One device's observations as every producer hands them to the store (docs/storage.md "The write
// path"): the upload scanner, the general parser (uploads, MQTT ingest), the gateway's readings and
// simulations. Columns rather than an object per observation: the scanner's typed arrays go to
// SQLite's writer thread and into PostgreSQL's binary COPY as they are.
import { toWireObservation, type Observation, type ObservationRecord } from './types.ts';

export interface ObservationBatch {
  ts: Float64Array<ArrayBuffer>;
  /** NaN where there is none: a stored temperature is finite, so NaN can only mean "none". */
  temperature: Float64Array<ArrayBuffer>;
  /** Each observation's free fields (null for one without), or null when none has any. */
  extra: (Record<string, unknown> | null)[] | null;
  /** Index of the newest observation (the last one of the greatest timestamp). */
  newest: number;
}

/** The batch of `records`, in their order. */
export function batchOf(records: readonly ObservationRecord[]): ObservationBatch {
  const n = records.length;
  const ts = new Float64Array(n);
  const temperature = new Float64Array(n);
  let extra: (Record<string, unknown> | null)[] | null = null;
  let newest = 0;
  for (let i = 0; i < n; i++) {
    const o = records[i]!;
    ts[i] = o.ts;
    temperature[i] = o.temperature ?? NaN;
    if (o.extra) (extra ??= new Array<Record<string, unknown> | null>(n).fill(null))[i] = o.extra;
    if (o.ts >= ts[newest]!) newest = i;
  }
  return { ts, temperature, extra, newest };
}

/** The i-th observation as a record. */
export function recordAt(b: ObservationBatch, i: number): ObservationRecord {
  const t = b.temperature[i]!;
  return { ts: b.ts[i]!, temperature: Number.isNaN(t) ? null : t, extra: b.extra?.[i] ?? null };
}

/** The records a batch stands for. */
export function recordsOf(b: ObservationBatch): ObservationRecord[] {
  const out: ObservationRecord[] = new Array(b.ts.length);
  for (let i = 0; i < out.length; i++) out[i] = recordAt(b, i);
  return out;
}

/** The batch's wire form (what a live event carries). */
export function wireOf(b: ObservationBatch): Observation[] {
  const out: Observation[] = new Array(b.ts.length);
  for (let i = 0; i < out.length; i++) out[i] = toWireObservation(recordAt(b, i));
  return out;
}

/**
 * The batch with repeated timestamps collapsed, the later one winning (as when the observations are
 * written one after another), the others in their order; the batch itself when none repeats.
 */
export function lastWins(b: ObservationBatch): ObservationBatch {
  const { ts } = b;
  const n = ts.length;
  let ascending = true;
  for (let i = 1; i < n && ascending; i++) ascending = ts[i]! > ts[i - 1]!;
  // Only an unordered batch can repeat a timestamp.
  if (ascending) return b;
  const last = new Map<number, number>();
  for (let i = 0; i < n; i++) last.set(ts[i]!, i);
  if (last.size === n) return b;
  const keep = [...last.values()].sort((x, y) => x - y);
  const out: ObservationBatch = { ts: new Float64Array(keep.length), temperature: new Float64Array(keep.length), extra: b.extra && new Array(keep.length), newest: 0 };
  for (let k = 0; k < keep.length; k++) {
    const i = keep[k]!;
    out.ts[k] = ts[i]!;
    out.temperature[k] = b.temperature[i]!;
    if (out.extra) out.extra[k] = b.extra![i] ?? null;
    if (i === b.newest) out.newest = k;
  }
  return out;
}
