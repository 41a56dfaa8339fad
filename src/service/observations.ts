// Observation operations: validating an upload batch (all or nothing), storing it through the one
// store path every producer uses (HTTP uploads, the gateway's kit readings, simulations), and the
// read side (latest of all, one device's range with keyset paging, per-bucket aggregates).
import { ReefError } from '../core/errors.ts';
import type { DeviceRecord, DeviceRef, Observation, ObservationRecord } from '../core/types.ts';
import { duration, isoTimestamp, temperature } from '../core/validate.ts';
import { spanOf, type EventBus, type ObservationSpan } from '../events/bus.ts';
import { pageJson } from '../core/observation-json.ts';
import { wireOf, type ObservationBatch } from '../core/observation-batch.ts';
import type { ObservationQuery, SolutionCursor, Store } from '../store/store.ts';
import { kitCelsius } from './kit-units.ts';
import { countStored, type ObservationPath } from '../metrics/metrics.ts';

/**
 * Validates every observation before anything is stored, so one bad entry rejects the batch.
 * timestamp: ISO-8601 with zone, stored at millisecond precision (the dedupe key with the device).
 * temperature: number or numeric string, stored as a number. Other fields: kept verbatim.
 */
export function parseBatch(body: unknown, max: number, maxExtraBytes: number): ObservationBatch {
  const list = (body as { observations?: unknown } | null)?.observations;
  if (!Array.isArray(list)) throw new ReefError('VALIDATION_FAILED', 'the body must be {"observations": [...]}', { field: 'observations' });
  if (list.length > max) {
    throw new ReefError('TOO_MANY_OBSERVATIONS', `at most ${max} observations per request, got ${list.length}; split the upload`, { field: 'observations' });
  }
  const n = list.length;
  const out: ObservationBatch = { ts: new Float64Array(n), temperature: new Float64Array(n), extra: null, newest: 0 };
  for (let i = 0; i < n; i++) {
    const o = list[i] as Record<string, unknown>;
    if (typeof o !== 'object' || o === null || Array.isArray(o)) {
      throw new ReefError('VALIDATION_FAILED', `observations[${i}] must be an object`, { field: `observations/${i}` });
    }
    const ts = isoTimestamp(o.timestamp, `observations[${i}].timestamp`);
    const t = o.temperature === undefined || o.temperature === null ? null : temperature(o.temperature, `observations[${i}].temperature`);
    let extra: Record<string, unknown> | null = null;
    for (const k in o) {
      if (k === 'timestamp' || k === 'temperature') continue;
      extra ??= {};
      extra[k] = o[k];
    }
    // One observation's own fields are bounded (REEF_MAX_OBSERVATION_EXTRA, docs/security.md
    // "Limits"): a megabyte string in one reading would be stored, published and sent to every
    // subscriber with it, on HTTP and MQTT alike.
    if (extra !== null && jsonLongerThan(extra, maxExtraBytes)) {
      throw new ReefError('VALIDATION_FAILED', `observations[${i}] has more than ${maxExtraBytes} bytes of fields besides timestamp and temperature`, { field: `observations/${i}` });
    }
    out.ts[i] = ts;
    out.temperature[i] = t ?? NaN;
    if (extra) (out.extra ??= new Array<Record<string, unknown> | null>(n).fill(null))[i] = extra;
    if (ts >= out.ts[out.newest]!) out.newest = i;
  }
  return out;
}

/**
 * Whether `value` written as JSON would take more than `limit` characters, counted from its strings
 * (their length, escapes aside), numbers, keys and punctuation, stopping as soon as it does: no
 * copy of a large value is made to measure it.
 */
export function jsonLongerThan(value: unknown, limit: number): boolean {
  let size = 0;
  const walk = (v: unknown): boolean => {
    if (typeof v === 'string') size += v.length + 2;
    else if (typeof v === 'number' || typeof v === 'boolean' || v === null) size += String(v).length;
    else if (Array.isArray(v)) {
      // Brackets, and a comma between elements.
      size += 2 + Math.max(0, v.length - 1);
      for (const x of v) if (walk(x)) return true;
    } else if (typeof v === 'object') {
      // Braces, and per key its quotes, its colon and a comma (one too many, taken back after).
      size += 1;
      for (const k in v) {
        size += k.length + 4;
        if (size > limit || walk((v as Record<string, unknown>)[k])) return true;
      }
    }
    return size > limit;
  };
  return walk(value);
}

