// The app's view of the Reef HTTP interface, on the SDK (src/sdk: token kept in memory and renewed,
// paging, typed errors, the SSE streams, simulations, the CoAP bridge): failures become plain
// sentences a user can act on.
import { ApiError as SdkApiError, NetworkError, ReefClient } from '../../src/sdk/index.ts';
import type { Bucket, Device, DeviceCadence, KitStatus, Observation, ObservationGroup } from '../../src/sdk/index.ts';
import { isKitModule } from './format.ts';

export type { Bucket, Device, KitStatus, Observation };
export type LatestGroup = ObservationGroup;

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

/** The endpoint as typed, without a trailing slash; empty means the serving origin. */
export function normaliseEndpoint(raw: string): string {
  const t = raw.trim().replace(/\/+$/, '');
  if (!t) return location.origin;
  return /^https?:\/\//i.test(t) ? t : `http://${t}`;
}

export class Connection {
  readonly client: ReefClient;

  constructor(
    readonly endpoint: string,
    readonly clientId: string,
    // The secret lives only inside the SDK client, in memory, to renew the token; never stored.
    clientSecret: string | ReefClient,
    readonly solution: string,
  ) {
    this.client = typeof clientSecret === 'string' ? new ReefClient({ endpoint, solution, credentials: { clientId, clientSecret }, retries: 2, maxRetryDelayMs: 5000 }) : clientSecret;
  }

  /** Signed in with a kept token (a reload of the page): it is not renewed; when it expires the secret is asked again. */
  static withToken(endpoint: string, clientId: string, token: string, solution: string): Connection {
    return new Connection(endpoint, clientId, new ReefClient({ endpoint, solution, token, retries: 2, maxRetryDelayMs: 5000 }), solution);
  }

  /** How often each device reports and when it last did (GET …/cadence); none from a server without it. */
  async cadence(): Promise<DeviceCadence[]> {
    try {
      return await this.client.cadence();
    } catch (e) {
      if (e instanceof SdkApiError && e.status === 404 && e.code.startsWith('HTTP_')) return [];
      throw this.explain(e);
    }
  }

  /** The same sign-in (and token) addressing another solution: switching needs no secret again. */
  withSolution(solution: string): Connection {
    return new Connection(this.endpoint, this.clientId, this.client.inSolution(solution), solution);
  }

  /** The solution's dev kits as the gateway sees them; none when the server runs no gateway. */
  async kits(): Promise<KitStatus[]> {
    try {
      return await this.client.listKits();
    } catch (e) {
      if (e instanceof SdkApiError && e.status === 404 && e.code.startsWith('HTTP_')) return [];
      throw this.explain(e);
    }
  }

  /** Turns any failure into an ApiError with a sentence for the user. */
  explain(e: unknown): unknown {
    if (e instanceof ApiError || (e as Error)?.name === 'AbortError') return e;
    if (e instanceof NetworkError) {
      return new ApiError(
        'network',
        e.timedOut ? `${this.endpoint} did not answer in time: the server may be overloaded or unreachable.` : `Cannot reach ${this.endpoint}: the network is down or the server is not running.`,
      );
    }
    if (!(e instanceof SdkApiError)) return e;
    const { status, code } = e;
    const ref = e.requestId ? ` (request id ${e.requestId})` : '';
    if (code === 'INVALID_CREDENTIALS') return new ApiError('credentials', 'Client id or client secret is wrong. Check both in your account settings.', status, code);
    if (code === 'ACCOUNT_DISABLED') return new ApiError('credentials', 'This account is disabled.', status, code);
    if (status === 401) return new ApiError('credentials', `Not signed in: ${e.message}`, status, code);
    if (code === 'SOLUTION_NOT_FOUND' || code === 'INVALID_SOLUTION_NAME') {
      return new ApiError('solution', `No solution “${this.solution}” in this account. Names are case sensitive; try sandbox or StudioSimulation.`, status, code);
    }
    if (code === 'DEVICE_NOT_FOUND') return new ApiError('device', e.message, status, code);
    if (status === 429) return new ApiError('throttled', `Too many attempts${e.retryAfter !== undefined ? `; try again in ${e.retryAfter} s` : ''}.`, status, code);
    // The kit's own errors and deadlines (through the gateway) are worded by the bridge already.
    if (code === 'GATEWAY_TIMEOUT' || code === 'BAD_GATEWAY' || (status === 503 && code !== 'STORE_UNAVAILABLE' && !code.startsWith('HTTP_'))) return new ApiError('server', e.message, status, code);
    if (status >= 500) return new ApiError('server', `The server failed (${status}): ${e.message}${ref}`, status, code);
    if (status === 404 && code.startsWith('HTTP_')) return new ApiError('server', `${this.endpoint} does not look like a Reef server (404 for ${e.url}).`, status, code);
    return new ApiError('request', e.message, status, code);
  }

