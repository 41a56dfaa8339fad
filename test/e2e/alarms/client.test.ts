// Alarms through the SDK (ReefClient) and the `reef alarms` command (the real binary in a child
// process) against a real server; and the OpenAPI document describing the alarm routes.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { ReefClient, isApiError } from '../../../src/sdk/index.ts';
import { reef as run } from '../../helpers/reef.ts';
import { tempDir } from '../../helpers/server.ts';
import { at, newDevice, startAlarmServer, upload, type AlarmServer } from '../../helpers/alarms.ts';

let s: AlarmServer;
const cfg = tempDir('reef-cli-alarms-');
before(async () => {
  s = await startAlarmServer();
});
after(async () => {
  await s.close();
  fs.rmSync(cfg, { recursive: true, force: true });
});

/** The shared runner (test/helpers/reef.ts) with this file's client config directory. */
function reef(args: string[], env: Record<string, string>) {
  return run(args, { env: { REEF_CONFIG_DIR: cfg, REEF_TOKEN: '', ...env } });
}

describe('SDK', () => {
  it('rules, alarms, acknowledge, paging and counts through ReefClient; a bad rule is an ApiError naming the field', async () => {
    const c = await s.account('sdk');
    const client = new ReefClient({ endpoint: s.url, solution: 'StudioSimulation', credentials: c });
    const dev = (await client.createDevice({ deviceType: 'VirtualDevice', domainInfo: {} })).id;
    const rule = await client.createAlarmRule({ condition: 'above', threshold: 8, deviceId: dev, duration: '1m' });
    assert.equal(rule.durationMs, 60_000);
    await assert.rejects(client.createAlarmRule({ condition: 'outside', low: 5, high: 1 }), (e: unknown) => isApiError(e) && e.status === 400 && e.code === 'VALIDATION_FAILED' && e.field === 'high');
    const token = await s.token(c);
    for (let i = 0; i < 3; i++) {
      await upload(s, token, dev, [at(s, i * 3, 9), at(s, i * 3 + 1, 9)]);
      await upload(s, token, dev, [at(s, i * 3 + 2, 3)]);
      await s.settle();
    }
    const all: string[] = [];
    for await (const a of client.alarms({ limit: 2 })) all.push(a.status);
    assert.deepEqual(all, ['cleared-unacknowledged', 'cleared-unacknowledged', 'cleared-unacknowledged']);
    await upload(s, token, dev, [at(s, 20, 9), at(s, 22, 9)]);
    await s.settle();
    const { alarms } = await client.listAlarms({ status: 'active' });
    assert.equal(alarms.length, 1);
    assert.deepEqual(await client.alarmCounts(), [{ deviceId: dev, active: 1 }]);
    const acked = await client.acknowledgeAlarm(alarms[0]!.id);
    assert.equal(acked.status, 'acknowledged');
    assert.equal(acked.acknowledgedBy?.name, 'sdk');
    assert.deepEqual(
      (await client.listAlarmRules({ deviceId: dev })).map((r) => r.id),
      [rule.id],
    );
    const changed = await client.updateAlarmRule(rule.id, { ...(await client.getAlarmRule(rule.id)), threshold: 12 });
    assert.equal(changed.threshold, 12);
    await client.deleteAlarmRule(rule.id);
    assert.equal((await client.getAlarm(alarms[0]!.id)).status, 'cleared', 'deleting the rule cleared its active alarm');
    assert.deepEqual((await client.listAlarmDeliveries()).deliveries, []);

    // A rule per device template, and the solution's webhook.
    const tpl = await client.createDeviceTemplate({ name: 'cold room', sensors: ['temperature'] });
    const byTemplate = await client.createAlarmRule({ condition: 'below', threshold: 2, templateId: tpl.id });
    assert.deepEqual([byTemplate.templateId, byTemplate.deviceId], [tpl.id, null]);
    await assert.rejects(
      client.createAlarmRule({ condition: 'below', threshold: 2, templateId: '00000000-0000-4000-8000-000000000000' }),
      (e: unknown) => isApiError(e) && e.status === 404 && e.code === 'TEMPLATE_NOT_FOUND',
    );
    assert.equal(await client.getAlarmWebhook(), null);
    const hook = await client.setAlarmWebhook('https://ops.example.org/reef');
    assert.equal(hook.url, 'https://ops.example.org/reef');
    assert.ok(hook.secret);
    assert.deepEqual(Object.keys((await client.getAlarmWebhook())!).sort(), ['updatedAt', 'url']);
    await client.deleteAlarmWebhook();
    assert.equal(await client.getAlarmWebhook(), null);
  });
});

