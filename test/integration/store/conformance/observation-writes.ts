// Conformance cases every store backend passes (index.ts runs them on each):
// observation writes: batches, last write wins, free fields, all-or-nothing, exact round trips.
import { it, before } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ObservationRecord } from '../../../../src/core/types.ts';
import type { Store } from '../../../../src/store/store.ts';
import { batchOf, type ObservationBatch } from '../../../../src/core/observation-batch.ts';
import { account, T0, series, rejectsWith, type StoreRef } from './fixtures.ts';

export function observationWriteCases(ref: StoreRef): void {
  let store!: Store;
  before(() => {
    store = ref.store;
  });

  it('re-sending the same timestamps replaces instead of duplicating (last write wins)', async () => {
    const a = account('hank');
    const id = randomUUID();
    await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 's', deviceType: 'VirtualDevice', domainInfo: {} });
    await store.insertObservations(id, batchOf(series(5)));
    await store.insertObservations(id, batchOf(series(5).map((o) => ({ ...o, temperature: 99, extra: { humidity: 40 } }))));
    const page = await store.queryObservations(id, { limit: 100 });
    assert.equal(page.observations.length, 5);
    assert.ok(page.observations.every((o) => o.temperature === 99 && (o.extra as any).humidity === 40));
  });

  it('keeps free-form fields verbatim and null temperatures', async () => {
    const a = account('ivy');
    const id = randomUUID();
    await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 's', deviceType: 'VirtualDevice', domainInfo: {} });
    const extra = { humidity: 41.5, accelerometer: { x: 1, y: -2, z: 0.5 }, note: 'ünïcødé ✓', tags: ['a', 'b'] };
    await store.insertObservations(
      id,
      batchOf([
        { ts: T0, temperature: null, extra },
        { ts: T0 + 1, temperature: 1.2345, extra: { tags: ['b'] } },
      ]),
    );
    const page = await store.queryObservations(id, { limit: 10 });
    assert.deepEqual(page.observations, [
      { ts: T0 + 1, temperature: 1.2345, extra: { tags: ['b'] } },
      { ts: T0, temperature: null, extra },
    ]);
    const tagged = await store.queryObservations(id, { limit: 10, tag: 'a' });
    assert.deepEqual(
      tagged.observations.map((o) => o.ts),
      [T0],
    );
  });

  it('insertObservationsMany writes several devices at once and reports the missing ones', async () => {
    const a = account('many');
    const [d1, d2, gone] = [randomUUID(), randomUUID(), randomUUID()];
    for (const id of [d1, d2]) await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 'many', deviceType: 'VirtualDevice', domainInfo: {} });
    const r = await store.insertObservationsMany([
      { deviceId: d1, batch: batchOf(series(3)) },
      { deviceId: gone, batch: batchOf(series(2)) },
      { deviceId: d2, batch: batchOf([{ ts: T0 + 9, temperature: 9, extra: { k: 'v' } }]) },
    ]);
    assert.deepEqual(r, { written: 4, missing: [gone] });
    assert.equal((await store.queryObservations(d1, { limit: 10 })).observations.length, 3);
    assert.deepEqual((await store.queryObservations(d2, { limit: 10 })).observations, [{ ts: T0 + 9, temperature: 9, extra: { k: 'v' } }]);
    const latest = await store.latestObservations(a.groupId, 'many');
    assert.deepEqual(
      latest.map((l) => [l.deviceId, l.observation.ts]).sort(),
      [
        [d1, T0 + 2000],
        [d2, T0 + 9],
      ].sort(),
    );
  });

  it('a batch for an unknown device stores nothing and says DEVICE_NOT_FOUND', async () => {
    await rejectsWith(store.insertObservations(randomUUID(), batchOf(series(3))), 'DEVICE_NOT_FOUND');
    await rejectsWith(store.queryObservations(randomUUID(), { limit: 1 }), 'DEVICE_NOT_FOUND');
  });

  it('concurrent batches each settle on their own: an unknown device fails only its own, later writes win in call order', async () => {
    const a = account('conc');
    const ids = [randomUUID(), randomUUID()];
    for (const id of ids) await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 'conc', deviceType: 'VirtualDevice', domainInfo: {} });
    // Handed in together without awaiting in between, as concurrent uploads are (SQLite commits
    // them as one group).
    const results = await Promise.allSettled([
      store.insertObservations(ids[0]!, batchOf(series(3))),
      store.insertObservations(randomUUID(), batchOf(series(3))),
      store.insertObservations(ids[1]!, batchOf(series(2))),
      store.insertObservations(ids[0]!, batchOf(series(3).map((o) => ({ ...o, temperature: -7 })))),
    ]);
    assert.deepEqual(
      results.map((r) => (r.status === 'fulfilled' ? r.value.written : (r.reason as { code?: string }).code)),
      [3, 'DEVICE_NOT_FOUND', 2, 3],
    );
    const page = await store.queryObservations(ids[0]!, { limit: 10 });
    assert.deepEqual(
      page.observations.map((o) => o.temperature),
      [-7, -7, -7],
    );
    assert.equal((await store.queryObservations(ids[1]!, { limit: 10 })).observations.length, 2);
  });

  it('repeated timestamps within one batch: the later row wins, nothing duplicates', async () => {
    const a = account('mia');
    const id = randomUUID();
    await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 's', deviceType: 'VirtualDevice', domainInfo: {} });
    await store.insertObservations(
      id,
      batchOf([
        { ts: T0, temperature: 1, extra: null },
        { ts: T0 + 1, temperature: 2, extra: null },
        { ts: T0, temperature: 3, extra: { v: 'second' } },
      ]),
    );
    const page = await store.queryObservations(id, { limit: 10 });
    assert.deepEqual(page.observations, [
      { ts: T0 + 1, temperature: 2, extra: null },
      { ts: T0, temperature: 3, extra: { v: 'second' } },
    ]);
  });

  it('batches as the upload scanner builds them (typed arrays, no free fields) store what their records would: nulls, repeats, replacing stored rows, the latest', async () => {
    const a = account('pia');
    const id = randomUUID();
    await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 'packed', deviceType: 'VirtualDevice', domainInfo: {} });
    const pack = (rows: [number, number | null][]): ObservationBatch => {
      let newest = 0;
      for (let i = 0; i < rows.length; i++) if (rows[i]![0] >= rows[newest]![0]) newest = i;
      return { ts: Float64Array.from(rows, (r) => r[0]), temperature: Float64Array.from(rows, (r) => r[1] ?? Number.NaN), extra: null, newest };
    };
    // Ascending, a null, a timestamp past 2^32 ms and one before 1970 (negative): fresh rows.
    assert.deepEqual(
      await store.insertObservations(
        id,
        pack([
          [-86_400_000, -0.5],
          [T0, 21.5],
          [T0 + 1000, null],
          [T0 + 2000, 0.1 + 0.2],
        ]),
      ),
      { written: 4 },
    );
    // Over stored rows (same timestamps replace) and unordered with a repeat (the later wins).
    assert.deepEqual(
      await store.insertObservations(
        id,
        pack([
          [T0 + 3000, 7],
          [T0 + 1000, 8],
          [T0 + 3000, 9],
        ]),
      ),
      { written: 3 },
    );
    const page = await store.queryObservations(id, { limit: 10, from: -86_400_000 });
    assert.deepEqual(page.observations, [
      { ts: T0 + 3000, temperature: 9, extra: null },
      { ts: T0 + 2000, temperature: 0.1 + 0.2, extra: null },
      { ts: T0 + 1000, temperature: 8, extra: null },
      { ts: T0, temperature: 21.5, extra: null },
      { ts: -86_400_000, temperature: -0.5, extra: null },
    ]);
    // A second device: a batch ending in a null temperature is its latest as it is.
    const id2 = randomUUID();
    await store.createDevice({ id: id2, tenantId: a.tenantId, groupId: a.groupId, solution: 'packed', deviceType: 'VirtualDevice', domainInfo: {} });
    await store.insertObservations(
      id2,
      pack([
        [T0, 1],
        [T0 + 5, null],
      ]),
    );
    const latest = await store.latestObservations(a.groupId, 'packed');
    assert.deepEqual(latest.find((l) => l.deviceId === id)?.observation, { ts: T0 + 3000, temperature: 9, extra: null });
    assert.deepEqual(latest.find((l) => l.deviceId === id2)?.observation, { ts: T0 + 5, temperature: null, extra: null });
    await rejectsWith(store.insertObservations(randomUUID(), pack([[T0, 1]])), 'DEVICE_NOT_FOUND');
  });

  it('any timestamp from 1970 to 9999 and any double temperature round-trip exactly', async () => {
    const a = account('ned');
    const id = randomUUID();
    await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 's', deviceType: 'VirtualDevice', domainInfo: {} });
    const rows: ObservationRecord[] = [
      { ts: 0, temperature: 0.1 + 0.2, extra: null },
      { ts: Date.UTC(1999, 11, 31, 23, 59, 59, 999), temperature: -273.15, extra: null },
      { ts: Date.UTC(2038, 0, 19, 3, 14, 8, 1), temperature: 1e-300, extra: null },
      // biome-ignore lint/correctness/noPrecisionLoss: a number past 2^53 on purpose: it must come back as JavaScript parses it
      { ts: Date.UTC(9999, 11, 31, 23, 59, 59, 999), temperature: 123456.7891, extra: { big: 12345678901234567 } },
    ];
    await store.insertObservations(id, batchOf(rows));
    const page = await store.queryObservations(id, { limit: 10 });
    assert.deepEqual(page.observations, [...rows].reverse());
    const latest = await store.latestObservations(a.groupId, 's');
    assert.deepEqual(latest.find((l) => l.deviceId === id)?.observation, rows[3]);
  });
}
