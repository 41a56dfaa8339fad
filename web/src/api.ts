// The app's view of the Reef HTTP interface: a token kept in memory and renewed silently, typed
// failures turned into plain sentences, paging through next_page, and the Server-Sent Events stream.

export interface Device {
  id: string;
  deviceType: string;
  domainInfo?: { location?: { latitude: number; longitude: number }; nic_macID?: string; [k: string]: unknown };
  provisioningInfo?: { vendorMacAddress?: string; status?: string; [k: string]: unknown };
}

export interface Observation {
  timestamp: string;
  temperature?: number | string;
  [k: string]: unknown;
}

export interface Bucket {
  timestamp: string;
  count: number;
  min: number | null;
  avg: number | null;
  max: number | null;
}

export interface LatestGroup {
  deviceId: string;
  observations: Observation[];
}

/** A failure the user can act on: `kind` picks the wording, `message` is shown as is. */
export class ApiError extends Error {
  constructor(
    readonly kind: 'credentials' | 'solution' | 'network' | 'server' | 'request' | 'throttled' | 'device',
    message: string,
    readonly status = 0,
    readonly code = '',
  ) {
    super(message);
  }
}

interface ErrorBody {
  statusCode?: number;
  code?: string;
  message?: string;
  requestId?: string;
}

/** The endpoint as typed, without a trailing slash; empty means the serving origin. */
export function normaliseEndpoint(raw: string): string {
  const t = raw.trim().replace(/\/+$/, '');
  if (!t) return location.origin;
  return /^https?:\/\//i.test(t) ? t : `http://${t}`;
}

function tokenExpiry(token: string): number {
  try {
    const part = token.split('.')[1] ?? '';
    const json = JSON.parse(atob(part.replace(/-/g, '+').replace(/_/g, '/'))) as { exp?: number };
    return typeof json.exp === 'number' ? json.exp * 1000 : Date.now() + 10 * 60_000;
  } catch {
    return Date.now() + 10 * 60_000;
  }
}

export class Connection {
  private token = '';
  private expires = 0;
  private renewing: Promise<string> | null = null;

  constructor(
    readonly endpoint: string,
    readonly clientId: string,
    // The secret lives only in this object, in memory, to renew the token; it is never stored.
    private readonly clientSecret: string,
    readonly solution: string,
  ) {}

  /** A valid token: fetched on first use and renewed a minute before it expires. */
  async accessToken(force = false): Promise<string> {
    if (!force && this.token && Date.now() < this.expires - 60_000) return this.token;
    this.renewing ??= (async () => {
      try {
        const body = await this.send<{ accessToken: string }>('POST', '/api/tokens', { clientId: this.clientId, clientSecret: this.clientSecret }, false);
        this.token = body.body.accessToken;
        this.expires = tokenExpiry(this.token);
        return this.token;
      } finally {
        this.renewing = null;
      }
    })();
    return this.renewing;
  }

  solutionPath(rest = ''): string {
    return `/api/solutions/${encodeURIComponent(this.solution)}${rest}`;
  }

  async get<T>(path: string, query: Record<string, string | number | undefined> = {}): Promise<{ body: T; headers: Headers }> {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') q.set(k, String(v));
    const qs = q.toString();
    return this.send<T>('GET', qs ? `${path}?${qs}` : path);
  }