/** Whether anyone may be listening for stored observations (else no event is built). */
function listening(events: EventBus | null): events is EventBus {
  return events !== null && !(events.idleFor ? events.idleFor('observations') : events.idle);
}

/**
 * Stores one device's batch, whichever producer made it (src/core/observation-batch.ts), and
 * publishes it: no record or wire form is made here; a live event builds what its reader asks for.
 */
export async function storeObservations(store: Store, events: EventBus | null, device: DeviceRef, batch: ObservationBatch, quota?: ObservationQuota, path?: ObservationPath): Promise<number> {
  // A dev kit's series is kept in °C whoever writes it (src/service/kit-units.ts).
  if (device.mac) batch = await kitCelsius(store, device.id, batch);
  if (!quota) return counted(path, await storeUncounted(store, events, device, batch));
  // The device's owner pays for what is stored on it, whoever in its group writes.
  const settle = await quota.reserveObservations(device.tenantId, batch.ts.length);
  let written = 0;
  try {
    written = await storeUncounted(store, events, device, batch);
    return counted(path, written);
  } finally {
    settle(written);
  }
}

/** Observations stored, for /metrics by the path they came in on (docs/operations.md "Metrics and logs"). */
function counted(path: ObservationPath | undefined, written: number): number {
  countStored(path, written);
  return written;
}

async function storeUncounted(store: Store, events: EventBus | null, device: DeviceRef, batch: ObservationBatch): Promise<number> {
  const { written } = await store.insertObservations(device.id, batch);
  publishStored(events, device, batch);
  return written;
}

/**
 * What a write path needs of the quotas (src/service/quotas.ts): a reservation before the store
 * commits, settled with what was written.
 */
export interface ObservationQuota {
  reserveObservations(tenantId: string, adding: number): Promise<(written: number) => void>;
}

/**
 * Several devices' batches in one store call (one commit on SQLite): what a simulation tick and the
 * gateway's readings write. With a quota each owner's share is reserved first; an owner over its
 * quota has its batches skipped (the others are stored), and when that leaves nothing to store the
 * quota error is thrown. Returns the ids of devices skipped: deleted, or over their owner's quota.
 */
export async function storeObservationsMany(
  store: Store,
  events: EventBus | null,
  given: { device: DeviceRef; batch: ObservationBatch }[],
  quota?: ObservationQuota,
  path?: ObservationPath,
): Promise<string[]> {
  // A dev kit's series is kept in °C whoever writes it (src/service/kit-units.ts).
  let items = given;
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    if (!item.device.mac) continue;
    const batch = await kitCelsius(store, item.device.id, item.batch);
    if (batch === item.batch) continue;
    if (items === given) items = given.slice();
    items[i] = { device: item.device, batch };
  }
  const refused: string[] = [];
  const settles: { tenantId: string; settle: (written: number) => void }[] = [];
  if (quota) {
    const byTenant = new Map<string, number>();
    for (const i of items) byTenant.set(i.device.tenantId, (byTenant.get(i.device.tenantId) ?? 0) + i.batch.ts.length);
    let first: unknown;
    const over = new Set<string>();
    for (const [tenantId, n] of byTenant) {
      try {
        settles.push({ tenantId, settle: await quota.reserveObservations(tenantId, n) });
      } catch (e) {
        first ??= e;
        over.add(tenantId);
      }
    }
    if (over.size) {
      for (const i of items) if (over.has(i.device.tenantId)) refused.push(i.device.id);
      items = items.filter((i) => !over.has(i.device.tenantId));
      if (!items.length) throw first;
    }
  }
  let gone = new Set<string>();
  try {
    const { missing } = await store.insertObservationsMany(items.map((i) => ({ deviceId: i.device.id, batch: i.batch })));
    gone = new Set(missing);
    let stored = 0;
    for (const { device, batch } of items) {
      if (gone.has(device.id)) continue;
      publishStored(events, device, batch);
      stored += batch.ts.length;
    }
    countStored(path, stored);
    for (const s of settles) {
      let written = 0;
      for (const i of items) if (i.device.tenantId === s.tenantId && !gone.has(i.device.id)) written += i.batch.ts.length;
      s.settle(written);
    }
    return [...gone, ...refused];
  } finally {
    for (const s of settles) s.settle(0);
  }
}

