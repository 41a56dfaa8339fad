// The plumbing under every ReefClient call: options, the token (token.ts), one request with typed
// errors (errors.ts), retries of idempotent calls on 429/503 after Retry-After, and timeouts. It
// needs only `fetch` (and ReadableStream, TextDecoder, atob): no Node-only module is on its import
// path. Options and wire habits follow the original JavaScript SDK (wire §1): endpoint, solution
// (default `sandbox`), client credentials or a token, the raw token in `Authorization`.
import { ApiError, NetworkError } from './errors.ts';
import { TokenManager, type Credentials } from './token.ts';
import type { ErrorBody, TokenResponse } from './types.ts';

export interface ReefClientOptions {
  /** Base URL of the service, e.g. `https://reef.example.org` (a trailing `/api` is accepted too). */
  endpoint: string;
  /** Solution the calls address unless a call names another; default `sandbox` (seed §1). */
  solution?: string;
  /** Client id and secret: a token is fetched on first use and renewed before it expires. */
  credentials?: Credentials;
  /** A ready access token instead of credentials (not renewed: when it expires calls fail with 401). */
  token?: string;
  /** The fetch to use; default the global one. */
  fetch?: typeof fetch;
  /** Retries of idempotent calls (GET, PUT, DELETE) answered 429 or 503; default 3. */
  retries?: number;
  /** Longest wait before a retry; a Retry-After beyond it fails at once. Default 30 000 ms. */
  maxRetryDelayMs?: number;
  /** Give up on a call (per attempt) after this long; 0 waits forever. Default 30 000 ms. */
  timeoutMs?: number;
  /** Extra headers sent with every request. */
  headers?: Record<string, string>;
  /** The clock (epoch ms) a token's renewal and expiry are judged by; default Date.now. */
  now?: () => number;
}

/** Options every call accepts. */
export interface CallOptions {
  /** Address this solution instead of the client's. */
  solution?: string;
  signal?: AbortSignal;
}

export interface RequestInit2 {
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  /** A body already written as JSON (text or UTF-8 bytes), sent as it is instead of JSON.stringify(body). */
  json?: string | Uint8Array<ArrayBuffer>;
  /** Safe to repeat: retried on 429/503. */
  idempotent: boolean;
  auth?: boolean;
  signal?: AbortSignal | undefined;
  /** Return the response unread (streams). */
  raw?: boolean;
  accept?: string;
  /** This call's own timeout, instead of the client's. */
  timeoutMs?: number;
}

export interface Answer<T> {
  status: number;
  headers: Headers;
  data: T;
  response: Response;
}

const DEFAULTS = { solution: 'sandbox', retries: 3, maxRetryDelayMs: 30_000, timeoutMs: 30_000 };

