// The two hot read responses (latest of all, a device's page) written as JSON text straight from
// store records: no intermediate wire objects, no generic serialiser walking free-form fields.
// The result is byte-for-byte what JSON.stringify of the wire form gives (test/unit/core/observation-json.test.ts).
import { isoUtc } from './time.ts';
import type { ObservationRecord } from './types.ts';

export function observationJson(r: ObservationRecord): string {
  return observationJsonText(r.ts, r.temperature, r.extra ? JSON.stringify(r.extra) : null);
}

/**
 * One observation from its stored parts, the free fields as the JSON text the stores keep
 * (JSON.stringify of the object): a page read from the store is rendered without parsing them.
 */
export function observationJsonText(ts: number, temperature: number | null, extra: string | null): string {
  let s = '{"timestamp":"' + isoUtc(ts) + '"';
  // A stored temperature is finite, and a finite number's JSON text is its String form (ECMA-262
  // SerializeJSONProperty: ToString), which '' + n gives without JSON.stringify's call: a page of
  // 1,000 renders in about two thirds of the time.
  if (temperature !== null) s += ',"temperature":' + temperature;
  // Free fields never include timestamp or temperature (parseBatch keeps those apart).
  if (extra !== null && extra.length > 2) s += ',' + extra.slice(1, -1);
  return s + '}';
}

export function latestJson(rows: { deviceId: string; observation: ObservationRecord }[]): string {
  const parts = new Array<string>(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i]!;
    parts[i] = '{"deviceId":"' + r.deviceId + '","observations":[' + observationJson(r.observation) + ']}';
  }
  return '[' + parts.join(',') + ']';
}

/** Rows of several devices, consecutive rows of one device in one group (a solution-wide page). */
export function groupedJson(rows: { deviceId: string; observation: ObservationRecord }[]): string {
  const parts: string[] = [];
  let i = 0;
  while (i < rows.length) {
    const id = rows[i]!.deviceId;
    const obs: string[] = [];
    for (; i < rows.length && rows[i]!.deviceId === id; i++) obs.push(observationJson(rows[i]!.observation));
    parts.push('{"deviceId":"' + id + '","observations":[' + obs.join(',') + ']}');
  }
  return '[' + parts.join(',') + ']';
}

export function pageJson(rows: ObservationRecord[]): string {
  return '{"observations":[' + rows.map(observationJson).join(',') + ']}';
}

// A device's page written as bytes, then made into one string. Building the
// page by string concatenation made a rope of ~4,000 pieces that the HTTP layer flattened (for
// the Content-Length) before encoding it; here the timestamps and keys never become strings, the
// bytes go into one buffer reused from page to page, and one UTF-8 decode gives a flat string.
// (A new buffer per request is a little cheaper on a fresh server, but after a
// 2,000,000-observation upload it costs 1.21 ms of server CPU per page against 0.91 for
// this, likely because each 100 KB ArrayBuffer is memory outside V8's heap that its collector
// reclaims only under pressure. The reused buffer keeps the size of the largest page, ~1 MB at
// the 10,000 cap.)
/** The most bytes a row takes without its free fields: separator, keys, a 27-character timestamp, a 25-character number. */
const ROW_MAX = 96;
const OPEN_PAGE = ascii('{"observations":[');
const OPEN_ROW = ascii('{"timestamp":"');
const TEMPERATURE_KEY = ascii('","temperature":');
const OPEN_ROW_WORDS = words(OPEN_ROW);
const TEMPERATURE_KEY_WORDS = words(TEMPERATURE_KEY);
const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder();
/** Where pages are written before they become the response's string; grows to the largest page. */
let scratch: Uint8Array<ArrayBuffer> = new Uint8Array(1 << 17);
let scratchView = new DataView(scratch.buffer);

function ascii(s: string): Uint8Array {
  const b = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) b[i] = s.charCodeAt(i);
  return b;
}

/** Bytes as little-endian 32-bit words (the last one padded with zeros), for putWords. */
function words(b: Uint8Array): Uint32Array {
  const w = new Uint32Array(Math.ceil(b.length / 4));
  for (let i = 0; i < b.length; i++) w[i >> 2]! |= b[i]! << (8 * (i & 3));
  return w;
}

/**
 * `len` bytes of constant text written a word at a time. The last word may write up to three bytes
 * past them (zeros), always inside the row's reserved room (ROW_MAX), and overwritten next.
 */
function putWords(view: DataView, o: number, w: Uint32Array, len: number): number {
  for (let i = 0; i < w.length; i++) view.setUint32(o + 4 * i, w[i]!, true);
  return o + len;
}

function put(out: Uint8Array, o: number, b: Uint8Array): number {
  for (let i = 0; i < b.length; i++) out[o + i] = b[i]!;
  return o + b.length;
}