  private async wrap<T>(p: Promise<T>): Promise<T> {
    try {
      return await p;
    } catch (e) {
      throw this.explain(e);
    }
  }

  /** Any SDK call, its failure worded for the user like every other. */
  sdk<T>(fn: (client: ReefClient) => Promise<T>): Promise<T> {
    return this.wrap(fn(this.client));
  }

  /** Fetches (or renews) the token: the first thing Connect does. */
  accessToken(): Promise<string> {
    return this.wrap(this.client.getToken());
  }

  solutionPath(rest = ''): string {
    return `/api/solutions/${encodeURIComponent(this.solution)}${rest}`;
  }

  async devices(): Promise<Device[]> {
    try {
      return (await this.client.listDevices()).filter((d) => !isKitModule(d));
    } catch (e) {
      // The original answered 404 for a solution without devices (wire §1): that is "none".
      if (e instanceof SdkApiError && e.status === 404 && e.code.startsWith('HTTP_')) return [];
      throw this.explain(e);
    }
  }

  latest(): Promise<LatestGroup[]> {
    return this.wrap(this.client.latestObservations());
  }

  /** Every observation of [from, to), oldest first, across pages. */
  async range(deviceId: string, from: Date, to: Date, signal?: AbortSignal, pageSize = 10000): Promise<Observation[]> {
    const pages: Observation[][] = [];
    await this.wrap(
      (async () => {
        for await (const p of this.client.observationPages(deviceId, { from, to, pageSize, ...(signal ? { signal } : {}) })) pages.push(p.observations);
      })(),
    );
    // Pages come newest first; the plot wants oldest first.
    return pages.flat().reverse();
  }

  buckets(deviceId: string, from: Date, to: Date, bucketMs: number, signal?: AbortSignal): Promise<Bucket[]> {
    return this.wrap(this.client.buckets(deviceId, { from, to, bucket: `${bucketMs}ms`, ...(signal ? { signal } : {}) }));
  }

  /**
   * The solution's live stream (the SDK reads it with fetch, so the token goes in a header). When
   * it cannot connect (server restarting, network down) it tries again, backing off.
   */
  events(handlers: {
    observations?: (d: LatestGroup) => void;
    device?: (d: { deviceId: string; action: string }) => void;
    state?: (live: boolean) => void;
    other?: (type: string, data: unknown) => void;
  }): () => void {
    const ac = new AbortController();
    void (async () => {
      let delay = 1000;
      while (!ac.signal.aborted) {
        try {
          for await (const ev of this.client.stream({
            signal: ac.signal,
            onOpen: () => {
              delay = 1000;
              handlers.state?.(true);
            },
          })) {
            if (ev.type === 'observations') handlers.observations?.(ev as LatestGroup);
            else if (ev.type === 'device') handlers.device?.(ev as { deviceId: string; action: string });
            else handlers.other?.(ev.type, (ev as { data?: unknown }).data);
          }
        } catch {
          /* reconnect below */
        }
        if (ac.signal.aborted) return;
        handlers.state?.(false);
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 30_000);
      }
    })();
    return () => ac.abort();
  }
}
