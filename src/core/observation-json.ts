// The two hot read responses (latest of all, a device's page) written as JSON text straight from
// store records: no intermediate wire objects, no generic serialiser walking free-form fields.
// The result is byte-for-byte what JSON.stringify of the wire form gives (test/core/observation-json.test.ts).
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

// A device's page written as bytes, then made into one string (issue 18 item 2). Building the
// page by string concatenation made a rope of ~4,000 pieces that the HTTP layer flattened (for
// the Content-Length) before encoding it; here the timestamps and keys never become strings, the
// bytes go into one buffer reused from page to page, and one UTF-8 decode gives a flat string.
// (Sending a new buffer per request instead was measured too: a little cheaper on a fresh server,
// but after a 2,000,000-observation upload it cost 1.21 ms of server CPU per page against 0.91 for
// this, likely because each 100 KB ArrayBuffer is memory outside V8's heap that its collector
// reclaims only under pressure. The reused buffer keeps the size of the largest page, ~1 MB at
// the 10,000 cap.)
const DAY_MS = 86_400_000;
/** The most bytes a row takes without its free fields: separator, keys, a 27-character timestamp, a 25-character number. */
const ROW_MAX = 96;
const OPEN_PAGE = ascii('{"observations":[');
const OPEN_ROW = ascii('{"timestamp":"');
const TEMPERATURE_KEY = ascii('","temperature":');
const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder();
/** Where pages are written before they become the response's string; grows to the largest page. */
let scratch: Uint8Array<ArrayBuffer> = new Uint8Array(1 << 17);
let bytesDay = Number.NaN;
const dayPrefix = new Uint8Array(11); // "YYYY-MM-DDT" of bytesDay

function ascii(s: string): Uint8Array {
  const b = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) b[i] = s.charCodeAt(i);
  return b;
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
  return b;
}

function room(size: number): Uint8Array<ArrayBuffer> {
  if (scratch.length < size) scratch = new Uint8Array(size);
  return scratch;
}

/** isoUtc(ms) written as bytes at `o`; returns the offset after it. */
function putIso(out: Uint8Array, o: number, ms: number): number {
  if (!Number.isInteger(ms) || ms < 0 || ms > 253402300799999) return putText(out, o, isoUtc(ms));
  const day = Math.floor(ms / DAY_MS);
  if (day !== bytesDay) {
    bytesDay = day;
    const p = new Date(day * DAY_MS).toISOString();
    for (let i = 0; i < 11; i++) dayPrefix[i] = p.charCodeAt(i);
  }
  o = put(out, o, dayPrefix);
  let r = ms - day * DAY_MS;
  const h = (r / 3_600_000) | 0;
  r -= h * 3_600_000;
  const m = (r / 60_000) | 0;
  r -= m * 60_000;
  const s = (r / 1000) | 0;
  r -= s * 1000;
  out[o] = 48 + ((h / 10) | 0);
  out[o + 1] = 48 + (h % 10);
  out[o + 2] = 58; // :
  out[o + 3] = 48 + ((m / 10) | 0);
  out[o + 4] = 48 + (m % 10);
  out[o + 5] = 58;
  out[o + 6] = 48 + ((s / 10) | 0);
  out[o + 7] = 48 + (s % 10);
  out[o + 8] = 46; // .
  out[o + 9] = 48 + ((r / 100) | 0);
  out[o + 10] = 48 + (((r / 10) | 0) % 10);
  out[o + 11] = 48 + (r % 10);
  out[o + 12] = 90; // Z
  return o + 13;
}

/**
 * pageJson of the first `n` stored rows ([ts, temperature, free fields as stored JSON text]): the
 * same text (test/core/observation-json.test.ts, and the store conformance suite through
 * Store.observationPageJson).
 */
