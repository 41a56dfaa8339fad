// The SDK's two failure types: the service answered with an error (ApiError, carrying the uniform
// error body of docs/errors.md), or no answer came at all (NetworkError).
import type { ErrorBody } from './types.ts';

/** The service answered with a status of 400 or more. */
export class ApiError extends Error {
  /** HTTP status (400, 401, 404, 429, 503...). */
  readonly status: number;
  /** Catalogue code (`VALIDATION_FAILED`, `TOKEN_EXPIRED`, `RATE_LIMITED`...), or `HTTP_<status>` when the body was not ours. */
  readonly code: string;
  /** The request id the service logged the failure under (body `requestId` or the X-Request-Id header). */
  readonly requestId: string | null;
  /** The offending field, when the service named one. */
  readonly field: string | undefined;
  /** Seconds after which a retry makes sense (from Retry-After on 429 and 503). */
  readonly retryAfter: number | undefined;
  readonly method: string;
  readonly url: string;
  /** The parsed error body, when it was JSON. */
  readonly body: ErrorBody | undefined;

  constructor(init: {
    status: number;
    code: string;
    message: string;
    requestId: string | null;
    method: string;
    url: string;
    field?: string;
    retryAfter?: number;
    body?: ErrorBody;
  }) {
    super(init.message);
    this.name = 'ApiError';
    this.status = init.status;
    this.code = init.code;
    this.requestId = init.requestId;
    this.field = init.field;
    this.retryAfter = init.retryAfter;
    this.method = init.method;
    this.url = init.url;
    this.body = init.body;
  }
}

/** The request never got an answer: refused connection, DNS failure, reset, or timeout. */
export class NetworkError extends Error {
  readonly method: string;
  readonly url: string;
  /** True when the SDK gave up waiting (the `timeoutMs` option). */
  readonly timedOut: boolean;

  constructor(init: { method: string; url: string; message: string; cause?: unknown; timedOut?: boolean }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'NetworkError';
    this.method = init.method;
    this.url = init.url;
    this.timedOut = init.timedOut ?? false;
  }
}

export function isApiError(e: unknown, code?: string): e is ApiError {
  return e instanceof ApiError && (code === undefined || e.code === code);
}
