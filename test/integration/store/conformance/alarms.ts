// Conformance cases every store backend passes (index.ts runs them on each):
// alarm rules, alarms, evaluation state and webhook deliveries.
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { getSolutionWebhook, setSolutionWebhook } from '../../../../src/alarms/notify.ts';
import type { AlarmRecord, AlarmRuleRecord, AlarmRuleSpec, WebhookDeliveryRecord } from '../../../../src/core/alarms.ts';
import type { Store } from '../../../../src/store/store.ts';
import { account, T0, type StoreRef } from './fixtures.ts';

export function alarmCases(ref: StoreRef): void {
  let store!: Store;
  before(() => {
    store = ref.store;
  });

  describe('alarms', () => {
    const a = account('alarmist');
    const other = account('stranger');
    const spec = (name: string): AlarmRuleSpec => ({
      name,
      field: 'temperature',
      condition: 'above',
      threshold: 8,
      durationMs: 600_000,
      hysteresis: 0.5,
      unit: 'C',
      severity: 'major',
      enabled: true,
      webhook: null,
    });
    const rule = (name: string, deviceId: string | null = null, group = a.groupId): AlarmRuleRecord => ({
      id: randomUUID(),
      groupId: group,
      tenantId: a.tenantId,
      solution: 'cold',
      deviceId,
      spec: spec(name),
      createdAt: T0,
      updatedAt: T0,
    });
    const alarm = (r: AlarmRuleRecord, deviceId: string, raisedAt: number): AlarmRecord => ({
      id: randomUUID(),
      groupId: r.groupId,
      solution: r.solution,
      deviceId,
      ruleId: r.id,
      status: 'raised',
      severity: 'major',
      raisedAt,
      updatedAt: raisedAt,
      reading: { ts: raisedAt, value: 9.5, unit: 'C' },
      rule: { name: r.spec.name, field: 'temperature', condition: 'above' },
      acknowledgedAt: null,
      acknowledgedBy: null,
      clearedAt: null,
      history: [{ at: raisedAt, event: 'raised', reading: { ts: raisedAt, value: 9.5, unit: 'C' } }],
    });

    it('keeps rules per group and solution; update and delete touch only the owner group', async () => {
      const r1 = rule('fridge', randomUUID());
      const r2 = rule('room');
      await store.createAlarmRule(r1);
      await store.createAlarmRule({ ...r2, createdAt: T0 + 1 });
      assert.deepEqual(await store.getAlarmRule(a.groupId, 'cold', r1.id), r1);
      assert.equal(await store.getAlarmRule(other.groupId, 'cold', r1.id), null);
      assert.equal(await store.getAlarmRule(a.groupId, 'warm', r1.id), null);
      assert.deepEqual(
        (await store.listAlarmRules(a.groupId, 'cold')).map((r) => r.id),
        [r1.id, r2.id],
      );
      assert.deepEqual(await store.listAlarmRules(other.groupId, 'cold'), []);
      assert.equal(await store.countAlarmRules(a.groupId, 'cold'), 2);
      assert.equal(await store.countAlarmRules(other.groupId, 'cold'), 0);
      const changed = { ...r1, deviceId: null, spec: { ...r1.spec, threshold: 5 }, updatedAt: T0 + 5 };
      assert.equal(await store.updateAlarmRule({ ...changed, groupId: other.groupId }), false);
      assert.equal(await store.updateAlarmRule(changed), true);
      assert.deepEqual(await store.getAlarmRule(a.groupId, 'cold', r1.id), changed);
      assert.ok((await store.allAlarmRules()).some((r) => r.id === r2.id));
      await store.setAlarmState(r2.id, 'd1', { phase: 'pending', since: T0 });
      assert.equal(await store.deleteAlarmRule(other.groupId, 'cold', r2.id), false);
      assert.equal(await store.deleteAlarmRule(a.groupId, 'cold', r2.id), true);
      assert.equal(await store.getAlarmRule(a.groupId, 'cold', r2.id), null);
      assert.ok(!(await store.listAlarmStates()).some((x) => x.ruleId === r2.id), 'a deleted rule leaves no evaluation state');
    });

    it("keeps a rule's device template and the solution's webhook (state key per group and solution)", async () => {
      const templateId = randomUUID();
      const r = { ...rule('per template'), spec: { ...spec('per template'), templateId } };
      await store.createAlarmRule(r);
      assert.equal((await store.getAlarmRule(a.groupId, 'cold', r.id))?.spec.templateId, templateId);
      assert.equal((await store.allAlarmRules()).find((x) => x.id === r.id)?.spec.templateId, templateId);
      const moved = { ...r, spec: { ...r.spec, templateId: randomUUID() }, updatedAt: T0 + 9 };
      assert.equal(await store.updateAlarmRule(moved), true);
      assert.deepEqual(await store.getAlarmRule(a.groupId, 'cold', r.id), moved);
      const none = { ...moved, spec: spec('per template') };
      assert.equal(await store.updateAlarmRule(none), true);
      assert.equal((await store.getAlarmRule(a.groupId, 'cold', r.id))?.spec.templateId, undefined, 'back to the whole solution');
      // The solution's webhook lives in the state table, one key per group and solution.
      const hook = { url: 'https://ops.example.org/reef', salt: 'abc', updatedAt: T0 };
      await setSolutionWebhook(store, a.groupId, 'cold', hook);
      assert.deepEqual(await getSolutionWebhook(store, a.groupId, 'cold'), hook);
      assert.equal(await getSolutionWebhook(store, other.groupId, 'cold'), null);
      assert.equal(await getSolutionWebhook(store, a.groupId, 'warm'), null);
      await setSolutionWebhook(store, a.groupId, 'cold', null);
      assert.equal(await getSolutionWebhook(store, a.groupId, 'cold'), null);
    });

    it('one active alarm per rule and device; compare-and-set updates; keyset paging newest first', async () => {
      const r = rule('pager');
      await store.createAlarmRule(r);
      const first = alarm(r, 'dev-a', T0 + 1000);
      assert.equal(await store.insertAlarm(first), true);
      assert.equal(await store.insertAlarm(alarm(r, 'dev-a', T0 + 2000)), false, 'a second raise of an active alarm stores nothing');
      const acked: AlarmRecord = { ...first, status: 'acknowledged', acknowledgedAt: T0 + 1500, acknowledgedBy: { tenantId: a.tenantId, name: a.name } };
      assert.equal(await store.updateAlarm(acked, 'raised'), true);
      assert.equal(await store.updateAlarm({ ...acked, status: 'cleared' }, 'raised'), false, 'stale status: nothing written');
      assert.equal(await store.insertAlarm(alarm(r, 'dev-a', T0 + 2000)), false, 'acknowledged is still active');
      assert.deepEqual(
        (await store.activeAlarmCounts(a.groupId, 'cold')).find((c) => c.deviceId === 'dev-a'),
        { deviceId: 'dev-a', count: 1 },
      );
      assert.equal(await store.updateAlarm({ ...acked, status: 'cleared', clearedAt: T0 + 1800 }, 'acknowledged'), true);
      assert.ok(!(await store.activeAlarms()).some((x) => x.id === first.id));
      // Cleared: the next breach is a new alarm.
      const later: AlarmRecord[] = [];
      for (let i = 0; i < 5; i++) {
        const x = alarm(r, `dev-${i}`, T0 + 10_000 + (i < 3 ? 0 : i) * 1000);
        assert.equal(await store.insertAlarm(x), true);
        later.push(x);
      }
      assert.deepEqual((await store.getAlarm(a.groupId, 'cold', first.id))?.status, 'cleared');
      assert.equal(await store.getAlarm(other.groupId, 'cold', first.id), null);
      const all: string[] = [];
      let after: { raisedAt: number; id: string } | undefined;
      for (;;) {
        const page = await store.listAlarms(a.groupId, 'cold', { ruleId: r.id, limit: 2, ...(after ? { after } : {}) });
        if (!page.length) break;
        all.push(...page.map((x) => x.id));
        const last = page[page.length - 1]!;
        after = { raisedAt: last.raisedAt, id: last.id };
      }
      const expected = [...later, first].sort((x, y) => y.raisedAt - x.raisedAt || (x.id < y.id ? 1 : -1)).map((x) => x.id);
      assert.deepEqual(all, expected);
      assert.deepEqual(
        (await store.listAlarms(a.groupId, 'cold', { ruleId: r.id, statuses: ['cleared'], limit: 10 })).map((x) => x.id),
        [first.id],
      );
      assert.deepEqual(
        (await store.listAlarms(a.groupId, 'cold', { deviceId: 'dev-4', limit: 10 })).map((x) => x.id),
        [later[4]!.id],
      );
      assert.deepEqual(await store.listAlarms(other.groupId, 'cold', { limit: 10 }), []);
      assert.deepEqual(await store.getAlarm(a.groupId, 'cold', later[0]!.id), later[0]);
    });

    it('raises and updates several alarms in one call: state and delivery stored with each alarm inserted, none for one already active', async () => {
      const r = rule('batch');
      await store.createAlarmRule(r);
      const active = alarm(r, 'dev-b0', T0);
      assert.equal(await store.insertAlarm(active), true);
      const delivery = (x: AlarmRecord): WebhookDeliveryRecord => ({
        id: `rd-${x.id}`,
        groupId: x.groupId,
        solution: x.solution,
        ruleId: x.ruleId,
        alarmId: x.id,
        // Delivered: the suite's test of due deliveries must not see it.
        status: 'delivered',
        attempts: 1,
        nextAt: T0,
        createdAt: T0,
        updatedAt: T0,
        url: 'http://127.0.0.1:9/hook',
        body: '{"event":"raised"}',
        lastError: null,
      });
      const again = alarm(r, 'dev-b0', T0 + 1);
      const fresh = alarm(r, 'dev-b1', T0 + 1);
      const quiet = alarm(r, 'dev-b2', T0 + 1);
      const state = (x: AlarmRecord) => ({ phase: 'raised' as const, since: 0, alarmId: x.id });
      assert.deepEqual(
        await store.raiseAlarms([
          { alarm: again, state: state(again), delivery: delivery(again) },
          { alarm: fresh, state: state(fresh), delivery: delivery(fresh) },
          { alarm: quiet, state: state(quiet), delivery: null },
        ]),
        [false, true, true],
      );
      assert.equal(await store.getAlarm(a.groupId, 'cold', again.id), null, 'a second raise of an active alarm stores nothing');
      assert.deepEqual(await store.getAlarm(a.groupId, 'cold', fresh.id), fresh);
      assert.deepEqual(await store.getAlarm(a.groupId, 'cold', quiet.id), quiet);
      const states = (await store.listAlarmStates()).filter((x) => x.ruleId === r.id);
      assert.deepEqual(states.map((x) => x.deviceId).sort(), ['dev-b1', 'dev-b2']);
      assert.equal(await store.getDelivery(a.groupId, 'cold', `rd-${again.id}`), null);
      assert.deepEqual(await store.getDelivery(a.groupId, 'cold', `rd-${fresh.id}`), delivery(fresh));
      assert.deepEqual(await store.raiseAlarms([]), []);
      // Several compare-and-set updates in one call: one whose status moved on is not written.
      const ackd: AlarmRecord = { ...quiet, status: 'acknowledged', acknowledgedAt: T0 + 2, acknowledgedBy: { tenantId: a.tenantId, name: a.name } };
      assert.equal(await store.updateAlarm(ackd, 'raised'), true);
      const clearedFresh: AlarmRecord = { ...fresh, status: 'cleared-unacknowledged', clearedAt: T0 + 3 };
      assert.deepEqual(
        await store.updateAlarms([
          { alarm: clearedFresh, expect: 'raised' },
          { alarm: { ...quiet, status: 'cleared-unacknowledged', clearedAt: T0 + 3 }, expect: 'raised' },
        ]),
        [true, false],
      );
      assert.deepEqual(await store.getAlarm(a.groupId, 'cold', fresh.id), clearedFresh);
      assert.deepEqual(await store.getAlarm(a.groupId, 'cold', quiet.id), ackd);
      assert.deepEqual(await store.updateAlarms([]), []);
    });

    it('keeps evaluation state per rule and device', async () => {
      await store.setAlarmState('r-x', 'd-1', { phase: 'pending', since: T0 });
      await store.setAlarmState('r-x', 'd-1', { phase: 'raised', since: T0, alarmId: 'A' });
      await store.setAlarmState('r-x', 'd-2', { phase: 'pending', since: T0 + 1 });
      await store.setAlarmState('r-x', 'd-2', null);
      assert.deepEqual(
        (await store.listAlarmStates()).filter((x) => x.ruleId === 'r-x'),
        [{ ruleId: 'r-x', deviceId: 'd-1', state: { phase: 'raised', since: T0, alarmId: 'A' } }],
      );
    });

    it('webhook deliveries: due ones by time, listed per status with keyset paging', async () => {
      const d = (i: number, nextAt: number): WebhookDeliveryRecord => ({
        id: `dl-${i}`,
        groupId: a.groupId,
        solution: 'cold',
        ruleId: 'r',
        alarmId: 'al',
        status: 'pending',
        attempts: 0,
        nextAt,
        createdAt: T0 + i,
        updatedAt: T0 + i,
        url: 'http://127.0.0.1:9/hook',
        body: '{"event":"raised"}',
        lastError: null,
      });
      for (let i = 0; i < 4; i++) await store.insertDelivery(d(i, T0 + 100 - i));
      assert.deepEqual(
        (await store.dueDeliveries(T0 + 98, 10)).map((x) => x.id),
        ['dl-3', 'dl-2'],
      );
      const dead = { ...d(1, T0), status: 'dead' as const, attempts: 8, lastError: 'HTTP 500' };
      await store.updateDelivery(dead);
      await store.updateDelivery({ ...d(0, T0), status: 'dead', attempts: 8 });
      assert.deepEqual(await store.getDelivery(a.groupId, 'cold', 'dl-1'), dead);
      assert.equal(await store.getDelivery(other.groupId, 'cold', 'dl-1'), null);
      assert.deepEqual(
        (await store.dueDeliveries(T0 + 1000, 10)).map((x) => x.id),
        ['dl-3', 'dl-2'],
      );
      const p1 = await store.listDeliveries(a.groupId, 'cold', 'dead', 1);
      assert.deepEqual(
        p1.map((x) => x.id),
        ['dl-1'],
      );
      const p2 = await store.listDeliveries(a.groupId, 'cold', 'dead', 1, { createdAt: p1[0]!.createdAt, id: p1[0]!.id });
      assert.deepEqual(
        p2.map((x) => x.id),
        ['dl-0'],
      );
      assert.deepEqual(await store.listDeliveries(other.groupId, 'cold', 'dead', 10), []);
    });
  });
}
