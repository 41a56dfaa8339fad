// Value rules shared by the HTTP layer, the CLI and the store. Each returns a clean value or throws
// a ReefError naming the field, so every entry point rejects the same inputs the same way.
import { parseDuration } from './duration.ts';
import { ReefError } from './errors.ts';

/**
 * Solution names: case sensitive (seed §1), 1..64 characters from a conservative set so a name is
 * always safe in a URL path segment, a file name and a PostgreSQL identifier suffix.
 */
export const SOLUTION_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
export const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
export const MAC16 = /^[0-9a-fA-F]{16}$/;

export function solutionName(name: string): string {
  if (!SOLUTION_NAME.test(name) || name.includes('..')) {
    throw new ReefError('INVALID_SOLUTION_NAME', `solution name ${JSON.stringify(name.slice(0, 80))} is not allowed: use 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit`, {
      field: 'solution',
    });
  }
  return name;
}

export function deviceId(id: string): string {
  if (!UUID.test(id)) throw new ReefError('INVALID_DEVICE_ID', `device id ${JSON.stringify(id.slice(0, 80))} is not a UUID`, { field: 'id' });
  return id.toLowerCase();
}

/** MAC as the seed shows it: 16 hexadecimal characters; stored lower case. */
export function macAddress(mac: string, field = 'ssniMacAddress'): string {
  const m = mac.replace(/[:-]/g, '');
  if (!MAC16.test(m)) throw new ReefError('VALIDATION_FAILED', `${field} must be 16 hexadecimal characters`, { field });
  return m.toLowerCase();
}

// ISO 8601 date-time with a zone designator. A time without a zone is ambiguous for a platform
// that stores UTC, so it is refused rather than guessed.
const ISO_DATETIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?([Zz]|[+-]\d{2}:?\d{2})$/;

const DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * The canonical form every client sends (what toISOString writes: 2026-01-31T12:00:00.000Z),
 * read digit by digit: uploads of 10,000 observations spend most of their validation here.
 * The epoch millisecond of the day is remembered, as a batch's timestamps mostly share a day.
 * Returns -1 for anything else, which the general path then parses or refuses.
 */
let lastDate = -1;
let lastDayMs = 0;
/** Offsets of the digits in 2026-01-31T12:00:00.000Z (also the upload scanner's, observation-scan.ts). */
export const ISO_DIGITS = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20, 21, 22];

// Top-level helpers rather than closures: a closure per call costs an allocation per observation.
function digitsBad(s: string): boolean {
  for (let i = 0; i < ISO_DIGITS.length; i++) if ((s.charCodeAt(ISO_DIGITS[i]!) - 48) >>> 0 > 9) return true;
  return false;
}
function two(s: string, i: number): number {
  return (s.charCodeAt(i) - 48) * 10 + s.charCodeAt(i + 1) - 48;
}

function canonicalIso(s: string): number {
  if (
    s.length !== 24 ||
    s.charCodeAt(23) !== 90 ||
    s.charCodeAt(4) !== 45 ||
    s.charCodeAt(7) !== 45 ||
    s.charCodeAt(10) !== 84 ||
    s.charCodeAt(13) !== 58 ||
    s.charCodeAt(16) !== 58 ||
    s.charCodeAt(19) !== 46 ||
    digitsBad(s)
  )
    return -1;
  const y = two(s, 0) * 100 + two(s, 2),
    mo = two(s, 5),
    d = two(s, 8);
  const h = two(s, 11),
    mi = two(s, 14),
    sec = two(s, 17),
    ms = two(s, 20) * 10 + s.charCodeAt(22) - 48;
  return isoFields(y, mo, d, h, mi, sec, ms);
}

/**
 * The epoch millisecond of a canonical timestamp's fields, or -1 when they name no real instant
 * from 1970 on: the calendar rules of canonicalIso, shared with the upload scanner's byte
 * reader (observation-scan.ts). The day's epoch is remembered.
 */
