// One unit per dev kit series, on SQLite and on PostgreSQL (docs/api.md "Temperature units"): the
// gateway's readings bridge stores °C with `unit`/`rawValue`/`rawUnit`, and the original Java CoAP
// and MQTT clients upload the kit's own figure as the kit reports it (a string, °F when the kit is
// in F, no unit) at the same second. Whoever writes, and in whichever order, the kit's series stays
// in °C with the kit's own figure kept. A device that is not a kit is stored as sent.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { DeviceRecord } from '../../../src/core/types.ts';
import { readingObservation } from '../../../src/gateway/readings.ts';
import { storeObservationsMany } from '../../../src/service/observations.ts';
import { batchOf } from '../../../src/core/observation-batch.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/pg.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

const ADMIN = { 'x-reef-admin-key': 'an-operator-key-for-kit-units' };
const EPOCH = Math.floor(Date.UTC(2026, 10, 20, 10) / 1000);
const iso = (epoch: number) => new Date(epoch * 1000).toISOString();

interface Obs {
  timestamp: string;
  temperature?: number;
  [field: string]: unknown;
}

for (const backend of ['sqlite', 'postgres'] as const) {
  describe(`a kit's series keeps one unit (${backend})`, () => {
    let server: TestServer;
    let db: TestDatabase | undefined;
    let token: string;
    let clientId: string;
    let mac = 0x0013500500001000;

    before(async () => {
      if (backend === 'postgres') db = await createTestDatabase('reef_units');
      server = await startTestServer({ adminKey: ADMIN['x-reef-admin-key'], ...(db ? { databaseUrl: db.url } : {}) });
      const acct = await server.login('kit-owner');
      token = acct.token;
      clientId = acct.clientId;
    });
    after(async () => {
      await server.close();
      await db?.drop();
    });

    async function provision(): Promise<DeviceRecord> {
      const r = await server.request('POST', '/api/admin/provision', { headers: ADMIN, body: { clientId, mac: (mac++).toString(16).padStart(16, '0') } });
      assert.equal(r.status, 201);
      const { id } = (await r.json()) as { id: string };
      const { groupId } = (await server.services.store.getAccountByClientId(clientId))!;
      return (await server.services.store.getDevice(groupId, 'sandbox', id))!;
    }
    /** What the gateway's readings bridge stores for a kit reading (src/gateway/kit-readings.ts). */
    async function bridge(kit: DeviceRecord, epoch: number, value: number, unit: 'C' | 'F'): Promise<void> {
      const record = readingObservation({ epoch, value, unit }, epoch * 1000, kit.mac!);
      assert.deepEqual(await storeObservationsMany(server.services.store, server.services.events, [{ device: kit, batch: batchOf([record]) }]), []);
    }
    /** The original Java CoAP client's upload of a kit reading (TempPayloadTransformer): the figure as a string. */
    async function upload(id: string, observations: unknown[]): Promise<void> {
      const r = await server.request('POST', `/api/solutions/sandbox/devices/${id}/observations`, { token, body: { observations } });
      assert.equal(r.status, 201, await r.clone().text());
    }
    async function series(id: string): Promise<Obs[]> {
      const r = await server.request('GET', `/api/solutions/sandbox/devices/${id}/observations`, { token });
      return ((await r.json()) as { observations: Obs[] }).observations.reverse();
    }

    it('an original upload of a °F reading replaces the bridged one at the same second, in °C with the figure kept', async () => {
      const kit = await provision();
      await bridge(kit, EPOCH, 72.5, 'F');
      await upload(kit.id, [{ timestamp: iso(EPOCH), temperature: '72.50' }]);
      // The MQTT client adds the MAC as macId; the reading after it comes from the uploader alone.
      await upload(kit.id, [{ timestamp: iso(EPOCH + 60), temperature: '73.40', macId: kit.mac }]);
      await bridge(kit, EPOCH + 120, 71.6, 'F');
      assert.deepEqual(await series(kit.id), [
        { timestamp: iso(EPOCH), temperature: 22.5, unit: 'C', rawValue: 72.5, rawUnit: 'F' },
        { timestamp: iso(EPOCH + 60), temperature: 23, macId: kit.mac, unit: 'C', rawValue: 73.4, rawUnit: 'F' },
        { timestamp: iso(EPOCH + 120), temperature: 22, unit: 'C', rawValue: 71.6, rawUnit: 'F', mac: kit.mac, source: 'gateway' },
      ]);
    });

    it('a kit set to °C: uploads of its figures stay as they are, with the unit said', async () => {
      const kit = await provision();
      await bridge(kit, EPOCH, 72.5, 'F');
      // PUT ?cfg=C: the next readings come in °C; the uploader sends the same figure as the bridge.
      await bridge(kit, EPOCH + 60, 21.5, 'C');
      await upload(kit.id, [{ timestamp: iso(EPOCH + 60), temperature: '21.50' }]);
      // No bridged reading at this second: the kit's last reported unit (°C) is its unit.
      await upload(kit.id, [{ timestamp: iso(EPOCH + 120), temperature: 21.75 }]);
      const got = await series(kit.id);
      assert.deepEqual(got, [
        { timestamp: iso(EPOCH), temperature: 22.5, unit: 'C', rawValue: 72.5, rawUnit: 'F', mac: kit.mac, source: 'gateway' },
        { timestamp: iso(EPOCH + 60), temperature: 21.5, unit: 'C', rawValue: 21.5, rawUnit: 'C' },
        { timestamp: iso(EPOCH + 120), temperature: 21.75, unit: 'C', rawValue: 21.75, rawUnit: 'C' },
      ]);
    });

    it('an upload before any bridged reading is taken in the kit default, °F; a stated unit wins; the bridge then writes °C over it', async () => {
      const kit = await provision();
      await upload(kit.id, [
        { timestamp: iso(EPOCH), temperature: '68.00' },
        { timestamp: iso(EPOCH + 60), temperature: 20.25, unit: 'C' },
        { timestamp: iso(EPOCH + 120), temperature: 70, unit: '°f' },
        { timestamp: iso(EPOCH + 150), temperature: 71.6, unit: 'Fahrenheit' },
        { timestamp: iso(EPOCH + 180), humidity: 40 },
      ]);
      await bridge(kit, EPOCH, 68, 'F');
      const got = await series(kit.id);
      assert.deepEqual(got, [
        { timestamp: iso(EPOCH), temperature: 20, unit: 'C', rawValue: 68, rawUnit: 'F', mac: kit.mac, source: 'gateway' },
        { timestamp: iso(EPOCH + 60), temperature: 20.25, unit: 'C', rawValue: 20.25, rawUnit: 'C' },
        { timestamp: iso(EPOCH + 120), temperature: 21.1111, unit: 'C', rawValue: 70, rawUnit: 'F' },
        { timestamp: iso(EPOCH + 150), temperature: 22, unit: 'C', rawValue: 71.6, rawUnit: 'F' },
        { timestamp: iso(EPOCH + 180), humidity: 40 },
      ]);
      for (const o of got) if (o.temperature !== undefined) assert.ok(o.temperature > 15 && o.temperature < 30, `one unit: ${o.temperature}`);
    });

    it('the plain upload body (numbers only) is kept in °C on a kit too; a device that is not a kit is stored as sent', async () => {
      const kit = await provision();
      await bridge(kit, EPOCH - 60, 75.2, 'F');
      await upload(kit.id, [{ timestamp: iso(EPOCH), temperature: 75.2 }]);
      assert.deepEqual((await series(kit.id)).at(-1), { timestamp: iso(EPOCH), temperature: 24, unit: 'C', rawValue: 75.2, rawUnit: 'F' });
      const made = await server.request('POST', '/api/solutions/sandbox/devices', { token, body: { deviceType: 'MILLI', domainInfo: { nic_macID: '00135005ff00ee02' } } });
      const { id } = (await made.json()) as { id: string };
      await upload(id, [{ timestamp: iso(EPOCH), temperature: '72.50' }]);
      assert.deepEqual(await series(id), [{ timestamp: iso(EPOCH), temperature: 72.5 }]);
    });
  });
}
