// IEC 62056-46 "frame format type 3" (wire §2): 7E | format(2) | dst | src | control | HCS(2) |
// info | FCS(2) | 7E. The format field is 0xA000 | length, length counting every byte between the
// flags. No byte stuffing: the length field delimits the frame, so a receiver resynchronises on
// the next flag after a bad frame. HCS covers format+addresses+control; FCS covers everything from
// the format field to the end of the info field, and is present only when there is an info field.
import { crc16x25 } from './crc16.ts';

export const FLAG = 0x7e;
/** The application processor's address, used for both dst and src (wire §2). */
export const DEFAULT_ADDRESS = 0x03;
export const DEFAULT_MAX_INFO = 255;
const EMPTY: Buffer = Buffer.alloc(0);
const FLAG_BYTE = Buffer.from([FLAG]);
/** Bytes between the flags of a frame without info: format 2, dst, src, control, HCS 2. */
const HEADER_LEN = 7;

export const PF = 0x10;
export const U = { SNRM: 0x83, DISC: 0x43, UA: 0x63, DM: 0x0f, FRMR: 0x87 } as const;
export const S_RR = 0x01;

export interface HdlcFrame {
  dst: number;
  src: number;
  control: number;
  info: Buffer;
}

export type FrameKind = 'I' | 'RR' | 'RNR' | 'SNRM' | 'DISC' | 'UA' | 'DM' | 'FRMR' | 'unknown';

export function frameKind(control: number): FrameKind {
  if ((control & 1) === 0) return 'I';
  if ((control & 3) === 1) {
    const s = control & 0x0f;
    return s === 0x01 ? 'RR' : s === 0x05 ? 'RNR' : 'unknown';
  }
  switch (control & ~PF & 0xff) {
    case U.SNRM:
      return 'SNRM';
    case U.DISC:
      return 'DISC';
    case U.UA:
      return 'UA';
    case U.DM:
      return 'DM';
    case U.FRMR:
      return 'FRMR';
    default:
      return 'unknown';
  }
}

export function pollFinal(control: number): boolean {
  return (control & PF) !== 0;
}

/** I-frame control: N(R)<<5 | P/F<<4 | N(S)<<1. */
export function iControl(ns: number, nr: number, pf: boolean): number {
  return ((nr & 7) << 5) | (pf ? PF : 0) | ((ns & 7) << 1);
}

/** RR control: N(R)<<5 | P/F<<4 | 0x01. */
export function rrControl(nr: number, pf: boolean): number {
  return ((nr & 7) << 5) | (pf ? PF : 0) | S_RR;
}

export function nsOf(control: number): number {
  return (control >> 1) & 7;
}

export function nrOf(control: number): number {
  return (control >> 5) & 7;
}

export function encodeFrame(f: { dst?: number; src?: number; control: number; info?: Buffer }): Buffer {
  const info = f.info ?? EMPTY;
  const len = HEADER_LEN + (info.length > 0 ? info.length + 2 : 0);
  if (len > 0x7ff) throw new RangeError(`HDLC frame of ${len} bytes exceeds the 11-bit length field`);
  const b = Buffer.allocUnsafe(len + 2);
  b[0] = FLAG;
  b.writeUInt16BE(0xa000 | len, 1);
  b[3] = f.dst ?? DEFAULT_ADDRESS;
  b[4] = f.src ?? DEFAULT_ADDRESS;
  b[5] = f.control;
  const hcs = crc16x25(b, 1, 6);
  b[6] = hcs & 0xff;
  b[7] = hcs >> 8;
  if (info.length > 0) {
    info.copy(b, 8);
    const fcs = crc16x25(b, 1, 8 + info.length);
    b[8 + info.length] = fcs & 0xff;
    b[9 + info.length] = fcs >> 8;
  }
  b[len + 1] = FLAG;
  return b;
}

export function describeFrame(f: HdlcFrame): string {
  const k = frameKind(f.control);
  const pf = pollFinal(f.control) ? ' P/F' : '';
  const seq = k === 'I' ? ` N(S)=${nsOf(f.control)} N(R)=${nrOf(f.control)}` : k === 'RR' || k === 'RNR' ? ` N(R)=${nrOf(f.control)}` : '';
  return `${k}${pf}${seq} ${f.dst.toString(16).padStart(2, '0')}<-${f.src.toString(16).padStart(2, '0')}${f.info.length ? ` info=${f.info.length}B` : ''}`;
}

export interface DecoderCounters {
  frames: number;
  badHcs: number;
  badFcs: number;
  badFormat: number;
  oversized: number;
  truncated: number;
  /** Bytes skipped while looking for an opening flag. */
  garbage: number;
}

export function newDecoderCounters(): DecoderCounters {
  return { frames: 0, badHcs: 0, badFcs: 0, badFormat: 0, oversized: 0, truncated: 0, garbage: 0 };
}

/**
 * Byte-stream to frames. Handles frames split across writes, several frames in one write (with
 * separate flags or a shared closing/opening flag), and drops corrupted, truncated and oversized
 * frames, counting each kind, without losing the frames that follow them.
 */
export class FrameDecoder {
  readonly counters: DecoderCounters = newDecoderCounters();
  /** A partial frame held from earlier pushes (a copy: the caller's buffers are never held). */
  private buf: Buffer = EMPTY;
  /** The last push ended on a flag, which may also open the next frame (shared flags). */
  private flagHeld = false;
  private readonly maxLen: number;

  constructor(maxInfo = DEFAULT_MAX_INFO) {
    this.maxLen = HEADER_LEN + maxInfo + 2;
  }

