// A kit's network module, on SQLite and on PostgreSQL (docs/api.md "A kit's network module"): the
// original Windows CoAP client keeps only devices of type MILLI and reads their domainInfo.nic_macID
// (CoApDeviceFinderGateway.cs), so every provisioned NICDevKit is listed with its module, a MILLI
// device with the kit's MAC, made and gone with the kit. The module's series is the kit's; it takes
// no place of the device quota; it cannot be changed or deleted on its own.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../../helpers/pg.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

const ADMIN = { 'x-reef-admin-key': 'an-operator-key-for-kit-modules' };
const T0 = Date.UTC(2026, 10, 20, 10);

interface Dev {
  id: string;
  deviceType: string;
  domainInfo: { nic_macID?: string; kitId?: string; [k: string]: unknown };
  provisioningInfo?: { ssniMacAddress: string; ssniNetworkDeviceType: string };
}

for (const backend of ['sqlite', 'postgres'] as const) {
  describe(`a kit's network module (${backend})`, () => {
    let server: TestServer;
    let db: TestDatabase | undefined;

    before(async () => {
      if (backend === 'postgres') db = await createTestDatabase('reef_module');
      server = await startTestServer({ adminKey: ADMIN['x-reef-admin-key'], ...(db ? { databaseUrl: db.url } : {}) });
    });
    after(async () => {
      await server.close();
      await db?.drop();
    });

    async function provision(clientId: string, mac: string): Promise<Dev> {
      const r = await server.request('POST', '/api/admin/provision', { headers: ADMIN, body: { clientId, mac } });
      assert.equal(r.status, 201);
      const { kitKey: _key, ...device } = (await r.json()) as Dev & { kitKey: string };
      return device;
    }
    async function list(token: string, q = ''): Promise<Dev[]> {
      const r = await server.request('GET', `/api/solutions/sandbox/devices${q}`, { token });
      assert.equal(r.status, 200);
      return ((await r.json()) as { devices: Dev[] }).devices;
    }

    it('is listed after its kit as a MILLI device with the kit MAC: what the Windows CoAP client keeps', async () => {
      const c = await server.login('windows');
      const kit = await provision(c.clientId, '00:13:50:05:00:47:DC:1F');
      assert.equal(kit.deviceType, 'NICDevKit', 'the kit is served as the seed shows it');
      const devices = await list(c.token);
      assert.equal(devices.length, 2);
      assert.deepEqual(devices[0], kit);
      const module = devices[1]!;
      assert.match(module.id, /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      assert.deepEqual(module, { id: module.id, deviceType: 'MILLI', domainInfo: { nic_macID: '001350050047dc1f', kitId: kit.id }, provisioningInfo: kit.provisioningInfo });

      // The Windows client: a token posted with no Content-Type, the device list, then only MILLI devices' nic_macID.
      const t = await fetch(`${server.url}/api/tokens`, { method: 'POST', body: new TextEncoder().encode(JSON.stringify({ clientId: c.clientId, clientSecret: c.clientSecret })) });
      assert.equal(t.status, 201);
      const { accessToken } = (await t.json()) as { accessToken: string };
      const seen = await list(accessToken);
      assert.deepEqual(
        seen.filter((d) => d.deviceType === 'MILLI').map((d) => d.domainInfo.nic_macID),
        ['001350050047dc1f'],
      );

      // Read by id; the same id every time; another group sees nothing.
      const one = await server.request('GET', `/api/solutions/sandbox/devices/${module.id}`, { token: c.token });
      assert.equal(one.status, 200);
      assert.deepEqual(await one.json(), module);
      assert.equal((await list(c.token))[1]!.id, module.id);
      const other = await server.login('stranger');
      assert.equal((await server.request('GET', `/api/solutions/sandbox/devices/${module.id}`, { token: other.token })).status, 404);
      assert.deepEqual(await list(other.token), []);
    });

    it('?deviceType= lists modules as MILLI devices (with clients own, in creation order) and kits as NICDevKit', async () => {
      const c = await server.login('types');
      const kit = await provision(c.clientId, '0013500500000a01');
      const own = (await (
        await server.request('POST', '/api/solutions/sandbox/devices', { token: c.token, body: { deviceType: 'MILLI', domainInfo: { nic_macID: '0013500500000a02' } } })
      ).json()) as Dev;
      const milli = await list(c.token, '?deviceType=MILLI');
      assert.deepEqual(
        milli.map((d) => [d.domainInfo.nic_macID, d.domainInfo.kitId ?? null]),
        [
          ['0013500500000a01', kit.id],
          ['0013500500000a02', null],
        ],
      );
      assert.equal(milli[1]!.id, own.id);
      assert.deepEqual(
        (await list(c.token, '?deviceType=NICDevKit')).map((d) => d.id),
        [kit.id],
      );
      // Simulated devices live elsewhere: no module there.
      await server.request('POST', '/api/solutions/StudioSimulation/devices', { token: c.token, body: { deviceType: 'VirtualDevice' } });
      const sims = (await (await server.request('GET', '/api/solutions/StudioSimulation/devices', { token: c.token })).json()) as { devices: Dev[] };
      assert.deepEqual(
        sims.devices.map((d) => d.deviceType),
        ['VirtualDevice'],
      );
    });

    it("holds no observations of its own: uploads to it are the kit's, and reading it reads the kit's series", async () => {
      const c = await server.login('series');
      const kit = await provision(c.clientId, '0013500500000b01');
      const module = (await list(c.token))[1]!;
      const up = await server.request('POST', `/api/solutions/sandbox/devices/${module.id}/observations`, {
        token: c.token,
        body: { observations: [{ timestamp: new Date(T0).toISOString(), temperature: 21.5, unit: 'C' }] },
      });
      assert.equal(up.status, 201);
      await server.request('POST', `/api/solutions/sandbox/devices/${kit.id}/observations`, {
        token: c.token,
        body: { observations: [{ timestamp: new Date(T0 + 60_000).toISOString(), temperature: 22, unit: 'C' }] },
      });
      const read = async (id: string) =>
        (await (await server.request('GET', `/api/solutions/sandbox/devices/${id}/observations`, { token: c.token })).json()) as { observations: { timestamp: string; temperature: number }[] };
      const ofKit = await read(kit.id);
      assert.deepEqual(
        ofKit.observations.map((o) => o.temperature),
        [22, 21.5],
      );
      assert.deepEqual(await read(module.id), ofKit);
      // The latest of each device: the kit alone, not a second sensor without data.
      const latest = (await (await server.request('GET', '/api/solutions/sandbox/observations', { token: c.token })).json()) as { deviceId: string }[];
      assert.deepEqual(
        latest.map((g) => g.deviceId),
        [kit.id],
      );
    });

    it('takes no place of the device quota, cannot be changed or deleted alone, and goes with its kit', async () => {
      const c = await server.login('lifecycle');
      const kit = await provision(c.clientId, '0013500500000c01');
      const module = (await list(c.token))[1]!;
      assert.equal(await server.services.store.countDevices(c.tenantId), 1);
      for (const [method, body] of [
        ['DELETE', undefined],
        ['PATCH', { domainInfo: { note: 'x' } }],
      ] as const) {
        const r = await server.request(method, `/api/solutions/sandbox/devices/${module.id}`, { token: c.token, ...(body ? { body } : {}) });
        assert.equal(r.status, 409, method);
        const e = (await r.json()) as { code: string; message: string };
        assert.equal(e.code, 'CONFLICT');
        assert.match(e.message, new RegExp(`network module of dev kit ${kit.id}`));
      }
      assert.equal((await list(c.token)).length, 2, 'nothing changed');

      const del = await server.request('DELETE', `/api/solutions/sandbox/devices/${kit.id}`, { token: c.token });
      assert.equal(del.status, 200);
      assert.deepEqual(await list(c.token), []);
      assert.equal((await server.request('GET', `/api/solutions/sandbox/devices/${module.id}`, { token: c.token })).status, 404);
      const up = await server.request('POST', `/api/solutions/sandbox/devices/${module.id}/observations`, {
        token: c.token,
        body: { observations: [{ timestamp: new Date(T0).toISOString(), temperature: 21.5 }] },
      });
      assert.equal(up.status, 404);
      // Provisioned again, the kit is a new device, with a new module.
      const again = await provision(c.clientId, '0013500500000c01');
      const now = await list(c.token);
      assert.deepEqual(
        now.map((d) => d.domainInfo.kitId ?? d.id),
        [again.id, again.id],
      );
      assert.notEqual(now[1]!.id, module.id);
    });
  });
}
