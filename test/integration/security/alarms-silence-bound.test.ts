// A silence check raises at most maxRaisesPerCheck alarms per group (tenant) (docs/alarms.md
// "Evaluation, precisely"): a tenant with many silence rules over many devices gets its alarms over
// several checks, and another tenant's silent device is raised in the very first one. Before, one
// check raised every silent pair at once (200 rules × 200 devices: 40,000 alarms in one go, other
// requests stalled for seconds).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createAlarmComponent, type AlarmParts } from '../../../src/alarms/component.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

const SOL = '/api/solutions/StudioSimulation';
const clock = { now: Date.now() };
const LIMIT = 100;

describe('silence checks are bounded per tenant', () => {
  let s: TestServer;
  let parts: AlarmParts;
  before(async () => {
    s = await startTestServer({}, [createAlarmComponent({ now: () => clock.now, silenceCheckMs: 0, deliveryPollMs: 0, maxRaisesPerCheck: LIMIT, onReady: (p) => (parts = p) })]);
  });
  after(() => s.close());

  const active = async (groupId: string) => (await s.services.store.activeAlarms()).filter((a) => a.groupId === groupId).length;

  it("10 silence rules × 50 devices raise 100 alarms per check, and another tenant's alarm goes in the first", async () => {
    const hostile = await s.login('hostile');
    const victim = await s.login('victim');
    for (let i = 0; i < 50; i++) {
      const r = await s.request('POST', `${SOL}/devices`, { token: hostile.token, body: { deviceType: 'VirtualDevice', domainInfo: {} } });
      assert.equal(r.status, 201);
    }
    for (let i = 0; i < 10; i++) {
      const r = await s.request('POST', `${SOL}/alarm-rules`, { token: hostile.token, body: { condition: 'silence', silence: `${10 + i}m` } });
      assert.equal(r.status, 201);
    }
    const v = await s.request('POST', `${SOL}/devices`, { token: victim.token, body: { deviceType: 'VirtualDevice', domainInfo: {} } });
    const vdev = ((await v.json()) as { id: string }).id;
    const vr = await s.request('POST', `${SOL}/alarm-rules`, { token: victim.token, body: { condition: 'silence', silence: '10m', deviceId: vdev } });
    assert.equal(vr.status, 201);
    await parts.engine.flush();

    clock.now += 60 * 60_000;
    await parts.engine.checkSilence();
    assert.equal(await active(hostile.groupId), LIMIT, 'one check raises at most the limit for the tenant');
    assert.equal(await active(victim.groupId), 1, "the other tenant's silent device is raised in the same check");

    // The rest follow in the next checks, none lost, none twice.
    for (let i = 0; i < 4; i++) await parts.engine.checkSilence();
    assert.equal(await active(hostile.groupId), 500);
    await parts.engine.checkSilence();
    assert.equal(await active(hostile.groupId), 500);
    assert.equal(await active(victim.groupId), 1);
  });
});
