// Every kind of object an account can create has a quota (docs/security.md "Quotas"): solutions,
// device templates and alarm rules are counted per group, and requests racing at the limit never
// pass it together; a refusal is 403 QUOTA_EXCEEDED naming the quota. Before, an account with zero
// device quota made 300 solutions in half a second through device templates.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createAlarmComponent } from '../../../src/alarms/component.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/pg.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

for (const backend of ['sqlite', 'postgres'] as const) {
  describe(`object quotas (${backend})`, () => {
    let s: TestServer;
    let db: TestDatabase | undefined;
    before(async () => {
      if (backend === 'postgres') db = await createTestDatabase('reef_quota_objects');
      s = await startTestServer({ quotas: { devices: 1, solutions: 3, templates: 5, alarmRules: 4 }, ...(db ? { databaseUrl: db.url } : {}) }, [
        createAlarmComponent({ silenceCheckMs: 0, deliveryPollMs: 0 }),
      ]);
    });
    after(async () => {
      await s?.close();
      await db?.drop();
    });

    const codeOf = async (r: Response) => (await r.json()) as { code: string; message: string };

    it('200 parallel templates in new solutions make at most the solutions quota of solutions', async () => {
      const a = await s.login('spammer');
      // 200 at once: under the 256 connections one address may hold (docs/security.md "Limits").
      const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => s.request('POST', `/api/solutions/spam${i}/devicetemplates`, { token: a.token, body: { name: `T${i}`, sensors: [] } })));
      const made = answers.filter((r) => r.status === 201).length;
      assert.equal(made, 3, 'three solutions, one template each');
      for (const r of answers.filter((x) => x.status !== 201)) {
        assert.equal(r.status, 403);
        const b = await codeOf(r);
        assert.equal(b.code, 'QUOTA_EXCEEDED');
        assert.match(b.message, /^solutions quota: this account's group may have 3 solutions/);
      }
      const counts = await s.services.store.countGroupObjects(a.groupId);
      assert.deepEqual(counts, { solutions: 3, templates: 3, alarmRules: 0 });
      // A first device in a new solution is refused too; one in an existing solution is not.
      const fresh = await s.request('POST', '/api/solutions/another/devices', { token: a.token, body: { deviceType: 'VirtualDevice' } });
      assert.equal(fresh.status, 403);
      assert.match((await codeOf(fresh)).message, /^solutions quota/);
      const inOld = await s.request('POST', '/api/solutions/spam0/devices', { token: a.token, body: { deviceType: 'VirtualDevice' } });
      assert.equal(inOld.status, 201);
    });

    it('templates and alarm rules: racing creations stop at the quota', async () => {
      const a = await s.login('builder');
      const t = await Promise.all(Array.from({ length: 20 }, (_, i) => s.request('POST', '/api/solutions/sandbox/devicetemplates', { token: a.token, body: { name: `T${i}`, sensors: [] } })));
      assert.equal(t.filter((r) => r.status === 201).length, 5);
      for (const r of t.filter((x) => x.status !== 201)) assert.match((await codeOf(r)).message, /^device templates quota: .* may have 5 device templates/);
      const rules = await Promise.all(
        Array.from({ length: 20 }, (_, i) => s.request('POST', '/api/solutions/sandbox/alarm-rules', { token: a.token, body: { condition: 'above', threshold: 10 + i } })),
      );
      assert.equal(rules.filter((r) => r.status === 201).length, 4);
      for (const r of rules.filter((x) => x.status !== 201)) {
        assert.equal(r.status, 403);
        assert.match((await codeOf(r)).message, /^alarm rules quota: .* may have 4 alarm rules/);
      }
      assert.deepEqual(await s.services.store.countGroupObjects(a.groupId), { solutions: 1, templates: 5, alarmRules: 4 });
      // Another account's group has its own quota.
      const b = await s.login('neighbour');
      assert.equal((await s.request('POST', '/api/solutions/sandbox/alarm-rules', { token: b.token, body: { condition: 'above', threshold: 9 } })).status, 201);
    });
  });
}