/**
 * A stored batch as a live event; nothing is built when nobody can be listening. The wire form is
 * built on first use (an SSE stream, another node); the batch itself rides along, unserialized (not
 * enumerable), for in-process consumers that want numbers: alarm evaluation (src/alarms); so does
 * its time span, for other nodes.
 */
function publishStored(events: EventBus | null, device: DeviceRef, batch: ObservationBatch): void {
  const n = batch.ts.length;
  if (!listening(events) || !n) return;
  let wire: Observation[] | undefined;
  let span: ObservationSpan | undefined;
  const e = {
    kind: 'observations' as const,
    groupId: device.groupId,
    solution: device.solution,
    deviceId: device.id,
    get observations(): Observation[] {
      if (!wire) wire = wireOf(batch);
      return wire;
    },
  };
  Object.defineProperty(e, 'batch', { value: batch, enumerable: false });
  Object.defineProperty(e, 'span', {
    get: () => {
      if (!span) span = spanOf(n, (i) => batch.ts[i]!);
      return span;
    },
    enumerable: false,
  });
  events.publish(e);
}

export interface RangeQuery {
  limit?: number;
  from?: string;
  to?: string;
  after?: string;
  tags?: string;
}

/**
 * A page asked for without `limit`: what about 1 MB of the original's JSON held (wire §1: "the
 * original capped a page at 1 MB when no limit was given"). Its plain observation,
 * `{"temperature":21.1234,"timestamp":"2019-03-21T23:52:25.000Z"}`, is 62 bytes and a comma, so
 * 16,384 of them are 1,032,192 bytes, within 1 MiB (docs/api.md "One device").
 */
export const DEFAULT_PAGE = 16_384;
/** The most a page holds when `limit` is given; a larger limit is served through next_page. */
export const MAX_PAGE = 10_000;

/** The page size of a request: the default without `limit`, else `limit` capped at MAX_PAGE. */
export function pageLimit(limit: number | undefined): number {
  return limit === undefined ? DEFAULT_PAGE : Math.min(limit, MAX_PAGE);
}

/** The store query of a page request: bounds and cursor checked, the limit capped; a tag-filtered page examines at most maxScan readings. */
function pageQuery(q: RangeQuery, maxScan?: number): ObservationQuery {
  const from = q.from === undefined ? undefined : isoTimestamp(q.from, 'from');
  const to = q.to === undefined ? undefined : isoTimestamp(q.to, 'to');
  if (from !== undefined && to !== undefined && from > to) throw new ReefError('VALIDATION_FAILED', 'from must not be after to', { field: 'from' });
  let before: number | undefined;
  if (q.after !== undefined) {
    try {
      before = isoTimestamp(q.after, 'after');
    } catch {
      throw new ReefError('INVALID_CURSOR', 'after must be the cursor from a next_page link (an ISO-8601 timestamp)', { field: 'after' });
    }
  }
  // A limit beyond the page cap is served page by page through next_page rather than refused.
  return {
    limit: pageLimit(q.limit),
    ...(from === undefined ? {} : { from }),
    ...(to === undefined ? {} : { to }),
    ...(before === undefined ? {} : { before }),
    ...(q.tags === undefined ? {} : { tag: q.tags, ...(maxScan === undefined ? {} : { maxScan }) }),
  };
}

/**
 * One device's observations, newest first. `after` is the keyset cursor: the timestamp of the
 * last observation of the previous page; the page holds strictly older ones (wire §1 paging).
 */
export async function deviceObservations(store: Store, device: DeviceRecord, q: RangeQuery): Promise<{ records: ObservationRecord[]; nextAfter: string | null }> {
  const page = await store.queryObservations(device.id, pageQuery(q));
  return {
    records: page.observations,
    nextAfter: page.nextBefore === null ? null : new Date(page.nextBefore).toISOString(),
  };
}

