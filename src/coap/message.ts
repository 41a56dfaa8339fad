// RFC 7252 §3 message codec, written by hand. parseMessage() refuses message format errors with a
// typed CoapFormatError whose `disposition` says what RFC 7252 §4.2/§4.3 asks of the receiver;
// checkOptions() then finds options that must be treated as unrecognized (§5.4.1, §5.4.3, §5.4.5),
// and classifyDatagram() combines both into the one answer a server gives.
import { Code, codeClass, codeToString, isRequestCode, METHOD_NAMES } from './codes.ts';
import { decodeUint, encodeUint, isCritical, Option, OPTION_DEFS, optionName, RECOGNIZED_OPTIONS } from './options.ts';

export const CON = 0;
export const NON = 1;
export const ACK = 2;
export const RST = 3;
export type MessageType = 0 | 1 | 2 | 3;
export const TYPE_NAMES = ['CON', 'NON', 'ACK', 'RST'] as const;

export interface CoapOption {
  number: number;
  value: Buffer;
}

export interface CoapMessage {
  type: MessageType;
  code: number;
  mid: number;
  token: Buffer;
  /** In ascending option-number order after parsing; any order when building (serialize sorts). */
  options: CoapOption[];
  payload: Buffer;
}

/**
 * What the receiver does with a message it cannot parse:
 * - `ignore`: silently drop (RFC 7252 §3: unknown version; §4.2: ACK/RST with errors; too short to
 *   carry a Message ID; §4.3: a NON may be ignored);
 * - `reset`: answer RST with the message's ID (§4.2: a CON with a format error is rejected).
 */
export type FormatDisposition = 'ignore' | 'reset';

export class CoapFormatError extends Error {
  readonly disposition: FormatDisposition;
  readonly mid?: number;
  readonly type?: MessageType;
  constructor(message: string, disposition: FormatDisposition, mid?: number, type?: MessageType) {
    super(message);
    this.name = 'CoapFormatError';
    this.disposition = disposition;
    if (mid !== undefined) this.mid = mid;
    if (type !== undefined) this.type = type;
  }
}

/** A zero-length buffer shared by every empty token, option value and payload (it cannot be written to). */
export const EMPTY_BUFFER: Buffer = Buffer.alloc(0);

/** The largest message an endpoint accepts unless told otherwise (RFC 7252 §4.6). */
export const SUGGESTED_MAX_MESSAGE_SIZE = 1152;

/** Upper bound this codec accepts; RFC 7252 §4.6 suggests 1152 bytes; larger is a caller's 4.13. */
export const MAX_MESSAGE_SIZE = 65507;

/**
 * parseMessage's refusal. A function of its own, not a closure made in every call: tsx runs the
 * sources with esbuild's keepNames, which names each such closure with Object.defineProperty as it
 * is made, on every datagram (the kit's CPU per request is 12 % lower without such closures).
 */
function fail(why: string, type: MessageType, mid: number): never {
  throw new CoapFormatError(why, type === CON || type === NON ? 'reset' : 'ignore', mid, type);
}

/**
 * Parses one datagram. Throws CoapFormatError on a message format error; reserved code classes
 * (1, 6, 7) and malformed empty messages count as format errors (RFC 7252 §4.1, §12.1).
 */
