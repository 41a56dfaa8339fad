// The conditions of alarm rules as pure functions: does a reading break the rule, and is it far
// enough back inside the normal range (hysteresis) to clear it. No I/O: src/alarms/engine.ts (pairs.ts) keeps
// the state between readings.
import type { AlarmRuleSpec, TemperatureUnit } from '../core/alarms.ts';

/** The numeric value at a dotted path of a wire observation, or null when absent or not a number. */
export function readField(o: Record<string, unknown>, path: string): number | null {
  let v: unknown = o;
  if (path.indexOf('.') < 0) v = o[path];
  else {
    for (const k of path.split('.')) {
      if (typeof v !== 'object' || v === null) return null;
      v = (v as Record<string, unknown>)[k];
    }
  }
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/**
 * The unit an observation's temperature is in. Reef stores temperatures as sent; a reading may say
 * its unit in a `unit` field ("C", "F", "°C", "°F", "celsius", "fahrenheit"); without one it is
 * Celsius, as the gateway stores kit readings (docs/alarms.md "Units").
 */
export function readingUnit(o: Record<string, unknown>): TemperatureUnit {
  const u = o.unit;
  if (typeof u !== 'string') return 'C';
  const s = u.trim().toLowerCase().replace('°', '');
  return s === 'f' || s === 'fahrenheit' ? 'F' : 'C';
}

export function convert(v: number, from: TemperatureUnit, to: TemperatureUnit): number {
  if (from === to) return v;
  return from === 'C' ? (v * 9) / 5 + 32 : ((v - 32) * 5) / 9;
}

/** Change per minute between two readings (in the rule's unit), or null when they share a timestamp. */
export function ratePerMinute(prevTs: number, prevValue: number, ts: number, value: number): number | null {
  if (ts <= prevTs) return null;
  return ((value - prevValue) * 60_000) / (ts - prevTs);
}

/**
 * Whether `x` breaks the rule: the value for above/below/outside, the rate per minute for rate.
 * (Silence is decided by time alone.)
 */
export function breaks(s: AlarmRuleSpec, x: number): boolean {
  switch (s.condition) {
    case 'above':
      return x > s.threshold!;
    case 'below':
      return x < s.threshold!;
    case 'outside':
      return x < s.low! || x > s.high!;
    case 'rate':
      return s.direction === 'rise' ? x > s.ratePerMinute! : s.direction === 'fall' ? x < -s.ratePerMinute! : Math.abs(x) > s.ratePerMinute!;
    default:
      return false;
  }
}

/** Whether `x` is back inside the normal range by at least the hysteresis: the alarm clears. */
export function clears(s: AlarmRuleSpec, x: number): boolean {
  const h = s.hysteresis;
  switch (s.condition) {
    case 'above':
      return x <= s.threshold! - h;
    case 'below':
      return x >= s.threshold! + h;
    case 'outside':
      return x >= s.low! + h && x <= s.high! - h;
    case 'rate': {
      const limit = s.ratePerMinute! - h;
      return s.direction === 'rise' ? x <= limit : s.direction === 'fall' ? x >= -limit : Math.abs(x) <= limit;
    }
    default:
      return true;
  }
}
