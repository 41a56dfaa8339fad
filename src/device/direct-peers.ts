// What the network module sends a direct peer (allowDirect, lab use; docs/device.md "Reach"), which
// may be a forged source address: never more than AMPLIFICATION_LIMIT times the bytes it sent
// (RFC 7252 §11.3; the factor is QUIC's limit before address validation, RFC 9000 §8.1). A GET is
// asked of the application processor in blocks small enough to fit (RFC 7959 §2.4).
import {
  ACK,
  blockSize,
  type CoapMessage,
  type CoapOption,
  codeClass,
  decodeBlock,
  EMPTY_BUFFER,
  encodeBlock,
  encodedLength,
  Option,
  type ResponseSpec,
  szxForSize,
  uintOption,
} from '../coap/index.ts';

/** Answers to a direct peer are at most this many times the size of its request (RFC 7252 §11.3). */
export const AMPLIFICATION_LIMIT = 3;
/** Room the options of a 2.05 take at most (Content-Format, Max-Age, Block2, Size2, ETag-less). */
const RESPONSE_OPTIONS_BYTES = 14;
/** The application processor's own block size (sensor.ts SENSOR_BLOCK_SZX: 128 bytes). */
const AP_BLOCK = 128;

/** The bytes an answer to this request from a direct peer may take. */
export function answerBudget(req: CoapMessage): number {
  return AMPLIFICATION_LIMIT * encodedLength(req);
}

/**
 * The request's options, for an answer within `budget` bytes (Infinity: any): with a Block2 option
 * whose blocks fit (RFC 7959 §2.4: the client's own smaller size is kept). Unchanged when the kit's
 * blocks fit anyway or no block (16 bytes at least) can.
 */
export function fitBlock2(req: CoapMessage, options: CoapOption[], budget: number): CoapOption[] {
  const room = budget - (4 + req.token.length + 1 + RESPONSE_OPTIONS_BYTES);
  if (room >= AP_BLOCK || room < 16) return options;
  const fit = szxForSize(room);
  const asked = options.find((o) => o.number === Option.BLOCK2);
  let num = 0;
  const szx = fit;
  if (asked) {
    let b: ReturnType<typeof decodeBlock>;
    try {
      b = decodeBlock(asked.value.length ? asked.value.readUIntBE(0, asked.value.length) : 0);
    } catch {
      return options; // SZX 7: the application processor answers 4.00
    }
    if (b.szx <= fit) return options;
    num = (b.num * blockSize(b.szx)) / blockSize(fit);
  }
  return [...options.filter((o) => o.number !== Option.BLOCK2), uintOption(Option.BLOCK2, encodeBlock({ num, more: false, szx }))];
}

/**
 * The answer as it may go to a direct peer: as it is when it fits the budget, an error with its
 * diagnostic cut to fit (as the endpoint does for its own refusals), or none (`answer` undefined:
 * withheld) with the size it would have had.
 */
export function boundAnswer(req: CoapMessage, res: ResponseSpec, budget: number): { answer: ResponseSpec | undefined; size: number } {
  const size = encodedLength({ type: ACK, code: res.code, mid: 0, token: req.token, options: res.options ?? [], payload: res.payload ?? EMPTY_BUFFER });
  if (size <= budget) return { answer: res, size };
  const bare = size - (res.payload?.length ?? 0) - (res.payload?.length ? 1 : 0);
  if (codeClass(res.code) !== 2 && bare <= budget) {
    const room = budget - bare - 1;
    return { answer: { code: res.code, options: res.options ?? [], ...(room > 0 ? { payload: (res.payload ?? Buffer.alloc(0)).subarray(0, room) } : {}) }, size };
  }
  return { answer: undefined, size };
}
