// CoAP codes (RFC 7252 §3, §5.8, §5.9, §12.1): a code is one byte, class (3 bits) and detail (5 bits),
// written "c.dd". Requests are class 0, responses classes 2, 4 and 5; 1, 6 and 7 are reserved.

/** Builds a code from its class and detail: code(2, 5) is 2.05. */
export function code(cls: number, detail: number): number {
  return ((cls & 0x07) << 5) | (detail & 0x1f);
}

export const Code = {
  EMPTY: 0,
  GET: 1,
  POST: 2,
  PUT: 3,
  DELETE: 4,
  FETCH: 5,
  PATCH: 6,
  IPATCH: 7,
  CREATED: code(2, 1),
  DELETED: code(2, 2),
  VALID: code(2, 3),
  CHANGED: code(2, 4),
  CONTENT: code(2, 5),
  CONTINUE: code(2, 31),
  BAD_REQUEST: code(4, 0),
  UNAUTHORIZED: code(4, 1),
  BAD_OPTION: code(4, 2),
  FORBIDDEN: code(4, 3),
  NOT_FOUND: code(4, 4),
  METHOD_NOT_ALLOWED: code(4, 5),
  NOT_ACCEPTABLE: code(4, 6),
  REQUEST_ENTITY_INCOMPLETE: code(4, 8),
  PRECONDITION_FAILED: code(4, 12),
  REQUEST_ENTITY_TOO_LARGE: code(4, 13),
  UNSUPPORTED_CONTENT_FORMAT: code(4, 15),
  TOO_MANY_REQUESTS: code(4, 29),
  INTERNAL_SERVER_ERROR: code(5, 0),
  NOT_IMPLEMENTED: code(5, 1),
  BAD_GATEWAY: code(5, 2),
  SERVICE_UNAVAILABLE: code(5, 3),
  GATEWAY_TIMEOUT: code(5, 4),
  PROXYING_NOT_SUPPORTED: code(5, 5),
} as const;

export const METHOD_NAMES: Record<number, string> = { 1: 'GET', 2: 'POST', 3: 'PUT', 4: 'DELETE', 5: 'FETCH', 6: 'PATCH', 7: 'iPATCH' };

export function codeClass(c: number): number {
  return c >> 5;
}

export function codeDetail(c: number): number {
  return c & 0x1f;
}

/** "2.05" for 0x45; "GET" style names are not used here so logs read like the RFC. */
export function codeToString(c: number): string {
  return `${codeClass(c)}.${String(codeDetail(c)).padStart(2, '0')}`;
}

/** Parses "4.04" (the form src/core/errors.ts uses) into a code byte. */
export function codeFromString(s: string): number {
  const m = /^([0-7])\.(\d{2})$/.exec(s);
  if (!m || Number(m[2]) > 31) throw new RangeError(`not a CoAP code: ${s}`);
  return code(Number(m[1]), Number(m[2]));
}

export function isRequestCode(c: number): boolean {
  return c >= 1 && c <= 31;
}

export function isResponseCode(c: number): boolean {
  const k = codeClass(c);
  return k === 2 || k === 4 || k === 5;
}

export function isSuccess(c: number): boolean {
  return codeClass(c) === 2;
}
