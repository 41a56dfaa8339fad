// ReefClient's calls for observations (seed §4.2–4.3, wire §1): the latest of every device, one
// device's pages through `next_page`, a solution's range, buckets, and uploads in batches.
import { ApiError } from './errors.ts';
import { DeviceCalls } from './devices.ts';
import { iso, seg, type CallOptions } from './transport.ts';
import type { Bucket, Observation, ObservationGroup, ObservationPage, ObservationQuery, UploadObservation } from './types.ts';
import { uploadBody } from './upload-body.ts';

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

export abstract class ObservationCalls extends DeviceCalls {
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
}