export function parseMessage(buf: Uint8Array): CoapMessage {
  const b = Buffer.isBuffer(buf) ? buf : Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  if (b.length < 4) throw new CoapFormatError(`datagram of ${b.length} bytes is shorter than the 4-byte header`, 'ignore');
  const b0 = b.readUInt8(0);
  const version = b0 >> 6;
  const type = ((b0 >> 4) & 3) as MessageType;
  const tkl = b0 & 0x0f;
  const code = b.readUInt8(1);
  const mid = b.readUInt16BE(2);
  // §3: messages with unknown version numbers MUST be silently ignored.
  if (version !== 1) throw new CoapFormatError(`unknown CoAP version ${version}`, 'ignore', mid, type);
  // §4.2/§4.3: rejecting a CON is a RST; an ACK or RST is never rejected, only ignored; a NON may be
  // rejected by RST too, which also tells an observing sender to stop (RFC 7641 §3.6).
  if (tkl > 8) fail(`token length ${tkl} is reserved (9-15)`, type, mid);
  const cls = codeClass(code);
  if (cls === 1 || cls === 6 || cls === 7) fail(`code ${codeToString(code)} is in a reserved class`, type, mid);
  if (code === Code.EMPTY) {
    // §4.1: an Empty message has TKL 0 and nothing after the header.
    if (tkl !== 0 || b.length !== 4) fail('empty message with token, options or payload', type, mid);
    if (type === NON) fail('empty NON message', type, mid);
    return { type, code, mid, token: EMPTY_BUFFER, options: [], payload: EMPTY_BUFFER };
  }
  if (b.length < 4 + tkl) fail('datagram shorter than its token length', type, mid);
  // Token, option values and payload are views into the datagram, not copies: a received
  // datagram's buffer is its own and nothing writes into it afterwards.
  const token = tkl === 0 ? EMPTY_BUFFER : b.subarray(4, 4 + tkl);
  const options: CoapOption[] = [];
  let i = 4 + tkl;
  let num = 0;
  let payload = EMPTY_BUFFER;
  while (i < b.length) {
    const byte = b.readUInt8(i);
    if (byte === 0xff) {
      // §3: a marker followed by a zero-length payload MUST be processed as a format error.
      if (i + 1 >= b.length) fail('payload marker followed by an empty payload', type, mid);
      payload = b.subarray(i + 1);
      break;
    }
    i++;
    let delta = byte >> 4;
    let len = byte & 0x0f;
    // §3.1: nibble 15 is reserved except as the whole payload-marker byte.
    if (delta === 15) fail('option delta 15 without a payload marker', type, mid);
    if (len === 15) fail('option length 15 is reserved', type, mid);
    if (delta === 13) {
      if (i >= b.length) fail('truncated extended option delta', type, mid);
      delta = b.readUInt8(i++) + 13;
    } else if (delta === 14) {
      if (i + 1 >= b.length) fail('truncated extended option delta', type, mid);
      delta = b.readUInt16BE(i) + 269;
      i += 2;
    }
    if (len === 13) {
      if (i >= b.length) fail('truncated extended option length', type, mid);
      len = b.readUInt8(i++) + 13;
    } else if (len === 14) {
      if (i + 1 >= b.length) fail('truncated extended option length', type, mid);
      len = b.readUInt16BE(i) + 269;
      i += 2;
    }
    num += delta;
    if (num > 0xffff) fail(`option number ${num} exceeds 65535`, type, mid);
    if (i + len > b.length) fail(`option ${num} value runs past the end of the datagram`, type, mid);
    options.push({ number: num, value: len === 0 ? EMPTY_BUFFER : b.subarray(i, i + len) });
    i += len;
  }
  return { type, code, mid, token, options, payload };
}

/** The options in ascending number order, stable (repeated options keep their order); the array itself when it already is. */
function sortedOptions(options: CoapOption[]): CoapOption[] {
  for (let k = 1; k < options.length; k++) if (options[k]!.number < options[k - 1]!.number) return [...options].sort((x, y) => x.number - y.number);
  return options;
}

/** Bytes of the extended delta/length field for a value (RFC 7252 §3.1). */
function extendedBytes(v: number): number {
  return v < 13 ? 0 : v < 269 ? 1 : 2;
}

/** The size of serializeMessage(m), without building it. */
export function encodedLength(m: CoapMessage): number {
  let n = 4 + m.token.length;
  let prev = 0;
  for (const o of sortedOptions(m.options)) {
    n += 1 + extendedBytes(o.number - prev) + extendedBytes(o.value.length) + o.value.length;
    prev = o.number;
  }
  return m.payload.length > 0 ? n + 1 + m.payload.length : n;
}

/** Writes a delta or length nibble's extension at `i` (RFC 7252 §3.1); returns the next index. */
function writeExtended(b: Buffer, i: number, v: number): number {
  if (v < 13) return i;
  if (v < 269) {
    b[i] = v - 13;
    return i + 1;
  }
  const x = v - 269;
  b[i] = (x >> 8) & 0xff;
  b[i + 1] = x & 0xff;
  return i + 2;
}

const nibble = (v: number): number => (v < 13 ? v : v < 269 ? 13 : 14);

/**
 * Serializes a message; options are sorted by number (stable, so repeated options keep their
 * order). One buffer, sized first and written in place.
 */
