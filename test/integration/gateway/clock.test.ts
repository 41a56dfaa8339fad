// Kit clocks (seed §4.4): the kit's own time PUT is recorded, and a kit whose clock is off by more
// than the allowed skew is set right by the gateway with a time PUT.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startGateway, until, type GatewayHarness } from '../../helpers/gateway.ts';

describe('kit clocks', () => {
  let h: GatewayHarness;
  before(async () => {
    h = await startGateway({ options: { maxClockSkewMs: 5000, clockMinIntervalMs: 60_000 } });
  });
  after(() => h.close());

  it("records the kit's time PUT and sets a clock that is an hour off", async () => {
    const alice = await h.t.login('alice');
    const mac = '00000000000004a1';
    const { kit } = await h.kit(alice.tenantId, mac, { timeSyncIntervalMs: 0 });
    // The kit's clock jumps an hour back; it reports it with its own time PUT (/sensor/arduino/time).
    kit.sensor.setClock(Date.now() - 3_600_000);
    const reportsBefore = h.gw.gateway.stats.clockReports;
    kit.sensor.sendClock();
    await until(() => h.gw.gateway.stats.clockReports > reportsBefore, 'the time PUT arrives');
    const r = h.gw.gateway.clock.get(mac)!;
    assert.equal(r.source, 'time-put');
    assert.ok(r.skewMs < -3_500_000 && r.skewMs > -3_700_000, `skew ${r.skewMs}`);
    await until(() => Math.abs(kit.sensor.now() - Date.now()) < 2000, "the gateway sets the kit's clock");
    await until(async () => JSON.parse((await h.t.services.store.getState(`gateway/clock/${mac}`)) ?? '{}').setAt !== undefined, 'the correction is recorded');
    const stored = JSON.parse((await h.t.services.store.getState(`gateway/clock/${mac}`))!);
    assert.equal(stored.mac, mac);
    assert.ok(stored.skewMs < -3_500_000);

    // A kit that is right is left alone.
    const sets = h.gw.gateway.stats.clockSets;
    kit.sensor.sendClock();
    await until(() => h.gw.gateway.stats.clockReports > reportsBefore + 1, 'the next report');
    assert.ok(Math.abs(h.gw.gateway.clock.get(mac)!.skewMs) < 2000);
    assert.equal(h.gw.gateway.stats.clockSets, sets);
  });
});
