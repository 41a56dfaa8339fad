// Webhook targets (docs/security.md "Webhook targets"): by default a URL whose host is or resolves
// to a loopback, private, link-local, unspecified or multicast address is refused when it is set
// (rule or solution webhook: 400 WEBHOOK_TARGET_FORBIDDEN, nothing stored) and again at send time
// on the address the connection is made to; REEF_ALARM_WEBHOOK_ALLOW_CIDRS allows the subnets it
// names, REEF_ALARM_WEBHOOK_ALLOW_PRIVATE all of them.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { allowList, blockedAddress, forbiddenAddress, postWebhook } from '../../../src/alarms/egress.ts';
import { alarms, at, createRule, newDevice, receiver, startAlarmServer, upload, type AlarmServer } from '../../helpers/alarms.ts';

let s: AlarmServer;
before(async () => {
  s = await startAlarmServer({ alarms: { webhookAllowPrivate: false, webhookAllowCidrs: [] } });
});
after(() => s.close());

const SOL = '/api/solutions/StudioSimulation';

describe('webhook targets', () => {
  it('classifies addresses: loopback, RFC 1918, shared, link-local, ULA, unspecified, multicast and mapped ones are not public', () => {
    for (const a of [
      '127.0.0.1',
      '127.8.9.10',
      '10.1.2.3',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.1.1',
      '100.64.0.1',
      '169.254.169.254',
      '0.0.0.0',
      '224.0.0.1',
      '255.255.255.255',
      '::1',
      '::',
      'fc00::1',
      'fd12:3456::1',
      'fe80::1',
      'ff02::1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '::ffff:169.254.169.254',
      'not-an-ip',
    ]) {
      assert.equal(forbiddenAddress(a), true, a);
    }
    for (const a of ['93.184.215.14', '8.8.8.8', '172.32.0.1', '192.169.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8']) {
      assert.equal(forbiddenAddress(a), false, a);
    }
  });

  it('an allow-list of subnets lets those non-public addresses through and no others; public ones always pass', () => {
    const policy = {
      allowPrivate: false,
      allowed: allowList([
        { address: '10.20.0.0', prefix: 16, family: 4 },
        { address: 'fd00:1::', prefix: 64, family: 6 },
      ]),
    };
    for (const a of ['10.20.0.1', '10.20.255.254', '::ffff:10.20.3.4', '::ffff:a14:304', 'fd00:1::5', '8.8.8.8', '2606:4700:4700::1111']) assert.equal(blockedAddress(a, policy), false, a);
    for (const a of ['10.21.0.1', '10.0.0.1', '127.0.0.1', '169.254.169.254', 'fd00:2::1', '::1', '::ffff:127.0.0.1', 'not-an-ip']) assert.equal(blockedAddress(a, policy), true, a);
    assert.equal(blockedAddress('10.21.0.1', { allowPrivate: true }), false, 'everything when private targets are allowed');
    assert.equal(blockedAddress('10.20.0.1', { allowPrivate: false }), true, 'nothing non-public without a list');
  });

  it('refuses non-public webhook URLs of rules and of the solution with a clear 400; nothing is stored', async () => {
    const { token } = await s.login('targets');
    const dev = await newDevice(s, token);
    for (const url of [
      'http://127.0.0.1:9/hook',
      'http://localhost:9/hook',
      'http://169.254.169.254/latest/meta-data',
      'http://10.0.0.7/hook',
      'http://[::1]:9/hook',
      'http://[::ffff:127.0.0.1]/hook',
      'http://0.0.0.0/hook',
      'https://192.168.1.20/hook',
    ]) {
      const r = await s.request('POST', `${SOL}/alarm-rules`, { token, body: { condition: 'above', threshold: 8, deviceId: dev, webhook: { url } } });
      assert.equal(r.status, 400, url);
      const e = (await r.json()) as { code: string; field: string; message: string };
      assert.equal(e.code, 'WEBHOOK_TARGET_FORBIDDEN', url);
      assert.equal(e.field, 'webhook.url');
      assert.match(e.message, /REEF_ALARM_WEBHOOK_ALLOW_CIDRS.*REEF_ALARM_WEBHOOK_ALLOW_PRIVATE/);
      const h = await s.request('PUT', `${SOL}/alarm-webhook`, { token, body: { url } });
      assert.equal(h.status, 400, url);
      assert.equal(((await h.json()) as { code: string }).code, 'WEBHOOK_TARGET_FORBIDDEN');
    }
    assert.deepEqual(((await (await s.request('GET', `${SOL}/alarm-rules`, { token })).json()) as { rules: unknown[] }).rules, []);
    assert.deepEqual(await (await s.request('GET', `${SOL}/alarm-webhook`, { token })).json(), { webhook: null });
    // A host that does not resolve is told at once too.
    const r = await s.request('POST', `${SOL}/alarm-rules`, { token, body: { condition: 'above', threshold: 8, webhook: 'http://no-such-host.invalid/hook' } });
    assert.equal(r.status, 400);
    assert.equal(((await r.json()) as { field: string }).field, 'webhook.url');
  });

  it('checks again at send time on the connected address: a stored loopback target becomes a failed attempt, nothing reaches it', async () => {
    const rx = await receiver([204]);
    try {
      const { token } = await s.login('sendtime');
      const dev = await newDevice(s, token);
      // A rule set while its host was public (or while the operator allowed private targets): stored
      // directly, as validation would now refuse it, and reloaded by the evaluator.
      const rule = await createRule(s, token, { condition: 'above', threshold: 8, deviceId: dev });
      const rec = (await s.services.store.allAlarmRules()).find((r) => r.id === rule.id)!;
      const url = rx.url.replace('127.0.0.1', 'localhost');
      await s.services.store.updateAlarmRule({ ...rec, spec: { ...rec.spec, webhook: { url, salt: 'salt' } } });
      s.parts.engine.handle({ kind: 'alarm-rule', groupId: rec.groupId, solution: rec.solution, ruleId: rec.id, action: 'updated' });
      await upload(s, token, dev, [at(s, 0, 9)]);
      await s.settle();
      const pending = (await (await s.request('GET', `${SOL}/alarm-deliveries?status=pending`, { token })).json()) as { deliveries: { attempts: number; lastError: string; url: string }[] };
      assert.equal(pending.deliveries.length, 1);
      assert.equal(pending.deliveries[0]!.url, url);
      assert.equal(pending.deliveries[0]!.attempts, 1);
      assert.match(pending.deliveries[0]!.lastError, /resolves to (127\.0\.0\.1|::1), which is a loopback, private/);
      assert.equal(rx.received.length, 0, 'the receiver was never reached');
    } finally {
      await rx.close();
    }
  });

  it('postWebhook refuses a name resolving to loopback by default, and reaches it when the operator allows private targets', async () => {
    const rx = await receiver([204]);
    try {
      const url = rx.url.replace('127.0.0.1', 'localhost');
      await assert.rejects(postWebhook(url, {}, '{}', 5000, { allowPrivate: false }), /localhost resolves to .* non-public/);
      await assert.rejects(postWebhook(rx.url, {}, '{}', 5000, { allowPrivate: false }), /127\.0\.0\.1 is a loopback/);
      assert.equal(rx.received.length, 0);
      assert.deepEqual(await postWebhook(url, {}, '{}', 5000, { allowPrivate: true }), { status: 204 });
      assert.equal(rx.received.length, 1);
    } finally {
      await rx.close();
    }
  });
});

