// Kit readings and client uploads of the same reading: the gateway stores each kit reading at the
// kit's own reading time, so when an original Java client uploads the same reading itself (the
// kit's epoch second as timestamp, the kit's figure as a string, no unit) it replaces the bridged
// observation instead of doubling it, and in the same unit: °C with the kit's figure kept
// (docs/api.md "Temperature units"). Over real UDP (kit → gateway) and HTTP (the upload).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { readingObservation } from '../../../src/gateway/readings.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/pg.ts';
import { startGateway, until, type GatewayHarness } from '../../helpers/gateway.ts';

interface Obs {
  timestamp: string;
  temperature: number;
  unit?: string;
  rawValue?: number;
  rawUnit?: string;
  kitEpoch?: number;
  source?: string;
}

for (const backend of ['sqlite', 'postgres'] as const)
  describe(`bridged kit readings (${backend})`, () => {
    let h: GatewayHarness;
    let db: TestDatabase | undefined;
    let alice: { tenantId: string; token: string };
    let deviceId: string;

    before(async () => {
      if (backend === 'postgres') db = await createTestDatabase('reef_kitread');
      h = await startGateway(db ? { config: { databaseUrl: db.url } } : {});
      alice = await h.t.login('alice');
      // One notification a minute, as the original kit sends them: the first answer is all this test sees.
      deviceId = (await h.kit(alice.tenantId, '00135005ff00c0a1', { periodMs: 60_000 })).device.id;
    });
    after(async () => {
      await h?.close();
      await db?.drop();
    });

    const observations = async (q = '') =>
      ((await (await h.t.request('GET', `/api/solutions/sandbox/devices/${deviceId}/observations${q}`, { token: alice.token })).json()) as { observations: Obs[] }).observations;

    it("are stored at the kit's reading second; the Java client's upload of the same reading replaces it, still in °C", async () => {
      await until(async () => (await observations()).length >= 1, 'the first reading is stored');
      const [bridged] = await observations();
      assert.equal(bridged!.source, 'gateway');
      assert.match(bridged!.timestamp, /\.000Z$/, "the kit's epoch second");
      assert.equal(bridged!.kitEpoch, undefined, 'a kit with a good clock needs no separate epoch');
      assert.equal(bridged!.unit, 'C');

      // What the original Java client posts for that reading (TempPayloadTransformer): the kit's
      // epoch second, the kit's figure as a string, nothing else.
      const upload = { observations: [{ timestamp: bridged!.timestamp, temperature: bridged!.rawValue!.toFixed(2) }] };
      const r = await h.t.request('POST', `/api/solutions/sandbox/devices/${deviceId}/observations`, { token: alice.token, body: upload });
      assert.equal(r.status, 201);
      const t = Date.parse(bridged!.timestamp);
      const at = await observations(`?from=${new Date(t).toISOString()}&to=${new Date(t + 1).toISOString()}`);
      assert.equal(at.length, 1, 'one observation for one reading');
      assert.deepEqual(at[0], { timestamp: bridged!.timestamp, temperature: bridged!.temperature, unit: 'C', rawValue: bridged!.rawValue, rawUnit: bridged!.rawUnit });
    });
  });

describe('readingObservation', () => {
  const reading = { epoch: 1_769_860_800, value: 71.5, unit: 'F' as const };
  it("takes the kit's time when its clock is within the tolerance, else the receipt time with the kit's epoch kept", () => {
    const good = readingObservation(reading, reading.epoch * 1000 + 700, 'm', 10_000);
    assert.equal(good.ts, reading.epoch * 1000);
    assert.equal(good.temperature, 21.9444);
    assert.deepEqual(good.extra, { unit: 'C', rawValue: 71.5, rawUnit: 'F', mac: 'm', source: 'gateway' });
    const receivedAt = reading.epoch * 1000 + 3_600_000;
    const off = readingObservation(reading, receivedAt, 'm', 10_000);
    assert.equal(off.ts, receivedAt);
    assert.equal(off.extra!.kitEpoch, reading.epoch);
  });
});