  async send<T>(method: string, path: string, body?: unknown, auth = true, signal?: AbortSignal): Promise<{ body: T; headers: Headers }> {
    const url = /^https?:/.test(path) ? path : this.endpoint + path;
    for (let attempt = 0; ; attempt++) {
      const headers: Record<string, string> = { accept: 'application/json' };
      if (auth) headers.authorization = await this.accessToken(attempt > 0);
      if (body !== undefined) headers['content-type'] = 'application/json';
      let res: Response;
      try {
        res = await fetch(url, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }), ...(signal ? { signal } : {}) });
      } catch (e) {
        if ((e as Error).name === 'AbortError') throw e;
        throw new ApiError('network', `Cannot reach ${this.endpoint}: the network is down or the server is not running.`);
      }
      // A token that expired in flight (or a restarted server with new keys): renew once, retry.
      if (res.status === 401 && auth && attempt === 0) continue;
      if (res.ok) {
        const text = await res.text();
        return { body: (text ? JSON.parse(text) : undefined) as T, headers: res.headers };
      }
      throw await this.failure(res);
    }
  }

  private async failure(res: Response): Promise<ApiError> {
    let b: ErrorBody = {};
    try {
      b = (await res.json()) as ErrorBody;
    } catch {
      /* not our error body: a proxy's page */
    }
    const msg = b.message ?? res.statusText;
    const code = b.code ?? '';
    const ref = b.requestId ? ` (request id ${b.requestId})` : '';
    if (code === 'INVALID_CREDENTIALS' || code === 'ACCOUNT_DISABLED') {
      return new ApiError('credentials', code === 'ACCOUNT_DISABLED' ? 'This account is disabled.' : 'Client id or client secret is wrong. Check both in your account settings.', res.status, code);
    }
    if (res.status === 401) return new ApiError('credentials', `Not signed in: ${msg}`, res.status, code);
    if (code === 'SOLUTION_NOT_FOUND' || code === 'INVALID_SOLUTION_NAME') {
      return new ApiError('solution', `No solution “${this.solution}” in this account. Names are case sensitive; try sandbox or StudioSimulation.`, res.status, code);
    }
    if (code === 'DEVICE_NOT_FOUND') return new ApiError('device', msg, res.status, code);
    if (res.status === 429) {
      const after = res.headers.get('retry-after');
      return new ApiError('throttled', `Too many attempts${after ? `; try again in ${after} s` : ''}.`, res.status, code);
    }
    if (res.status >= 500) {
      if (code === 'GATEWAY_TIMEOUT' || code === 'BAD_GATEWAY') return new ApiError('server', msg + ref, res.status, code);
      return new ApiError('server', `The server failed (${res.status}): ${msg}${ref}`, res.status, code);
    }
    if (res.status === 404 && !b.code) return new ApiError('server', `${this.endpoint} does not look like a Reef server (404 for ${res.url}).`, res.status, code);
    return new ApiError('request', msg, res.status, code);
  }

  async devices(): Promise<Device[]> {
    try {
      return (await this.get<{ devices: Device[] }>(this.solutionPath('/devices'))).body.devices;
    } catch (e) {
      // The original answered 404 for a solution without devices (wire §1): that is "none".
      if (e instanceof ApiError && e.status === 404 && e.code === 'NOT_FOUND') return [];
      throw e;
    }
  }

  async latest(): Promise<LatestGroup[]> {
    return (await this.get<LatestGroup[]>(this.solutionPath('/observations'))).body;
  }

  /** Every observation of [from, to), oldest first, following next_page. */
  async range(deviceId: string, from: Date, to: Date, signal?: AbortSignal, limit = 10000): Promise<Observation[]> {
    const out: Observation[][] = [];
    let url: string | null = this.endpoint + this.solutionPath(`/devices/${deviceId}/observations`) + `?${new URLSearchParams({ from: from.toISOString(), to: to.toISOString(), limit: String(limit) })}`;
    while (url) {
      const r: { body: { observations: Observation[] }; headers: Headers } = await this.send('GET', url, undefined, true, signal);
      out.push(r.body.observations);
      url = r.headers.get('next_page');
    }
    // Pages come newest first; the plot wants oldest first.
    return out.flat().reverse();
  }

  async buckets(deviceId: string, from: Date, to: Date, bucketMs: number, signal?: AbortSignal): Promise<Bucket[]> {
    const q = new URLSearchParams({ from: from.toISOString(), to: to.toISOString(), bucket: `${bucketMs}ms` });
    const r = await this.send<{ buckets: Bucket[] }>('GET', this.solutionPath(`/devices/${deviceId}/observations?${q}`), undefined, true, signal);
    return r.body.buckets;
  }

  /**
   * The solution's event stream. EventSource cannot send headers, so the token rides as
   * access_token; when the stream fails (server restart, expired token) it is reopened with a
   * fresh token after a pause.
   */
  events(handlers: { observations?: (d: LatestGroup) => void; device?: (d: { deviceId: string; action: string }) => void; state?: (live: boolean) => void; other?: (type: string, data: unknown) => void }, otherTypes: string[] = []): () => void {
    let es: EventSource | null = null;
    let closed = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let delay = 1000;
    const open = async () => {
      if (closed) return;
      let token: string;
      try {
        token = await this.accessToken();
      } catch {
        retry();
        return;
      }
      if (closed) return;
      es = new EventSource(`${this.endpoint}${this.solutionPath('/events')}?access_token=${encodeURIComponent(token)}`);
      es.onopen = () => {
        delay = 1000;
        handlers.state?.(true);
      };
      es.onerror = () => {
        handlers.state?.(false);
        if (es && es.readyState === EventSource.CLOSED) retry();
      };
      es.addEventListener('observations', (e) => handlers.observations?.(JSON.parse((e as MessageEvent).data) as LatestGroup));
      es.addEventListener('device', (e) => handlers.device?.(JSON.parse((e as MessageEvent).data) as { deviceId: string; action: string }));
      for (const t of otherTypes) es.addEventListener(t, (e) => handlers.other?.(t, JSON.parse((e as MessageEvent).data)));
    };
    const retry = () => {
      es?.close();
      es = null;
      if (closed) return;
      clearTimeout(timer);
      timer = setTimeout(() => void open(), delay);
      delay = Math.min(delay * 2, 30_000);
    };
    void open();
    return () => {
      closed = true;
      clearTimeout(timer);
      es?.close();
    };
  }
}

/** Temperature of an observation as a number (some clients send "72.50"), or null. */
export function temperatureOf(o: Observation | undefined): number | null {
  if (!o || o.temperature === undefined || o.temperature === null) return null;
  const v = typeof o.temperature === 'number' ? o.temperature : Number(o.temperature);
  return Number.isFinite(v) ? v : null;
}
