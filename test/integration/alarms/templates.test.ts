// Rules per device template (docs/alarms.md "Rules"): a rule naming templateId watches every device
// of the solution that names the template, devices made after the rule included; validation of
// the template (same group and solution) and of deviceId/templateId together.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { alarms, at, createRule, startAlarmServer, upload, type AlarmServer } from '../../helpers/alarms.ts';

let s: AlarmServer;
before(async () => {
  s = await startAlarmServer();
});
after(() => s.close());

const SOL = '/api/solutions/StudioSimulation';

async function template(token: string, name: string): Promise<string> {
  const r = await s.request('POST', `${SOL}/devicetemplates`, { token, body: { name, sensors: ['temperature'] } });
  assert.equal(r.status, 201, await r.clone().text());
  return ((await r.json()) as { deviceTemplates: { id: string } }).deviceTemplates.id;
}

async function device(token: string, templateId?: string): Promise<string> {
  const r = await s.request('POST', `${SOL}/devices`, { token, body: { deviceType: 'VirtualDevice', domainInfo: templateId ? { templateId } : {} } });
  assert.equal(r.status, 201, await r.clone().text());
  return ((await r.json()) as { id: string }).id;
}

async function send(token: string, dev: string, ...readings: Record<string, unknown>[]): Promise<void> {
  for (const r of readings) {
    await upload(s, token, dev, [r]);
    await s.settle();
  }
}

describe('rules per device template', () => {
  it('watch every device naming the template, devices made later included, and no other device', async () => {
    const { token } = await s.login('tpl');
    const fridge = await template(token, 'fridge');
    const other = await template(token, 'freezer');
    const before1 = await device(token, fridge);
    const rule = await createRule(s, token, { condition: 'above', threshold: 8, templateId: fridge.toUpperCase() });
    assert.equal(rule.templateId, fridge, 'stored in lower case');
    assert.equal(rule.deviceId, null);
    const later = await device(token, fridge);
    const freezer = await device(token, other);
    const plain = await device(token);
    // A plain device's batch first: the evaluator resolves (and remembers) it has no rule.
    await send(token, plain, at(s, 0, 20));
    await send(token, before1, at(s, 1, 9));
    await send(token, later, at(s, 2, 9));
    await send(token, freezer, at(s, 3, 9));
    await send(token, plain, at(s, 4, 9));
    const raised = (await alarms(s, token)).map((a) => a.deviceId).sort();
    assert.deepEqual(raised, [before1, later].sort(), 'only the devices of the template');

    // ?deviceId= lists the rules watching a device: its template's included.
    const list = async (d: string) => ((await (await s.request('GET', `${SOL}/alarm-rules?deviceId=${d}`, { token })).json()) as { rules: { id: string }[] }).rules.map((r) => r.id);
    assert.deepEqual(await list(later), [rule.id]);
    assert.deepEqual(await list(freezer), []);

    // Moved to the other template by PUT: the old devices clear nothing by themselves, a new
    // breach on a freezer device raises.
    const r = await s.request('PUT', `${SOL}/alarm-rules/${rule.id}`, { token, body: { ...rule, templateId: other } });
    assert.equal(r.status, 200, await r.clone().text());
    await send(token, freezer, at(s, 5, 10));
    assert.ok((await alarms(s, token, `?deviceId=${freezer}`)).length === 1, 'the freezer device is watched now');
  });

  it('refuses a template of another solution or group, a malformed id, and deviceId with templateId; nothing stored', async () => {
    const { token } = await s.login('tpl-bad');
    const { token: other } = await s.login('tpl-other');
    const theirs = await template(other, 'theirs');
    const mine = await template(token, 'mine');
    const dev = await device(token, mine);
    const cases: [Record<string, unknown>, number, string, string][] = [
      [{ condition: 'above', threshold: 1, templateId: theirs }, 404, 'TEMPLATE_NOT_FOUND', 'templateId'],
      [{ condition: 'above', threshold: 1, templateId: '00000000-0000-4000-8000-000000000000' }, 404, 'TEMPLATE_NOT_FOUND', 'templateId'],
      [{ condition: 'above', threshold: 1, templateId: 'fridge' }, 400, 'VALIDATION_FAILED', 'templateId'],
      [{ condition: 'above', threshold: 1, templateId: 7 }, 400, 'VALIDATION_FAILED', 'templateId'],
      [{ condition: 'above', threshold: 1, templateId: mine, deviceId: dev }, 400, 'VALIDATION_FAILED', 'templateId'],
    ];
    for (const [body, status, code, field] of cases) {
      const r = await s.request('POST', `${SOL}/alarm-rules`, { token, body });
      assert.equal(r.status, status, JSON.stringify(body));
      const e = (await r.json()) as { code: string; field?: string };
      assert.equal(e.code, code, JSON.stringify(body));
      assert.equal(e.field, field, JSON.stringify(body));
    }
    // Another solution of the same group does not see the template either.
    const r = await s.request('POST', '/api/solutions/elsewhere/alarm-rules', { token, body: { condition: 'above', threshold: 1, templateId: mine } });
    assert.ok(r.status === 404, `another solution: ${r.status}`);
    const listed = (await (await s.request('GET', `${SOL}/alarm-rules`, { token })).json()) as { rules: unknown[] };
    assert.deepEqual(listed.rules, []);
  });

  it('a device given the template later (PATCH) is watched from then on; taken away, it is not', async () => {
    const { token } = await s.login('tpl-patch');
    const t = await template(token, 'cold room');
    const dev = await device(token);
    const rule = await createRule(s, token, { condition: 'above', threshold: 8, templateId: t });
    // Evaluated once without a template: the evaluator has resolved (and remembers) no rule.
    await send(token, dev, at(s, 0, 20));
    assert.deepEqual(await alarms(s, token), []);
    const patch = (domainInfo: Record<string, unknown>) => s.request('PATCH', `${SOL}/devices/${dev}`, { token, body: { domainInfo } });
    assert.equal((await patch({ templateId: t })).status, 200);
    await s.settle();
    await send(token, dev, at(s, 1, 9));
    assert.deepEqual(
      (await alarms(s, token)).map((a) => [a.ruleId, a.deviceId]),
      [[rule.id, dev]],
    );
    // Without the template, a new breach after the alarm clears raises nothing.
    await send(token, dev, at(s, 2, 5));
    assert.equal((await patch({ templateId: null })).status, 200);
    await s.settle();
    await send(token, dev, at(s, 3, 30));
    assert.deepEqual(await alarms(s, token, '?status=active'), []);
  });

  it('a silence rule on a template watches only its devices', async () => {
    const { token } = await s.login('tpl-silence');
    const t = await template(token, 'quiet');
    const watched = await device(token, t);
    await device(token);
    await createRule(s, token, { condition: 'silence', silence: '15m', templateId: t });
    s.clock.now += 16 * 60_000;
    await s.parts.engine.checkSilence();
    assert.deepEqual(
      (await alarms(s, token)).map((a) => a.deviceId),
      [watched],
    );
  });
});
