// Block2 helpers (RFC 7959 §2.2-§2.4): the option value is NUM (up to 20 bits) | M (1 bit) | SZX
// (3 bits); the block size is 2^(SZX+4), 16..1024. SZX 7 is reserved and a 4.00 when received.

export interface BlockValue {
  num: number;
  more: boolean;
  szx: number;
}

export class BlockOptionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BlockOptionError';
  }
}

export function blockSize(szx: number): number {
  return 1 << (szx + 4);
}

/** The largest SZX whose block size is at most `size` (size 128 gives SZX 3). */
export function szxForSize(size: number): number {
  if (size < 16) throw new RangeError('block size below 16');
  return Math.min(6, Math.floor(Math.log2(size)) - 4);
}

export function encodeBlock(b: BlockValue): number {
  if (b.szx < 0 || b.szx > 6) throw new RangeError(`SZX ${b.szx} out of range 0..6`);
  if (b.num < 0 || b.num > 0xfffff) throw new RangeError(`block number ${b.num} out of range`);
  return (b.num << 4) | (b.more ? 8 : 0) | b.szx;
}

/** Decodes a Block1/Block2 uint value; throws BlockOptionError for the reserved SZX 7 (answer 4.00). */
export function decodeBlock(v: number): BlockValue {
  const szx = v & 7;
  if (szx === 7) throw new BlockOptionError('SZX 7 is reserved');
  return { num: v >>> 4, more: (v & 8) !== 0, szx };
}

/**
 * The slice of a representation a Block2 request asks for (RFC 7959 §2.4). Returns undefined when
 * the block starts past the end (a server answers 4.00 then; RFC 7959 names no other code).
 */
export function block2Slice(payload: Buffer, req: BlockValue): { chunk: Buffer; block: BlockValue } | undefined {
  const size = blockSize(req.szx);
  const start = req.num * size;
  if (start > payload.length || (start === payload.length && payload.length > 0)) return undefined;
  const chunk = payload.subarray(start, start + size);
  return { chunk, block: { num: req.num, szx: req.szx, more: start + size < payload.length } };
}

/**
 * Decides the Block2 answer of a server: if the client asked for blocks, or the representation is
 * larger than the server's preferred size, answer one block. `undefined` means send it whole.
 */
export function planBlock2(payload: Buffer, requested: number | undefined, preferredSzx = 6): { chunk: Buffer; block: BlockValue } | undefined | 'out-of-range' {
  if (requested === undefined) {
    if (payload.length <= blockSize(preferredSzx)) return undefined;
    return block2Slice(payload, { num: 0, more: false, szx: preferredSzx });
  }
  const req = decodeBlock(requested);
  // §2.4: the server may use a smaller size than asked; never a larger one.
  const szx = Math.min(req.szx, preferredSzx);
  const num = szx === req.szx ? req.num : (req.num * blockSize(req.szx)) / blockSize(szx);
  return block2Slice(payload, { num, more: false, szx }) ?? 'out-of-range';
}

/** Client side: reassembles Block2 responses in order; returns the whole body when the last block arrives. */
export class Block2Assembler {
  private parts: Buffer[] = [];
  private next = 0;
  private size = 0;
  add(block: BlockValue, chunk: Buffer): Buffer | undefined {
    const start = block.num * blockSize(block.szx);
    if (start !== this.size) throw new BlockOptionError(`block ${block.num} out of order`);
    this.parts.push(chunk);
    this.size += chunk.length;
    this.next = block.num + 1;
    return block.more ? undefined : Buffer.concat(this.parts);
  }
  get nextNum(): number {
    return this.next;
  }
}
