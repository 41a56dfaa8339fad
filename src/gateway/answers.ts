// The gateway's CoAP answers. Every failure answer takes its code from the one catalogue
// (src/core/errors.ts: each entry's CoAP code, RFC 7252 §5.9), so the gateway and the HTTP bridge
// say the same thing for the same failure; a 5.03 carries Max-Age as its retry delay
// (RFC 7252 §5.9.3.4), as Retry-After does over HTTP.
import { CoapResetError, CoapTimeoutError, codeClass, codeFromString, Option, serializeMessage, uintOption, type CoapMessage, type ResponseSpec } from '../coap/index.ts';
import { ReefError, type ErrorCode } from '../core/errors.ts';

/** A response with a short diagnostic payload (RFC 7252 §5.5.2), cut to `max` bytes. */
export function text(code: number, s: string, max = 96): ResponseSpec {
  return { code, payload: Buffer.from(s.slice(0, max), 'utf8') };
}

/** The CoAP answer to a catalogue error: its CoAP code, the message as diagnostic, Max-Age on a retry-later. */
export function failure(e: ReefError, max = 96): ResponseSpec {
  const code = codeFromString(e.coap);
  const spec = max > 0 ? text(code, e.message, max) : { code };
  if (e.retryAfter !== undefined) spec.options = [uintOption(Option.MAX_AGE, e.retryAfter)];
  return spec;
}

/** The same, from a catalogue code and a message. */
export function refuse(code: ErrorCode, message: string, max = 96): ResponseSpec {
  return failure(new ReefError(code, message), max);
}

/**
 * The answer to a catalogue error for a peer that may have no session (`known` false): never larger
 * than the request that caused it, so the gateway cannot be used to amplify traffic toward a spoofed address.
 */
export function boundedFailure(req: CoapMessage, e: ReefError, known: boolean): ResponseSpec {
  if (known) return failure(e);
  // The header, token and payload marker are fixed; options (a Max-Age) and the diagnostic share the rest.
  const budget = serializeMessage(req).length - (4 + req.token.length) - 1 - (e.retryAfter !== undefined ? 3 : 0);
  return failure(e, Math.max(0, budget));
}

/** A failed exchange with a kit as a catalogue error: no answer by the deadline (5.04), RST or unreachable (5.02). */
export function upstreamFailure(e: unknown, deadlineMs: number): ReefError {
  if (e instanceof ReefError) return e;
  if (e instanceof CoapTimeoutError) return new ReefError('GATEWAY_TIMEOUT', `the kit did not answer within ${Math.round(deadlineMs / 100) / 10} s`);
  if (e instanceof CoapResetError) return new ReefError('BAD_GATEWAY', 'the kit rejected the request (RST)');
  return new ReefError('BAD_GATEWAY', 'the kit could not be reached', { cause: e });
}

/** The kit's response as the client's: every option but Observe passes (Block2, Size2, Max-Age, ETag...). */
export function relayed(m: CoapMessage, seq?: number): ResponseSpec {
  // The usual answer carries no Observe: its options pass as they are (never written to).
  const options = seq === undefined && !m.options.some((o) => o.number === Option.OBSERVE) ? m.options : m.options.filter((o) => o.number !== Option.OBSERVE);
  if (seq !== undefined) options.push(uintOption(Option.OBSERVE, seq));
  return { code: m.code, options, payload: m.payload };
}

export function isKitError(m: CoapMessage): boolean {
  return codeClass(m.code) !== 2;
}