function putText(out: Uint8Array, o: number, s: string): number {
  for (let i = 0; i < s.length; i++) out[o + i] = s.charCodeAt(i);
  return o + s.length;
}

function grow(out: Uint8Array, used: number, need: number): Uint8Array<ArrayBuffer> {
  const b = new Uint8Array(Math.max(out.length * 2, used + need));
  b.set(out.subarray(0, used));
  scratch = b;
  scratchView = new DataView(b.buffer);
  return b;
}

function room(size: number): Uint8Array<ArrayBuffer> {
  if (scratch.length < size) {
    scratch = new Uint8Array(size);
    scratchView = new DataView(scratch.buffer);
  }
  return scratch;
}

/**
 * '' + t as bytes (t finite). Readings have a few decimals: when t × 10^4 rounded, m, gives t back
 * as m / 10^4, t is the decimal m·10^-4 exactly as the double it reads back to, and with at most 13
 * significant digits that decimal is t's shortest round-trip form (two decimals of at most 15
 * digits never read back to one double), which is what String gives (ECMA-262 Number::toString,
 * fixed notation from 10^-6 up to 10^21). Its digits are written from the integer m, with no
 * string per reading: a page of 1,000 is rendered in about half the time. Anything else goes
 * through String.
 */
function putNumber(out: Uint8Array, o: number, t: number): number {
  if (t > -1e9 && t < 1e9) {
    const m = Math.round(t * 10_000);
    if (m / 10_000 === t) {
      let a = m;
      if (a < 0) {
        out[o++] = 45; // - (never for -0, whose String form is "0")
        a = -a;
      }
      const whole = Math.floor(a / 10_000);
      let frac = a - whole * 10_000;
      o = putUint(out, o, whole);
      if (frac !== 0) {
        out[o++] = 46; // .
        let digits = 4;
        while (frac % 10 === 0) {
          frac /= 10;
          digits--;
        }
        for (let i = digits - 1; i >= 0; i--) {
          out[o + i] = 48 + (frac % 10);
          frac = (frac / 10) | 0;
        }
        o += digits;
      }
      return o;
    }
  }
  return putText(out, o, '' + t);
}

/** A whole number below 10^9 in decimal. */
function putUint(out: Uint8Array, o: number, n: number): number {
  let len = 1;
  for (let p = 10; p <= n; p *= 10) len++;
  for (let i = len - 1; i >= 0; i--) {
    out[o + i] = 48 + (n % 10);
    n = (n / 10) | 0;
  }
  return o + len;
}

/** Two ASCII digits of 0–99 as one little-endian 16-bit word: "07" is 0x3730. */
const DIGITS2 = Uint16Array.from({ length: 100 }, (_, n) => (48 + ((n / 10) | 0)) | ((48 + (n % 10)) << 8));
/** "YYYY-MM-DDTHH:MM:" of the minute `prefixMinute`, as four little-endian 32-bit words and a byte. */
let prefixMinute = Number.NaN;
const prefixWords = new Uint32Array(4);
let prefixLast = 0;

/**
 * isoUtc(ms) written as bytes at `o`; returns the offset after it. The rows of a page are mostly
 * seconds apart: the date, hour and minute are made once per minute and copied a word at a time,
 * then the seconds and milliseconds written from a table of digit pairs.
 */
function putIso(out: Uint8Array, view: DataView, o: number, ms: number): number {
  if (!Number.isInteger(ms) || ms < 0 || ms > 253402300799999) return putText(out, o, isoUtc(ms));
  const minute = Math.floor(ms / 60_000);
  if (minute !== prefixMinute) {
    prefixMinute = minute;
    const p = new Date(minute * 60_000).toISOString(); // YYYY-MM-DDTHH:MM:00.000Z
    for (let w = 0; w < 4; w++) {
      let word = 0;
      for (let b = 3; b >= 0; b--) word = (word << 8) | p.charCodeAt(w * 4 + b);
      prefixWords[w] = word >>> 0;
    }
    prefixLast = p.charCodeAt(16);
  }
  view.setUint32(o, prefixWords[0]!, true);
  view.setUint32(o + 4, prefixWords[1]!, true);
  view.setUint32(o + 8, prefixWords[2]!, true);
  view.setUint32(o + 12, prefixWords[3]!, true);
  out[o + 16] = prefixLast;
  const r = ms - minute * 60_000;
  const sec = (r / 1000) | 0;
  const milli = r - sec * 1000;
  view.setUint16(o + 17, DIGITS2[sec]!, true);
  out[o + 19] = 46; // .
  const hundreds = (milli / 100) | 0;
  out[o + 20] = 48 + hundreds;
  view.setUint16(o + 21, DIGITS2[milli - hundreds * 100]!, true);
  out[o + 23] = 90; // Z
  return o + 24;
}

