// One unit per dev kit series (docs/api.md "Temperature units"): every temperature stored on a
// provisioned kit is °C, whoever writes it. The gateway's readings bridge already writes °C with
// `unit`, `rawValue` and `rawUnit`; an original client (the Java CoAP and MQTT clients) uploads the
// kit's own figure as the kit reports it, °F when the kit is in F, without a unit. Such an upload
// is converted here, once for every writer, and keeps its figure as `rawValue`/`rawUnit`.
import type { ObservationBatch } from '../core/observation-batch.ts';
import type { ObservationRecord } from '../core/types.ts';
import type { Store } from '../store/store.ts';

export type TemperatureUnit = 'C' | 'F';

/** The kit's unit out of the box (wire §2: "Default unit on the original: Fahrenheit"). */
export const KIT_DEFAULT_UNIT: TemperatureUnit = 'F';

/** Stored rows read to learn the kit's last reported unit (its newest rows may be added sensors'). */
const LAST_UNIT_ROWS = 20;

/** Seed §2: temperatures carry up to four fractional digits. */
export function round4(x: number): number {
  return Math.round(x * 10_000) / 10_000;
}

export function toCelsius(value: number, unit: TemperatureUnit): number {
  return round4(unit === 'F' ? ((value - 32) * 5) / 9 : value);
}

/** `C`, `F`, `°C`, `°F`, `celsius`, `fahrenheit` in any case, as alarm rules read them; anything else names no unit. */
export function unitOf(v: unknown): TemperatureUnit | undefined {
  if (typeof v !== 'string') return undefined;
  const s = v.trim().toLowerCase().replace('°', '');
  if (s === 'c' || s === 'celsius') return 'C';
  if (s === 'f' || s === 'fahrenheit') return 'F';
  return undefined;
}

/** Already in the kit form: °C with the kit's own figure kept (what the gateway writes). */
function normalised(x: Record<string, unknown> | null): boolean {
  return x !== null && unitOf(x.unit) === 'C' && typeof x.rawValue === 'number' && unitOf(x.rawUnit) !== undefined;
}

/**
 * The batch as a kit's series keeps it: each temperature in °C with `unit: "C"`, `rawValue` and
 * `rawUnit`. The unit of a figure is, in this order: the observation's own `unit`; the unit of
 * the reading stored at the same instant when the figure is that reading's (`rawValue`, or its
 * °C temperature); the unit of the kit's last stored reading that names one; else the kit's
 * default, °F. Reads the store only for figures without a unit of their own.
 */
export async function kitCelsius(store: Store, deviceId: string, batch: ObservationBatch): Promise<ObservationBatch> {
  const { ts, temperature, extra } = batch;
  const n = ts.length;
  let from = Number.POSITIVE_INFINITY;
  let to = Number.NEGATIVE_INFINITY;
  let changes = false;
  let unknown = 0;
  for (let i = 0; i < n; i++) {
    const x = extra?.[i] ?? null;
    if (Number.isNaN(temperature[i]!) || normalised(x)) continue;
    changes = true;
    if (unitOf(x?.unit) !== undefined) continue;
    unknown++;
    from = Math.min(from, ts[i]!);
    to = Math.max(to, ts[i]!);
  }
  if (!changes) return batch;
  let atSameInstant: Map<number, ObservationRecord> | null = null;
  let lastUnit: TemperatureUnit | undefined;
  if (unknown) {
    atSameInstant = new Map();
    // What the write will replace and the kit's last unit: the primary's rows, not a standby's (fresh).
    const stored = await store.queryObservations(deviceId, { from, to: to + 1, limit: Math.min(unknown * 4, 10_000), fresh: true });
    for (const s of stored.observations) atSameInstant.set(s.ts, s);
    const newest = await store.queryObservations(deviceId, { limit: LAST_UNIT_ROWS, fresh: true });
    for (const s of newest.observations) {
      lastUnit = unitOf(s.extra?.rawUnit) ?? (s.temperature !== null ? unitOf(s.extra?.unit) : undefined);
      if (lastUnit) break;
    }
  }
  const out: ObservationBatch = { ts, temperature: new Float64Array(n), extra: new Array(n), newest: batch.newest };
  for (let i = 0; i < n; i++) {
    const t = temperature[i]!;
    const x = extra?.[i] ?? null;
    if (Number.isNaN(t) || normalised(x)) {
      out.temperature[i] = t;
      out.extra![i] = x;
      continue;
    }
    const unit = unitOf(x?.unit) ?? sameReadingUnit(atSameInstant?.get(ts[i]!), t) ?? lastUnit ?? KIT_DEFAULT_UNIT;
    out.temperature[i] = toCelsius(t, unit);
    out.extra![i] = { ...x, unit: 'C', rawValue: t, rawUnit: unit };
  }
  return out;
}

/** The unit of `value` when it is the stored reading's own figure (or its °C temperature). */
function sameReadingUnit(stored: ObservationRecord | undefined, value: number): TemperatureUnit | undefined {
  if (!stored?.extra) return undefined;
  const rawUnit = unitOf(stored.extra.rawUnit);
  if (rawUnit && stored.extra.rawValue === value) return rawUnit;
  if (stored.temperature === value && unitOf(stored.extra.unit) === 'C') return 'C';
  return undefined;
}
