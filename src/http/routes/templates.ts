// Device templates (wire §1): the original SDK's four calls —
// GET/POST /api/solutions/{s}/devicetemplates, PUT .../devicetemplates/{id},
// GET /api/tenants/systemTenant/devicetemplates — plus GET and DELETE of one template.
// Shapes are the original's: a list is {"deviceTemplates": [...]}, one template is
// {"deviceTemplates": {id, name, sensors}} (the plural key holding one object, as the SDK reads it).
import type { FastifyInstance } from 'fastify';
import { ReefError } from '../../core/errors.ts';
import type { QuotaService } from '../../service/quotas.ts';
import type { Store } from '../../store/store.ts';
import { SYSTEM_TEMPLATES, SYSTEM_TENANT, createTemplate, deleteTemplate, getTemplate, listTemplates, toWireTemplate, updateTemplate } from '../../service/templates.ts';
import { errors, solutionParams } from '../schemas.ts';

const template = {
  type: 'object',
  properties: {
    id: { type: 'string', format: 'uuid' },
    name: { type: 'string' },
    sensors: { type: 'array', items: {}, description: 'Sensor names, or objects with at least a name' },
  },
  required: ['name', 'sensors'],
} as const;

const templateBody = {
  type: 'object',
  description: '{"deviceTemplate": {"name", "sensors"}} (the original SDK) or the bare {"name", "sensors"}',
  // Checked by the service (src/service/templates.ts), which names the offending field the same
  // way for both body shapes.
  properties: {
    deviceTemplate: { description: 'An object: name (1-128 printable characters), sensors (at most 100: names, or objects with a name)' },
    name: { description: 'The bare form: 1-128 printable characters' },
    sensors: { description: 'The bare form: at most 100 sensor names, or objects with a name, unique' },
  },
} as const;

const one = { type: 'object', properties: { deviceTemplates: template } } as const;
const many = { type: 'object', properties: { deviceTemplates: { type: 'array', items: template } } } as const;
const templateParams = {
  type: 'object',
  properties: { solution: { type: 'string', maxLength: 200 }, id: { type: 'string', maxLength: 200 } },
  required: ['solution', 'id'],
} as const;

export async function templateRoutes(app: FastifyInstance, opts: { store: Store; quotas: QuotaService }) {
  const { store } = opts;
  const base = '/api/solutions/:solution/devicetemplates';

  app.get(
    base,
    {
      schema: { tags: ['device templates'], summary: 'The device templates of the solution', params: solutionParams, response: { 200: many, ...errors(400, 401, 404) } },
    },
    async (request) => {
      const { solution } = request.params as { solution: string };
      return { deviceTemplates: (await listTemplates(store, request.account, solution)).map(toWireTemplate) };
    },
  );

  app.post(
    base,
    {
      schema: { tags: ['device templates'], summary: 'Create a device template', params: solutionParams, body: templateBody, response: { 201: one, ...errors(400, 401, 403, 409, 413, 415) } },
      bodyLimit: 64 * 1024,
    },
    async (request, reply) => {
      const { solution } = request.params as { solution: string };
      // A template may also make its solution: both count against the group's quotas.
      const fresh = !(await store.solutionExists(request.account.groupId, solution));
      const t = await opts.quotas.createObject(request.account, 'templates', fresh, () => createTemplate(store, request.account, solution, request.body));
      return reply
        .code(201)
        .header('location', `/api/solutions/${encodeURIComponent(solution)}/devicetemplates/${t.id}`)
        .send({ deviceTemplates: toWireTemplate(t) });
    },
  );

  app.get(
    `${base}/:id`,
    {
      schema: { tags: ['device templates'], summary: 'One device template', params: templateParams, response: { 200: one, ...errors(400, 401, 404) } },
    },
    async (request) => {
      const { solution, id } = request.params as { solution: string; id: string };
      return { deviceTemplates: toWireTemplate(await getTemplate(store, request.account, solution, id)) };
    },
  );

  app.put(
    `${base}/:id`,
    {
      schema: {
        tags: ['device templates'],
        summary: 'Replace the name and sensors of a device template',
        params: templateParams,
        body: templateBody,
        response: { 200: one, ...errors(400, 401, 404, 413, 415) },
      },
      bodyLimit: 64 * 1024,
    },
    async (request) => {
      const { solution, id } = request.params as { solution: string; id: string };
      return { deviceTemplates: toWireTemplate(await updateTemplate(store, request.account, solution, id, request.body)) };
    },
  );

  app.delete(
    `${base}/:id`,
    {
      schema: { tags: ['device templates'], summary: 'Delete a device template; answers it', params: templateParams, response: { 200: one, ...errors(400, 401, 404) } },
    },
    async (request) => {
      const { solution, id } = request.params as { solution: string; id: string };
      return { deviceTemplates: toWireTemplate(await deleteTemplate(store, request.account, solution, id)) };
    },
  );

  // The static templates every tenant sees; they have no id (they are not stored).
  app.get(
    '/api/tenants/:tenant/devicetemplates',
    {
      schema: {
        tags: ['device templates'],
        summary: 'The static device templates (tenant systemTenant), the same for every caller',
        params: { type: 'object', properties: { tenant: { type: 'string', maxLength: 100 } }, required: ['tenant'] },
        response: { 200: many, ...errors(401, 404) },
      },
    },
    async (request) => {
      const { tenant } = request.params as { tenant: string };
      if (tenant !== SYSTEM_TENANT) throw new ReefError('NOT_FOUND', `only ${SYSTEM_TENANT} has static device templates`, { field: 'tenant' });
      return { deviceTemplates: SYSTEM_TEMPLATES };
    },
  );
}