export function serializeMessage(m: CoapMessage): Buffer {
  const tkl = m.token.length;
  if (tkl > 8) throw new RangeError('token longer than 8 bytes');
  const opts = sortedOptions(m.options);
  const b = Buffer.allocUnsafe(encodedLength(m));
  b[0] = 0x40 | (m.type << 4) | tkl;
  b[1] = m.code;
  b[2] = (m.mid >> 8) & 0xff;
  b[3] = m.mid & 0xff;
  if (tkl > 0) b.set(m.token, 4);
  let i = 4 + tkl;
  let prev = 0;
  for (const o of opts) {
    const delta = o.number - prev;
    const len = o.value.length;
    b[i++] = (nibble(delta) << 4) | nibble(len);
    i = writeExtended(b, i, delta);
    i = writeExtended(b, i, len);
    if (len > 0) b.set(o.value, i);
    i += len;
    prev = o.number;
  }
  if (m.payload.length > 0) {
    b[i++] = 0xff;
    b.set(m.payload, i);
  }
  return b;
}

// ---- option helpers -------------------------------------------------------------------------

export function getOption(m: CoapMessage, n: number): Buffer | undefined {
  return m.options.find((o) => o.number === n)?.value;
}

export function getOptions(m: CoapMessage, n: number): Buffer[] {
  return m.options.filter((o) => o.number === n).map((o) => o.value);
}

export function hasOption(m: CoapMessage, n: number): boolean {
  return m.options.some((o) => o.number === n);
}

export function getUintOption(m: CoapMessage, n: number): number | undefined {
  const v = getOption(m, n);
  return v === undefined ? undefined : decodeUint(v);
}

/** Replaces every occurrence of option n with the given values (none removes it). */
export function setOption(m: CoapMessage, n: number, ...values: Buffer[]): void {
  m.options = m.options.filter((o) => o.number !== n).concat(values.map((value) => ({ number: n, value })));
}

export function uintOption(n: number, v: number): CoapOption {
  return { number: n, value: encodeUint(v) };
}

export function stringOption(n: number, s: string): CoapOption {
  return { number: n, value: Buffer.from(s, 'utf8') };
}

/** Uri-Path segments, decoded. */
export function uriPath(m: CoapMessage): string[] {
  return getOptions(m, Option.URI_PATH).map((v) => v.toString('utf8'));
}

/** Uri-Query items, decoded. */
export function uriQuery(m: CoapMessage): string[] {
  return getOptions(m, Option.URI_QUERY).map((v) => v.toString('utf8'));
}

/** "/a/b" into Uri-Path options ("/" or "" gives none). */
export function pathOptions(path: string): CoapOption[] {
  return path
    .split('/')
    .filter((s) => s.length > 0)
    .map((s) => stringOption(Option.URI_PATH, s));
}

/** "a&b=c" (with or without "?") into Uri-Query options. */
export function queryOptions(query: string): CoapOption[] {
  return query
    .replace(/^\?/, '')
    .split('&')
    .filter((s) => s.length > 0)
    .map((s) => stringOption(Option.URI_QUERY, s));
}

/** "/a/b?x&y" into Uri-Path and Uri-Query options. */
export function uriOptions(pathAndQuery: string): CoapOption[] {
  const q = pathAndQuery.indexOf('?');
  return q < 0 ? pathOptions(pathAndQuery) : [...pathOptions(pathAndQuery.slice(0, q)), ...queryOptions(pathAndQuery.slice(q + 1))];
}

export interface OptionProblem {
  number: number;
  critical: boolean;
  reason: 'unrecognized' | 'bad-length' | 'repeated';
}

/**
 * Options that RFC 7252 makes "unrecognized": unknown numbers (§5.4.1), a known option whose value
 * length is out of range (§5.4.3), and each supernumerary occurrence of a non-repeatable option
 * (§5.4.5). Elective ones are to be ignored by the caller; critical ones reject the message.
 */
export function checkOptions(m: CoapMessage, recognized: ReadonlySet<number> = RECOGNIZED_OPTIONS): OptionProblem[] {
  const problems: OptionProblem[] = [];
  const opts = m.options;
  // Parsed options are in ascending order, so a repeat is the option just before; a message built
  // in another order is checked with a set.
  let seen: Set<number> | undefined;
  for (let k = 1; k < opts.length; k++) if (opts[k]!.number < opts[k - 1]!.number) seen = new Set<number>();
  for (let k = 0; k < opts.length; k++) {
    const o = opts[k]!;
    const critical = isCritical(o.number);
    const def = OPTION_DEFS.get(o.number);
    const repeated = seen ? seen.has(o.number) : k > 0 && opts[k - 1]!.number === o.number;
    if (!recognized.has(o.number) || def === undefined) {
      problems.push({ number: o.number, critical, reason: 'unrecognized' });
    } else if (o.value.length < def.min || o.value.length > def.max) {
      problems.push({ number: o.number, critical, reason: 'bad-length' });
    } else if (!def.repeatable && repeated) {
      problems.push({ number: o.number, critical, reason: 'repeated' });
    }
    seen?.add(o.number);
  }
  return problems;
}

