// The small CBOR (RFC 8949) subset the kit and gateway need, written by hand: unsigned and negative
// integers, byte and text strings, arrays, maps, false/true/null/undefined and floats. Definite
// lengths only when encoding; indefinite lengths are refused when decoding (no kit sends them).

export type CborValue = number | bigint | string | Uint8Array | boolean | null | undefined | CborValue[] | Map<CborValue, CborValue>;

export class CborError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CborError';
  }
}

function head(major: number, n: number | bigint): number[] {
  const m = major << 5;
  if (typeof n === 'bigint') {
    if (n < 24n) return [m | Number(n)];
    const out = [m | 27];
    for (let s = 56n; s >= 0n; s -= 8n) out.push(Number((n >> s) & 0xffn));
    return out;
  }
  if (n < 24) return [m | n];
  if (n < 0x100) return [m | 24, n];
  if (n < 0x10000) return [m | 25, n >> 8, n & 0xff];
  if (n < 0x100000000) return [m | 26, (n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff];
  return head(major, BigInt(n));
}

export function encodeCbor(v: CborValue): Buffer {
  const out: number[] = [];
  const enc = (x: CborValue): void => {
    if (x === false) out.push(0xf4);
    else if (x === true) out.push(0xf5);
    else if (x === null) out.push(0xf6);
    else if (x === undefined) out.push(0xf7);
    else if (typeof x === 'bigint') out.push(...(x >= 0n ? head(0, x) : head(1, -1n - x)));
    else if (typeof x === 'number') {
      if (Number.isInteger(x) && Math.abs(x) <= Number.MAX_SAFE_INTEGER) out.push(...(x >= 0 ? head(0, x) : head(1, -1 - x)));
      else {
        const b = Buffer.alloc(8);
        b.writeDoubleBE(x);
        out.push(0xfb, ...b);
      }
    } else if (typeof x === 'string') {
      const b = Buffer.from(x, 'utf8');
      out.push(...head(3, b.length), ...b);
    } else if (x instanceof Uint8Array) {
      out.push(...head(2, x.length), ...x);
    } else if (Array.isArray(x)) {
      out.push(...head(4, x.length));
      x.forEach(enc);
    } else if (x instanceof Map) {
      out.push(...head(5, x.size));
      for (const [k, val] of x) {
        enc(k);
        enc(val);
      }
    } else throw new CborError(`cannot encode ${typeof x}`);
  };
  enc(v);
  return Buffer.from(out);
}

function halfToNumber(h: number): number {
  const e = (h >> 10) & 0x1f;
  const f = h & 0x3ff;
  const s = h & 0x8000 ? -1 : 1;
  if (e === 0) return s * f * 2 ** -24;
  if (e === 31) return f ? NaN : s * Infinity;
  return s * (1 + f / 1024) * 2 ** (e - 15);
}

/** Decodes exactly one CBOR item filling the whole buffer; maps come back as Map. */
export function decodeCbor(buf: Uint8Array): CborValue {
  const b = Buffer.isBuffer(buf) ? buf : Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  let i = 0;
  const need = (n: number): void => {
    if (i + n > b.length) throw new CborError('truncated CBOR');
  };
  const arg = (ai: number): number | bigint => {
    if (ai < 24) return ai;
    if (ai === 24) return (need(1), b.readUInt8(i++));
    if (ai === 25) return (need(2), (i += 2), b.readUInt16BE(i - 2));
    if (ai === 26) return (need(4), (i += 4), b.readUInt32BE(i - 4));
    if (ai === 27) {
      need(8);
      const v = b.readBigUInt64BE(i);
      i += 8;
      return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
    }
    throw new CborError(ai === 31 ? 'indefinite-length items are not supported' : `reserved additional info ${ai}`);
  };
  const dec = (depth: number): CborValue => {
    if (depth > 32) throw new CborError('CBOR nested too deeply');
    need(1);
    const ib = b.readUInt8(i++);
    const major = ib >> 5;
    const ai = ib & 0x1f;
    if (major === 7) {
      if (ai === 20) return false;
      if (ai === 21) return true;
      if (ai === 22) return null;
      if (ai === 23) return undefined;
      if (ai === 25) return (need(2), (i += 2), halfToNumber(b.readUInt16BE(i - 2)));
      if (ai === 26) return (need(4), (i += 4), b.readFloatBE(i - 4));
      if (ai === 27) return (need(8), (i += 8), b.readDoubleBE(i - 8));
      throw new CborError(`unsupported simple value ${ai}`);
    }
    const n = arg(ai);
    switch (major) {
      case 0:
        return n;
      case 1:
        return typeof n === 'bigint' ? -1n - n : -1 - n;
      case 2:
      case 3: {
        if (typeof n === 'bigint') throw new CborError('string too long');
        need(n);
        const s = b.subarray(i, i + n);
        i += n;
        if (major === 2) return new Uint8Array(s);
        const text = new TextDecoder('utf-8', { fatal: true });
        try {
          return text.decode(s);
        } catch {
          throw new CborError('text string is not valid UTF-8');
        }
      }
      case 4: {
        if (typeof n === 'bigint' || n > b.length) throw new CborError('array too long');
        const a: CborValue[] = [];
        for (let k = 0; k < n; k++) a.push(dec(depth + 1));
        return a;
      }
      case 5: {
        if (typeof n === 'bigint' || n > b.length) throw new CborError('map too long');
        const m = new Map<CborValue, CborValue>();
        for (let k = 0; k < n; k++) {
          const key = dec(depth + 1);
          m.set(key, dec(depth + 1));
        }
        return m;
      }
      default:
        throw new CborError('tagged items are not supported');
    }
  };
  const v = dec(0);
  if (i !== b.length) throw new CborError(`${b.length - i} bytes after the CBOR item`);
  return v;
}