  /** Bytes held that may be the start of a frame (0 or a lone flag means idle). */
  get pending(): number {
    return this.buf.length;
  }

  /**
   * Frames completed by `data`. A whole frame in one write, the usual case, is decoded in place:
   * the info fields are views into `data`, which must not be written to afterwards (a stream's
   * chunks and the in-process line's writes never are).
   */
  push(data: Uint8Array): HdlcFrame[] {
    const d = Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    let b: Buffer;
    if (this.buf.length > 0) b = Buffer.concat([this.buf, d]);
    else if (this.flagHeld && d[0] !== FLAG) b = Buffer.concat([FLAG_BYTE, d]);
    else b = d;
    this.flagHeld = false;
    const out: HdlcFrame[] = [];
    let i = 0;
    for (;;) {
      // Find the opening flag.
      let f = b.indexOf(FLAG, i);
      if (f < 0) {
        this.counters.garbage += b.length - i;
        i = b.length;
        break;
      }
      this.counters.garbage += f - i;
      i = f;
      // Skip repeated flags (inter-frame fill).
      while (i + 1 < b.length && b[i + 1] === FLAG) i++;
      if (i + 2 >= b.length) break; // need the format field
      const format = b.readUInt16BE(i + 1);
      const len = format & 0x7ff;
      if ((format & 0xf000) !== 0xa000 || (format & 0x0800) !== 0 || len < HEADER_LEN) {
        this.counters.badFormat++;
        i++;
        continue;
      }
      if (len > this.maxLen) {
        this.counters.oversized++;
        i++;
        continue;
      }
      if (i + len + 1 >= b.length) break; // wait for the rest
      if (b[i + len + 1] !== FLAG) {
        // The closing flag is not where the length says: a truncated or corrupted frame.
        this.counters.truncated++;
        i++;
        continue;
      }
      const hcs = b.readUInt16LE(i + 6);
      if (crc16x25(b, i + 1, i + 6) !== hcs) {
        this.counters.badHcs++;
        i++;
        continue;
      }
      let info: Buffer = EMPTY;
      if (len > HEADER_LEN) {
        if (len < HEADER_LEN + 3) {
          this.counters.badFormat++;
          i++;
          continue;
        }
        const end = i + 1 + len - 2; // FCS position
        const fcs = b.readUInt16LE(end);
        if (crc16x25(b, i + 1, end) !== fcs) {
          this.counters.badFcs++;
          i++;
          continue;
        }
        info = b.subarray(i + 8, end);
      }
      out.push({ dst: b.readUInt8(i + 3), src: b.readUInt8(i + 4), control: b.readUInt8(i + 5), info });
      this.counters.frames++;
      // Leave the closing flag in place: it may also open the next frame.
      i = i + len + 1;
    }
    if (i >= b.length) this.buf = EMPTY;
    else if (i === b.length - 1 && b[i] === FLAG) {
      this.buf = EMPTY;
      this.flagHeld = true;
    } else this.buf = Buffer.from(b.subarray(i));
    return out;
  }

  /** Drops a partial frame after an inter-byte timeout (UART_TIMEOUT_IN_MS), counting it as truncated. */
  flush(): void {
    if (this.pending > 0) this.counters.truncated++;
    this.buf = EMPTY;
    this.flagHeld = false;
  }
}

// ---- the UA parameter block (IEC 62056-46 §6.4.4.4.3.2) ----------------------------------------

export interface LinkParams {
  maxInfoTx: number;
  maxInfoRx: number;
  windowTx: number;
  windowRx: number;
}

function paramBytes(v: number, width?: number): number[] {
  const out: number[] = [];
  let x = v;
  do {
    out.unshift(x & 0xff);
    x = Math.floor(x / 256);
  } while (x > 0);
  while (width !== undefined && out.length < width) out.unshift(0);
  return out;
}

/** Format identifier 0x81, group 0x80, group length, then parameters 05/06 (max info) and 07/08 (window). */
export function encodeLinkParams(p: LinkParams): Buffer {
  const body: number[] = [];
  const add = (id: number, bytes: number[]): void => void body.push(id, bytes.length, ...bytes);
  add(0x05, paramBytes(p.maxInfoTx));
  add(0x06, paramBytes(p.maxInfoRx));
  add(0x07, paramBytes(p.windowTx, 4));
  add(0x08, paramBytes(p.windowRx, 4));
  return Buffer.from([0x81, 0x80, body.length, ...body]);
}

export function decodeLinkParams(b: Uint8Array): LinkParams {
  if (b.length < 3 || b[0] !== 0x81 || b[1] !== 0x80 || b[2] !== b.length - 3) throw new Error('bad HDLC parameter block');
  const p: LinkParams = { maxInfoTx: 128, maxInfoRx: 128, windowTx: 1, windowRx: 1 };
  let i = 3;
  while (i < b.length) {
    const id = b[i];
    const n = b[i + 1];
    if (n === undefined || i + 2 + n > b.length) throw new Error('bad HDLC parameter block');
    let v = 0;
    for (let k = 0; k < n; k++) v = v * 256 + b[i + 2 + k]!; // inside b: checked above
    if (id === 0x05) p.maxInfoTx = v;
    else if (id === 0x06) p.maxInfoRx = v;
    else if (id === 0x07) p.windowTx = v;
    else if (id === 0x08) p.windowRx = v;
    i += 2 + n;
  }
  return p;
}

/** FRMR info (ISO/IEC 13239): rejected control, V(R)<<5 | V(S)<<1, then W=1 X=2 Y=4 Z=8. */
export const FRMR_W = 0x01;
export const FRMR_X = 0x02;
export const FRMR_Y = 0x04;
export const FRMR_Z = 0x08;
