// ReefClient: a typed client for the whole Reef HTTP API, for Node and browsers alike. It needs only
// `fetch` (and ReadableStream, TextDecoder, atob): no Node-only module is on its import path.
// Options and wire habits follow the original JavaScript SDK (wire §1): endpoint, solution
// (default `sandbox`), client credentials or a token, the raw token in `Authorization`.
import { ApiError, NetworkError } from './errors.ts';
import { parseSse } from './sse.ts';
import { TokenManager, type Credentials } from './token.ts';
import { uploadBody } from './upload-body.ts';
import type {
  Alarm,
  MqttConnectInfo,
  AlarmDelivery,
  AlarmQuery,
  AlarmRule,
  Bucket,
  NewAlarmRule,
  SolutionWebhook,
  CoapRequestBody,
  CoapResponse,
  Device,
  DeviceChange,
  DeviceTemplate,
  ErrorBody,
  NewDevice,
  Observation,
  ObservationGroup,
  ObservationPage,
  ObservationQuery,
  NewSimulation,
  DeviceCadence,
  KitStatus,
  Simulation,
  StreamEvent,
  TemplateSensor,
  TokenResponse,
  UploadObservation,
} from './types.ts';
import { deviceMac, normalizeMac } from './types.ts';

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

export interface RangeOptions extends ObservationQuery, CallOptions {
  /** Observations per page asked of the service (it caps a page at 10 000); default 1000. */
  pageSize?: number;
  /** Stop after this many observations in all. */
  limit?: number;
}

export interface UploadProgress {
  /** Observations the service has stored so far (it acknowledges whole batches). */
  stored: number;
  /** Batches acknowledged so far. */
  batches: number;
}

export interface UploadOptions extends CallOptions {
  /** Observations per request; default 5000. A batch the service refuses as too large (413) is split. */
  batchSize?: number;
  /** Requests in flight at once; default 2. */
  concurrency?: number;
  /** Called after each acknowledged batch. */
  onProgress?: (p: UploadProgress) => void;
}

export interface UploadResult {
  stored: number;
  batches: number;
}

export interface CoapOptions extends CallOptions {
  /** Wait this long for the kit (default: the client's timeoutMs, at least 35 s, beyond the gateway's 30 s deadline). */
  timeoutMs?: number;
}

export interface ObserveOptions {
  solution?: string;
  /** Ends the observation. Breaking out of `for await` ends it too. */
  signal?: AbortSignal;
  /** Called once the observation is established (before the first notification is yielded). */
  onOpen?: () => void;
  /** Called with the service's reason when it ends the observation (kit error, account disabled...). */
  onEnd?: (reason: string) => void;
}

export interface StreamOptions {
  /** Only this device's events. */
  deviceId?: string;
  solution?: string;
  /** Ends the stream. Breaking out of `for await` ends it too. */
  signal?: AbortSignal;
  /** Reconnect when the connection drops (default true); failures to connect are thrown. */
  reconnect?: boolean;
  /** Called each time the stream is connected (the service is then subscribed). */
  onOpen?: () => void;
}

