// Option numbers, their formats and the properties encoded in the number itself
// (RFC 7252 §5.4.6, §5.10, §12.2; RFC 7641 §2; RFC 7959 §2.1, §4; RFC 7967 §2).

export const Option = {
  IF_MATCH: 1,
  URI_HOST: 3,
  ETAG: 4,
  IF_NONE_MATCH: 5,
  OBSERVE: 6,
  URI_PORT: 7,
  LOCATION_PATH: 8,
  URI_PATH: 11,
  CONTENT_FORMAT: 12,
  MAX_AGE: 14,
  URI_QUERY: 15,
  ACCEPT: 17,
  LOCATION_QUERY: 20,
  BLOCK2: 23,
  BLOCK1: 27,
  SIZE2: 28,
  PROXY_URI: 35,
  PROXY_SCHEME: 39,
  SIZE1: 60,
  NO_RESPONSE: 258,
} as const;

export type OptionFormat = 'empty' | 'opaque' | 'uint' | 'string';

export interface OptionDef {
  readonly name: string;
  readonly format: OptionFormat;
  readonly min: number;
  readonly max: number;
  readonly repeatable: boolean;
}

/** Every option this library recognizes, with the value-length bounds of its defining RFC. */
export const OPTION_DEFS: ReadonlyMap<number, OptionDef> = new Map<number, OptionDef>([
  [Option.IF_MATCH, { name: 'If-Match', format: 'opaque', min: 0, max: 8, repeatable: true }],
  [Option.URI_HOST, { name: 'Uri-Host', format: 'string', min: 1, max: 255, repeatable: false }],
  [Option.ETAG, { name: 'ETag', format: 'opaque', min: 1, max: 8, repeatable: true }],
  [Option.IF_NONE_MATCH, { name: 'If-None-Match', format: 'empty', min: 0, max: 0, repeatable: false }],
  [Option.OBSERVE, { name: 'Observe', format: 'uint', min: 0, max: 3, repeatable: false }],
  [Option.URI_PORT, { name: 'Uri-Port', format: 'uint', min: 0, max: 2, repeatable: false }],
  [Option.LOCATION_PATH, { name: 'Location-Path', format: 'string', min: 0, max: 255, repeatable: true }],
  [Option.URI_PATH, { name: 'Uri-Path', format: 'string', min: 0, max: 255, repeatable: true }],
  [Option.CONTENT_FORMAT, { name: 'Content-Format', format: 'uint', min: 0, max: 2, repeatable: false }],
  [Option.MAX_AGE, { name: 'Max-Age', format: 'uint', min: 0, max: 4, repeatable: false }],
  [Option.URI_QUERY, { name: 'Uri-Query', format: 'string', min: 0, max: 255, repeatable: true }],
  [Option.ACCEPT, { name: 'Accept', format: 'uint', min: 0, max: 2, repeatable: false }],
  [Option.LOCATION_QUERY, { name: 'Location-Query', format: 'string', min: 0, max: 255, repeatable: true }],
  [Option.BLOCK2, { name: 'Block2', format: 'uint', min: 0, max: 3, repeatable: false }],
  [Option.BLOCK1, { name: 'Block1', format: 'uint', min: 0, max: 3, repeatable: false }],
  [Option.SIZE2, { name: 'Size2', format: 'uint', min: 0, max: 4, repeatable: false }],
  [Option.PROXY_URI, { name: 'Proxy-Uri', format: 'string', min: 1, max: 1034, repeatable: false }],
  [Option.PROXY_SCHEME, { name: 'Proxy-Scheme', format: 'string', min: 1, max: 255, repeatable: false }],
  [Option.SIZE1, { name: 'Size1', format: 'uint', min: 0, max: 4, repeatable: false }],
  [Option.NO_RESPONSE, { name: 'No-Response', format: 'uint', min: 0, max: 1, repeatable: false }],
]);

/** The set of option numbers recognized by default; pass a narrower or wider set to the checks. */
export const RECOGNIZED_OPTIONS: ReadonlySet<number> = new Set(OPTION_DEFS.keys());

/** RFC 7252 §5.4.6: odd numbers are critical. */
export function isCritical(n: number): boolean {
  return (n & 1) === 1;
}

/** RFC 7252 §5.4.6: bit 1 set means unsafe to forward. */
export function isUnsafe(n: number): boolean {
  return (n & 2) === 2;
}

/** RFC 7252 §5.4.6: NoCacheKey when bits 1..4 are 1110 (after the critical and unsafe bits). */
export function isNoCacheKey(n: number): boolean {
  return (n & 0x1e) === 0x1c;
}

export function optionName(n: number): string {
  return OPTION_DEFS.get(n)?.name ?? `Option${n}`;
}

/** RFC 7252 §3.2: uint values in network byte order with leading zero bytes removed (0 is empty). */
export function encodeUint(v: number): Buffer {
  if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw new RangeError(`uint option value out of range: ${v}`);
  if (v === 0) return Buffer.alloc(0);
  if (v < 0x100) return Buffer.from([v]);
  if (v < 0x10000) return Buffer.from([v >> 8, v & 0xff]);
  if (v < 0x1000000) return Buffer.from([v >> 16, (v >> 8) & 0xff, v & 0xff]);
  const b = Buffer.alloc(4);
  b.writeUInt32BE(v);
  return b;
}

/** Decodes a uint option value; a sender may include leading zeros, which are harmless. */
export function decodeUint(b: Buffer): number {
  let v = 0;
  for (const x of b) v = v * 256 + x;
  return v;
}

/** Content-Format identifiers (RFC 7252 §12.3, RFC 7049 §7.4). */
export const ContentFormat = {
  TEXT_PLAIN: 0,
  /** Used by older kit firmware for reading payloads; not IANA-registered (wire §2). */
  LEGACY_KIT: 2,
  LINK_FORMAT: 40,
  XML: 41,
  OCTET_STREAM: 42,
  EXI: 47,
  JSON: 50,
  CBOR: 60,
} as const;