export function isoFields(y: number, mo: number, d: number, h: number, mi: number, sec: number, ms: number): number {
  const time = timeOfDay(h, mi, sec, ms);
  if (y < 1970 || time < 0) return -1;
  const date = y * 10000 + mo * 100 + d;
  if (date !== lastDate) {
    if (mo < 1 || mo > 12 || d < 1) return -1;
    const leap = mo === 2 && y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0) ? 1 : 0;
    if (d > DAYS[mo - 1]! + leap) return -1;
    lastDayMs = Date.UTC(y, mo - 1, d);
    lastDate = date;
  }
  return lastDayMs + time;
}

/** The millisecond of the day of a canonical timestamp's time fields, or -1 when they name none. */
export function timeOfDay(h: number, mi: number, sec: number, ms: number): number {
  if (h > 23 || mi > 59 || sec > 59) return -1;
  return ((h * 60 + mi) * 60 + sec) * 1000 + ms;
}

/** Parses an ISO-8601 UTC/offset timestamp to epoch ms; throws naming `field`. */
export function isoTimestamp(value: unknown, field: string): number {
  if (typeof value === 'string') {
    const fast = canonicalIso(value);
    if (fast >= 0) return fast;
  }
  if (typeof value !== 'string') throw new ReefError('VALIDATION_FAILED', `${field} must be an ISO-8601 date-time string`, { field });
  const m = ISO_DATETIME.exec(value);
  const ms = m ? Date.parse(value.replace(' ', 'T')) : NaN;
  if (!m || !Number.isFinite(ms)) {
    throw new ReefError('VALIDATION_FAILED', `${field} must be an ISO-8601 date-time with a time zone, e.g. 2026-01-31T12:00:00.000Z`, { field });
  }
  // Date.parse rolls 2026-02-31 over to March; a calendar check refuses it.
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const day = new Date(Date.UTC(y, mo - 1, d));
  if (day.getUTCFullYear() !== y || day.getUTCMonth() !== mo - 1 || day.getUTCDate() !== d || Number(m[4]) > 23 || Number(m[5]) > 59 || Number(m[6] ?? 0) > 59) {
    throw new ReefError('VALIDATION_FAILED', `${field} is not a real calendar date-time`, { field });
  }
  if (ms < 0 || ms > 253402300799999) throw new ReefError('VALIDATION_FAILED', `${field} must lie between 1970 and 9999`, { field });
  return ms;
}

export function latitude(v: unknown, field = 'domainInfo.location.latitude'): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < -90 || v > 90) {
    throw new ReefError('VALIDATION_FAILED', `${field} must be a number from -90 to 90`, { field });
  }
  return v;
}

export function longitude(v: unknown, field = 'domainInfo.location.longitude'): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < -180 || v > 180) {
    throw new ReefError('VALIDATION_FAILED', `${field} must be a number from -180 to 180`, { field });
  }
  return v;
}

/** Temperature: a finite number, or a numeric string (some clients send "72.50"), stored as a number. */
export function temperature(v: unknown, field: string): number {
  let n: number;
  if (typeof v === 'number') n = v;
  else if (typeof v === 'string' && /^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$/.test(v)) n = Number(v);
  else throw new ReefError('VALIDATION_FAILED', `${field} must be a number or a numeric string`, { field });
  if (!Number.isFinite(n)) throw new ReefError('VALIDATION_FAILED', `${field} must be finite`, { field });
  return n;
}

/** A positive duration ("500ms", "10s", "5m", "1h", "1d"; a bare number is milliseconds) in ms. */
export function duration(v: string, field: string): number {
  const ms = parseDuration(v);
  if (!Number.isSafeInteger(ms) || ms <= 0) throw new ReefError('VALIDATION_FAILED', `${field} must be a duration such as 500ms, 10s, 5m, 1h or 1d`, { field });
  return ms;
}