/** deviceObservations as the response body ({"observations":[...]}), through the store's fast path when it has one. */
export async function deviceObservationsJson(store: Store, device: DeviceRecord, q: RangeQuery, maxScan?: number): Promise<{ json: string; nextAfter: string | null }> {
  const query = pageQuery(q, maxScan);
  const page = store.observationPageJson
    ? await store.observationPageJson(device.id, query)
    : await store.queryObservations(device.id, query).then((p) => ({ json: pageJson(p.observations), nextBefore: p.nextBefore }));
  return { json: page.json, nextAfter: page.nextBefore === null ? null : new Date(page.nextBefore).toISOString() };
}

/** True when a solution-wide read asks for a range; otherwise it is "latest of each". */
export function isRangeQuery(q: RangeQuery): boolean {
  return q.from !== undefined || q.to !== undefined || q.after !== undefined;
}

// The solution-wide cursor: `<ISO timestamp>~<device sequence>` — where the previous page stopped.
// Opaque to clients (they GET the next_page URL verbatim); readable in logs.
const SOLUTION_CURSOR = /^(.{1,40})~(\d{1,15})$/;

/**
 * Every observation of the solution in the range, device by device (creation order), newest first
 * within a device, keyset-paged through `after`. `tags` (one tag) filters; a filtered page examines
 * at most maxScan readings over all its devices. No range: not this.
 */
export async function solutionObservations(
  store: Store,
  groupId: string,
  solution: string,
  q: RangeQuery,
  maxScan?: number,
): Promise<{ rows: { deviceId: string; observation: ObservationRecord }[]; nextAfter: string | null }> {
  const from = q.from === undefined ? undefined : isoTimestamp(q.from, 'from');
  const to = q.to === undefined ? undefined : isoTimestamp(q.to, 'to');
  if (from !== undefined && to !== undefined && from > to) throw new ReefError('VALIDATION_FAILED', 'from must not be after to', { field: 'from' });
  let after: SolutionCursor | undefined;
  if (q.after !== undefined) {
    const m = SOLUTION_CURSOR.exec(q.after);
    let ts = NaN;
    try {
      if (m) ts = isoTimestamp(m[1], 'after');
    } catch {
      ts = NaN;
    }
    if (!m || !Number.isFinite(ts)) throw new ReefError('INVALID_CURSOR', 'after must be the cursor from a next_page link', { field: 'after' });
    after = { ts, device: Number(m[2]) };
  }
  const page = await store.querySolutionObservations(groupId, solution, {
    limit: pageLimit(q.limit),
    ...(from === undefined ? {} : { from }),
    ...(to === undefined ? {} : { to }),
    ...(q.tags === undefined ? {} : { tag: q.tags, ...(maxScan === undefined ? {} : { maxScan }) }),
    ...(after === undefined ? {} : { after }),
  });
  return { rows: page.rows, nextAfter: page.next ? `${new Date(page.next.ts).toISOString()}~${page.next.device}` : null };
}

/** Per-bucket min/avg/max of temperature over [from, to): what the plot asks for on long ranges. */
export async function deviceBuckets(store: Store, device: DeviceRecord, q: { from?: string; to?: string; bucket: string }, maxBuckets = 100_000) {
  if (q.from === undefined || q.to === undefined) throw new ReefError('VALIDATION_FAILED', 'bucket needs both from and to', { field: q.from === undefined ? 'from' : 'to' });
  const from = isoTimestamp(q.from, 'from');
  const to = isoTimestamp(q.to, 'to');
  if (from >= to) throw new ReefError('VALIDATION_FAILED', 'from must be before to', { field: 'from' });
  const bucketMs = duration(q.bucket, 'bucket');
  // The work of a bucketed read and the size of its answer grow with the buckets asked for.
  if ((to - from) / bucketMs > maxBuckets) throw new ReefError('VALIDATION_FAILED', `at most ${maxBuckets} buckets per request: widen the bucket or narrow from and to`, { field: 'bucket' });
  const rows = await store.bucketObservations(device.id, { from, to, bucketMs });
  return rows.map((b) => ({ timestamp: new Date(b.ts).toISOString(), count: b.count, min: b.min, avg: b.avg, max: b.max }));
}
