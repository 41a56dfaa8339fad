// Conformance cases every store backend passes (index.ts runs them on each):
// retention.
import { it, before } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ObservationRecord } from '../../../../src/core/types.ts';
import type { Store } from '../../../../src/store/store.ts';
import { batchOf } from '../../../../src/core/observation-batch.ts';
import { account, rejectsWith, type StoreRef } from './fixtures.ts';

export function retentionCases(ref: StoreRef): void {
  let store!: Store;
  before(() => {
    store = ref.store;
  });

  it('retention: expired observations of a solution go, other solutions keep theirs', async () => {
    const now = Date.now();
    const a = account('olga');
    const [short1, short2, long1] = [randomUUID(), randomUUID(), randomUUID()];
    const mk = (id: string, solution: string) => store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution, deviceType: 'VirtualDevice', domainInfo: {} });
    await mk(short1, 'short');
    await mk(long1, 'long');
    const ancient = Date.UTC(1971, 5, 1);
    const old = now - 400 * 86_400_000;
    const recent = now - 3_600_000;
    const obs = (ts: number, t: number): ObservationRecord => ({ ts, temperature: t, extra: null });
    await store.insertObservations(short1, batchOf([obs(ancient, 1), obs(old, 2), obs(recent, 3)]));
    await store.insertObservations(long1, batchOf([obs(ancient, 1), obs(old, 2), obs(recent, 3)]));
    await rejectsWith(store.setRetention(a.groupId, 'nope', 7), 'SOLUTION_NOT_FOUND');
    await rejectsWith(store.setRetention(a.groupId, 'short', 0), 'VALIDATION_FAILED');
    assert.equal(await store.getRetention(a.groupId, 'short'), null);
    await store.setRetention(a.groupId, 'short', 7);
    assert.equal(await store.getRetention(a.groupId, 'short'), 7);
    assert.equal(await store.getRetention(a.groupId, 'long'), null);
    // A device made after the setting follows it too; one whose only observation expires loses its latest.
    await mk(short2, 'short');
    await store.insertObservations(short2, batchOf([obs(old, 5)]));
    await store.maintain(now);
    const tss = async (id: string) => (await store.queryObservations(id, { limit: 10 })).observations.map((o) => o.ts);
    assert.deepEqual(await tss(short1), [recent]);
    assert.deepEqual(await tss(short2), []);
    assert.deepEqual(await tss(long1), [recent, old, ancient]);
    const latest = await store.latestObservations(a.groupId, 'short');
    assert.deepEqual(
      latest.map((l) => [l.deviceId, l.observation.ts]),
      [[short1, recent]],
    );
    // Lifting the retention keeps what arrives from then on.
    await store.setRetention(a.groupId, 'short', null);
    await store.insertObservations(short1, batchOf([obs(old, 9)]));
    await store.maintain(now);
    assert.deepEqual(await tss(short1), [recent, old]);
  });
}
