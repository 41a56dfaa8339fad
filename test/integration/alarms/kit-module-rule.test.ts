// An alarm rule names the device whose readings it watches: a kit's network module has none of its
// own (docs/api.md "A kit's network module"), so a rule on it is refused with the kit to name
// instead, and a rule on the kit fires on what an original client uploads through the module.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { provisionKit } from '../../../src/service/devices.ts';
import { alarms, at, createRule, startAlarmServer, upload, type AlarmServer } from '../../alarms/helpers.ts';

describe("alarm rules and a kit's network module", () => {
  let s: AlarmServer;
  before(async () => {
    s = await startAlarmServer();
  });
  after(() => s.close());

  it('a rule on the module is a 400 naming the kit; a rule on the kit sees uploads made through the module', async () => {
    const c = await s.login('kit-alarms');
    const account = (await s.services.store.getAccountByTenantId(c.tenantId))!;
    const { device: kit } = await provisionKit(s.services.store, s.services.events, account, '0013500500000d01');
    const devices = ((await (await s.request('GET', '/api/solutions/sandbox/devices', { token: c.token })).json()) as { devices: { id: string; deviceType: string }[] }).devices;
    const module = devices.find((d) => d.deviceType === 'MILLI')!;

    const r = await s.request('POST', '/api/solutions/sandbox/alarm-rules', { token: c.token, body: { condition: 'above', threshold: 30, deviceId: module.id } });
    assert.equal(r.status, 400);
    const e = (await r.json()) as { code: string; field: string; message: string };
    assert.equal(e.code, 'VALIDATION_FAILED');
    assert.equal(e.field, 'deviceId');
    assert.match(e.message, new RegExp(`dev kit ${kit.id}`));

    await createRule(s, c.token, { condition: 'above', threshold: 30, deviceId: kit.id }, 'sandbox');
    await upload(s, c.token, module.id, [at(s, 1, 35, { unit: 'C' })], 'sandbox');
    await s.settle();
    const raised = await alarms(s, c.token, '', 'sandbox');
    assert.deepEqual(
      raised.map((a) => [a.deviceId, a.status]),
      [[kit.id, 'raised']],
    );
  });
});
