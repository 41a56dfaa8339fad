// Device templates on SQLite and on PostgreSQL, called the way the original JavaScript
// SDK calls them (Content-Type: application/json on every request, the raw token, its body shapes):
// GET/POST /api/solutions/{s}/devicetemplates, PUT .../devicetemplates/{id} and
// GET /api/tenants/systemTenant/devicetemplates. Bad input is a 400 that stores nothing; another
// tenant's templates never show.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ReefClient } from '../../../src/sdk/index.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/pg.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

interface Tpl {
  id?: string;
  name: string;
  sensors: unknown[];
}

for (const backend of ['sqlite', 'postgres'] as const) {
  describe(`device templates (${backend})`, () => {
    let server: TestServer;
    let db: TestDatabase | undefined;
    let owner: { token: string; clientId: string; clientSecret: string };
    let other: { token: string };

    before(async () => {
      if (backend === 'postgres') db = await createTestDatabase('reef_tpl');
      server = await startTestServer(db ? { databaseUrl: db.url } : {});
      owner = await server.login('owner');
      other = await server.login('other');
    });
    after(async () => {
      await server?.close();
      await db?.drop();
    });

    /** As the original SDK sends every request. */
    function sdk(method: string, path: string, token: string, body?: unknown) {
      return fetch(`${server.url}${path}`, {
        method,
        headers: { authorization: token, 'content-type': 'application/json', accept: 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    }

    it('POST (wrapped and bare), GET the list, PUT: the original shapes', async () => {
      const sensors = ['temperature', { name: 'humidity', unit: '%' }];
      const made = await sdk('POST', '/api/solutions/sandbox/devicetemplates', owner.token, { deviceTemplate: { name: 'Greenhouse', sensors } });
      assert.equal(made.status, 201);
      const a = ((await made.json()) as { deviceTemplates: Tpl }).deviceTemplates;
      assert.match(a.id!, /^[0-9a-f-]{36}$/);
      assert.deepEqual({ name: a.name, sensors: a.sensors }, { name: 'Greenhouse', sensors });
      assert.equal(made.headers.get('location'), `/api/solutions/sandbox/devicetemplates/${a.id}`);
      const bare = await sdk('POST', '/api/solutions/sandbox/devicetemplates', owner.token, { name: 'Fridge', sensors: ['temperature'] });
      assert.equal(bare.status, 201);
      const b = ((await bare.json()) as { deviceTemplates: Tpl }).deviceTemplates;

      const list = await sdk('GET', '/api/solutions/sandbox/devicetemplates', owner.token);
      assert.equal(list.status, 200);
      assert.deepEqual(await list.json(), { deviceTemplates: [a, b] });

      const put = await sdk('PUT', `/api/solutions/sandbox/devicetemplates/${a.id}`, owner.token, { deviceTemplate: { name: 'Greenhouse 2', sensors: ['temperature', 'light'] } });
      assert.equal(put.status, 200);
      assert.deepEqual(await put.json(), { deviceTemplates: { id: a.id, name: 'Greenhouse 2', sensors: ['temperature', 'light'] } });
      const one = await sdk('GET', `/api/solutions/sandbox/devicetemplates/${a.id}`, owner.token);
      assert.deepEqual(((await one.json()) as { deviceTemplates: Tpl }).deviceTemplates.name, 'Greenhouse 2');
      const del = await sdk('DELETE', `/api/solutions/sandbox/devicetemplates/${b.id}`, owner.token);
      assert.equal(del.status, 200);
      assert.deepEqual(await del.json(), { deviceTemplates: b });
      assert.equal((await sdk('GET', `/api/solutions/sandbox/devicetemplates/${b.id}`, owner.token)).status, 404);
    });

    it('the static templates: the same for every tenant, without ids', async () => {
      const r = await sdk('GET', '/api/tenants/systemTenant/devicetemplates', owner.token);
      assert.equal(r.status, 200);
      const body = (await r.json()) as { deviceTemplates: Tpl[] };
      assert.ok(body.deviceTemplates.length >= 1);
      assert.ok(body.deviceTemplates.every((t) => t.id === undefined && typeof t.name === 'string' && Array.isArray(t.sensors)));
      assert.deepEqual(await (await sdk('GET', '/api/tenants/systemTenant/devicetemplates', other.token)).json(), body);
      assert.equal((await sdk('GET', '/api/tenants/TNSOMEONE/devicetemplates', owner.token)).status, 404);
      assert.equal((await fetch(`${server.url}/api/tenants/systemTenant/devicetemplates`)).status, 401);
    });

    it("another tenant's templates never show: list, read, replace and delete answer as for none", async () => {
      const mine = ((await (await sdk('POST', '/api/solutions/shared-name/devicetemplates', owner.token, { name: 'Mine', sensors: [] })).json()) as { deviceTemplates: Tpl }).deviceTemplates;
      assert.deepEqual(await (await sdk('GET', '/api/solutions/sandbox/devicetemplates', other.token)).json(), { deviceTemplates: [] });
      assert.equal((await sdk('GET', '/api/solutions/shared-name/devicetemplates', other.token)).status, 404, 'the other tenant has no such solution');
      for (const [m, body] of [
        ['GET', undefined],
        ['PUT', { name: 'Stolen', sensors: [] }],
        ['DELETE', undefined],
      ] as const) {
        const r = await sdk(m, `/api/solutions/shared-name/devicetemplates/${mine.id}`, other.token, body);
        assert.equal(r.status, 404, m);
        assert.equal(((await r.json()) as { code: string }).code, 'TEMPLATE_NOT_FOUND');
      }
      assert.deepEqual(((await (await sdk('GET', `/api/solutions/shared-name/devicetemplates/${mine.id}`, owner.token)).json()) as { deviceTemplates: Tpl }).deviceTemplates, mine);
    });

    it('bad templates are 400 in the uniform error body and store nothing', async () => {
      const c = await server.login('strict');
      const bad: [unknown, string][] = [
        [{ deviceTemplate: { sensors: [] } }, 'deviceTemplate.name'],
        [{ deviceTemplate: { name: '', sensors: [] } }, 'deviceTemplate.name'],
        [{ deviceTemplate: { name: 'x'.repeat(129), sensors: [] } }, 'deviceTemplate.name'],
        [{ deviceTemplate: { name: 'tab\there', sensors: [] } }, 'deviceTemplate.name'],
        [{ deviceTemplate: { name: 'T', sensors: 'temperature' } }, 'deviceTemplate.sensors'],
        [{ deviceTemplate: { name: 'T', sensors: [42] } }, 'deviceTemplate.sensors[0]'],
        [{ deviceTemplate: { name: 'T', sensors: [{ unit: 'C' }] } }, 'deviceTemplate.sensors[0].name'],
        [{ deviceTemplate: { name: 'T', sensors: ['a', 'a'] } }, 'deviceTemplate.sensors[1]'],
        [{ deviceTemplate: { name: 'T', sensors: Array.from({ length: 101 }, (_, i) => `s${i}`) } }, 'deviceTemplate.sensors'],
        [{ deviceTemplate: { name: 'T', sensors: [{ name: 'big', note: 'x'.repeat(17_000) }] } }, 'deviceTemplate.sensors'],
        [{ deviceTemplate: { name: 'T', sensors: [{ name: 'nul', note: 'a\u0000b' }] } }, 'deviceTemplate.sensors'],
        [{ deviceTemplate: 'T' }, 'deviceTemplate'],
        [{ name: 'T' }, 'sensors'],
      ];
      for (const [body, field] of bad) {
        const r = await sdk('POST', '/api/solutions/sandbox/devicetemplates', c.token, body);
        assert.equal(r.status, 400, JSON.stringify(body).slice(0, 80));
        const e = (await r.json()) as { code: string; field: string; requestId: string };
        assert.equal(e.code, 'VALIDATION_FAILED');
        assert.equal(e.field, field, JSON.stringify(body).slice(0, 80));
      }
      const notJson = await fetch(`${server.url}/api/solutions/sandbox/devicetemplates`, {
        method: 'POST',
        headers: { authorization: c.token, 'content-type': 'application/json' },
        body: '{"deviceTemplate":',
      });
      assert.equal(notJson.status, 400);
      assert.equal(((await notJson.json()) as { code: string }).code, 'MALFORMED_JSON');
      assert.deepEqual(await (await sdk('GET', '/api/solutions/sandbox/devicetemplates', c.token)).json(), { deviceTemplates: [] }, 'nothing stored');
      // PUT of a malformed id, and of a valid id that names nothing.
      assert.equal((await sdk('PUT', '/api/solutions/sandbox/devicetemplates/nope', c.token, { name: 'T', sensors: [] })).status, 400);
      assert.equal((await sdk('PUT', `/api/solutions/sandbox/devicetemplates/${crypto.randomUUID()}`, c.token, { name: 'T', sensors: [] })).status, 404);
    });

    it('a device may name a template of its solution; a name that resolves to none is 400', async () => {
      const c = await server.login('linker');
      const t = ((await (await sdk('POST', '/api/solutions/sandbox/devicetemplates', c.token, { name: 'Env', sensors: ['temperature', 'humidity'] })).json()) as { deviceTemplates: Tpl })
        .deviceTemplates;
      const d = await sdk('POST', '/api/solutions/sandbox/devices/', c.token, { deviceType: 'Thermo', domainInfo: { templateId: t.id!.toUpperCase() } });
      assert.equal(d.status, 201);
      assert.equal(((await d.json()) as { domainInfo: { templateId: string } }).domainInfo.templateId, t.id);
      for (const templateId of [crypto.randomUUID(), 'not-a-uuid', 7]) {
        const r = await sdk('POST', '/api/solutions/sandbox/devices/', c.token, { deviceType: 'Thermo', domainInfo: { templateId } });
        assert.equal(r.status, 400);
        assert.equal(((await r.json()) as { field: string }).field, 'domainInfo.templateId');
      }
      // A template of another tenant cannot be named either.
      const theirs = ((await (await sdk('POST', '/api/solutions/sandbox/devicetemplates', other.token, { name: 'Theirs', sensors: [] })).json()) as { deviceTemplates: Tpl }).deviceTemplates;
      assert.equal((await sdk('POST', '/api/solutions/sandbox/devices/', c.token, { deviceType: 'Thermo', domainInfo: { templateId: theirs.id } })).status, 400);
      const list = (await (await sdk('GET', '/api/solutions/sandbox/devices', c.token)).json()) as { devices: unknown[] };
      assert.equal(list.devices.length, 1);
    });

    it('the SDK: create, list, update, get, delete and the static templates', async () => {
      const client = new ReefClient({ endpoint: server.url, credentials: { clientId: owner.clientId, clientSecret: owner.clientSecret }, solution: 'sdk-solution' });
      const t = await client.createDeviceTemplate({ name: 'Kit', sensors: [{ name: 'temperature', unit: 'F' }] });
      assert.deepEqual(await client.listDeviceTemplates(), [t]);
      assert.equal((await client.updateDeviceTemplate(t.id!, { name: 'Kit 2', sensors: ['temperature'] })).name, 'Kit 2');
      assert.deepEqual((await client.getDeviceTemplate(t.id!)).sensors, ['temperature']);
      assert.equal((await client.deleteDeviceTemplate(t.id!)).id, t.id);
      assert.deepEqual(await client.listDeviceTemplates(), []);
      assert.ok((await client.systemDeviceTemplates()).some((s) => s.name === 'NICDevKit'));
    });

    it('the OpenAPI document lists the template calls', async () => {
      const doc = (await (await fetch(`${server.url}/api/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
      assert.ok(doc.paths['/api/solutions/{solution}/devicetemplates']?.get && doc.paths['/api/solutions/{solution}/devicetemplates']?.post);
      assert.ok(doc.paths['/api/solutions/{solution}/devicetemplates/{id}']?.put);
      assert.ok(doc.paths['/api/tenants/{tenant}/devicetemplates']?.get);
    });
  });
}
