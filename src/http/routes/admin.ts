// Operator endpoints, guarded by the admin key from config (REEF_ADMIN_KEY), compared in constant
// time. Without a configured key they are refused: an operator opts in.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ReefError } from '../../core/errors.ts';
import { toWireDevice } from '../../core/types.ts';
import { createAccount, findAccount } from '../../auth/accounts.ts';
import type { EventBus } from '../../events/bus.ts';
import { macAddress } from '../../core/validate.ts';
import { provisionKit } from '../../service/devices.ts';
import { issueKitKey } from '../../service/kit-keys.ts';
import type { Store } from '../../store/store.ts';
import type { QuotaService } from '../../service/quotas.ts';
import { errors } from '../schemas.ts';

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

export async function adminRoutes(app: FastifyInstance, opts: { store: Store; events: EventBus; quotas: QuotaService; adminKey: string | null }) {
  const { store, events, quotas, adminKey } = opts;
  const expected = adminKey ? digest(adminKey) : null;

  app.addHook('onRequest', async (request: FastifyRequest) => {
    if (!expected) throw new ReefError('ADMIN_KEY_REQUIRED', 'operator endpoints are disabled: start the service with REEF_ADMIN_KEY');
    const given = request.headers['x-reef-admin-key'];
    // Hashing both sides gives equal lengths, so the comparison is constant time whatever was sent.
    if (typeof given !== 'string' || !timingSafeEqual(digest(given), expected)) {
      throw new ReefError('ADMIN_KEY_REQUIRED', 'send the operator key in the X-Reef-Admin-Key header');
    }
  });

  app.post(
    '/api/admin/accounts',
    {
      schema: {
        tags: ['admin'],
        summary: 'Create an account; the client secret is in this response only',
        body: { type: 'object', properties: { name: { type: 'string', maxLength: 200 }, group: { type: 'string', maxLength: 64 }, joinGroup: { type: 'string', maxLength: 64 } }, required: ['name'] },
        response: {
          201: { type: 'object', properties: { tenantId: { type: 'string' }, clientId: { type: 'string' }, clientSecret: { type: 'string' }, groupId: { type: 'string' } } },
          ...errors(400, 403),
        },
      },
    },
    async (request, reply) => {
      const { name, group, joinGroup } = request.body as { name: string; group?: string; joinGroup?: string };
      const c = await createAccount(store, { name, ...(group === undefined ? {} : { group }), ...(joinGroup === undefined ? {} : { joinGroup }) });
      return reply.code(201).header('cache-control', 'no-store').send(c);
    },
  );

  app.post(
    '/api/admin/provision',
    {
      schema: {
        tags: ['admin'],
        summary: "Provision a dev kit (NICDevKit) to an account's sandbox, as on order fulfillment (seed §3)",
        // The MAC under any of its names: `mac`, the wire's `ssniMacAddress`, or the
        // seed's `vendorMacAddress`; with or without ':'/'-' separators, any case.
        body: {
          type: 'object',
          properties: {
            clientId: { type: 'string', maxLength: 100 },
            mac: { type: 'string', maxLength: 32 },
            ssniMacAddress: { type: 'string', maxLength: 32 },
            vendorMacAddress: { type: 'string', maxLength: 32 },
          },
          required: ['clientId'],
        },
        response: {
          201: {
            description: 'The device, and `kitKey`: the kit key (64 hex digits), in this response only (docs/security.md "Kits")',
            allOf: [{ $ref: 'Device#' }, { type: 'object', properties: { kitKey: { type: 'string' } } }],
          },
          ...errors(400, 403, 404, 409),
        },
      },
    },
    async (request, reply) => {
      const b = request.body as { clientId: string; mac?: string; ssniMacAddress?: string; vendorMacAddress?: string };
      const given = [b.mac, b.ssniMacAddress, b.vendorMacAddress].filter((v) => v !== undefined);
      const mac = given[0];
      if (mac === undefined) throw new ReefError('VALIDATION_FAILED', 'body must have mac (or ssniMacAddress / vendorMacAddress)', { field: 'mac' });
      if (new Set(given.map((v) => v.replace(/[:-]/g, '').toLowerCase())).size > 1) {
        throw new ReefError('VALIDATION_FAILED', 'mac, ssniMacAddress and vendorMacAddress name different MACs', { field: 'mac' });
      }
      const account = await findAccount(store, b.clientId);
      const { devices: maxDevices } = await quotas.limits(account.tenantId);
      const { device, kitKey } = await provisionKit(store, events, account, mac, maxDevices);
      return reply
        .code(201)
        .header('cache-control', 'no-store')
        .send({ ...toWireDevice(device), kitKey });
    },
  );

  app.post(
    '/api/admin/kits/:mac/key',
    {
      schema: {
        tags: ['admin'],
        summary: 'Issue a new kit key for a provisioned dev kit; the previous key stops working',
        params: { type: 'object', properties: { mac: { type: 'string', maxLength: 32 } }, required: ['mac'] },
        response: { 201: { type: 'object', properties: { mac: { type: 'string' }, kitKey: { type: 'string' } } }, ...errors(400, 403, 404) },
      },
    },
    async (request, reply) => {
      const mac = macAddress((request.params as { mac: string }).mac, 'mac');
      if (!(await store.getDeviceByMac(mac))) throw new ReefError('DEVICE_NOT_FOUND', `no dev kit with MAC ${mac} is provisioned`, { field: 'mac' });
      return reply
        .code(201)
        .header('cache-control', 'no-store')
        .send({ mac, kitKey: await issueKitKey(store, mac) });
    },
  );

  const quotaSchema = {
    type: 'object',
    properties: {
      devices: { type: 'integer' },
      observations: { type: 'integer' },
      backfill: { type: 'integer' },
      solutions: { type: 'integer' },
      templates: { type: 'integer' },
      alarmRules: { type: 'integer' },
    },
  } as const;
  const settable = { type: ['integer', 'null'], minimum: 0 } as const;
  const accountParams = { type: 'object', properties: { id: { type: 'string', maxLength: 100 } }, required: ['id'] } as const;

  app.get(
    '/api/admin/accounts/:id/quotas',
    {
      schema: {
        tags: ['admin'],
        summary: "An account's quotas (its own or the defaults) and its use of them",
        params: accountParams,
        response: {
          200: {
            type: 'object',
            properties: {
              tenantId: { type: 'string' },
              limits: quotaSchema,
              usage: { type: 'object', properties: { devices: { type: 'integer' }, observations: { type: 'integer' }, countedAt: { type: ['string', 'null'] } } },
            },
          },
          ...errors(403, 404),
        },
      },
    },
    async (request) => {
      const account = await findAccount(store, (request.params as { id: string }).id);
      return { tenantId: account.tenantId, limits: await quotas.limits(account.tenantId), usage: await quotas.usage(account.tenantId) };
    },
  );

  app.put(
    '/api/admin/accounts/:id/quotas',
    {
      schema: {
        tags: ['admin'],
        summary: "Set some of an account's quotas; null puts one back to the default (REEF_QUOTA_*)",
        params: accountParams,
        body: {
          type: 'object',
          additionalProperties: false,
          properties: { devices: settable, observations: settable, backfill: settable, solutions: settable, templates: settable, alarmRules: settable },
        },
        response: { 200: { type: 'object', properties: { tenantId: { type: 'string' }, limits: quotaSchema } }, ...errors(400, 403, 404) },
      },
    },
    async (request) => {
      const account = await findAccount(store, (request.params as { id: string }).id);
      return { tenantId: account.tenantId, limits: await quotas.set(account.tenantId, request.body as Record<string, number | null>) };
    },
  );
}
