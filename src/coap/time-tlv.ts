// The kit's time TLV (wire §2): type 0x06, length 0x08, then the seconds since the epoch and the
// milliseconds, each an unsigned 32-bit big-endian integer: 10 bytes in all. The original firmware's
// GET of the clock answered the bare 4-byte big-endian epoch (content-format 42).

export class TimeTlvError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TimeTlvError';
  }
}

export const TIME_TLV_TYPE = 0x06;
export const TIME_TLV_LENGTH = 0x08;

/** Encodes epoch milliseconds as the 10-byte TLV. */
export function encodeTimeTlv(epochMs: number): Buffer {
  const b = Buffer.alloc(10);
  b[0] = TIME_TLV_TYPE;
  b[1] = TIME_TLV_LENGTH;
  b.writeUInt32BE(Math.floor(epochMs / 1000) >>> 0, 2);
  b.writeUInt32BE(Math.floor(epochMs % 1000), 6);
  return b;
}

/** Decodes the TLV into epoch milliseconds; throws TimeTlvError when malformed (the kit answers 4.06). */
export function decodeTimeTlv(b: Uint8Array): number {
  if (b.length !== 10) throw new TimeTlvError(`time TLV must be 10 bytes, got ${b.length}`);
  if (b[0] !== TIME_TLV_TYPE || b[1] !== TIME_TLV_LENGTH) throw new TimeTlvError('time TLV must start 06 08');
  const v = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  const ms = v.readUInt32BE(6);
  if (ms > 999) throw new TimeTlvError(`milliseconds ${ms} out of range 0..999`);
  return v.readUInt32BE(2) * 1000 + ms;
}

/** The 4-byte big-endian epoch seconds of the clock GET. */
export function encodeEpoch32(epochMs: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(Math.floor(epochMs / 1000) >>> 0);
  return b;
}

export function decodeEpoch32(b: Uint8Array): number {
  if (b.length !== 4) throw new TimeTlvError(`epoch must be 4 bytes, got ${b.length}`);
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).readUInt32BE(0);
}