export function pageJsonOfRows(rows: readonly (readonly [number, number | null, string | null])[], n = rows.length): string {
  let out = room(OPEN_PAGE.length + 2 + n * ROW_MAX);
  let o = put(out, 0, OPEN_PAGE);
  for (let i = 0; i < n; i++) {
    const row = rows[i]!;
    const t = row[1];
    const extra = row[2];
    // A UTF-16 unit never takes more than 3 bytes in UTF-8.
    const need = ROW_MAX + (extra === null ? 0 : extra.length * 3);
    if (out.length - o < need + 2) out = grow(out, o, need + 2);
    if (i) out[o++] = 44; // ,
    o = put(out, o, OPEN_ROW);
    o = putIso(out, o, row[0]);
    if (t !== null) {
      o = put(out, o, TEMPERATURE_KEY);
      // A stored temperature is finite: its JSON text is its String form (see observationJsonText).
      o = putText(out, o, '' + t);
    } else out[o++] = 34; // the timestamp's closing quote
    if (extra !== null && extra.length > 2) {
      // The stored object's text written whole, then its braces turned into the separator and
      // dropped: ',' + the members, as observationJsonText splices them.
      const written = utf8.encodeInto(extra, out.subarray(o)).written;
      out[o] = 44;
      o += written - 1;
    }
    out[o++] = 125; // }
  }
  out[o++] = 93; // ]
  out[o++] = 125;
  return fromUtf8.decode(out.subarray(0, o));
}

/** Where putStoredReal stopped reading its input (the character after the number). */
let readTo = 0;

/**
 * Writes the JSON text of a stored temperature given as SQLite's text of the double (in `s` from
 * `i`), and leaves the input position after it in readTo; returns -1 when there is no number there.
 * SQLite renders a double with 15 significant digits when those read back as the same double, else
 * with 17 (always reading back exactly), plain or with an exponent, a whole number with ".0"
 * (checked on 1.4 million doubles, and by the store conformance suite). A plain text of at most 15
 * significant digits is the only decimal of its length or shorter that reads back as the double, so
 * its digits are exactly Number::toString's (ECMA-262: the fewest digits that read back; plain from
 * 10^-7 to 10^21) and it is copied, less a ".0". Any other text is read back and written by String().
 */
function putStoredReal(out: Uint8Array, o: number, s: string, i: number): number {
  const start = o;
  const from = i;
  let c = s.charCodeAt(i);
  if (c === 45) {
    out[o++] = 45; // -
    c = s.charCodeAt(++i);
  }
  let digits = 0;
  let significant = 0;
  let dot = -1;
  for (;;) {
    if (c >= 48 && c <= 57) {
      digits++;
      if (significant || c !== 48) significant++;
      out[o++] = c;
    } else if (c === 46 && dot < 0) {
      dot = o;
      out[o++] = 46;
    } else break;
    c = s.charCodeAt(++i);
  }
  if (c === 101 || c === 69 || significant > 15 || !digits) {
    // An exponent or 17 digits: the number read back and written as String() writes it.
    for (; i < s.length; i++) {
      c = s.charCodeAt(i);
      if (!(c === 43 || c === 45 || c === 46 || c === 101 || c === 69 || (c >= 48 && c <= 57))) break;
    }
    const v = Number(s.slice(from, i));
    if (i === from || !Number.isFinite(v)) return -1;
    readTo = i;
    return putText(out, start, '' + v);
  }
  // "21.0" is 21; "-0.0" is 0, as String(-0).
  if (dot >= 0 && o === dot + 2 && out[dot + 1] === 48) o = dot;
  if (significant === 0) {
    out[start] = 48;
    o = start + 1;
  }
  readTo = i;
  return o;
}

/** An integer written in decimal (the timestamp in a packed text) read from `s` at `i`; the position after it in readTo. */
function readInteger(s: string, i: number): number {
  const neg = s.charCodeAt(i) === 45;
  if (neg) i++;
  let n = 0;
  let c = s.charCodeAt(i);
  while (c >= 48 && c <= 57) {
    n = n * 10 + (c - 48);
    c = s.charCodeAt(++i);
  }
  readTo = i;
  return neg ? -n : n;
}

