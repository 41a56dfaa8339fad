// Observations: upload (wire §1, 201), latest of all devices (seed §4.2), one device's range newest
// first with keyset paging through the next_page header (seed §4.3, wire §1), per-bucket aggregates
// for long plots, and a Server-Sent Events stream of new observations.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { solutionName } from '../../core/validate.ts';
import type { Config } from '../../config/config.ts';
import type { EventBus, ReefEvent } from '../../events/bus.ts';
import { findSeriesDevice, findUploadDevice, resolveSolution } from '../../service/devices.ts';
import { deviceBuckets, deviceObservationsJson, isRangeQuery, parseBatch, solutionObservations, storeObservations, type RangeQuery } from '../../service/observations.ts';
import { groupedJson, latestJson } from '../../core/observation-json.ts';
import { solutionCadence } from '../../service/cadence.ts';
import { ScannedUpload, scanUpload } from '../../core/observation-scan.ts';
import type { Store } from '../../store/store.ts';
import type { QuotaService } from '../../service/quotas.ts';
import { deviceParams, errors, solutionParams } from '../schemas.ts';
import { sseFrame } from '../sse.ts';
import { ReadSlots } from '../read-slots.ts';

const rangeQuery = {
  type: 'object',
  properties: {
    limit: { type: 'integer', minimum: 1, description: 'Most observations in the page (capped at 10000); without it a page holds 16384, about 1 MB as the original answered' },
    from: { type: 'string', maxLength: 64, description: 'Inclusive lower bound, ISO-8601' },
    to: { type: 'string', maxLength: 64, description: 'Exclusive upper bound, ISO-8601' },
    after: { type: 'string', maxLength: 64, description: 'Paging cursor from the next_page header' },
    tags: {
      type: 'string',
      maxLength: 200,
      description: 'Only observations whose tags contain this tag; a page examines at most REEF_READ_MAX_SCAN stored observations, so it may be short (even empty) with a next_page',
    },
    bucket: { type: 'string', maxLength: 16, description: 'Aggregate into buckets (10s, 5m, 1h...): needs from and to; at most REEF_READ_MAX_BUCKETS buckets' },
  },
} as const;

/** The solution-wide read takes the range parameters but not bucket (a per-device aggregate). */
const { bucket: _bucket, ...solutionRangeProperties } = rangeQuery.properties;
const solutionRangeQuery = {
  type: 'object',
  properties: { ...solutionRangeProperties, after: { ...rangeQuery.properties.after, description: 'Paging cursor from the next_page header (<timestamp>~<device position>)' } },
} as const;

/**
 * The next page's full URL: same path and query, with the cursor replaced (wire §1). Its origin is
 * REEF_PUBLIC_URL when set; else the forwarded host when proxy headers are trusted; else the
 * address this server answered on. Never a client's own Host header: a link built from it would
 * send the next request (and its token) wherever the previous request claimed to be.
 */
function nextPageUrl(request: FastifyRequest, after: string, config: Config): string {
  const raw = request.url;
  const q = new URLSearchParams(raw.includes('?') ? raw.slice(raw.indexOf('?') + 1) : '');
  q.set('after', after);
  q.delete('access_token');
  let origin = config.http.publicUrl;
  if (!origin && config.http.trustProxy) origin = `${request.protocol}://${request.host}`;
  if (!origin) {
    const s = request.socket;
    const host = s.localAddress?.includes(':') ? `[${s.localAddress}]` : s.localAddress;
    origin = `${request.protocol}://${host}:${s.localPort}`;
  }
  return `${origin}${raw.split('?')[0]}?${q.toString()}`;
}