export function iso(v: string | Date | undefined): string | undefined {
  return v instanceof Date ? v.toISOString() : v;
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Retry-After: delay-seconds or an HTTP-date (RFC 9110 §10.2.3); undefined when absent or unreadable. */
export function parseRetryAfter(v: string | null, now = Date.now()): number | undefined {
  if (!v) return undefined;
  const t = v.trim();
  if (/^\d+$/.test(t)) return Number(t);
  const at = Date.parse(t);
  return Number.isFinite(at) ? Math.max(0, Math.ceil((at - now) / 1000)) : undefined;
}

/** A path segment, encoded. */
export function seg(s: string): string {
  return encodeURIComponent(s);
}

/**
 * What every call of ReefClient stands on. The calls themselves are added by resource, one class
 * each, in a chain ending in ReefClient (client.ts): devices.ts, observations.ts, simulations.ts,
 * alarms.ts, kits.ts, live.ts; the order of the chain means nothing.
 */
export abstract class ClientBase {
  readonly endpoint: string;
  readonly solution: string;
  protected readonly tokens: TokenManager;
  private readonly fetchFn: typeof fetch;
  protected readonly opts: Required<Pick<ReefClientOptions, 'retries' | 'maxRetryDelayMs' | 'timeoutMs'>> & { headers: Record<string, string> };

  constructor(options: ReefClientOptions, shared?: { tokens: TokenManager }) {
    if (!options || typeof options.endpoint !== 'string' || !/^https?:\/\//i.test(options.endpoint)) {
      throw new TypeError('ReefClient: endpoint must be an http:// or https:// URL');
    }
    this.endpoint = options.endpoint.replace(/\/+$/, '').replace(/\/api$/, '');
    this.solution = options.solution ?? DEFAULTS.solution;
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== 'function') throw new TypeError('ReefClient: no fetch available; pass options.fetch');
    // Called unbound, a browser's fetch throws "Illegal invocation".
    this.fetchFn = options.fetch ? options.fetch : (input, init) => globalThis.fetch(input, init);
    this.opts = {
      retries: options.retries ?? DEFAULTS.retries,
      maxRetryDelayMs: options.maxRetryDelayMs ?? DEFAULTS.maxRetryDelayMs,
      timeoutMs: options.timeoutMs ?? DEFAULTS.timeoutMs,
      headers: options.headers ?? {},
    };
    if (shared) this.tokens = shared.tokens;
    else {
      const creds = options.credentials;
      if (creds && (typeof creds.clientId !== 'string' || typeof creds.clientSecret !== 'string')) {
        throw new TypeError('ReefClient: credentials need clientId and clientSecret strings');
      }
      if (!creds && !options.token) throw new TypeError('ReefClient: give credentials {clientId, clientSecret} or a token');
      this.tokens = new TokenManager(creds ? () => this.requestToken(creds) : null, options.token ?? null, options.now ?? Date.now);
    }
    this.options = options;
  }

  protected readonly options: ReefClientOptions;

  /** How many token calls this client (and its inSolution siblings) made so far. */
  get tokenRenewals(): number {
    return this.tokens.renewals;
  }

  /** A valid access token (fetched or renewed first when due). */
  getToken(): Promise<string> {
    return this.tokens.get();
  }

  // ---- tokens ------------------------------------------------------------------------------

  /** POST /api/tokens: exchanges the credentials for a token. Not retried on 429 (the throttle). */
  private async requestToken(c: Credentials): Promise<TokenResponse> {
    const r = await this.request<TokenResponse>('POST', '/api/tokens', { body: { clientId: c.clientId, clientSecret: c.clientSecret }, idempotent: false, auth: false });
    if (!r.data || typeof r.data.accessToken !== 'string') {
      throw new ApiError({
        status: r.status,
        code: 'BAD_TOKEN_RESPONSE',
        message: 'the token response carries no accessToken',
        requestId: r.headers.get('x-request-id'),
        method: 'POST',
        url: this.endpoint + '/api/tokens',
      });
    }
    return r.data;
  }
  protected sol(opts: { solution?: string | undefined }): string {
    return `/api/solutions/${seg(opts.solution ?? this.solution)}`;
  }

  /**
   * A next_page URL is followed verbatim (wire §1) when it points at our endpoint's origin. One that
   * names another origin (a proxy in between rewrote the host) is taken as a path on our endpoint,
   * so the token is never sent anywhere the caller did not configure.
   */
  protected followable(next: string): string {
    const base = new URL(this.endpoint);
    const u = new URL(next, base);
    if (u.origin === base.origin) return u.toString();
    return this.endpoint + u.pathname + u.search;
  }

  /** One call with token handling, typed errors and retries of idempotent calls on 429/503. */
  protected async request<T>(method: string, pathOrUrl: string, init: RequestInit2): Promise<Answer<T>> {
    let url = /^https?:\/\//i.test(pathOrUrl) ? pathOrUrl : this.endpoint + pathOrUrl;
    if (init.query) {
      const u = new URL(url);
      for (const [k, v] of Object.entries(init.query)) if (v !== undefined && v !== '') u.searchParams.set(k, String(v));
      url = u.toString();
    }
    const auth = init.auth ?? true;
    let renewed = false;
    for (let attempt = 0; ; attempt++) {
      const headers: Record<string, string> = { accept: init.accept ?? 'application/json', ...this.opts.headers };
      let token: string | null = null;
      if (auth) {
        token = await this.tokens.get();
        // The raw token, as the original clients send it (wire §1).
        headers.authorization = token;
      }
      let body: string | Uint8Array<ArrayBuffer> | undefined;
      if (init.json !== undefined || init.body !== undefined) {
        body = init.json ?? JSON.stringify(init.body);
        headers['content-type'] = 'application/json';
      }
      const res = await this.send<T>(method, url, headers, body, init);
      if (!(res instanceof ApiError)) return res;
      const err = res;
      // An expired or rejected token is renewed once, whatever the method: a 401 is answered before
      // anything is done, so repeating the call cannot do it twice.
      if (err.status === 401 && token && !renewed && this.tokens.canRenew && (err.code === 'TOKEN_EXPIRED' || err.code === 'TOKEN_INVALID')) {
        renewed = true;
        await this.tokens.invalidate(token);
        attempt--;
        continue;
      }
      if ((err.status === 503 || err.status === 429) && init.idempotent && attempt < this.opts.retries) {
        const delay = err.retryAfter !== undefined ? err.retryAfter * 1000 : Math.min(250 * 2 ** attempt, 8000) * (0.5 + Math.random() / 2);
        if (delay <= this.opts.maxRetryDelayMs) {
          await sleep(delay, init.signal);
          continue;
        }
      }
      throw err;
    }
  }

  /** One attempt: the answer, or an ApiError for a status ≥ 400 (returned, so request() decides on retries). */
  private async send<T>(method: string, url: string, headers: Record<string, string>, body: string | Uint8Array<ArrayBuffer> | undefined, init: RequestInit2): Promise<Answer<T> | ApiError> {
    const ctrl = new AbortController();
    const outer = init.signal;
    const onAbort = () => ctrl.abort(outer!.reason);
    if (outer?.aborted) throw outer.reason;
    outer?.addEventListener('abort', onAbort, { once: true });
    let timedOut = false;
    const timeoutMs = init.timeoutMs ?? this.opts.timeoutMs;
    const timer =
      timeoutMs > 0
        ? setTimeout(() => {
            timedOut = true;
            ctrl.abort();
          }, timeoutMs)
        : null;
    let keepLinked = false;
    const done = () => {
      if (timer) clearTimeout(timer);
      if (!keepLinked) outer?.removeEventListener('abort', onAbort);
    };
    try {
      let response: Response;
      try {
        response = await this.fetchFn(url, { method, headers, ...(body === undefined ? {} : { body }), signal: ctrl.signal });
      } catch (e) {
        throw this.networkError(e, method, url, timedOut, outer, timeoutMs);
      }
      if (response.ok && init.raw) {
        // The body is read later: the timeout ends here, but the caller's abort must still reach it.
        keepLinked = true;
        return { status: response.status, headers: response.headers, data: null as T, response };
      }
      let text: string;
      try {
        text = await response.text();
      } catch (e) {
        throw this.networkError(e, method, url, timedOut, outer, timeoutMs);
      }
      if (!response.ok) return apiError(response, text, method, url);
      let data: T = undefined as T;
      if (text.length) {
        try {
          data = JSON.parse(text) as T;
        } catch {
          throw new ApiError({
            status: response.status,
            code: 'BAD_RESPONSE',
            message: `the service answered ${response.status} with a body that is not JSON`,
            requestId: response.headers.get('x-request-id'),
            method,
            url,
          });
        }
      }
      return { status: response.status, headers: response.headers, data, response };
    } finally {
      done();
    }
  }

  private networkError(e: unknown, method: string, url: string, timedOut: boolean, outer: AbortSignal | undefined, timeoutMs: number): unknown {
    // The caller's own abort passes through as it is, like fetch's.
    if (outer?.aborted) return outer.reason ?? e;
    if (timedOut) return new NetworkError({ method, url, message: `${method} ${url} got no answer within ${timeoutMs} ms`, cause: e, timedOut: true });
    const cause = (e as { cause?: { code?: string; message?: string } })?.cause;
    const detail = cause?.code ?? cause?.message ?? (e as Error)?.message ?? String(e);
    return new NetworkError({ method, url, message: `${method} ${url} failed: ${detail}`, cause: e });
  }
}

function apiError(response: Response, text: string, method: string, url: string): ApiError {
  let body: ErrorBody | undefined;
  try {
    const b = JSON.parse(text) as ErrorBody;
    if (b && typeof b === 'object' && typeof b.code === 'string') body = b;
  } catch {
    // Not our body (a proxy's HTML page, say): the status alone tells.
  }
  const retryAfter = parseRetryAfter(response.headers.get('retry-after'));
  return new ApiError({
    status: response.status,
    code: body?.code ?? `HTTP_${response.status}`,
    message: body?.message ?? `${response.status} ${response.statusText}`.trim() + (text && text.length < 200 && !/^\s*</.test(text) ? `: ${text.trim()}` : ''),
    requestId: body?.requestId ?? response.headers.get('x-request-id'),
    method,
    url,
    ...(body?.field !== undefined ? { field: body.field } : {}),
    ...(retryAfter !== undefined ? { retryAfter } : {}),
    ...(body ? { body } : {}),
  });
}