/**
 * pageJson from the SQLite store's packed page text (SqliteStore.observationPageJson): rows newest
 * first, each `<ts>`, then ` <temperature as SQLite writes the double>` when it has one, then
 * `\u001f<free fields as stored JSON text>` when it has them, rows ended by `\u001e`. The stored
 * JSON text is JSON.stringify's, which never holds a raw control character. Returns null when the
 * text is not `rows` such rows: the caller renders from the row values instead.
 */
export function pageJsonFromPacked(s: string, rows: number): string | null {
  let out = room(OPEN_PAGE.length + 2 + rows * ROW_MAX);
  let o = put(out, 0, OPEN_PAGE);
  const end = s.length;
  let i = 0;
  for (let r = 0; r < rows; r++) {
    if (out.length - o < ROW_MAX + 2) out = grow(out, o, ROW_MAX + 2);
    if (r) out[o++] = 44; // ,
    o = put(out, o, OPEN_ROW);
    o = putIso(out, o, readInteger(s, i));
    i = readTo;
    let c = s.charCodeAt(i);
    if (c === 32) {
      o = put(out, o, TEMPERATURE_KEY);
      o = putStoredReal(out, o, s, i + 1);
      if (o < 0) return null;
      i = readTo;
      c = s.charCodeAt(i);
    } else out[o++] = 34; // the timestamp's closing quote
    if (c === 31) {
      const stop = s.indexOf('\u001e', i + 1);
      if (stop < 0) return null;
      const extra = s.slice(i + 1, stop);
      if (extra.length > 2) {
        if (out.length - o < extra.length * 3 + 2) out = grow(out, o, extra.length * 3 + 2);
        // The stored object's text written whole, then its braces turned into the separator and
        // dropped: ',' + the members, as observationJsonText splices them.
        const written = utf8.encodeInto(extra, out.subarray(o)).written;
        out[o] = 44;
        o += written - 1;
      }
      i = stop;
      c = 30;
    }
    if (c !== 30) return null; // not the text described
    i++;
    out[o++] = 125; // }
  }
  if (i !== end) return null;
  out[o++] = 93; // ]
  out[o++] = 125;
  return fromUtf8.decode(out.subarray(0, o));
}

/**
 * pageJson from the SQLite store's page as two lists (SqliteStore.observationPageJson, pages
 * without free fields): the timestamps, and the temperatures as SQLite writes the doubles (`n`: none),
 * each followed by a space, rows newest first. Returns null when they are not `rows` such rows.
 * (Every read stops at a space inside the text: reading past a string's end makes V8 call the
 * charCodeAt builtin instead of inlining it, which cost a fifth of the renderer.)
 */
export function pageJsonFromLists(times: string, temperatures: string, rows: number): string | null {
  const out = room(OPEN_PAGE.length + 2 + rows * ROW_MAX);
  let o = put(out, 0, OPEN_PAGE);
  let i = 0;
  let j = 0;
  for (let r = 0; r < rows; r++) {
    if (r) out[o++] = 44; // ,
    o = put(out, o, OPEN_ROW);
    o = putIso(out, o, readInteger(times, i));
    i = readTo;
    if (times.charCodeAt(i++) !== 32) return null;
    if (temperatures.charCodeAt(j) === 110) {
      out[o++] = 34; // no temperature: the timestamp's closing quote
      j++;
    } else {
      o = put(out, o, TEMPERATURE_KEY);
      o = putStoredReal(out, o, temperatures, j);
      if (o < 0) return null;
      j = readTo;
    }
    if (temperatures.charCodeAt(j++) !== 32) return null;
    out[o++] = 125; // }
  }
  if (i !== times.length || j !== temperatures.length) return null;
  out[o++] = 93; // ]
  out[o++] = 125;
  return fromUtf8.decode(out.subarray(0, o));
}
