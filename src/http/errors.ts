// Every failure leaves as the one error body {statusCode, code, error, message, requestId[, field]}.
// Fastify's own errors (validation, content type, body size, JSON syntax) are mapped into the
// catalogue here; anything unexpected is logged with its stack and answered 500 without it.
import { STATUS_CODES } from 'node:http';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ERRORS, ReefError, isReefError, type ErrorBody, type ErrorCode } from '../core/errors.ts';

export function toReefError(err: FastifyError | Error): ReefError {
  if (isReefError(err)) return err;
  const fe = err as FastifyError & { validation?: { instancePath?: string; params?: Record<string, unknown>; message?: string }[]; validationContext?: string };
  if (fe.validation && fe.validation.length) {
    const v = fe.validation[0]!;
    const ctx = fe.validationContext ?? 'body';
    let path = (v.instancePath ?? '').replace(/^\//, '');
    const missing = v.params?.missingProperty;
    if (typeof missing === 'string') path = path ? `${path}/${missing}` : missing;
    const field = path ? `${ctx}/${path}` : ctx;
    return new ReefError('VALIDATION_FAILED', `${field} ${v.message ?? 'is invalid'}`, { field: path || ctx });
  }
  switch (fe.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      if (fe.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return new ReefError('UNSUPPORTED_MEDIA_TYPE', 'send the body as application/json');
      return new ReefError('VALIDATION_FAILED', 'the Content-Length does not match the body');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ReefError('PAYLOAD_TOO_LARGE', 'the body is larger than this server accepts');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ReefError('VALIDATION_FAILED', 'the body is empty', { field: 'body' });
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new ReefError('MALFORMED_JSON', 'the body is not valid JSON');
  }
  if (err instanceof SyntaxError || fe.code === 'FST_ERR_CTP_INVALID_JSON_BODY') return new ReefError('MALFORMED_JSON', 'the body is not valid JSON');
  const status = fe.statusCode ?? 500;
  if (status === 413) return new ReefError('PAYLOAD_TOO_LARGE');
  if (status === 415) return new ReefError('UNSUPPORTED_MEDIA_TYPE');
  if (status === 404) return new ReefError('NOT_FOUND');
  if (status >= 400 && status < 500) return new ReefError('VALIDATION_FAILED', 'the request is malformed');
  return new ReefError('INTERNAL', 'something went wrong; the request id identifies it in our logs', { cause: err });
}

export function errorBody(e: ReefError, requestId: string): ErrorBody {
  const body: ErrorBody = {
    statusCode: e.status,
    code: e.code,
    error: STATUS_CODES[e.status] ?? 'Error',
    message: e.message,
    requestId,
  };
  if (e.field !== undefined) body.field = e.field;
  return body;
}

export function sendError(reply: FastifyReply, e: ReefError): FastifyReply {
  if (e.retryAfter !== undefined) reply.header('retry-after', String(e.retryAfter));
  if (e.allow) reply.header('allow', e.allow.join(', '));
  return reply
    .code(e.status)
    .type('application/json; charset=utf-8')
    .send(errorBody(e, String(reply.request.id)));
}

/** Most bytes of a refused body read and thrown away so its sender sees the 413 (drainBody). */
const DRAIN_MAX_BYTES = 256 * 1024 * 1024;

/**
 * Reads and discards the rest of a body that is refused before it has all arrived, for at most
 * `ms` and DRAIN_MAX_BYTES. Closing a socket with unread bytes in it makes the kernel send a TCP
 * reset, and a client that writes its whole body before reading (most do) then gets the reset
 * instead of the 413: RFC 9112 §9.6 has a server keep reading a while before it closes.
 */
export function drainBody(raw: FastifyRequest['raw'], ms: number): Promise<void> {
  if (raw.complete || raw.destroyed) return Promise.resolve();
  return new Promise<void>((resolve) => {
    let bytes = 0;
    const done = () => {
      clearTimeout(timer);
      raw.off('data', count);
      raw.off('end', done);
      raw.off('close', done);
      raw.off('error', done);
      resolve();
    };
    const count = (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > DRAIN_MAX_BYTES) done();
    };
    const timer = setTimeout(done, ms);
    raw.on('data', count);
    raw.once('end', done);
    raw.once('close', done);
    raw.once('error', done);
    raw.resume();
  });
}

export function installErrorHandling(app: FastifyInstance, opts: { drainMs?: number } = {}): void {
  const drainMs = opts.drainMs ?? 10_000;
  app.setErrorHandler(async (err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const e = toReefError(err);
    // A body refused for its size is read to its end (bounded) before the answer: see drainBody.
    if (e.code === 'PAYLOAD_TOO_LARGE') await drainBody(request.raw, drainMs);
    // Only faults of ours are errors, with their stack. A kit that is offline, slow or answers an
    // error, a store outage or load shedding is an expected condition: one line, no stack.
    if (e.code === 'INTERNAL') request.log.error({ err, code: e.code }, 'request failed');
    else if (e.status >= 500) request.log.info({ code: e.code, msg: e.message }, 'request failed upstream');
    else request.log.debug({ code: e.code, msg: e.message }, 'request refused');
    return sendError(reply, e);
  });
  app.setNotFoundHandler((request, reply) => sendError(reply, new ReefError('ROUTE_NOT_FOUND', `no endpoint ${request.method} ${request.url.split('?')[0]}`)));
}

/** Fastify's errors before routing (frameworkErrors): a too-long path segment, a broken URL. */
export function frameworkError(err: FastifyError): ReefError {
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') return new ReefError('URI_TOO_LONG', 'a path segment of the URL is longer than any valid solution name or device id');
  if (err.code === 'FST_ERR_BAD_URL') return new ReefError('BAD_REQUEST', 'the URL is not valid percent-encoding');
  return new ReefError('BAD_REQUEST', 'the request could not be routed');
}

let clientErrorCount = 0;
/**
 * Errors Node's HTTP parser raises before there is a request (Fastify's clientErrorHandler): answered
 * on the raw socket with the uniform body, then the connection is closed, as Node itself does.
 */
export function clientError(this: FastifyInstance, err: NodeJS.ErrnoException & { code?: string }, socket: import('node:stream').Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const e =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? new ReefError('REQUEST_TIMEOUT', 'the request did not arrive in full in time')
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? new ReefError('HEADERS_TOO_LARGE', 'the request line and headers are larger than 16 KiB')
        : new ReefError('BAD_REQUEST', 'the HTTP request is malformed');
  const body = JSON.stringify(errorBody(e, `client-error-${(clientErrorCount++ & 0xffffffff).toString(16)}`));
  this.log.debug({ code: e.code, err: err.code }, 'client error');
  if ((socket as { writable?: boolean }).writable) {
    socket.write(`HTTP/1.1 ${e.status} ${STATUS_CODES[e.status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy();
}

/** Used by docs tests: every catalogue code with its status. */
export function catalogue(): { code: ErrorCode; status: number; coap?: string }[] {
  return (Object.keys(ERRORS) as ErrorCode[]).map((code) => ({ code, status: ERRORS[code].status, ...('coap' in ERRORS[code] ? { coap: (ERRORS[code] as { coap: string }).coap } : {}) }));
}
