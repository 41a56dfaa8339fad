// Dev kits carry the identity fields the original clients read: the reference plot page reads
// provisioningInfo.ssniMacAddress, the MQTT client finds kits by domainInfo.nic_macID (16 lower-case
// hex), the Windows CoAP client reads it from MILLI devices (each kit's network module). A MAC given to Reef is accepted in either spelling
// (field name, separators, case) and kept in the one wire form.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ReefClient, deviceMac } from '../../../src/sdk/index.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/pg.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

const ADMIN = { 'x-reef-admin-key': 'an-operator-key-for-tests' };

interface Kit {
  id: string;
  deviceType: string;
  domainInfo: Record<string, unknown>;
  provisioningInfo: Record<string, unknown>;
}

for (const backend of ['sqlite', 'postgres'] as const)
  describe(`dev kit identity fields (${backend})`, () => {
    let server: TestServer;
    let db: TestDatabase | undefined;
    before(async () => {
      if (backend === 'postgres') db = await createTestDatabase('reef_kitf');
      server = await startTestServer({ adminKey: ADMIN['x-reef-admin-key'], ...(db ? { databaseUrl: db.url } : {}) });
    });
    after(async () => {
      await server?.close();
      await db?.drop();
    });

    it('provisioning takes the MAC as mac, ssniMacAddress or vendorMacAddress, and every kit is served with the wire names', async () => {
      const c = await server.login('wire-names');
      const bodies = [{ mac: '00:13:50:05:FF:00:00:01' }, { ssniMacAddress: '00135005FF000002' }, { vendorMacAddress: '00-13-50-05-ff-00-00-03' }];
      for (const b of bodies) {
        const r = await server.request('POST', '/api/admin/provision', { headers: ADMIN, body: { clientId: c.clientId, ...b } });
        assert.equal(r.status, 201, await r.clone().text());
      }
      const list = (await (await server.request('GET', '/api/solutions/sandbox/devices', { token: c.token, headers: { accept: 'application/json' } })).json()) as { devices: Kit[] };
      const macs = ['00135005ff000001', '00135005ff000002', '00135005ff000003'];
      // Each kit is followed by its network module (docs/api.md "A kit's network module").
      const kits = list.devices.filter((d) => d.deviceType !== 'MILLI');
      assert.deepEqual(
        list.devices.filter((d) => d.deviceType === 'MILLI').map((d) => d.domainInfo.nic_macID),
        kits.map((d) => d.domainInfo.nic_macID),
      );
      assert.deepEqual(kits.map((d) => d.provisioningInfo.ssniMacAddress).sort(), macs);
      for (const d of kits) {
        assert.equal(d.deviceType, 'NICDevKit', 'deviceType stays as the seed says');
        assert.equal(d.provisioningInfo.ssniNetworkDeviceType, 'MILLI');
        assert.equal(d.domainInfo.nic_macID, d.provisioningInfo.ssniMacAddress);
        assert.match(String(d.domainInfo.nic_macID), /^[0-9a-f]{16}$/);
        assert.ok(!('vendorMacAddress' in d.provisioningInfo));
        // One device read answers the same fields as the list.
        const one = (await (await server.request('GET', `/api/solutions/sandbox/devices/${d.id}`, { token: c.token })).json()) as Kit;
        assert.deepEqual(one, d);
      }
    });

    it('the same MAC in another spelling is the same kit (409), and conflicting spellings in one body are 400', async () => {
      const c = await server.login('spell');
      assert.equal((await server.request('POST', '/api/admin/provision', { headers: ADMIN, body: { clientId: c.clientId, mac: '0013500500000abc' } })).status, 201);
      const again = await server.request('POST', '/api/admin/provision', { headers: ADMIN, body: { clientId: c.clientId, ssniMacAddress: '00:13:50:05:00:00:0A:BC' } });
      assert.equal(again.status, 409);
      assert.equal(((await again.json()) as { code: string }).code, 'MAC_ALREADY_PROVISIONED');
      const both = await server.request('POST', '/api/admin/provision', { headers: ADMIN, body: { clientId: c.clientId, mac: '0013500500000abd', vendorMacAddress: '0013500500000abe' } });
      assert.equal(both.status, 400);
      const none = await server.request('POST', '/api/admin/provision', { headers: ADMIN, body: { clientId: c.clientId } });
      assert.equal(none.status, 400);
      assert.equal(((await none.json()) as { field: string }).field, 'mac');
      const list = (await (await server.request('GET', '/api/solutions/sandbox/devices', { token: c.token })).json()) as { devices: Kit[] };
      assert.deepEqual(
        list.devices.map((d) => d.deviceType),
        ['NICDevKit', 'MILLI'],
        'nothing more was stored: the kit and its network module',
      );
    });

    it('a client creating a device with domainInfo.nic_macID gets it kept in wire form; a malformed one is 400 and stores nothing', async () => {
      const c = await server.login('mqtt-style');
      const r = await server.request('POST', '/api/solutions/sandbox/devices/', { token: c.token, body: { deviceType: 'MILLI', domainInfo: { nic_macID: '00:13:50:05:FF:12:34:AB' } } });
      assert.equal(r.status, 201);
      assert.deepEqual(((await r.json()) as Kit).domainInfo, { nic_macID: '00135005ff1234ab' });
      for (const bad of ['00135005ff1234', 'zz135005ff1234ab', 42]) {
        const e = await server.request('POST', '/api/solutions/sandbox/devices/', { token: c.token, body: { deviceType: 'MILLI', domainInfo: { nic_macID: bad } } });
        assert.equal(e.status, 400);
        const body = (await e.json()) as { code: string; field: string };
        assert.equal(body.code, 'VALIDATION_FAILED');
        assert.equal(body.field, 'domainInfo.nic_macID');
      }
      const list = (await (await server.request('GET', '/api/solutions/sandbox/devices', { token: c.token })).json()) as { devices: Kit[] };
      assert.equal(list.devices.length, 1);
    });

    it('the SDK finds a kit by its MAC in any spelling, wherever the server put it', async () => {
      const c = await server.login('sdk-mac');
      const kit = (await (await server.request('POST', '/api/admin/provision', { headers: ADMIN, body: { clientId: c.clientId, mac: '00135005ff00aa01' } })).json()) as Kit;
      const client = new ReefClient({ endpoint: server.url, credentials: { clientId: c.clientId, clientSecret: c.clientSecret } });
      for (const spelling of ['00135005FF00AA01', '00:13:50:05:ff:00:aa:01']) assert.equal((await client.findDeviceByMac(spelling))?.id, kit.id);
      assert.equal(await client.findDeviceByMac('00135005ff00aa02'), null);
      await assert.rejects(client.findDeviceByMac('not-a-mac'), TypeError);
      // Devices written by older servers: the seed's spelling and nic_macID alone are read too.
      assert.equal(deviceMac({ domainInfo: {}, provisioningInfo: { status: 'provisioned', timestamp: '', vendorMacAddress: '00135005FF00AA09' } as never }), '00135005ff00aa09');
      assert.equal(deviceMac({ domainInfo: { nic_macID: '00135005ff00aa08' } }), '00135005ff00aa08');
      // Another tenant's kit is not found by MAC.
      const other = await server.login('sdk-mac-other');
      const theirs = new ReefClient({ endpoint: server.url, credentials: { clientId: other.clientId, clientSecret: other.clientSecret } });
      assert.equal(await theirs.findDeviceByMac('00135005ff00aa01'), null);
    });
  });
