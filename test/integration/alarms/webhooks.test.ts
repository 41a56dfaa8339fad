// Webhooks to a real local HTTP receiver: signed JSON, retries with backoff on the fake clock, the
// dead-letter list over HTTP and its retry, and a receiver that never answers not holding up ingest.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { alarms, at, createRule, newDevice, receiver, startAlarmServer, upload, type AlarmServer } from '../../helpers/alarms.ts';

let s: AlarmServer;
before(async () => {
  s = await startAlarmServer({}, { webhook: { maxAttempts: 3, baseDelayMs: 10_000, timeoutMs: 60_000 } });
});
after(() => s.close());

const DELIVERIES = '/api/solutions/StudioSimulation/alarm-deliveries';

describe('webhooks', () => {
  it('a raised alarm is POSTed as signed JSON; a failing receiver is retried with backoff until it answers 2xx', async () => {
    const rx = await receiver([500, 503, 204]);
    try {
      const { token } = await s.login('hook');
      const dev = await newDevice(s, token);
      const rule = await createRule(s, token, { condition: 'above', threshold: 8, deviceId: dev, webhook: { url: rx.url } });
      const secret = rule.webhook.secret as string;
      assert.match(secret, /^[A-Za-z0-9_-]{43}$/, 'the signing secret is shown on creation');
      const read = (await (await s.request('GET', `/api/solutions/StudioSimulation/alarm-rules/${rule.id}`, { token })).json()) as { webhook: Record<string, unknown> };
      assert.deepEqual(read.webhook, { url: rx.url }, 'and never again');

      const first = rx.next();
      await upload(s, token, dev, [at(s, 0, 9)]);
      await s.settle();
      const r1 = await first;
      assert.ok(r1.validSignature(secret), 'the signature verifies with the secret');
      assert.ok(!r1.validSignature('not-the-secret'));
      assert.equal(r1.headers['content-type'], 'application/json');
      assert.equal(r1.headers['x-reef-event'], 'raised');
      const body = JSON.parse(r1.body) as { event: string; alarm: { id: string; deviceId: string; status: string } };
      assert.equal(body.event, 'raised');
      assert.equal(body.alarm.deviceId, dev);
      const [alarm] = await alarms(s, token);
      assert.equal(body.alarm.id, alarm?.id);

      // 500: the next attempt waits 10 s, then 20 s.
      let pending = (await (await s.request('GET', `${DELIVERIES}?status=pending`, { token })).json()) as { deliveries: Record<string, any>[] };
      assert.equal(pending.deliveries.length, 1);
      assert.equal(pending.deliveries[0]!.attempts, 1);
      assert.equal(pending.deliveries[0]!.lastError, 'HTTP 500');
      s.clock.now += 9_000;
      await s.parts.sender.deliverDue();
      assert.equal(rx.received.length, 1, 'not before the backoff');
      s.clock.now += 1_000;
      await s.parts.sender.deliverDue();
      assert.equal(rx.received.length, 2);
      s.clock.now += 19_000;
      await s.parts.sender.deliverDue();
      assert.equal(rx.received.length, 2);
      s.clock.now += 1_000;
      await s.parts.sender.deliverDue();
      assert.equal(rx.received.length, 3);
      assert.equal(rx.received[2]!.headers['x-reef-delivery'], rx.received[0]!.headers['x-reef-delivery'], 'the same delivery each time');
      assert.ok(rx.received[2]!.validSignature(secret));
      const delivered = (await (await s.request('GET', `${DELIVERIES}?status=delivered`, { token })).json()) as { deliveries: Record<string, any>[] };
      assert.deepEqual(
        delivered.deliveries.map((d) => [d.attempts, d.lastError]),
        [[3, null]],
      );
      pending = (await (await s.request('GET', `${DELIVERIES}?status=pending`, { token })).json()) as { deliveries: Record<string, any>[] };
      assert.deepEqual(pending.deliveries, []);
    } finally {
      await rx.close();
    }
  });

  it('after the last attempt a delivery is a dead letter, listed over HTTP; retrying it sends it again', async () => {
    const rx = await receiver([500, 500, 500, 200]);
    try {
      const { token } = await s.login('dead');
      const dev = await newDevice(s, token);
      await createRule(s, token, { condition: 'above', threshold: 8, deviceId: dev, webhook: rx.url });
      await upload(s, token, dev, [at(s, 0, 9)]);
      await s.settle();
      for (let i = 0; i < 3; i++) {
        s.clock.now += 3_600_000;
        await s.parts.sender.deliverDue();
      }
      assert.equal(rx.received.length, 3, 'three attempts, no more');
      const dead = (await (await s.request('GET', DELIVERIES, { token })).json()) as { deliveries: Record<string, any>[] };
      assert.equal(dead.deliveries.length, 1);
      const d = dead.deliveries[0]!;
      assert.deepEqual([d.status, d.attempts, d.lastError, d.url, d.body.event], ['dead', 3, 'HTTP 500', rx.url, 'raised']);
      const other = await s.login('nosy');
      assert.deepEqual(((await (await s.request('GET', DELIVERIES, { token: other.token })).json()) as { deliveries: unknown[] }).deliveries, []);
      assert.equal((await s.request('POST', `${DELIVERIES}/${d.id}/retry`, { token: other.token })).status, 404);

      const retry = await s.request('POST', `${DELIVERIES}/${d.id}/retry`, { token });
      assert.equal(retry.status, 200);
      await s.parts.sender.deliverDue();
      assert.equal(rx.received.length, 4);
      const delivered = (await (await s.request('GET', `${DELIVERIES}?status=delivered`, { token })).json()) as { deliveries: { id: string }[] };
      assert.deepEqual(
        delivered.deliveries.map((x) => x.id),
        [d.id],
      );
      const again = await s.request('POST', `${DELIVERIES}/${d.id}/retry`, { token });
      assert.equal(again.status, 409, 'a delivered one is not sent again');
    } finally {
      await rx.close();
    }
  });

  it('a receiver that never answers holds up neither uploads nor alarms', async () => {
    const rx = await receiver('hang');
    try {
      const { token } = await s.login('hang');
      const dev = await newDevice(s, token);
      await createRule(s, token, { condition: 'above', threshold: 8, deviceId: dev, webhook: rx.url });
      const arrived = rx.next();
      await upload(s, token, dev, [at(s, 0, 9)]);
      await s.parts.engine.flush();
      void s.parts.sender.deliverDue();
      await arrived; // the receiver holds this request open
      await upload(s, token, dev, [at(s, 1, 5)]);
      await upload(s, token, dev, [at(s, 2, 10)]);
      await s.parts.engine.flush();
      assert.deepEqual(
        (await alarms(s, token)).map((a) => a.status),
        ['raised', 'cleared-unacknowledged'],
      );
      const r = await s.request('GET', `/api/solutions/StudioSimulation/devices/${dev}/observations`, { token });
      assert.equal(((await r.json()) as { observations: unknown[] }).observations.length, 3);
    } finally {
      await rx.close();
    }
  });

  it("a solution's webhook gets the alarms of every rule without its own, signed with its own secret; a rule's webhook still wins", async () => {
    const shared = await receiver([204]);
    const own = await receiver([204]);
    try {
      const { token } = await s.login('solution-hook');
      const HOOK = '/api/solutions/StudioSimulation/alarm-webhook';
      assert.deepEqual(await (await s.request('GET', HOOK, { token })).json(), { webhook: null });
      const set = await s.request('PUT', HOOK, { token, body: { url: shared.url } });
      assert.equal(set.status, 200);
      const { webhook } = (await set.json()) as { webhook: { url: string; secret: string } };
      assert.equal(webhook.url, shared.url);
      assert.match(webhook.secret, /^[A-Za-z0-9_-]{43}$/, 'the signing secret is shown when set');
      const read = (await (await s.request('GET', HOOK, { token })).json()) as { webhook: Record<string, unknown> };
      assert.equal(read.webhook.url, shared.url);
      assert.equal(read.webhook.secret, undefined, 'and never again');
      const same = (await (await s.request('PUT', HOOK, { token, body: { url: shared.url } })).json()) as { webhook: Record<string, unknown> };
      assert.equal(same.webhook.secret, undefined, 'the same URL keeps its secret');
      const bad = await s.request('PUT', HOOK, { token, body: { url: 'ftp://x' } });
      assert.equal(bad.status, 400);
      assert.equal(((await bad.json()) as { field: string }).field, 'url');
      const other = await s.login('solution-hook-other');
      assert.deepEqual(await (await s.request('GET', HOOK, { token: other.token })).json(), { webhook: null }, "another group's solution of that name has its own (none)");

      const d1 = await newDevice(s, token);
      const d2 = await newDevice(s, token);
      await createRule(s, token, { condition: 'above', threshold: 8, deviceId: d1 });
      const mine = await createRule(s, token, { condition: 'above', threshold: 8, deviceId: d2, webhook: own.url });
      const got = shared.next();
      await upload(s, token, d1, [at(s, 0, 9)]);
      await s.settle();
      const r = await got;
      assert.ok(r.validSignature(webhook.secret), "signed with the solution webhook's secret");
      assert.equal((JSON.parse(r.body) as { alarm: { deviceId: string } }).alarm.deviceId, d1);
      const gotOwn = own.next();
      await upload(s, token, d2, [at(s, 1, 9)]);
      await s.settle();
      assert.ok((await gotOwn).validSignature(mine.webhook.secret));
      assert.equal(shared.received.length, 1, "a rule with its own webhook does not use the solution's");

      assert.equal((await s.request('DELETE', HOOK, { token })).status, 204);
      assert.deepEqual(await (await s.request('GET', HOOK, { token })).json(), { webhook: null });
      await upload(s, token, d1, [at(s, 2, 5)]);
      await s.settle();
      assert.equal(shared.received.length, 1, 'removed: nothing more is sent there');
    } finally {
      await shared.close();
      await own.close();
    }
  });
});