export async function observationRoutes(app: FastifyInstance, opts: { store: Store; events: EventBus; config: Config; quotas: QuotaService }) {
  const { store, events, config, quotas } = opts;
  // Range, filtered and bucketed reads in progress per account (src/http/read-slots.ts).
  const reads = new ReadSlots(config.reads.maxPerAccount);

  app.post(
    '/api/solutions/:solution/devices/:id/observations',
    {
      // The common body shape is read straight into numbers (src/core/observation-scan.ts); any
      // other body is parsed as JSON and checked by the schema and parseBatch, as before.
      config: {
        scanBody: (bytes: Uint8Array) => {
          const batch = scanUpload(bytes, config.maxObservationsPerRequest);
          return batch ? new ScannedUpload(batch) : undefined;
        },
      },
      schema: {
        tags: ['observations'],
        summary: 'Upload observations of one device (all stored or none)',
        params: deviceParams,
        body: {
          type: 'object',
          properties: { observations: { type: 'array', items: { type: 'object' } } },
          required: ['observations'],
        },
        response: { 201: { type: 'object', properties: { stored: { type: 'integer' } } }, ...errors(400, 401, 403, 404, 413, 415) },
      },
    },
    async (request, reply) => {
      const { solution, id } = request.params as { solution: string; id: string };
      const device = await findUploadDevice(store, request.account, solution, id);
      const body = request.body;
      const batch = body instanceof ScannedUpload ? body.batch : parseBatch(body, config.maxObservationsPerRequest, config.maxObservationExtraBytes);
      // Reserved against the device owner's quota before the store commits (src/service/quotas.ts).
      const stored = await storeObservations(store, events, device, batch, quotas, 'http');
      return reply.code(201).send({ stored });
    },
  );

  app.get(
    '/api/solutions/:solution/observations',
    {
      schema: {
        tags: ['observations'],
        summary: 'The latest observation of every device of the solution; with from, to (or after): every observation in the range, paged by next_page',
        params: solutionParams,
        querystring: solutionRangeQuery,
        response: {
          200: {
            type: 'array',
            items: { type: 'object', properties: { deviceId: { type: 'string' }, observations: { type: 'array', items: { $ref: 'Observation#' } } } },
          },
          ...errors(400, 401, 404, 429),
        },
      },
    },
    async (request, reply) => {
      const { solution } = request.params as { solution: string };
      await resolveSolution(store, request.account, solution);
      const { groupId } = request.account;
      // With a range (from, to, or a next_page cursor) the original answers every matching
      // observation of the solution, paged; without one, the latest of each device,
      // where tags and limit are ignored as the wire reference says.
      const q = request.query as RangeQuery;
      if (isRangeQuery(q)) {
        const page = await reads.run(request.account.tenantId, () => solutionObservations(store, groupId, solution, q, config.reads.maxScan));
        if (page.nextAfter) reply.header('next_page', nextPageUrl(request, page.nextAfter, config));
        return reply.type('application/json; charset=utf-8').send(groupedJson(page.rows));
      }
      const body = store.latestObservationsJson ? await store.latestObservationsJson(groupId, solution) : latestJson(await store.latestObservations(groupId, solution));
      return reply.type('application/json; charset=utf-8').send(body);
    },
  );

  app.get(
    '/api/solutions/:solution/cadence',
    {
      schema: {
        tags: ['observations'],
        summary: 'When each device of the solution last reported and its usual interval (the median gap of its newest readings): staleness without watching first',
        params: solutionParams,
        response: {
          200: {
            type: 'object',
            properties: {
              devices: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: { deviceId: { type: 'string' }, lastSeen: { type: 'string' }, intervalSeconds: { type: ['number', 'null'] } },
                },
              },
            },
          },
          ...errors(401, 404),
        },
      },
    },
    async (request) => {
      const { solution } = request.params as { solution: string };
      await resolveSolution(store, request.account, solution);
      return { devices: await solutionCadence(store, request.account.groupId, solution) };
    },
  );

  app.get(
    '/api/solutions/:solution/devices/:id/observations',
    {
      schema: {
        tags: ['observations'],
        summary: "One device's observations, newest first; the next page's URL comes in the next_page header",
        params: deviceParams,
        querystring: rangeQuery,
        response: {
          200: {
            type: 'object',
            properties: {
              observations: { type: 'array', items: { $ref: 'Observation#' } },
              buckets: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: {
                    timestamp: { type: 'string' },
                    count: { type: 'integer' },
                    min: { type: ['number', 'null'] },
                    avg: { type: ['number', 'null'] },
                    max: { type: ['number', 'null'] },
                  },
                },
              },
            },
          },
          ...errors(400, 401, 404, 429),
        },
      },
    },
    async (request, reply) => {
      const { solution, id } = request.params as { solution: string; id: string };
      const q = request.query as RangeQuery & { bucket?: string };
      // A kit's network module names its kit's series (docs/api.md "A kit's network module").
      const device = await findSeriesDevice(store, request.account, solution, id);
      const tenant = request.account.tenantId;
      if (q.bucket !== undefined) return { buckets: await reads.run(tenant, () => deviceBuckets(store, device, { from: q.from, to: q.to, bucket: q.bucket! }, config.reads.maxBuckets)) };
      // A plain page reads at most its limit; a tag filter may examine up to maxScan readings.
      const read = () => deviceObservationsJson(store, device, q, config.reads.maxScan);
      const page = q.tags === undefined ? await read() : await reads.run(tenant, read);
      if (page.nextAfter) reply.header('next_page', nextPageUrl(request, page.nextAfter, config));
      return reply.type('application/json; charset=utf-8').send(page.json);
    },
  );

  // Live updates as Server-Sent Events: `observations` events carry {deviceId, observations}.
  app.get(
    '/api/solutions/:solution/events',
    {
      config: { tokenInQuery: true },
      schema: {
        tags: ['observations'],
        summary: 'Server-Sent Events: new observations (and device changes) of the solution as they are stored',
        params: solutionParams,
        querystring: { type: 'object', properties: { deviceId: { type: 'string', maxLength: 64 }, access_token: { type: 'string' } } },
        response: { ...errors(401, 404, 429) },
      },
    },
    async (request, reply) => {
      const { solution } = request.params as { solution: string };
      const { deviceId } = request.query as { deviceId?: string };
      solutionName(solution);
      const wanted = deviceId === undefined ? undefined : (await findSeriesDevice(store, request.account, solution, deviceId)).id;
      if (deviceId === undefined) await resolveSolution(store, request.account, solution);
      const groupId = request.account.groupId;
      const stream = app.streams.start(request, reply, request.caller, corsHeaders(request));
      const unsubscribe = events.subscribe((e: ReefEvent) => {
        if (e.kind === 'kit-payload') return; // raw kit bytes are for MQTT (docs/mqtt.md); the stored reading follows as observations
        if (e.groupId !== groupId || e.solution !== solution) return;
        if (wanted && 'deviceId' in e && e.deviceId !== wanted) return;
        stream.write(eventFrame(e));
      });
      stream.onClose(unsubscribe);
    },
  );
}

// One serialization per event, whatever the number of streams it goes to (src/http/sse.ts).
const frames = new WeakMap<ReefEvent, Buffer>();
function eventFrame(e: ReefEvent): Buffer {
  let f = frames.get(e);
  if (!f) {
    if (e.kind === 'observations') f = sseFrame('observations', { deviceId: e.deviceId, observations: e.observations });
    else if (e.kind === 'device') f = sseFrame('device', { deviceId: e.deviceId, action: e.action });
    else if (e.kind === 'alarm') f = sseFrame('alarm', { event: e.event, alarm: e.alarm });
    else if (e.kind === 'alarm-rule') f = sseFrame('alarm-rule', { ruleId: e.ruleId, action: e.action });
    else f = sseFrame(e.kind, e);
    frames.set(e, f);
  }
  return f;
}

// A hijacked reply skips Fastify's hooks, so the CORS headers of @fastify/cors are set by hand.
function corsHeaders(request: FastifyRequest): Record<string, string> {
  const origin = request.headers.origin;
  return origin ? { 'access-control-allow-origin': origin, vary: 'Origin' } : {};
}
