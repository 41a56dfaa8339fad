// Alarm rules over HTTP: validation with clear 400s, CRUD, and tenant isolation of rules and alarms.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { alarms, at, createRule, newDevice, startAlarmServer, upload, type AlarmServer } from '../../helpers/alarms.ts';

let s: AlarmServer;
before(async () => {
  s = await startAlarmServer();
});
after(() => s.close());

const BASE = '/api/solutions/StudioSimulation/alarm-rules';

describe('alarm rules', () => {
  it('bad rules get a 400 naming the field, and nothing is stored', async () => {
    const { token } = await s.login('bad');
    const dev = await newDevice(s, token);
    const cases: [Record<string, unknown> | string, string][] = [
      [{ threshold: 8 }, 'condition'],
      [{ condition: 'hotter', threshold: 8 }, 'condition'],
      [{ condition: 'above' }, 'threshold'],
      [{ condition: 'above', threshold: '8' }, 'threshold'],
      [{ condition: 'above', treshold: 8 }, 'treshold'],
      [{ condition: 'outside', low: 10, high: 2 }, 'high'],
      [{ condition: 'outside', low: 2, high: 4, hysteresis: 1 }, 'hysteresis'],
      [{ condition: 'rate', ratePerMinute: 0 }, 'ratePerMinute'],
      [{ condition: 'rate', ratePerMinute: 1, direction: 'up' }, 'direction'],
      [{ condition: 'silence' }, 'silence'],
      [{ condition: 'silence', silence: '1s' }, 'silence'],
      [{ condition: 'silence', silence: '15m', threshold: 3 }, 'threshold'],
      [{ condition: 'above', threshold: 8, duration: 'ten minutes' }, 'duration'],
      [{ condition: 'above', threshold: 8, duration: '30d' }, 'duration'],
      [{ condition: 'above', threshold: 8, hysteresis: -1 }, 'hysteresis'],
      [{ condition: 'above', threshold: 8, unit: 'K' }, 'unit'],
      [{ condition: 'above', threshold: 8, field: 'humidity', unit: 'C' }, 'unit'],
      [{ condition: 'above', threshold: 8, field: 'a..b' }, 'field'],
      [{ condition: 'above', threshold: 8, deviceId: 'not-a-uuid' }, 'deviceId'],
      [{ condition: 'above', threshold: 8, severity: 'apocalyptic' }, 'severity'],
      [{ condition: 'above', threshold: 8, webhook: { url: 'ftp://example.com/x' } }, 'webhook.url'],
      [{ condition: 'above', threshold: 8, webhook: { url: 'http://user:pw@example.com/x' } }, 'webhook.url'],
      [{ condition: 'above', threshold: 8, webhook: { url: 'http://example.com/x', secret: 'mine' } }, 'webhook.secret'],
      [{ condition: 'above', threshold: 8, name: 'x'.repeat(101) }, 'name'],
    ];
    for (const [body, field] of cases) {
      const r = await s.request('POST', BASE, { token, body });
      assert.equal(r.status, 400, JSON.stringify(body));
      const e = (await r.json()) as { code: string; field: string; message: string };
      assert.equal(e.code, 'VALIDATION_FAILED', JSON.stringify(body));
      assert.equal(e.field, field, `${JSON.stringify(body)}: ${e.message}`);
    }
    const malformed = await s.request('POST', BASE, { token, body: '{"condition": "above",' });
    assert.equal(malformed.status, 400);
    assert.equal(((await malformed.json()) as { code: string }).code, 'MALFORMED_JSON');
    // A device that is not in the solution (or not the caller's) is a 404, not a rule that never fires.
    const missing = await s.request('POST', BASE, { token, body: { condition: 'above', threshold: 8, deviceId: '00000000-0000-4000-8000-000000000000' } });
    assert.equal(missing.status, 404);
    assert.equal(((await missing.json()) as { code: string }).code, 'DEVICE_NOT_FOUND');
    const list = await s.request('GET', BASE, { token });
    assert.deepEqual(await list.json(), { rules: [] });
    assert.ok(dev);
  });

  it('create, read, replace and delete; defaults filled in; a GET answer can be sent back as the PUT body', async () => {
    const { token } = await s.login('crud');
    const dev = await newDevice(s, token);
    const rule = await createRule(s, token, { condition: 'above', threshold: 8, duration: '10m', hysteresis: 0.5, deviceId: dev });
    assert.equal(rule.name, 'temperature above 8 °C for 10 min');
    assert.equal(rule.field, 'temperature');
    assert.equal(rule.unit, 'C');
    assert.equal(rule.durationMs, 600_000);
    assert.equal(rule.severity, 'major');
    assert.equal(rule.enabled, true);
    assert.equal(rule.deviceId, dev);
    assert.equal(rule.webhook, null);
    const got = await (await s.request('GET', `${BASE}/${rule.id}`, { token })).json();
    assert.deepEqual(got, rule);

    const put = await s.request('PUT', `${BASE}/${rule.id}`, { token, body: { ...rule, threshold: 5, name: 'cold room' } });
    assert.equal(put.status, 200, await put.clone().text());
    const changed = (await put.json()) as Record<string, unknown>;
    assert.equal(changed.threshold, 5);
    assert.equal(changed.name, 'cold room');
    assert.equal(changed.createdAt, rule.createdAt);

    s.clock.now += 1000;
    const solutionWide = await createRule(s, token, { condition: 'silence', silence: '15m' });
    const listed = (await (await s.request('GET', `${BASE}?deviceId=${dev}`, { token })).json()) as { rules: { id: string }[] };
    assert.deepEqual(
      listed.rules.map((r) => r.id),
      [rule.id, solutionWide.id],
    );

    assert.equal((await s.request('DELETE', `${BASE}/${rule.id}`, { token })).status, 204);
    const gone = await s.request('GET', `${BASE}/${rule.id}`, { token });
    assert.equal(gone.status, 404);
    assert.equal(((await gone.json()) as { code: string }).code, 'ALARM_RULE_NOT_FOUND');
    assert.equal((await s.request('DELETE', `${BASE}/${rule.id}`, { token })).status, 404);
    assert.equal((await s.request('GET', `${BASE}/nonsense`, { token })).status, 404);
  });

  it("another group never sees, changes or acknowledges a group's rules and alarms", async () => {
    const owner = await s.login('owner');
    const stranger = await s.login('stranger');
    const dev = await newDevice(s, owner.token);
    await newDevice(s, stranger.token);
    const rule = await createRule(s, owner.token, { condition: 'above', threshold: 8, deviceId: dev });
    await upload(s, owner.token, dev, [at(s, 0, 9)]);
    await s.settle();
    const [alarm] = await alarms(s, owner.token);
    assert.ok(alarm, 'the owner sees the alarm');

    const t = stranger.token;
    assert.equal((await s.request('GET', `${BASE}/${rule.id}`, { token: t })).status, 404);
    assert.equal((await s.request('PUT', `${BASE}/${rule.id}`, { token: t, body: { condition: 'above', threshold: 1 } })).status, 404);
    assert.equal((await s.request('DELETE', `${BASE}/${rule.id}`, { token: t })).status, 404);
    assert.deepEqual(await (await s.request('GET', BASE, { token: t })).json(), { rules: [] });
    assert.deepEqual(await alarms(s, t), []);
    const other = await s.request('GET', `/api/solutions/StudioSimulation/alarms/${alarm.id}`, { token: t });
    assert.equal(other.status, 404);
    assert.equal(((await other.json()) as { code: string }).code, 'ALARM_NOT_FOUND');
    assert.equal((await s.request('POST', `/api/solutions/StudioSimulation/alarms/${alarm.id}/acknowledge`, { token: t })).status, 404);
    assert.deepEqual(await (await s.request('GET', '/api/solutions/StudioSimulation/alarm-counts', { token: t })).json(), { devices: [] });
    // A rule of the stranger's naming the owner's device is refused like an unknown device.
    assert.equal((await s.request('POST', BASE, { token: t, body: { condition: 'above', threshold: 1, deviceId: dev } })).status, 404);
    // Nothing of the stranger's touched the owner's alarm.
    const still = (await (await s.request('GET', `/api/solutions/StudioSimulation/alarms/${alarm.id}`, { token: owner.token })).json()) as { status: string };
    assert.equal(still.status, 'raised');
    assert.equal((await s.request('GET', '/api/solutions/StudioSimulation/alarm-rules', {})).status, 401);
  });
});
