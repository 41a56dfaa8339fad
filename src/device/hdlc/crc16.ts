// CRC-16/X.25 (wire §2): reflected polynomial 0x1021 (0x8408 reflected), init 0xFFFF, final XOR
// 0xFFFF; check value for "123456789" is 0x906E. Sent low byte first.

const TABLE = new Uint16Array(256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x8408 : c >>> 1;
  TABLE[n] = c;
}

export function crc16x25(data: Uint8Array, start = 0, end = data.length): number {
  let crc = 0xffff;
  // The table has all 256 entries; `i` stays inside [start, end) ⊆ data.
  for (let i = start; i < end; i++) crc = (crc >>> 8) ^ TABLE[(crc ^ data[i]!) & 0xff]!;
  return (crc ^ 0xffff) & 0xffff;
}