/**
 * pageJson of `n` stored readings given as columns (timestamps, temperatures with NaN for none,
 * free fields as the stored JSON text or null; `extra` null when none has any), in the order given:
 * the same text (test/unit/core/observation-json.test.ts, and the store conformance suite through
 * Store.observationPageJson).
 */
export function pageJsonOfColumns(ts: ArrayLike<number>, temperature: ArrayLike<number>, extra: readonly (string | null)[] | null, n: number): string {
  let out = room(OPEN_PAGE.length + 2 + n * ROW_MAX);
  let o = put(out, 0, OPEN_PAGE);
  for (let i = 0; i < n; i++) {
    const t = temperature[i]!;
    const fields = extra === null ? null : extra[i]!;
    // A UTF-16 unit never takes more than 3 bytes in UTF-8.
    const need = ROW_MAX + (fields === null ? 0 : fields.length * 3);
    if (out.length - o < need + 2) out = grow(out, o, need + 2);
    if (i) out[o++] = 44; // ,
    o = putObservation(out, scratchView, o, ts[i]!, t, fields);
  }
  out[o++] = 93; // ]
  out[o++] = 125;
  return fromUtf8.decode(out.subarray(0, o));
}

/**
 * One reading as observationJsonText writes it, at `o` in `out` (`view` over the same memory), which
 * has room for ROW_MAX bytes and its free fields' UTF-8; returns the offset after it.
 */
function putObservation(out: Uint8Array, view: DataView, o: number, ts: number, t: number, fields: string | null): number {
  o = putWords(view, o, OPEN_ROW_WORDS, OPEN_ROW.length);
  o = putIso(out, view, o, ts);
  if (!Number.isNaN(t)) {
    o = putWords(view, o, TEMPERATURE_KEY_WORDS, TEMPERATURE_KEY.length);
    // A stored temperature is finite: its JSON text is its String form (see observationJsonText).
    o = putNumber(out, o, t);
  } else out[o++] = 34; // the timestamp's closing quote
  if (fields !== null && fields.length > 2) {
    // The stored object's text written whole, then its braces turned into the separator and
    // dropped: ',' + the members, as observationJsonText splices them.
    const written = utf8.encodeInto(fields, out.subarray(o)).written;
    out[o] = 44;
    o += written - 1;
  }
  out[o++] = 125; // }
  return o;
}

const OPEN_GROUP = ascii('{"deviceId":"');
const GROUP_OBSERVATIONS = ascii('","observations":[');

/**
 * latestJson of each device's newest reading given as columns (device ids; timestamps,
 * temperatures with NaN for none, free fields as JSON text or null, as pageJsonOfColumns takes
 * them), as UTF-8 bytes in a Buffer of its own: the same text (test/unit/core/observation-json.test.ts
 * and the store conformance suite). Bytes because the HTTP layer writes a Buffer it is handed for
 * a fraction of what encoding a 1.3 MB string costs it (Store.latestObservationsJson); written
 * straight from the columns, no string per device is made either.
 */
export function latestJsonOfColumns(ids: readonly string[], ts: ArrayLike<number>, temperature: ArrayLike<number>, extra: readonly (string | null)[] | null, n: number): Buffer {
  let out = room(2 + n * (ROW_MAX + 80));
  let o = 0;
  out[o++] = 91; // [
  for (let i = 0; i < n; i++) {
    const id = ids[i]!;
    const fields = extra === null ? null : extra[i]!;
    // The group's keys and brackets, the id (3 bytes per UTF-16 unit at most), the reading.
    const need = OPEN_GROUP.length + GROUP_OBSERVATIONS.length + 3 + id.length * 3 + ROW_MAX + (fields === null ? 0 : fields.length * 3);
    if (out.length - o < need + 1) out = grow(out, o, need + 1);
    if (i) out[o++] = 44; // ,
    o = put(out, o, OPEN_GROUP);
    // Written as latestJson writes them, without escapes: a device id is a UUID (checked when the
    // device is made), copied byte for byte; anything else is encoded, never cut short.
    let k = 0;
    for (; k < id.length; k++) {
      const c = id.charCodeAt(k);
      if (c >= 0x80) break;
      out[o + k] = c;
    }
    o = k === id.length ? o + k : o + utf8.encodeInto(id, out.subarray(o)).written;
    o = put(out, o, GROUP_OBSERVATIONS);
    o = putObservation(out, scratchView, o, ts[i]!, temperature[i]!, fields);
    out[o++] = 93; // ]
    out[o++] = 125; // }
  }
  out[o++] = 93; // ]
  // A copy: the scratch memory is written again by the next page.
  return Buffer.from(out.subarray(0, o));
}