/** Removes the options checkOptions() found unusable (the elective ones a receiver ignores). */
export function withoutProblemOptions(m: CoapMessage, problems: OptionProblem[]): CoapMessage {
  if (problems.length === 0) return m;
  const seen = new Set<number>();
  const keep: CoapOption[] = [];
  for (const o of m.options) {
    const def = OPTION_DEFS.get(o.number);
    const bad =
      def === undefined ||
      problems.some((p) => p.number === o.number && p.reason === 'unrecognized') ||
      o.value.length < def.min ||
      o.value.length > def.max ||
      (!def.repeatable && seen.has(o.number));
    seen.add(o.number);
    if (!bad) keep.push(o);
  }
  return { ...m, options: keep };
}

/**
 * What a server does with an incoming datagram, per RFC 7252 §4.2, §4.3, §5.4.1:
 * - `message`: process it (unusable elective options already removed);
 * - `respond`: send `code` (4.02 for a CON request with an unrecognized critical option) with the
 *   diagnostic payload, piggy-backed;
 * - `reset`: send RST with `mid`;
 * - `ignore`: drop silently.
 */
export type Classified =
  | { kind: 'message'; msg: CoapMessage }
  | { kind: 'respond'; msg: CoapMessage; code: number; diagnostic: string }
  | { kind: 'reset'; mid: number; reason: string }
  | { kind: 'ignore'; reason: string };

export function classifyDatagram(buf: Uint8Array, recognized: ReadonlySet<number> = RECOGNIZED_OPTIONS): Classified {
  let msg: CoapMessage;
  try {
    msg = parseMessage(buf);
  } catch (e) {
    if (!(e instanceof CoapFormatError)) throw e;
    if (e.disposition === 'reset' && e.mid !== undefined) return { kind: 'reset', mid: e.mid, reason: e.message };
    return { kind: 'ignore', reason: e.message };
  }
  const problems = checkOptions(msg, recognized);
  if (problems.length === 0) return { kind: 'message', msg };
  const critical = problems.filter((p) => p.critical);
  if (critical.length > 0) {
    const names = critical.map((p) => `${optionName(p.number)} (${p.reason})`).join(', ');
    // §5.4.1: 4.02 for a CON request; any other message carrying one is rejected (§4.2, §4.3).
    if (msg.type === CON && isRequestCode(msg.code)) return { kind: 'respond', msg, code: Code.BAD_OPTION, diagnostic: `bad option: ${names}` };
    if (msg.type === CON || msg.type === NON) return { kind: 'reset', mid: msg.mid, reason: `unrecognized critical option: ${names}` };
    return { kind: 'ignore', reason: `unrecognized critical option: ${names}` };
  }
  return { kind: 'message', msg: withoutProblemOptions(msg, problems) };
}

// ---- builders ---------------------------------------------------------------------------------

export function emptyMessage(type: MessageType, mid: number): CoapMessage {
  return { type, code: Code.EMPTY, mid, token: EMPTY_BUFFER, options: [], payload: EMPTY_BUFFER };
}

/**
 * The response to a request (RFC 7252 §5.2): piggy-backed in the ACK of a CON (same MID), or a NON
 * with a fresh MID for a NON; always with the request's token.
 */
export function responseTo(req: CoapMessage, code: number, freshMid: () => number, options: CoapOption[] = [], payload: Buffer = EMPTY_BUFFER): CoapMessage {
  const con = req.type === CON;
  return { type: con ? ACK : NON, code, mid: con ? req.mid : freshMid(), token: req.token, options, payload };
}

export function isEmpty(m: CoapMessage): boolean {
  return m.code === Code.EMPTY;
}

/** A one-line trace of a message, for debug logs. */
export function describeMessage(m: CoapMessage): string {
  const code = isRequestCode(m.code) ? METHOD_NAMES[m.code] : codeToString(m.code);
  const opts = m.options
    .map((o) => {
      const def = OPTION_DEFS.get(o.number);
      const v = def?.format === 'uint' ? String(decodeUint(o.value)) : def?.format === 'string' ? JSON.stringify(o.value.toString('utf8')) : o.value.toString('hex');
      return `${optionName(o.number)}:${v}`;
    })
    .join(' ');
  return `${TYPE_NAMES[m.type]} ${code} mid=${m.mid} tok=${m.token.toString('hex') || '-'}${opts ? ' ' + opts : ''}${m.payload.length ? ` [${m.payload.length}B]` : ''}`;
}
