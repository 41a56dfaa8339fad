// The evaluator's fast path for a batch (docs/alarms.md "Every ingest path, one hook"): a device's
// plan (its rules, their pairs, the tightest limits of its temperature rules in °C) and a batch's
// summary (extremes and steepest changes) settle every rule a batch cannot break without judging
// each reading. Pure: engine.ts holds the plans and judges what is left reading by reading.
import type { AlarmRuleRecord, AlarmRuleSpec } from '../core/alarms.ts';
import type { ObservationBatch } from '../core/observation-batch.ts';
import type { Observation } from '../core/types.ts';
import type { Pair } from './pairs.ts';

/** A stored batch: the store's batch when published in this process, else its wire form. */
export type Batch = { batch: ObservationBatch; wire: null } | { batch: null; wire: Observation[] };

/** A batch's temperatures in one pass: extremes and steepest changes (°C, °C per minute). */
export interface Summary {
  count: number;
  firstTs: number;
  firstV: number;
  lastTs: number;
  lastV: number;
  min: number;
  max: number;
  maxRise: number;
  maxFall: number;
}

/** The reading's other fields, where rules read a field by path and a reading may name its unit. */
export function bagOf(batch: ObservationBatch | null, wire: Observation[] | null, i: number): Record<string, unknown> | null {
  return batch ? (batch.extra?.[i] ?? null) : wire![i]!;
}

export function temperatureOf(batch: ObservationBatch | null, wire: Observation[] | null, i: number): number | null {
  if (batch) {
    const t = batch.temperature[i]!;
    return Number.isNaN(t) ? null : t;
  }
  const t = wire![i]!.temperature;
  return typeof t === 'number' ? t : null;
}

/**
 * The batch's temperature extremes, oldest first as evaluation goes; null when a reading names its
 * own unit (then every rule is judged reading by reading). Readings without a temperature are left
 * out, and a repeated timestamp counts once, as the per-reading path does.
 */
export function summarize(n: number, order: number[] | null, tss: Float64Array, batch: ObservationBatch | null, wire: Observation[] | null): Summary | null {
  let count = 0;
  let firstTs = 0;
  let firstV = 0;
  let lastTs = 0;
  let lastV = 0;
  let min = Infinity;
  let max = -Infinity;
  let maxRise = -Infinity;
  let maxFall = Infinity;
  for (let j = 0; j < n; j++) {
    const i = order ? order[j]! : j;
    let t: number | null;
    if (batch) {
      t = batch.temperature[i]!;
      if (Number.isNaN(t)) continue;
      const x = batch.extra?.[i];
      if (x && x.unit !== undefined) return null;
    } else {
      const w = wire![i]!;
      t = typeof w.temperature === 'number' ? w.temperature : null;
      if (t === null) continue;
      if (w.unit !== undefined) return null;
    }
    const ts = tss[i]!;
    if (count) {
      if (ts <= lastTs) continue;
      const r = ((t - lastV) * 60_000) / (ts - lastTs);
      if (r > maxRise) maxRise = r;
      if (r < maxFall) maxFall = r;
    } else {
      firstTs = ts;
      firstV = t;
    }
    if (t < min) min = t;
    if (t > max) max = t;
    lastTs = ts;
    lastV = t;
    count++;
  }
  return { count, firstTs, firstV, lastTs, lastV, min, max, maxRise, maxFall };
}

/** Rounding room: near a threshold the per-reading path decides. */
export const EPS = 1e-9;

const toC = (s: AlarmRuleSpec, v: number) => (s.unit === 'F' ? ((v - 32) * 5) / 9 : v);

/**
 * What one device's rules are, resolved once and kept until a rule, a pair or the device changes:
 * the rules (its own, its template's, the solution's), their pairs, and the tightest limits of its
 * temperature rules in °C, so a batch that stays inside all of them settles every rule with one
 * comparison per limit (docs/alarms.md "Every ingest path, one hook").
 */
export interface Plan {
  rules: AlarmRuleRecord[];
  pairs: Pair[];
  silence: boolean;
  /** Lowest value that can break an above/outside rule; highest that can break a below/outside rule. */
  hi: number;
  lo: number;
  /** Smallest rise / fall per minute that can break a rate rule. */
  rise: number;
  fall: number;
}

export function plan(rules: AlarmRuleRecord[], pairs: Pair[]): Plan {
  const p: Plan = { rules, pairs, silence: false, hi: Infinity, lo: -Infinity, rise: Infinity, fall: Infinity };
  for (const r of rules) {
    const s = r.spec;
    if (s.condition === 'silence') {
      p.silence = true;
      continue;
    }
    if (s.field !== 'temperature') continue;
    switch (s.condition) {
      case 'above':
        p.hi = Math.min(p.hi, toC(s, s.threshold!));
        break;
      case 'below':
        p.lo = Math.max(p.lo, toC(s, s.threshold!));
        break;
      case 'outside':
        p.hi = Math.min(p.hi, toC(s, s.high!));
        p.lo = Math.max(p.lo, toC(s, s.low!));
        break;
      case 'rate': {
        const limit = s.unit === 'F' ? (s.ratePerMinute! * 5) / 9 : s.ratePerMinute!;
        if (s.direction !== 'fall') p.rise = Math.min(p.rise, limit);
        if (s.direction !== 'rise') p.fall = Math.min(p.fall, limit);
        break;
      }
    }
  }
  return p;
}

/**
 * True when no reading of the batch can break this temperature rule, whose pair is normal: the
 * pair moves past the batch at once (what judging each reading would have done). `inside`: the
 * batch is within the device's tightest limits (Plan), so only a rate rule's step from the pair's
 * last reading to the batch's first is left to check.
 */
export function settled(s: AlarmRuleSpec, p: Pair, sum: Summary, inside: boolean): boolean {
  if (s.field !== 'temperature' || p.phase !== 'normal') return false;
  if (p.lastTs !== undefined && p.lastTs >= sum.firstTs) return false;
  let could = false;
  switch (s.condition) {
    case 'above':
      could = !inside && sum.max > toC(s, s.threshold!) - EPS;
      break;
    case 'below':
      could = !inside && sum.min < toC(s, s.threshold!) + EPS;
      break;
    case 'outside':
      could = !inside && (sum.min < toC(s, s.low!) + EPS || sum.max > toC(s, s.high!) - EPS);
      break;
    case 'rate': {
      let rise = inside ? -Infinity : sum.maxRise;
      let fall = inside ? Infinity : sum.maxFall;
      if (p.lastTs !== undefined && p.lastValue !== undefined) {
        const r0 = ((sum.firstV - toC(s, p.lastValue)) * 60_000) / (sum.firstTs - p.lastTs);
        rise = Math.max(rise, r0);
        fall = Math.min(fall, r0);
      }
      // The limit in °C per minute (a rate converts by the factor alone).
      const limit = s.unit === 'F' ? (s.ratePerMinute! * 5) / 9 : s.ratePerMinute!;
      const up = rise > limit - EPS;
      const down = fall < -limit + EPS;
      could = s.direction === 'rise' ? up : s.direction === 'fall' ? down : up || down;
      if (!could) p.lastValue = s.unit === 'F' ? (sum.lastV * 9) / 5 + 32 : sum.lastV;
      break;
    }
    default:
      return false;
  }
  if (could) return false;
  p.lastTs = sum.lastTs;
  return true;
}