describe('reef alarms', () => {
  it('adds a rule, lists rules and alarms, acknowledges; usage errors exit 2 and refusals exit 1 with one line', async () => {
    const c = await s.account('cli');
    const token = await s.token(c);
    const dev = await newDevice(s, token);
    const env = { REEF_ENDPOINT: s.url, REEF_CLIENT_ID: c.clientId, REEF_CLIENT_SECRET: c.clientSecret, REEF_SOLUTION: 'StudioSimulation' };
    const add = await reef(['alarms', 'add', '--condition', 'below', '--threshold', '2', '--for', '5m', '--hysteresis', '0.5', '--device', dev, '--name', 'freezer door', '--json'], env);
    assert.equal(add.code, 0, add.stderr);
    const rule = JSON.parse(add.stdout) as { id: string; durationMs: number; name: string };
    assert.deepEqual([rule.durationMs, rule.name], [300_000, 'freezer door']);
    const rules = await reef(['alarms', 'rules'], env);
    assert.equal(rules.code, 0, rules.stderr);
    assert.match(rules.stdout, /freezer door .*below 2 °C/);

    await upload(s, token, dev, [at(s, 0, 1), at(s, 5, 1.5)]);
    await s.settle();
    const list = await reef(['alarms', 'list', '--status', 'active', '--json'], env);
    assert.equal(list.code, 0, list.stderr);
    const [alarm] = (JSON.parse(list.stdout) as { alarms: { id: string; status: string }[] }).alarms;
    assert.equal(alarm?.status, 'raised');
    const ack = await reef(['alarms', 'ack', alarm!.id], env);
    assert.equal(ack.code, 0, ack.stderr);
    assert.equal(ack.stdout.trim(), `${alarm!.id} acknowledged`);

    const bad = await reef(['alarms', 'add', '--condition', 'above'], env);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr.trim(), /^reef alarms: threshold must be a finite number \(VALIDATION_FAILED, field threshold, HTTP 400, request id \S+\)$/);
    // Each usage error: test/unit/cli/usage.test.ts; here, how the binary reports one.
    const usage = await reef(['alarms', 'add', '--threshold', 'warm'], env);
    assert.equal(usage.code, 2);
    assert.equal(usage.stderr, 'reef alarms: --condition is required: above, below, outside, rate or silence\n');
    const missing = await reef(['alarms', 'ack', '00000000-0000-4000-8000-000000000000'], env);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /ALARM_NOT_FOUND/);

    const tpl = (await (await s.request('POST', '/api/solutions/StudioSimulation/devicetemplates', { token, body: { name: 'fridge', sensors: ['temperature'] } })).json()) as {
      deviceTemplates: { id: string };
    };
    const byTemplate = await reef(['alarms', 'add', '--condition', 'above', '--threshold', '8', '--template', tpl.deviceTemplates.id, '--json'], env);
    assert.equal(byTemplate.code, 0, byTemplate.stderr);
    assert.equal((JSON.parse(byTemplate.stdout) as { templateId: string }).templateId, tpl.deviceTemplates.id);
    const setHook = await reef(['alarms', 'webhook', 'https://ops.example.org/reef'], env);
    assert.equal(setHook.code, 0, setHook.stderr);
    assert.match(setHook.stdout, /^https:\/\/ops\.example\.org\/reef\nwebhook signing secret \(shown once\): [A-Za-z0-9_-]{43}\n$/);
    const showHook = await reef(['alarms', 'webhook', '--json'], env);
    assert.equal((JSON.parse(showHook.stdout) as { webhook: { url: string } }).webhook.url, 'https://ops.example.org/reef');
    const removeHook = await reef(['alarms', 'webhook', '--remove'], env);
    assert.equal(removeHook.code, 0, removeHook.stderr);
    assert.equal((await reef(['alarms', 'webhook'], env)).stdout, 'no solution webhook in solution StudioSimulation\n');
  });
});

describe('OpenAPI', () => {
  it('documents the alarm routes and their schemas', async () => {
    const doc = (await (await fetch(`${s.url}/api/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>>; components: { schemas: Record<string, unknown> } };
    for (const p of [
      '/api/solutions/{solution}/alarm-rules',
      '/api/solutions/{solution}/alarm-rules/{id}',
      '/api/solutions/{solution}/alarms',
      '/api/solutions/{solution}/alarms/{id}/acknowledge',
      '/api/solutions/{solution}/alarm-deliveries',
      '/api/solutions/{solution}/alarm-webhook',
    ]) {
      assert.ok(doc.paths[p], `${p} is documented`);
    }
    assert.deepEqual(Object.keys(doc.paths['/api/solutions/{solution}/alarm-rules/{id}']!).sort(), ['delete', 'get', 'put']);
    assert.deepEqual(Object.keys(doc.paths['/api/solutions/{solution}/alarm-webhook']!).sort(), ['delete', 'get', 'put']);
    for (const name of ['AlarmRule', 'Alarm', 'AlarmDelivery']) assert.ok(doc.components.schemas[name], `${name} schema`);
    assert.ok((doc.components.schemas.AlarmRule as { properties: Record<string, unknown> }).properties.templateId, 'templateId documented');
  });
});
