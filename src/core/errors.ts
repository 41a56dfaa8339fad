// The one catalogue of Reef error codes. Every failure a client can see is one of these; each carries
// its HTTP status and, where the failure can surface over CoAP (gateway, device), its CoAP response
// code (RFC 7252 §5.9, written "c.dd"). docs/errors.md documents every entry; test/unit/docs/errors-doc.test.ts
// keeps the two in step.

export interface ErrorSpec {
  readonly status: number;
  readonly coap?: string;
  readonly title: string;
}

export const ERRORS = {
  // 400
  BAD_REQUEST: { status: 400, title: 'The HTTP request itself is malformed' },
  VALIDATION_FAILED: { status: 400, coap: '4.00', title: 'A field of the request is missing or invalid' },
  MALFORMED_JSON: { status: 400, coap: '4.00', title: 'The body is not valid JSON' },
  INVALID_SOLUTION_NAME: { status: 400, title: 'The solution name is not allowed' },
  INVALID_DEVICE_ID: { status: 400, title: 'A device id must be a UUID' },
  INVALID_CURSOR: { status: 400, title: 'The paging cursor is not valid' },
  WEBHOOK_TARGET_FORBIDDEN: { status: 400, title: 'The webhook host is or resolves to a non-public address' },
  // 401
  TOKEN_MISSING: { status: 401, coap: '4.01', title: 'No access token was sent' },
  TOKEN_INVALID: { status: 401, coap: '4.01', title: 'The access token is malformed, forged or not ours' },
  TOKEN_EXPIRED: { status: 401, coap: '4.01', title: 'The access token has expired' },
  INVALID_CREDENTIALS: { status: 401, coap: '4.01', title: 'Client id or client secret is wrong' },
  ACCOUNT_DISABLED: { status: 401, coap: '4.01', title: 'The account is disabled' },
  SESSION_REQUIRED: { status: 401, coap: '4.01', title: 'No live gateway session from this address and port' },
  METRICS_TOKEN_REQUIRED: { status: 401, title: 'The metrics endpoint needs the metrics token' },
  // 403
  ADMIN_KEY_REQUIRED: { status: 403, title: 'An operator call needs the admin key' },
  FORBIDDEN: { status: 403, coap: '4.03', title: 'The caller may not do this' },
  QUOTA_EXCEEDED: { status: 403, title: 'An account quota would be exceeded; the message names the limit' },
  // 404
  ROUTE_NOT_FOUND: { status: 404, coap: '4.04', title: 'No such endpoint' },
  SOLUTION_NOT_FOUND: { status: 404, title: 'No such solution for this account' },
  DEVICE_NOT_FOUND: { status: 404, coap: '4.04', title: 'No such device in this solution' },
  ACCOUNT_NOT_FOUND: { status: 404, title: 'No such account' },
  TEMPLATE_NOT_FOUND: { status: 404, title: 'No such device template in this solution' },
  NOT_FOUND: { status: 404, coap: '4.04', title: 'No such resource' },
  ALARM_RULE_NOT_FOUND: { status: 404, title: 'No such alarm rule in this solution' },
  ALARM_NOT_FOUND: { status: 404, title: 'No such alarm in this solution' },
  // 405
  METHOD_NOT_ALLOWED: { status: 405, coap: '4.05', title: 'The endpoint does not accept this method' },
  // 408
  REQUEST_TIMEOUT: { status: 408, title: 'The request was not received in full in time' },
  // 409
  MAC_ALREADY_PROVISIONED: { status: 409, title: 'A device with this MAC address is already provisioned' },
  CONFLICT: { status: 409, title: 'The request conflicts with the current state' },
  TOO_MANY_TEMPLATES: { status: 409, title: 'The solution holds as many device templates as allowed' },
  // 413
  PAYLOAD_TOO_LARGE: { status: 413, coap: '4.13', title: 'The body is larger than allowed' },
  TOO_MANY_OBSERVATIONS: { status: 413, title: 'More observations in one request than allowed' },
  // 414
  URI_TOO_LONG: { status: 414, title: 'A path segment of the URL is longer than allowed' },
  // 415
  UNSUPPORTED_MEDIA_TYPE: { status: 415, coap: '4.15', title: 'The body must be application/json' },
  // 429
  RATE_LIMITED: { status: 429, coap: '4.29', title: 'Too many requests; retry after the given delay' },
  TOO_MANY_STREAMS: { status: 429, title: 'Too many live event streams open for this account or node' },
  TOO_MANY_READS: { status: 429, title: 'Too many observation reads in progress for this account' },
  // 431
  HEADERS_TOO_LARGE: { status: 431, title: 'The request line or headers are larger than allowed' },
  // 5xx
  INTERNAL: { status: 500, coap: '5.00', title: 'Something went wrong on our side' },
  BAD_GATEWAY: { status: 502, coap: '5.02', title: 'The device answered with an error' },
  SERVER_BUSY: { status: 503, coap: '5.03', title: 'The service is shedding load; retry after the given delay' },
  STORE_UNAVAILABLE: { status: 503, coap: '5.03', title: 'The database is unreachable; retry shortly' },
  KIT_OFFLINE: { status: 503, coap: '5.03', title: 'The dev kit has not announced itself to the gateway' },
  GATEWAY_TIMEOUT: { status: 504, coap: '5.04', title: 'The device did not answer before the deadline' },
  OBSERVATION_ENDED: { status: 503, coap: '5.03', title: 'The observation of the kit resource ended; register again' },
  PROXYING_NOT_SUPPORTED: { status: 502, coap: '5.05', title: 'The gateway proxies only to dev kits under its mesh domain' },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;

export class ReefError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** The offending field, as a JSON-pointer-like path ("observations/3/timestamp"), when there is one. */
  readonly field?: string;
  /** Seconds after which a retry makes sense (429, 503). */
  readonly retryAfter?: number;
  /** Allowed methods (405). */
  readonly allow?: string[];

  constructor(code: ErrorCode, message?: string, extra: { field?: string; retryAfter?: number; allow?: string[]; cause?: unknown } = {}) {
    super(message ?? ERRORS[code].title, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.name = 'ReefError';
    this.code = code;
    this.status = ERRORS[code].status;
    if (extra.field !== undefined) this.field = extra.field;
    if (extra.retryAfter !== undefined) this.retryAfter = extra.retryAfter;
    if (extra.allow !== undefined) this.allow = extra.allow;
  }

  get coap(): string {
    const spec: ErrorSpec = ERRORS[this.code];
    return spec.coap ?? (this.status >= 500 ? '5.00' : '4.00');
  }
}

/** The device quota's refusal, wherever it is decided (QuotaService.checkDevices, the stores' createDevice). */
export function deviceQuotaError(limit: number, have: number, adding: number): ReefError {
  return new ReefError('QUOTA_EXCEEDED', `device quota: this account may have ${limit} devices and has ${have}; ${adding} more would exceed it`);
}

export function isReefError(e: unknown): e is ReefError {
  return e instanceof ReefError;
}

/** The uniform HTTP error body (docs/errors.md). */
export interface ErrorBody {
  statusCode: number;
  code: ErrorCode;
  error: string;
  message: string;
  requestId: string;
  field?: string;
}
