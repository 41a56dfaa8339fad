// Devices of a solution (seed §4.1; wire §1 for create and delete; PATCH is Reef's own, RFC 7396 §2).
import type { FastifyInstance } from 'fastify';
import { toWireDevice } from '../../core/types.ts';
import type { EventBus } from '../../events/bus.ts';
import { DeviceListCache } from '../../service/device-list.ts';
import { createDevice, deleteDevice, findDevice, updateDevice } from '../../service/devices.ts';
import type { Store } from '../../store/store.ts';
import type { QuotaService } from '../../service/quotas.ts';
import { deviceParams, errors, solutionParams } from '../schemas.ts';

export async function deviceRoutes(app: FastifyInstance, opts: { store: Store; events: EventBus; quotas: QuotaService }) {
  const { store, events, quotas } = opts;
  const lists = new DeviceListCache(store);

  app.get(
    '/api/solutions/:solution/devices',
    {
      schema: {
        tags: ['devices'],
        summary: 'List the devices of a solution',
        params: solutionParams,
        querystring: { type: 'object', properties: { deviceType: { type: 'string', maxLength: 64 } } },
        response: { 200: { type: 'object', properties: { devices: { type: 'array', items: { $ref: 'Device#' } } } }, ...errors(400, 401, 404) },
      },
    },
    async (request, reply) => {
      const { solution } = request.params as { solution: string };
      const { deviceType } = request.query as { deviceType?: string };
      const body = await lists.json(request.account, solution, deviceType || undefined);
      return reply.type('application/json; charset=utf-8').send(body);
    },
  );

  const createSchema = {
    tags: ['devices'],
    summary: 'Create a device (its solution is created with its first device)',
    params: solutionParams,
    body: {
      type: 'object',
      properties: {
        deviceType: { type: 'string', maxLength: 64 },
        domainInfo: { type: 'object', additionalProperties: true },
        provisioningInfo: {},
      },
      required: ['deviceType'],
    },
    response: { 201: { $ref: 'Device#' }, ...errors(400, 401, 403, 413, 415) },
  };
  const create = async (request: any, reply: any) => {
    const { solution } = request.params as { solution: string };
    const { devices: maxDevices } = await quotas.limits(request.account.tenantId);
    const make = () => createDevice(store, events, request.account, solution, request.body, maxDevices);
    // A first device makes its solution, which counts against the solutions quota.
    const d = (await store.solutionExists(request.account.groupId, solution)) ? await make() : await quotas.createObject(request.account, null, true, make);
    return reply
      .code(201)
      .header('location', `/api/solutions/${encodeURIComponent(solution)}/devices/${d.id}`)
      .send(toWireDevice(d));
  };
  // The original clients post to ".../devices/" with a trailing slash (wire §1): serve both.
  app.post('/api/solutions/:solution/devices', { schema: createSchema, bodyLimit: 64 * 1024 }, create);
  app.post('/api/solutions/:solution/devices/', { schema: { ...createSchema, hide: true }, bodyLimit: 64 * 1024 }, create);

  app.get(
    '/api/solutions/:solution/devices/:id',
    {
      schema: { tags: ['devices'], summary: 'One device', params: deviceParams, response: { 200: { $ref: 'Device#' }, ...errors(400, 401, 404) } },
    },
    async (request) => {
      const { solution, id } = request.params as { solution: string; id: string };
      return toWireDevice(await findDevice(store, request.account, solution, id));
    },
  );

  app.patch(
    '/api/solutions/:solution/devices/:id',
    {
      bodyLimit: 64 * 1024,
      schema: {
        tags: ['devices'],
        summary: "Change a device's type and domainInfo (a JSON merge patch, RFC 7396 §2: null removes a member); answers the device",
        params: deviceParams,
        body: {
          type: 'object',
          properties: {
            deviceType: { type: 'string', maxLength: 64 },
            domainInfo: { type: ['object', 'null'], additionalProperties: true },
          },
          additionalProperties: false,
        },
        response: { 200: { $ref: 'Device#' }, ...errors(400, 401, 404, 409, 413, 415) },
      },
    },
    async (request) => {
      const { solution, id } = request.params as { solution: string; id: string };
      return toWireDevice(await updateDevice(store, events, request.account, solution, id, (request.body ?? {}) as object));
    },
  );

  app.delete(
    '/api/solutions/:solution/devices/:id',
    {
      schema: {
        tags: ['devices'],
        summary: 'Delete a device and its observations; answers the deleted device',
        params: deviceParams,
        response: { 200: { $ref: 'Device#' }, ...errors(400, 401, 404) },
      },
    },
    async (request) => {
      const { solution, id } = request.params as { solution: string; id: string };
      // 200 with a JSON body, not 204: the original SDK parses every answer as JSON and reports an
      // empty one as a failed delete.
      return toWireDevice(await deleteDevice(store, events, request.account, solution, id));
    },
  );
}
