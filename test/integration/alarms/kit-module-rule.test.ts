// An alarm rule names the device whose readings it watches: a kit's network module has none of its
// own (docs/api.md "A kit's network module"), so a rule on it is refused with the kit to name
// instead, and a rule on the kit fires on what an original client uploads through the module.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createAlarmComponent, type AlarmParts } from '../../../src/alarms/component.ts';
import { provisionKit } from '../../../src/service/devices.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

describe("alarm rules and a kit's network module", () => {
  let s: TestServer;
  let parts: AlarmParts | undefined;
  // The clock the alarms run on: the reading below arrives as it is taken.
  const clock = { now: Date.now() };
  before(async () => {
    s = await startTestServer({}, [createAlarmComponent({ now: () => clock.now, silenceCheckMs: 0, deliveryPollMs: 0, onReady: (p) => (parts = p) })]);
  });
  after(() => s.close());

  it('a rule on the module is a 400 naming the kit; a rule on the kit sees uploads made through the module', async () => {
    const c = await s.login('kit-alarms');
    const account = (await s.services.store.getAccountByTenantId(c.tenantId))!;
    const { device: kit } = await provisionKit(s.services.store, s.services.events, account, '0013500500000d01');
    const devices = ((await (await s.request('GET', '/api/solutions/sandbox/devices', { token: c.token })).json()) as { devices: { id: string; deviceType: string }[] }).devices;
    const module = devices.find((d) => d.deviceType === 'MILLI')!;
    const rule = (deviceId: string) => s.request('POST', '/api/solutions/sandbox/alarm-rules', { token: c.token, body: { condition: 'above', threshold: 30, deviceId } });

    const refused = await rule(module.id);
    assert.equal(refused.status, 400);
    const e = (await refused.json()) as { code: string; field: string; message: string };
    assert.equal(e.code, 'VALIDATION_FAILED');
    assert.equal(e.field, 'deviceId');
    assert.match(e.message, new RegExp(`dev kit ${kit.id}`));

    assert.equal((await rule(kit.id)).status, 201);
    const ts = clock.now;
    clock.now = ts + 1000;
    const up = await s.request('POST', `/api/solutions/sandbox/devices/${module.id}/observations`, {
      token: c.token,
      body: { observations: [{ timestamp: new Date(ts).toISOString(), temperature: 35, unit: 'C' }] },
    });
    assert.equal(up.status, 201);
    await parts!.engine.flush();
    const raised = ((await (await s.request('GET', '/api/solutions/sandbox/alarms', { token: c.token })).json()) as { alarms: { deviceId: string; status: string }[] }).alarms;
    assert.deepEqual(
      raised.map((a) => [a.deviceId, a.status]),
      [[kit.id, 'raised']],
    );
  });
});
