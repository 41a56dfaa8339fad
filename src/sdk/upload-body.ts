// The body of an observation upload, `{"observations":[...]}`, written by hand for the common
// shape — a timestamp (Date, epoch milliseconds or ISO text) and a finite numeric temperature —
// and by JSON.stringify for anything else. A client uploading readings spends most of its CPU
// making this text (issue 18: JSON with ISO timestamps cost the bench's client 0.66 µs per
// observation through Date#toISOString and JSON.stringify, against 0.40 for InfluxDB's line
// protocol); here an ISO timestamp is the day's prefix, remembered, and the time of day from
// tables. The text means the same as JSON.stringify of the same observations with each timestamp
// as toISOString() gives it (test/sdk/upload-body.test.ts).
import type { UploadObservation } from './types.ts';

const DAY_MS = 86_400_000;
/** The latest ISO timestamp form: 9999-12-31T23:59:59.999Z. */
const MAX_PLAIN = 253402300799999;
const TWO = Array.from({ length: 100 }, (_, i) => String(i).padStart(2, '0'));
const THREE = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, '0'));
let day = Number.NaN;
let dayPrefix = '';

/** `new Date(ms).toISOString()` for epoch milliseconds (RangeError when not a valid time). */
export function isoOfMillis(ms: number): string {
  if (!Number.isInteger(ms) || ms < 0 || ms > MAX_PLAIN) return new Date(ms).toISOString();
  const d = Math.floor(ms / DAY_MS);
  if (d !== day) {
    day = d;
    dayPrefix = new Date(d * DAY_MS).toISOString().slice(0, 11);
  }
  let r = ms - d * DAY_MS;
  const h = (r / 3_600_000) | 0;
  r -= h * 3_600_000;
  const m = (r / 60_000) | 0;
  r -= m * 60_000;
  const s = (r / 1000) | 0;
  return dayPrefix + TWO[h] + ':' + TWO[m] + ':' + TWO[s] + '.' + THREE[r - s * 1000] + 'Z';
}

function timestampText(t: unknown): unknown {
  if (t instanceof Date) return isoOfMillis(t.getTime());
  if (typeof t === 'number') return isoOfMillis(t);
  return t;
}

function item(o: UploadObservation): string {
  const t = o.temperature;
  let plain = typeof t === 'number' ? Number.isFinite(t) : t === undefined;
  if (plain) {
    for (const k in o) {
      if (k !== 'timestamp' && k !== 'temperature') {
        plain = false;
        break;
      }
    }
  }
  const ts = timestampText(o.timestamp);
  if (!plain || typeof ts !== 'string') return JSON.stringify({ ...o, timestamp: ts });
  // A finite number's JSON text is its String form (ECMA-262 SerializeJSONProperty).
  const time = typeof o.timestamp === 'string' ? JSON.stringify(ts) : '"' + ts + '"';
  return t === undefined ? '{"timestamp":' + time + '}' : '{"timestamp":' + time + ',"temperature":' + t + '}';
}

/** The JSON text of an upload of `observations` (see the top of this file). */
export function uploadBody(observations: readonly UploadObservation[]): string {
  const parts = new Array<string>(observations.length);
  for (let i = 0; i < observations.length; i++) parts[i] = item(observations[i]!);
  return '{"observations":[' + parts.join(',') + ']}';
}