describe('webhook targets on an allow-list (REEF_ALARM_WEBHOOK_ALLOW_CIDRS=127.0.0.1/32)', () => {
  let listed: AlarmServer;
  before(async () => {
    listed = await startAlarmServer({ alarms: { webhookAllowPrivate: false, webhookAllowCidrs: [{ address: '127.0.0.1', prefix: 32, family: 4 }] } });
  });
  after(() => listed.close());

  it('a receiver on the listed address is set and reached; another loopback address is still refused', async () => {
    const rx = await receiver([204]);
    try {
      const { token } = await listed.login('listed');
      const dev = await newDevice(listed, token);
      const refusedRule = await listed.request('POST', `${SOL}/alarm-rules`, { token, body: { condition: 'above', threshold: 8, deviceId: dev, webhook: 'http://127.0.0.2:9/hook' } });
      assert.equal(refusedRule.status, 400);
      assert.equal(((await refusedRule.json()) as { code: string }).code, 'WEBHOOK_TARGET_FORBIDDEN');
      await createRule(listed, token, { condition: 'above', threshold: 8, deviceId: dev, webhook: rx.url });
      await upload(listed, token, dev, [at(listed, 0, 9)]);
      await listed.settle();
      assert.equal((await alarms(listed, token)).length, 1);
      assert.equal(rx.received.length, 1, 'the listed receiver was reached');
      assert.equal((JSON.parse(rx.received[0]!.body) as { event: string }).event, 'raised');
    } finally {
      await rx.close();
    }
  });
});