interface RequestInit2 {
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

interface Answer<T> {
  status: number;
  headers: Headers;
  data: T;
  response: Response;
}

const DEFAULTS = { solution: 'sandbox', retries: 3, maxRetryDelayMs: 30_000, timeoutMs: 30_000 };
const SIMULATIONS = '/api/solutions/StudioSimulation/simulations';

function iso(v: string | Date | undefined): string | undefined {
  return v instanceof Date ? v.toISOString() : v;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
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

export class ReefClient {
  readonly endpoint: string;
  readonly solution: string;
  private readonly tokens: TokenManager;
  private readonly fetchFn: typeof fetch;
  private readonly opts: Required<Pick<ReefClientOptions, 'retries' | 'maxRetryDelayMs' | 'timeoutMs'>> & { headers: Record<string, string> };

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

  private readonly options: ReefClientOptions;

  /** The same client (sharing its token) addressing another solution, e.g. `StudioSimulation`. */
  inSolution(solution: string): ReefClient {
    return new ReefClient({ ...this.options, solution }, { tokens: this.tokens });
  }

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

  // ---- devices (seed §4.1, wire §1) ----------------------------------------------------------

  async listDevices(opts: CallOptions & { deviceType?: string } = {}): Promise<Device[]> {
    const r = await this.request<{ devices: Device[] }>('GET', `${this.sol(opts)}/devices`, { query: { deviceType: opts.deviceType }, idempotent: true, signal: opts.signal });
    return r.data.devices;
  }

  async createDevice(device: NewDevice, opts: CallOptions = {}): Promise<Device> {
    const r = await this.request<Device>('POST', `${this.sol(opts)}/devices`, { body: device, idempotent: false, signal: opts.signal });
    return r.data;
  }

  async getDevice(id: string, opts: CallOptions = {}): Promise<Device> {
    return (await this.request<Device>('GET', `${this.sol(opts)}/devices/${seg(id)}`, { idempotent: true, signal: opts.signal })).data;
  }

  /**
   * Changes a device: `{deviceType}` and/or `{domainInfo}` as a JSON merge patch (null removes a
   * member), e.g. `{domainInfo: {location: {latitude, longitude}}}` or `{domainInfo: {templateId}}`.
   * Answers the device as stored.
   */
  async updateDevice(id: string, change: DeviceChange, opts: CallOptions = {}): Promise<Device> {
    return (await this.request<Device>('PATCH', `${this.sol(opts)}/devices/${seg(id)}`, { body: change, idempotent: true, signal: opts.signal })).data;
  }

  /** Deletes the device and its observations; answers the device as it was. */
  async deleteDevice(id: string, opts: CallOptions = {}): Promise<Device> {
    return (await this.request<Device>('DELETE', `${this.sol(opts)}/devices/${seg(id)}`, { idempotent: true, signal: opts.signal })).data;
  }

  /**
   * The device of the solution with this MAC (any case, with or without `:`/`-`), matched against
   * every spelling a server may use (deviceMac), or null. The original platform did not dedupe
   * devices, so its clients looked a device up by MAC before creating one.
   */
  async findDeviceByMac(mac: string, opts: CallOptions = {}): Promise<Device | null> {
    const want = normalizeMac(mac);
    if (!want) throw new TypeError(`findDeviceByMac: ${JSON.stringify(mac)} is not a MAC of 16 hexadecimal digits`);
    return (await this.listDevices(opts)).find((d) => deviceMac(d) === want) ?? null;
  }

  // ---- device templates (wire §1) ---------------------------------------------------------------

  /** The device templates of the solution, in creation order. */
  async listDeviceTemplates(opts: CallOptions = {}): Promise<DeviceTemplate[]> {
    return (await this.request<{ deviceTemplates: DeviceTemplate[] }>('GET', `${this.sol(opts)}/devicetemplates`, { idempotent: true, signal: opts.signal })).data.deviceTemplates;
  }

  /** The static templates every tenant sees (GET /api/tenants/systemTenant/devicetemplates); they have no id. */
  async systemDeviceTemplates(opts: { signal?: AbortSignal } = {}): Promise<DeviceTemplate[]> {
    return (await this.request<{ deviceTemplates: DeviceTemplate[] }>('GET', '/api/tenants/systemTenant/devicetemplates', { idempotent: true, signal: opts.signal })).data.deviceTemplates;
  }

  async getDeviceTemplate(id: string, opts: CallOptions = {}): Promise<DeviceTemplate> {
    return (await this.request<{ deviceTemplates: DeviceTemplate }>('GET', `${this.sol(opts)}/devicetemplates/${seg(id)}`, { idempotent: true, signal: opts.signal })).data.deviceTemplates;
  }

  async createDeviceTemplate(t: { name: string; sensors: TemplateSensor[] }, opts: CallOptions = {}): Promise<DeviceTemplate> {
    const body = { deviceTemplate: { name: t.name, sensors: t.sensors } };
    return (await this.request<{ deviceTemplates: DeviceTemplate }>('POST', `${this.sol(opts)}/devicetemplates`, { body, idempotent: false, signal: opts.signal })).data.deviceTemplates;
  }

  /** Replaces the template's name and sensors. */
  async updateDeviceTemplate(id: string, t: { name: string; sensors: TemplateSensor[] }, opts: CallOptions = {}): Promise<DeviceTemplate> {
    const body = { deviceTemplate: { name: t.name, sensors: t.sensors } };
    return (await this.request<{ deviceTemplates: DeviceTemplate }>('PUT', `${this.sol(opts)}/devicetemplates/${seg(id)}`, { body, idempotent: true, signal: opts.signal })).data.deviceTemplates;
  }

  async deleteDeviceTemplate(id: string, opts: CallOptions = {}): Promise<DeviceTemplate> {
    return (await this.request<{ deviceTemplates: DeviceTemplate }>('DELETE', `${this.sol(opts)}/devicetemplates/${seg(id)}`, { idempotent: true, signal: opts.signal })).data.deviceTemplates;
  }

  // ---- observations ----------------------------------------------------------------------------

  /** The latest observation of every device of the solution (seed §4.2). */
  async latestObservations(opts: CallOptions = {}): Promise<ObservationGroup[]> {
    return (await this.request<ObservationGroup[]>('GET', `${this.sol(opts)}/observations`, { idempotent: true, signal: opts.signal })).data;
  }

  /** One page of one device's observations, newest first, with the next page's URL. */
  async getObservations(deviceId: string, q: ObservationQuery & CallOptions & { limit?: number } = {}): Promise<ObservationPage> {
    const r = await this.request<{ observations: Observation[] }>('GET', `${this.sol(q)}/devices/${seg(deviceId)}/observations`, {
      query: { from: iso(q.from), to: iso(q.to), tags: q.tags, limit: q.limit },
      idempotent: true,
      signal: q.signal,
    });
    return { observations: r.data.observations, nextPage: r.headers.get('next_page') };
  }

  /** The page at a `next_page` URL. */
  async getObservationsPage(nextPage: string, opts: { signal?: AbortSignal } = {}): Promise<ObservationPage> {
    const r = await this.request<{ observations: Observation[] }>('GET', this.followable(nextPage), { idempotent: true, signal: opts.signal });
    return { observations: r.data.observations, nextPage: r.headers.get('next_page') };
  }

  /** One device's observations page by page (newest first), following `next_page` (wire §1). */
  async *observationPages(deviceId: string, q: RangeOptions = {}): AsyncGenerator<ObservationPage> {
    const pageSize = q.pageSize ?? 1000;
    let left = q.limit ?? Infinity;
    let page = await this.getObservations(deviceId, { ...q, limit: Math.min(pageSize, left) });
    for (;;) {
      if (page.observations.length > left) page = { ...page, observations: page.observations.slice(0, left) };
      left -= page.observations.length;
      yield page;
      if (!page.nextPage || left <= 0) return;
      let next = page.nextPage;
      if (left < pageSize) {
        const u = new URL(next);
        u.searchParams.set('limit', String(left));
        next = u.toString();
      }
      page = await this.getObservationsPage(next, { signal: q.signal });
    }
  }

  /**
   * Every observation of the solution in a range: `[{deviceId, observations}]` groups,
   * device by device, newest first within a device, page by page through `next_page`. Give `from`
   * and/or `to` (without a range the server answers the latest of each device instead).
   */
  async *solutionObservationPages(q: { from?: string | Date; to?: string | Date; tags?: string; pageSize?: number } & CallOptions): AsyncGenerator<ObservationGroup[]> {
    if (q.from === undefined && q.to === undefined) throw new TypeError('solutionObservationPages: give from and/or to');
    let r = await this.request<ObservationGroup[]>('GET', `${this.sol(q)}/observations`, {
      query: { from: iso(q.from), to: iso(q.to), tags: q.tags, limit: q.pageSize ?? 1000 },
      idempotent: true,
      signal: q.signal,
    });
    for (;;) {
      yield r.data;
      const next = r.headers.get('next_page');
      if (!next) return;
      r = await this.request<ObservationGroup[]>('GET', this.followable(next), { idempotent: true, signal: q.signal });
    }
  }

  /** One device's observations in a range as an async iterator (newest first), across pages. */
  async *observations(deviceId: string, q: RangeOptions = {}): AsyncGenerator<Observation> {
    for await (const page of this.observationPages(deviceId, q)) yield* page.observations;
  }

  /** Per-bucket min/avg/max of temperature over [from, to), e.g. bucket `5m`. */
  async buckets(deviceId: string, q: { from: string | Date; to: string | Date; bucket: string } & CallOptions): Promise<Bucket[]> {
    const r = await this.request<{ buckets: Bucket[] }>('GET', `${this.sol(q)}/devices/${seg(deviceId)}/observations`, {
      query: { from: iso(q.from), to: iso(q.to), bucket: q.bucket },
      idempotent: true,
      signal: q.signal,
    });
    return r.data.buckets;
  }

  /** One POST of observations (all stored or none). Not retried: it is not an idempotent call. */
  async uploadBatch(deviceId: string, observations: UploadObservation[], opts: CallOptions = {}): Promise<{ stored: number }> {
    const json = uploadBody(observations);
    const r = await this.request<{ stored: number }>('POST', `${this.sol(opts)}/devices/${seg(deviceId)}/observations`, { json, idempotent: false, signal: opts.signal });
    return r.data;
  }

  /**
   * Uploads any number of observations (an array or any (async) iterable) in batches, a few requests
   * at a time. Each batch is stored whole or not at all; on the first failure no further batch is
   * sent, the ones in flight are awaited, and the failure is thrown (onProgress has reported what was
   * stored). A batch refused as too large (413) is split in halves and sent again.
   */
  async uploadObservations(deviceId: string, observations: Iterable<UploadObservation> | AsyncIterable<UploadObservation>, opts: UploadOptions = {}): Promise<UploadResult> {
    const batchSize = Math.max(1, opts.batchSize ?? 5000);
    const concurrency = Math.max(1, opts.concurrency ?? 2);
    const progress: UploadProgress = { stored: 0, batches: 0 };
    const inFlight = new Set<Promise<void>>();
    let failure: { error: unknown } | null = null;

    const send = async (batch: UploadObservation[]): Promise<void> => {
      try {
        const r = await this.uploadBatch(deviceId, batch, opts);
        progress.stored += r.stored;
        progress.batches++;
        opts.onProgress?.({ ...progress });
      } catch (e) {
        if (e instanceof ApiError && e.status === 413 && batch.length > 1) {
          const half = Math.ceil(batch.length / 2);
          await send(batch.slice(0, half));
          await send(batch.slice(half));
          return;
        }
        throw e;
      }
    };
    const launch = async (batch: UploadObservation[]) => {
      while (inFlight.size >= concurrency) await Promise.race(inFlight);
      if (failure) return;
      const p: Promise<void> = send(batch).then(
        () => {
          inFlight.delete(p);
        },
        (error) => {
          inFlight.delete(p);
          failure ??= { error };
        },
      );
      inFlight.add(p);
    };

    let batch: UploadObservation[] = [];
    try {
      for await (const o of observations as AsyncIterable<UploadObservation>) {
        if (failure) break;
        batch.push(o);
        if (batch.length >= batchSize) {
          await launch(batch);
          batch = [];
        }
      }
    } catch (e) {
      // The source failed (a file that cannot be read, say): let the batches in flight finish.
      failure ??= { error: e };
    }
    if (batch.length && !failure) await launch(batch);
    await Promise.all(inFlight);
    if (failure) throw (failure as { error: unknown }).error;
    return { stored: progress.stored, batches: progress.batches };
  }

  // ---- simulations (docs/simulation.md; always in StudioSimulation) ------------------------------

  /** Starts a simulation: virtual devices in an area reporting temperatures. */
  async createSimulation(params: NewSimulation, opts: { signal?: AbortSignal } = {}): Promise<Simulation> {
    return (await this.request<Simulation>('POST', SIMULATIONS, { body: params, idempotent: false, signal: opts.signal })).data;
  }

  /** The account's simulations, newest first (without deviceIds). */
  async listSimulations(opts: { signal?: AbortSignal } = {}): Promise<Simulation[]> {
    return (await this.request<{ simulations: Simulation[] }>('GET', SIMULATIONS, { idempotent: true, signal: opts.signal })).data.simulations;
  }

  /** One simulation, with its device ids and progress. */
  async getSimulation(id: string, opts: { signal?: AbortSignal } = {}): Promise<Simulation> {
    return (await this.request<Simulation>('GET', `${SIMULATIONS}/${seg(id)}`, { idempotent: true, signal: opts.signal })).data;
  }

  /** Stops a simulation (its devices and readings stay); answers it, now stopped. Idempotent. */
  async stopSimulation(id: string, opts: { signal?: AbortSignal } = {}): Promise<Simulation> {
    return (await this.request<Simulation>('DELETE', `${SIMULATIONS}/${seg(id)}`, { idempotent: true, signal: opts.signal })).data;
  }

  // ---- alarms (docs/alarms.md) -------------------------------------------------------------------

  /** The solution's alarm rules; with deviceId, those that watch that device. */
  async listAlarmRules(opts: CallOptions & { deviceId?: string } = {}): Promise<AlarmRule[]> {
    return (await this.request<{ rules: AlarmRule[] }>('GET', `${this.sol(opts)}/alarm-rules`, { query: { deviceId: opts.deviceId }, idempotent: true, signal: opts.signal })).data.rules;
  }

  /** Creates a rule; a webhook's signing secret is in this answer only (`webhook.secret`). */
  async createAlarmRule(rule: NewAlarmRule, opts: CallOptions = {}): Promise<AlarmRule> {
    return (await this.request<AlarmRule>('POST', `${this.sol(opts)}/alarm-rules`, { body: rule, idempotent: false, signal: opts.signal })).data;
  }

  async getAlarmRule(id: string, opts: CallOptions = {}): Promise<AlarmRule> {
    return (await this.request<AlarmRule>('GET', `${this.sol(opts)}/alarm-rules/${seg(id)}`, { idempotent: true, signal: opts.signal })).data;
  }

  /** Replaces a rule (a rule read with getAlarmRule may be sent back changed). */
  async updateAlarmRule(id: string, rule: NewAlarmRule | AlarmRule, opts: CallOptions = {}): Promise<AlarmRule> {
    return (await this.request<AlarmRule>('PUT', `${this.sol(opts)}/alarm-rules/${seg(id)}`, { body: rule, idempotent: true, signal: opts.signal })).data;
  }

  /** Deletes a rule; its active alarms are cleared. */
  async deleteAlarmRule(id: string, opts: CallOptions = {}): Promise<void> {
    await this.request('DELETE', `${this.sol(opts)}/alarm-rules/${seg(id)}`, { idempotent: true, signal: opts.signal });
  }

  /** One page of alarms, newest raised first; pass nextAfter back as `after` for the next. */
  async listAlarms(q: AlarmQuery & CallOptions = {}): Promise<{ alarms: Alarm[]; nextAfter: string | null }> {
    const status = Array.isArray(q.status) ? q.status.join(',') : q.status;
    return (
      await this.request<{ alarms: Alarm[]; nextAfter: string | null }>('GET', `${this.sol(q)}/alarms`, {
        query: { status, deviceId: q.deviceId, ruleId: q.ruleId, limit: q.limit, after: q.after },
        idempotent: true,
        signal: q.signal,
      })
    ).data;
  }

  /** Every alarm matching the query, across pages. */
  async *alarms(q: Omit<AlarmQuery, 'after'> & CallOptions = {}): AsyncGenerator<Alarm> {
    let after: string | undefined;
    for (;;) {
      const page = await this.listAlarms({ ...q, ...(after ? { after } : {}) });
      yield* page.alarms;
      if (!page.nextAfter) return;
      after = page.nextAfter;
    }
  }

  async getAlarm(id: string, opts: CallOptions = {}): Promise<Alarm> {
    return (await this.request<Alarm>('GET', `${this.sol(opts)}/alarms/${seg(id)}`, { idempotent: true, signal: opts.signal })).data;
  }

  /** Acknowledges an alarm (again: no change). Idempotent. */
  async acknowledgeAlarm(id: string, opts: CallOptions = {}): Promise<Alarm> {
    return (await this.request<Alarm>('POST', `${this.sol(opts)}/alarms/${seg(id)}/acknowledge`, { idempotent: true, signal: opts.signal })).data;
  }

  /** Clears an active alarm by hand. Idempotent. */
  async clearAlarm(id: string, opts: CallOptions = {}): Promise<Alarm> {
    return (await this.request<Alarm>('POST', `${this.sol(opts)}/alarms/${seg(id)}/clear`, { idempotent: true, signal: opts.signal })).data;
  }

  /** Active alarms per device (devices without any are left out). */
  async alarmCounts(opts: CallOptions = {}): Promise<{ deviceId: string; active: number }[]> {
    return (await this.request<{ devices: { deviceId: string; active: number }[] }>('GET', `${this.sol(opts)}/alarm-counts`, { idempotent: true, signal: opts.signal })).data.devices;
  }

  /** Webhook deliveries in one status (default dead: the dead-letter list), newest first. */
  async listAlarmDeliveries(q: CallOptions & { status?: 'pending' | 'delivered' | 'dead'; limit?: number; after?: string } = {}): Promise<{ deliveries: AlarmDelivery[]; nextAfter: string | null }> {
    return (
      await this.request<{ deliveries: AlarmDelivery[]; nextAfter: string | null }>('GET', `${this.sol(q)}/alarm-deliveries`, {
        query: { status: q.status, limit: q.limit, after: q.after },
        idempotent: true,
        signal: q.signal,
      })
    ).data;
  }

  /** The solution's webhook (null: none), used for every rule without its own. */
  async getAlarmWebhook(opts: CallOptions = {}): Promise<SolutionWebhook | null> {
    return (await this.request<{ webhook: SolutionWebhook | null }>('GET', `${this.sol(opts)}/alarm-webhook`, { idempotent: true, signal: opts.signal })).data.webhook;
  }

  /** Sets the solution's webhook; a new URL's signing secret is in this answer only (`secret`). */
  async setAlarmWebhook(url: string, opts: CallOptions = {}): Promise<SolutionWebhook> {
    return (await this.request<{ webhook: SolutionWebhook }>('PUT', `${this.sol(opts)}/alarm-webhook`, { body: { url }, idempotent: true, signal: opts.signal })).data.webhook;
  }

  /** Removes the solution's webhook (rules with their own keep theirs). */
  async deleteAlarmWebhook(opts: CallOptions = {}): Promise<void> {
    await this.request('DELETE', `${this.sol(opts)}/alarm-webhook`, { idempotent: true, signal: opts.signal });
  }

  /** Sends a dead letter again. */
  async retryAlarmDelivery(id: string, opts: CallOptions = {}): Promise<AlarmDelivery> {
    return (await this.request<AlarmDelivery>('POST', `${this.sol(opts)}/alarm-deliveries/${seg(id)}/retry`, { idempotent: false, signal: opts.signal })).data;
  }

  // ---- CoAP bridge to dev kits (docs/coap.md "HTTP bridge") ----------------------------------------

  /** The solution's dev kits as the gateway sees them: reachable now, and when each was last heard. */
  /** GET /api/mqtt: where the MQTT broker listens and the caller's topics; null when the service runs none. */
  async mqttInfo(opts: CallOptions = {}): Promise<MqttConnectInfo | null> {
    try {
      return (await this.request<MqttConnectInfo>('GET', '/api/mqtt', { idempotent: true, signal: opts.signal })).data;
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return null;
      throw e;
    }
  }

  /** When each device of the solution last reported and its usual interval (devices with readings). */
  async cadence(opts: CallOptions = {}): Promise<DeviceCadence[]> {
    return (await this.request<{ devices: DeviceCadence[] }>('GET', `${this.sol(opts)}/cadence`, { idempotent: true, signal: opts.signal })).data.devices;
  }

  async listKits(opts: CallOptions = {}): Promise<KitStatus[]> {
    return (await this.request<{ kits: KitStatus[] }>('GET', `${this.sol(opts)}/kits`, { idempotent: true, signal: opts.signal })).data.kits;
  }

  /**
   * One CoAP request to a dev kit through the gateway, e.g. `coap(id, 'GET', 'snsr/arduino/temp?sens')`.
   * The resource is the kit path (with or without its `snsr`/`sensor` prefix) and its CoAP query.
   * A kit's 4.xx/5.xx is an ApiError 502 (BAD_GATEWAY); no answer by the deadline is 504. Not
   * retried: an offline kit (503 KIT_OFFLINE) stays offline for longer than a retry waits.
   */
  async coap(deviceId: string, method: 'GET' | 'PUT' | 'POST' | 'DELETE', resource: string, body?: CoapRequestBody, opts: CoapOptions = {}): Promise<CoapResponse> {
    const r = await this.request<CoapResponse>(method, this.coapPath(deviceId, resource, opts), {
      ...(body !== undefined && (method === 'PUT' || method === 'POST') ? { body } : {}),
      idempotent: false,
      signal: opts.signal,
      timeoutMs: opts.timeoutMs ?? (this.opts.timeoutMs === 0 ? 0 : Math.max(this.opts.timeoutMs, 35_000)),
    });
    return r.data;
  }

  coapGet(deviceId: string, resource: string, opts: CoapOptions = {}): Promise<CoapResponse> {
    return this.coap(deviceId, 'GET', resource, undefined, opts);
  }

  /** PUT, e.g. `coapPut(id, 'snsr/arduino/temp?cfg=C')` to switch the kit to Celsius. */
  coapPut(deviceId: string, resource: string, body?: CoapRequestBody, opts: CoapOptions = {}): Promise<CoapResponse> {
    return this.coap(deviceId, 'PUT', resource, body, opts);
  }

  /**
   * CoAP observe through the bridge: the current state, then a notification per change, as an
   * async iterator (Server-Sent Events read with fetch). It ends when the caller stops (break,
   * signal) or the service ends the observation (`onEnd` gets the reason).
   */
  async *coapObserve(deviceId: string, resource: string, opts: ObserveOptions = {}): AsyncGenerator<CoapResponse> {
    const ctrl = new AbortController();
    const onAbort = () => ctrl.abort(opts.signal?.reason);
    if (opts.signal?.aborted) return;
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      let res: Response;
      try {
        res = (
          await this.request<null>('GET', this.coapPath(deviceId, resource, opts), {
            idempotent: false,
            signal: ctrl.signal,
            raw: true,
            accept: 'text/event-stream',
            timeoutMs: this.opts.timeoutMs === 0 ? 0 : Math.max(this.opts.timeoutMs, 35_000),
          })
        ).response;
      } catch (e) {
        if (ctrl.signal.aborted) return;
        throw e;
      }
      opts.onOpen?.();
      try {
        for await (const m of parseSse(res.body!)) {
          if (m.event === 'notification') yield JSON.parse(m.data) as CoapResponse;
          else if (m.event === 'end') {
            let reason = m.data;
            try {
              reason = String((JSON.parse(m.data) as { reason?: unknown }).reason ?? m.data);
            } catch {
              // plain text reason
            }
            opts.onEnd?.(reason);
            return;
          }
        }
      } catch (e) {
        if (ctrl.signal.aborted) return;
        throw new NetworkError({ method: 'GET', url: this.endpoint + this.coapPath(deviceId, resource, opts), message: `the observation broke: ${(e as Error)?.message ?? e}`, cause: e });
      }
      opts.onEnd?.('the service closed the stream');
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
      ctrl.abort();
    }
  }

  private coapPath(deviceId: string, resource: string, opts: { solution?: string | undefined }): string {
    const q = resource.indexOf('?');
    const path = (q < 0 ? resource : resource.slice(0, q))
      .split('/')
      .filter((x) => x.length > 0)
      .map(seg)
      .join('/');
    const query =
      q < 0
        ? ''
        : resource
            .slice(q + 1)
            .split('&')
            .filter((x) => x.length > 0)
            .map(seg)
            .join('&');
    return `${this.sol(opts)}/devices/${seg(deviceId)}/coap/${path}${query ? `?${query}` : ''}`;
  }

  // ---- live stream -----------------------------------------------------------------------------

  /**
   * New observations (and device changes) of the solution as they are stored, from the Server-Sent
   * Events endpoint. Read with fetch so the Authorization header is sent, in browsers too.
   */
  async *stream(opts: StreamOptions = {}): AsyncGenerator<StreamEvent> {
    const ctrl = new AbortController();
    const onAbort = () => ctrl.abort(opts.signal?.reason);
    if (opts.signal?.aborted) return;
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const path = `${this.sol(opts)}/events`;
    let retryMs = 1000;
    try {
      for (;;) {
        let res: Response;
        try {
          res = (await this.request<null>('GET', path, { query: { deviceId: opts.deviceId }, idempotent: true, signal: ctrl.signal, raw: true, accept: 'text/event-stream' })).response;
        } catch (e) {
          if (ctrl.signal.aborted) return;
          throw e;
        }
        opts.onOpen?.();
        try {
          for await (const m of parseSse(res.body!)) {
            if (m.retry !== undefined) retryMs = m.retry;
            yield toStreamEvent(m.event, m.data);
          }
        } catch (e) {
          if (ctrl.signal.aborted) return;
          if (opts.reconnect === false) throw new NetworkError({ method: 'GET', url: this.endpoint + path, message: `the event stream broke: ${(e as Error)?.message ?? e}`, cause: e });
        }
        if (opts.reconnect === false || ctrl.signal.aborted) return;
        await sleep(retryMs, ctrl.signal).catch(() => {});
        if (ctrl.signal.aborted) return;
      }
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
      ctrl.abort();
    }
  }

  // ---- plumbing --------------------------------------------------------------------------------

  private sol(opts: { solution?: string | undefined }): string {
    return `/api/solutions/${seg(opts.solution ?? this.solution)}`;
  }

  /**
   * A next_page URL is followed verbatim (wire §1) when it points at our endpoint's origin. One that
   * names another origin (a proxy in between rewrote the host) is taken as a path on our endpoint,
   * so the token is never sent anywhere the caller did not configure.
   */
  private followable(next: string): string {
    const base = new URL(this.endpoint);
    const u = new URL(next, base);
    if (u.origin === base.origin) return u.toString();
    return this.endpoint + u.pathname + u.search;
  }

  /** One call with token handling, typed errors and retries of idempotent calls on 429/503. */
  private async request<T>(method: string, pathOrUrl: string, init: RequestInit2): Promise<Answer<T>> {
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

function seg(s: string): string {
  return encodeURIComponent(s);
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

function toStreamEvent(event: string, data: string): StreamEvent {
  let parsed: unknown = data;
  try {
    parsed = JSON.parse(data);
  } catch {
    // Plain text data stays a string.
  }
  if ((event === 'observations' || event === 'device' || event === 'alarm' || event === 'alarm-rule') && parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
    return { type: event, ...(parsed as Record<string, unknown>) } as StreamEvent;
  }
  return { type: event, data: parsed };
}
