// Changing a device (docs/api.md "Changing a device"): PATCH /api/solutions/{s}/devices/{id} with a
// new deviceType and domainInfo as a JSON merge patch (RFC 7396 §2), on SQLite and on PostgreSQL. The
// change is checked as a new device is (bad input: a 400 that changes nothing), another group's
// device answers 404, a dev kit keeps its type and MAC, and lists and event streams follow
// (test/integration/alarms/templates.test.ts: a device given a template later gets the template's rules).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ReefClient } from '../../../src/sdk/index.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/pg.ts';
import { readSse } from '../../helpers/sse.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

const ADMIN = { 'x-reef-admin-key': 'an-operator-key-for-tests' };

interface Device {
  id: string;
  deviceType: string;
  domainInfo: Record<string, unknown>;
  provisioningInfo?: Record<string, unknown>;
}

for (const backend of ['sqlite', 'postgres'] as const)
  describe(`changing a device (${backend})`, () => {
    let server: TestServer;
    let db: TestDatabase | undefined;
    let owner: { token: string; clientId: string; clientSecret: string };
    before(async () => {
      if (backend === 'postgres') db = await createTestDatabase('reef_devupd');
      server = await startTestServer({ adminKey: ADMIN['x-reef-admin-key'], ...(db ? { databaseUrl: db.url } : {}) });
      owner = await server.login('owner');
    });
    after(async () => {
      await server?.close();
      await db?.drop();
    });

    const create = async (token: string, body: unknown, solution = 'StudioSimulation') => {
      const r = await server.request('POST', `/api/solutions/${solution}/devices`, { token, body });
      assert.equal(r.status, 201);
      return (await r.json()) as Device;
    };
    const patch = (token: string, id: string, body: unknown, headers: Record<string, string> = {}, solution = 'StudioSimulation') =>
      fetch(`${server.url}/api/solutions/${solution}/devices/${id}`, {
        method: 'PATCH',
        headers: { authorization: token, 'content-type': 'application/merge-patch+json', ...headers },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      });
    const get = async (id: string, solution = 'StudioSimulation') => (await (await server.request('GET', `/api/solutions/${solution}/devices/${id}`, { token: owner.token })).json()) as Device;

    it('merges domainInfo member by member (null removes one), replaces deviceType, and answers the device as stored', async () => {
      const d = await create(owner.token, { deviceType: 'VirtualDevice', domainInfo: { location: { latitude: 10, longitude: 20, label: 'roof' }, owner: 'ops', keep: [1, 2] } });
      const r = await patch(owner.token, d.id, { deviceType: 'Fridge', domainInfo: { location: { latitude: 11.5 }, owner: null, room: 'B2', keep: [3] } });
      assert.equal(r.status, 200);
      const changed = (await r.json()) as Device;
      const want = { location: { latitude: 11.5, longitude: 20, label: 'roof' }, keep: [3], room: 'B2' };
      assert.deepEqual([changed.id, changed.deviceType, changed.domainInfo], [d.id, 'Fridge', want]);
      assert.deepEqual(await get(d.id), changed);
      // The list is not served from before the change.
      const list = (await (await server.request('GET', '/api/solutions/StudioSimulation/devices', { token: owner.token })).json()) as { devices: Device[] };
      assert.deepEqual(
        list.devices.find((x) => x.id === d.id),
        changed,
      );
      // Plain application/json is taken too; an empty patch changes nothing.
      const same = await server.request('PATCH', `/api/solutions/StudioSimulation/devices/${d.id}`, { token: owner.token, body: {} });
      assert.equal(same.status, 200);
      assert.deepEqual(await same.json(), changed);
    });

    it('bad changes are 400s in the uniform body and change nothing; another group sees 404; PATCH elsewhere is not a body type', async () => {
      const d = await create(owner.token, { deviceType: 'VirtualDevice', domainInfo: { location: { latitude: 1, longitude: 2 } } });
      const cases: [unknown, string][] = [
        [{ domainInfo: { location: { latitude: 91 } } }, 'domainInfo.location.latitude'],
        [{ domainInfo: { location: null, templateId: 'not-a-template' } }, 'domainInfo.templateId'],
        [{ domainInfo: { templateId: '6f1c8e3a-1d2b-4c5d-8e9f-0a1b2c3d4e5f' } }, 'domainInfo.templateId'],
        [{ domainInfo: { nic_macID: 'xyz' } }, 'domainInfo.nic_macID'],
        [{ deviceType: 'has spaces' }, 'deviceType'],
        [{ domainInfo: [1] }, 'domainInfo'],
        [{ domainInfo: { big: 'x'.repeat(20_000) } }, 'domainInfo'],
      ];
      for (const [body, field] of cases) {
        const r = await patch(owner.token, d.id, body);
        assert.equal(r.status, 400, JSON.stringify(body).slice(0, 80));
        const e = (await r.json()) as { code: string; field?: string };
        assert.equal(e.code, 'VALIDATION_FAILED', JSON.stringify(e));
        assert.equal(e.field, field, JSON.stringify(e));
      }
      for (const body of [{ id: '00000000-0000-4000-8000-000000000000' }, { provisioningInfo: {} }]) {
        const r = await patch(owner.token, d.id, body);
        assert.equal(r.status, 400, JSON.stringify(body));
      }
      const broken = await patch(owner.token, d.id, '{"domainInfo": ');
      assert.equal(broken.status, 400);
      assert.equal(((await broken.json()) as { code: string }).code, 'MALFORMED_JSON');
      assert.deepEqual(await get(d.id), d, 'nothing changed');

      const other = await server.login('other');
      const r = await patch(other.token, d.id, { domainInfo: { stolen: true } });
      assert.equal(r.status, 404);
      assert.equal(((await r.json()) as { code: string }).code, 'DEVICE_NOT_FOUND');
      assert.equal((await patch(owner.token, d.id, { domainInfo: { x: 1 } }, {}, 'sandbox')).status, 404, 'another solution');
      assert.deepEqual(await get(d.id), d, 'nothing changed');

      // A merge patch is what PATCH takes, not a body type for other routes.
      const post = await fetch(`${server.url}/api/solutions/StudioSimulation/devices`, {
        method: 'POST',
        headers: { authorization: owner.token, 'content-type': 'application/merge-patch+json' },
        body: JSON.stringify({ deviceType: 'X' }),
      });
      assert.equal(post.status, 415);
    });

    it('a dev kit keeps its type and MAC; its location and other fields can change', async () => {
      const c = await server.account('kitowner');
      const token = await server.token(c);
      const p = await server.request('POST', '/api/admin/provision', { headers: ADMIN, body: { clientId: c.clientId, mac: '00:13:50:05:00:aa:bb:01' } });
      assert.equal(p.status, 201, await p.clone().text());
      const kit = ((await (await server.request('GET', '/api/solutions/sandbox/devices', { token })).json()) as { devices: Device[] }).devices[0]!;
      const typeChange = await patch(token, kit.id, { deviceType: 'Fridge' }, {}, 'sandbox');
      assert.equal(typeChange.status, 400);
      assert.equal(((await typeChange.json()) as { field: string }).field, 'deviceType');
      for (const mac of [null, '0013500500aabb02']) {
        const r = await patch(token, kit.id, { domainInfo: { nic_macID: mac } }, {}, 'sandbox');
        assert.equal(r.status, 400);
        assert.equal(((await r.json()) as { field: string }).field, 'domainInfo.nic_macID');
      }
      const moved = await patch(token, kit.id, { domainInfo: { location: { latitude: 59.9, longitude: 10.7 }, nic_macID: '00-13-50-05-00-AA-BB-01' } }, {}, 'sandbox');
      assert.equal(moved.status, 200);
      const k = (await moved.json()) as Device;
      assert.deepEqual(
        [k.deviceType, k.domainInfo.nic_macID, k.domainInfo.location, k.provisioningInfo],
        [kit.deviceType, '00135005' + '00aabb01', { latitude: 59.9, longitude: 10.7 }, kit.provisioningInfo],
      );
    });

    it('streams say `updated`; the SDK gives a device a template and takes it away', async () => {
      const sdk = new ReefClient({ endpoint: server.url, credentials: { clientId: owner.clientId, clientSecret: owner.clientSecret }, solution: 'StudioSimulation' });
      const d = await create(owner.token, { deviceType: 'VirtualDevice' });
      const stream = await fetch(`${server.url}/api/solutions/StudioSimulation/events`, { headers: { authorization: owner.token } });
      const events = await readSse(stream, { subscribed: true });
      const tpl = await sdk.createDeviceTemplate({ name: 'Cold room', sensors: ['temperature'] });
      const changed = await sdk.updateDevice(d.id, { domainInfo: { templateId: tpl.id!.toUpperCase() } });
      assert.equal(changed.domainInfo?.templateId, tpl.id, 'kept in lower case');
      const [msg] = (await events.take(1, 'device')).filter((m) => m.event === 'device');
      assert.deepEqual(JSON.parse(msg!.data), { deviceId: d.id, action: 'updated' });
      await events.close();
      // Removing the template: null in the merge patch.
      const plain = await sdk.updateDevice(d.id, { domainInfo: { templateId: null } });
      assert.equal(plain.domainInfo?.templateId, undefined);
      assert.deepEqual((await get(d.id)).domainInfo, {});
    });
  });
