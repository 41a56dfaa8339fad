// Conformance cases every store backend passes (index.ts runs them on each):
// observation reads: device pages, solution pages, tag filters, latest of all, buckets, and the
// JSON fast paths.
import { it, before } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ObservationRecord } from '../../../../src/core/types.ts';
import { latestJson, pageJson } from '../../../../src/core/observation-json.ts';
import type { ObservationQuery, Store } from '../../../../src/store/store.ts';
import { batchOf } from '../../../../src/core/observation-batch.ts';
import { account, T0, series, rejectsWith, type StoreRef } from './fixtures.ts';

export function observationReadCases(ref: StoreRef): void {
  let store!: Store;
  before(() => {
    store = ref.store;
  });

  it('stores a batch and reads it newest first with keyset paging: no gap, no duplicate', async () => {
    const a = account('frank');
    const id = randomUUID();
    await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 's', deviceType: 'VirtualDevice', domainInfo: {} });
    const rows = series(2500);
    assert.deepEqual(await store.insertObservations(id, batchOf(rows)), { written: 2500 });
    const seen: number[] = [];
    let before: number | undefined;
    for (;;) {
      const page = await store.queryObservations(id, { limit: 1000, ...(before === undefined ? {} : { before }) });
      seen.push(...page.observations.map((o) => o.ts));
      if (page.nextBefore === null) break;
      before = page.nextBefore;
    }
    assert.equal(seen.length, 2500);
    assert.equal(new Set(seen).size, 2500);
    assert.deepEqual(seen, rows.map((r) => r.ts).reverse());
  });

  it('solution-wide pages: every observation in the range once, device by device, newest first; tag filter; other groups and solutions never', async () => {
    const a = account('solwide');
    const ids: string[] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    for (const id of ids) await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 'wide', deviceType: 'VirtualDevice', domainInfo: {} });
    // Device 0: 700 rows, device 1: none, device 2: 5 rows at the same instants as device 0, device 3: 300 rows.
    await store.insertObservations(ids[0]!, batchOf(series(700)));
    await store.insertObservations(ids[2]!, batchOf(series(5).map((r, i) => ({ ...r, extra: i % 2 ? { tags: ['hot'] } : null }))));
    await store.insertObservations(ids[3]!, batchOf(series(300, 1000, T0 + 10_000)));
    // Noise that must never show: another solution of the group, another group.
    const elsewhere = randomUUID();
    await store.createDevice({ id: elsewhere, tenantId: a.tenantId, groupId: a.groupId, solution: 'other', deviceType: 'VirtualDevice', domainInfo: {} });
    await store.insertObservations(elsewhere, batchOf(series(50)));
    const b = account('solwide-b');
    const theirs = randomUUID();
    await store.createDevice({ id: theirs, tenantId: b.tenantId, groupId: b.groupId, solution: 'wide', deviceType: 'VirtualDevice', domainInfo: {} });
    await store.insertObservations(theirs, batchOf(series(50)));

    const seen: string[] = [];
    let after: { device: number; ts: number } | undefined;
    let pages = 0;
    for (;;) {
      const page = await store.querySolutionObservations(a.groupId, 'wide', { limit: 64, ...(after ? { after } : {}) });
      assert.ok(page.rows.length <= 64);
      seen.push(...page.rows.map((r) => `${r.deviceId}@${r.observation.ts}`));
      pages++;
      if (!page.next) break;
      after = page.next;
    }
    const expected = [
      ...series(700)
        .map((r) => `${ids[0]}@${r.ts}`)
        .reverse(),
      ...series(5)
        .map((r) => `${ids[2]}@${r.ts}`)
        .reverse(),
      ...series(300, 1000, T0 + 10_000)
        .map((r) => `${ids[3]}@${r.ts}`)
        .reverse(),
    ];
    assert.deepEqual(seen, expected, 'no gap, no duplicate, device by device, newest first');
    assert.equal(pages, Math.ceil(expected.length / 64));

    // A range: [from, to) on every device.
    const ranged = await store.querySolutionObservations(a.groupId, 'wide', { limit: 10_000, from: T0 + 2000, to: T0 + 12_000 });
    assert.deepEqual(
      ranged.rows.map((r) => `${r.deviceId}@${r.observation.ts}`),
      [
        ...series(10, 1000, T0 + 2000)
          .map((r) => `${ids[0]}@${r.ts}`)
          .reverse(),
        ...series(3, 1000, T0 + 2000)
          .map((r) => `${ids[2]}@${r.ts}`)
          .reverse(),
        ...series(2, 1000, T0 + 10_000)
          .map((r) => `${ids[3]}@${r.ts}`)
          .reverse(),
      ],
    );
    assert.equal(ranged.next, null);
    // One tag.
    const hot = await store.querySolutionObservations(a.groupId, 'wide', { limit: 100, tag: 'hot' });
    assert.deepEqual(
      hot.rows.map((r) => [r.deviceId, r.observation.ts]),
      [
        [ids[2], T0 + 3000],
        [ids[2], T0 + 1000],
      ],
    );
    assert.deepEqual(hot.rows[0]!.observation.extra, { tags: ['hot'] });
    // Nothing of another group even with its own solution name, nothing for a solution it lacks.
    assert.deepEqual((await store.querySolutionObservations(a.groupId, 'nope', { limit: 10 })).rows, []);
    const bPage = await store.querySolutionObservations(b.groupId, 'wide', { limit: 1000 });
    assert.deepEqual([...new Set(bPage.rows.map((r) => r.deviceId))], [theirs]);
    // A cursor naming another group's device position only positions the walk: still only a's rows.
    const forged = await store.querySolutionObservations(a.groupId, 'wide', { limit: 1000, after: { device: 0, ts: Number.MAX_SAFE_INTEGER } });
    assert.ok(forged.rows.every((r) => ids.includes(r.deviceId)));
  });

  it('solution-wide pages over many devices, most of them empty in the range: small pages walk them all in order', async () => {
    // 60 devices; every fifth holds rows in the range (and one row before it that must not show).
    // Backends may walk devices in batches: pages of 3 cross every batch boundary.
    const a = account('solmany');
    const expected: string[] = [];
    for (let d = 0; d < 60; d++) {
      const id = randomUUID();
      await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 'many', deviceType: 'VirtualDevice', domainInfo: {} });
      if (d % 5 !== 0) continue;
      const rows = [{ ts: T0 - 60_000, temperature: 1, extra: null }, ...series(1 + (d % 4), 1000, T0 + d)];
      await store.insertObservations(id, batchOf(rows));
      expected.push(
        ...rows
          .slice(1)
          .map((r) => `${id}@${r.ts}`)
          .reverse(),
      );
    }
    const seen: string[] = [];
    let after: { device: number; ts: number } | undefined;
    for (let pages = 0; pages < 100; pages++) {
      const page = await store.querySolutionObservations(a.groupId, 'many', { limit: 3, from: T0, to: T0 + 3_600_000, ...(after ? { after } : {}) });
      seen.push(...page.rows.map((r) => `${r.deviceId}@${r.observation.ts}`));
      if (!page.next) break;
      after = page.next;
    }
    assert.deepEqual(seen, expected);
    // A range no device has rows in: nothing, and no next page.
    const none = await store.querySolutionObservations(a.groupId, 'many', { limit: 3, from: T0 + 7_200_000, to: T0 + 9_000_000 });
    assert.deepEqual([none.rows, none.next], [[], null]);
  });

  it('from is inclusive, to exclusive', async () => {
    const a = account('gina');
    const id = randomUUID();
    await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 's', deviceType: 'VirtualDevice', domainInfo: {} });
    await store.insertObservations(id, batchOf(series(10)));
    const page = await store.queryObservations(id, { from: T0 + 2000, to: T0 + 5000, limit: 100 });
    assert.deepEqual(
      page.observations.map((o) => o.ts),
      [T0 + 4000, T0 + 3000, T0 + 2000],
    );
    assert.equal(page.nextBefore, null);
  });

  it('a tag-filtered page examines at most maxScan readings and ends there with a cursor; following it finds every match', async () => {
    const a = account('scan');
    const id = randomUUID();
    await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 's', deviceType: 'VirtualDevice', domainInfo: {} });
    // 50 readings, newest first at index 0; three carry the tag: the 6th, 21st and 46th newest.
    const rows = series(50).map((r, i) => ({ ...r, extra: [44, 29, 4].includes(i) ? { tags: ['rare'] } : { tags: ['common'] } }));
    await store.insertObservations(id, batchOf(rows));
    const newest = (k: number) => T0 + (50 - k) * 1000; // the k-th newest (1-based)
    const pages: { ts: number[]; nextBefore: number | null }[] = [];
    let before: number | undefined;
    for (let guard = 0; guard < 10; guard++) {
      const page = await store.queryObservations(id, { limit: 100, tag: 'rare', maxScan: 10, ...(before === undefined ? {} : { before }) });
      pages.push({ ts: page.observations.map((o) => o.ts), nextBefore: page.nextBefore });
      if (page.nextBefore === null) break;
      before = page.nextBefore;
    }
    assert.deepEqual(pages, [
      { ts: [newest(6)], nextBefore: newest(10) },
      { ts: [], nextBefore: newest(20) },
      { ts: [newest(21)], nextBefore: newest(30) },
      { ts: [], nextBefore: newest(40) },
      { ts: [newest(46)], nextBefore: null },
    ]);
    // A full page before the budget runs out pages as usual.
    const full = await store.queryObservations(id, { limit: 2, tag: 'common', maxScan: 10 });
    assert.deepEqual(
      full.observations.map((o) => o.ts),
      [newest(1), newest(2)],
    );
    assert.equal(full.nextBefore, newest(2));
    // Tags that need escaping in JSON are found too.
    await store.insertObservations(id, batchOf([{ ts: newest(1) + 1000, temperature: 1, extra: { tags: ['quo"te', 'back\\slash'] } }]));
    for (const tag of ['quo"te', 'back\\slash']) {
      const escaped = await store.queryObservations(id, { limit: 10, tag, maxScan: 10 });
      assert.deepEqual(
        escaped.observations.map((o) => o.ts),
        [newest(1) + 1000],
        tag,
      );
    }
    // Without a tag, maxScan changes nothing.
    const plain = await store.queryObservations(id, { limit: 30, maxScan: 10 });
    assert.equal(plain.observations.length, 30);
    assert.equal(plain.nextBefore, newest(29));
  });

  it('a tag-filtered solution page examines at most maxScan readings over its devices and ends there with a cursor; following it finds every match once', async () => {
    const a = account('scanwide');
    const [da, db, dc] = [randomUUID(), randomUUID(), randomUUID()];
    for (const id of [da, db, dc]) await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 'sw', deviceType: 'VirtualDevice', domainInfo: {} });
    // Page order: device a's 30 readings (the 5th and 25th newest tagged), b's 15 without free
    // fields, c's 25 (the 12th newest tagged), newest first within each.
    const tagged = (n: number, start: number, rare: number[]) => series(n, 1000, start).map((r, i) => ({ ...r, extra: { tags: [rare.includes(n - i) ? 'rare' : 'common'] } }));
    await store.insertObservations(da, batchOf(tagged(30, T0, [5, 25])));
    await store.insertObservations(db, batchOf(series(15, 1000, T0 + 50_000)));
    await store.insertObservations(dc, batchOf(tagged(25, T0 + 100_000, [12])));
    const b = account('scanwide-b');
    const theirs = randomUUID();
    await store.createDevice({ id: theirs, tenantId: b.tenantId, groupId: b.groupId, solution: 'sw', deviceType: 'VirtualDevice', domainInfo: {} });
    await store.insertObservations(theirs, batchOf(tagged(10, T0, [1, 2, 3])));
    const tsA = (k: number) => T0 + (30 - k) * 1000; // the k-th newest of a
    const tsB = (k: number) => T0 + 50_000 + (15 - k) * 1000;
    const tsC = (k: number) => T0 + 100_000 + (25 - k) * 1000;
    const pages: { rows: string[]; next: number | null }[] = [];
    const cursors: number[] = [];
    let after: { device: number; ts: number } | undefined;
    for (let guard = 0; guard < 20; guard++) {
      const page = await store.querySolutionObservations(a.groupId, 'sw', { limit: 100, tag: 'rare', maxScan: 10, ...(after ? { after } : {}) });
      pages.push({ rows: page.rows.map((r) => `${r.deviceId}@${r.observation.ts}`), next: page.next?.ts ?? null });
      if (!page.next) break;
      cursors.push(page.next.device);
      after = page.next;
    }
    assert.deepEqual(pages, [
      { rows: [`${da}@${tsA(5)}`], next: tsA(10) },
      { rows: [], next: tsA(20) },
      // The budget ends with a's readings: the cursor stays on a's last one.
      { rows: [`${da}@${tsA(25)}`], next: tsA(30) },
      { rows: [], next: tsB(10) },
      { rows: [], next: tsC(5) },
      { rows: [`${dc}@${tsC(12)}`], next: tsC(15) },
      { rows: [], next: null },
    ]);
    // The cursor names the device it stopped on: a three times, then b, then c twice.
    assert.equal(new Set(cursors.slice(0, 3)).size, 1);
    assert.equal(new Set(cursors.slice(4, 6)).size, 1);
    assert.ok(cursors[0]! < cursors[3]! && cursors[3]! < cursors[4]!);
    // A budget larger than the range: one page, every match, no cursor.
    const whole = await store.querySolutionObservations(a.groupId, 'sw', { limit: 100, tag: 'rare', maxScan: 100 });
    assert.deepEqual(
      whole.rows.map((r) => r.observation.ts),
      [tsA(5), tsA(25), tsC(12)],
    );
    assert.equal(whole.next, null);
    // A full page before the budget runs out pages as usual, from its last row.
    const full = await store.querySolutionObservations(a.groupId, 'sw', { limit: 2, tag: 'common', maxScan: 10 });
    assert.deepEqual(
      full.rows.map((r) => r.observation.ts),
      [tsA(1), tsA(2)],
    );
    assert.equal(full.next?.ts, tsA(2));
    // A forged cursor only positions the walk: the other group's tagged readings never show.
    const forged = await store.querySolutionObservations(a.groupId, 'sw', { limit: 100, tag: 'rare', maxScan: 1000, after: { device: 0, ts: Number.MAX_SAFE_INTEGER } });
    assert.ok(forged.rows.every((r) => r.deviceId !== theirs));
  });

  it('latest of all devices follows the newest timestamp, not the last insert', async () => {
    const a = account('jack');
    const [d1, d2, d3] = [randomUUID(), randomUUID(), randomUUID()];
    for (const id of [d1, d2, d3]) await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 'latest', deviceType: 'VirtualDevice', domainInfo: {} });
    await store.insertObservations(d1, batchOf(series(3)));
    await store.insertObservations(d1, batchOf([{ ts: T0 - 5000, temperature: -1, extra: null }])); // older: latest unchanged
    await store.insertObservations(d2, batchOf([{ ts: T0 + 7, temperature: 7, extra: { k: 1 } }]));
    const latest = await store.latestObservations(a.groupId, 'latest');
    assert.deepEqual(
      latest.map((l) => [l.deviceId, l.observation.ts]).sort(),
      [
        [d1, T0 + 2000],
        [d2, T0 + 7],
      ].sort(),
    );
    assert.deepEqual(latest.find((l) => l.deviceId === d2)!.observation, { ts: T0 + 7, temperature: 7, extra: { k: 1 } });
    assert.deepEqual(await store.latestObservations('G-other', 'latest'), []);
  });

  it('the latest-of-all JSON fast path, where a backend has one, equals rendering the records', async () => {
    if (!store.latestObservationsJson) return;
    const a = account('fast');
    assert.equal((await store.latestObservationsJson(a.groupId, 'fast')).toString(), '[]');
    for (let i = 0; i < 5; i++) {
      const id = randomUUID();
      await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 'fast', deviceType: 'VirtualDevice', domainInfo: {} });
      if (i === 3) continue; // a device without observations is not listed
      await store.insertObservations(
        id,
        batchOf([
          { ts: T0 + i, temperature: i === 1 ? null : 1.5 + i, extra: i === 2 ? { note: 'ü "q"', nested: { a: [1, true] } } : null },
          { ts: T0 - 1000, temperature: 99, extra: null },
        ]),
      );
    }
    assert.equal((await store.latestObservationsJson(a.groupId, 'fast')).toString(), latestJson(await store.latestObservations(a.groupId, 'fast')));
  });

  it("a device page's JSON fast path, where a backend has one, equals rendering the records, cursor included", async () => {
    if (!store.observationPageJson) return;
    const a = account('page');
    const id = randomUUID();
    await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 'page', deviceType: 'VirtualDevice', domainInfo: {} });
    await store.insertObservations(
      id,
      batchOf([
        { ts: T0, temperature: null, extra: { '2': 'integer-like key', note: 'ü "q" \\ \u2028', nested: { a: [1, true, null] }, tags: ['x'] } },
        { ts: T0 + 1, temperature: -0.0001, extra: {} },
        { ts: T0 + 2, temperature: 1e21, extra: null },
        { ts: T0 + 3, temperature: 21.5, extra: { tags: ['x', 'y'] } },
      ]),
    );
    for (const q of [{ limit: 10 }, { limit: 2 }, { limit: 2, before: T0 + 2 }, { limit: 10, tag: 'x' }, { limit: 1, tag: 'x' }, { limit: 10, from: T0 + 1, to: T0 + 3 }]) {
      const page = await store.queryObservations(id, q);
      assert.deepEqual(await store.observationPageJson(id, q), { json: pageJson(page.observations), nextBefore: page.nextBefore }, JSON.stringify(q));
    }
    // Awkward numbers and timestamps: numbers whose shortest form has 16-17 digits or an
    // exponent, integers, the extremes; times before 1970, before year 0 and after 9999.
    const odd = randomUUID();
    await store.createDevice({ id: odd, tenantId: a.tenantId, groupId: a.groupId, solution: 'page', deviceType: 'VirtualDevice', domainInfo: {} });
    const numbers = [0.1 + 0.2, 1 / 3, 5e-324, 1.7976931348623157e308, 123456789012345680000, 1e-7, -1e-7, 1e-6, 2 ** 53 + 2, 100, -0, 1e15, 1e16, 0.000123, 21.0000000000001, -273.15];
    const times = [-62198755200000, -1, -86_400_001, 0, 999, 253402300799999, 253402300800000, 8.64e15];
    await store.insertObservations(
      odd,
      batchOf(numbers.map((temperature, i) => ({ ts: i < times.length ? times[i]! : T0 + i, temperature, extra: i % 5 === 0 ? { i, s: '\u00e9\ud83d\ude00' } : null }))),
    );
    for (const q of [{ limit: 100 }, { limit: 3 }, { limit: 5, before: 253402300800000 }]) {
      const page = await store.queryObservations(odd, q);
      assert.deepEqual(await store.observationPageJson(odd, q), { json: pageJson(page.observations), nextBefore: page.nextBefore }, JSON.stringify(q));
    }
    // The same numbers with no free fields on any row, one without a temperature (a backend may
    // read such pages another way), and again after a page of the device had free fields.
    const plain = randomUUID();
    await store.createDevice({ id: plain, tenantId: a.tenantId, groupId: a.groupId, solution: 'page', deviceType: 'VirtualDevice', domainInfo: {} });
    await store.insertObservations(plain, batchOf([...numbers, null].map((temperature, i) => ({ ts: i < times.length ? times[i]! : T0 + i, temperature, extra: null }))));
    for (const q of [{ limit: 100 }, { limit: 3 }, { limit: 5, before: 253402300800000 }, { limit: 100, from: -8.64e15 }]) {
      const page = await store.queryObservations(plain, q);
      assert.deepEqual(await store.observationPageJson(plain, q), { json: pageJson(page.observations), nextBefore: page.nextBefore }, JSON.stringify(q));
    }
    await store.insertObservations(plain, batchOf([{ ts: T0 + 100, temperature: 1 / 7, extra: { note: 'now with fields' } }]));
    for (const q of [{ limit: 2 }, { limit: 2, before: T0 + 100 }, { limit: 2 }]) {
      const page = await store.queryObservations(plain, q);
      assert.deepEqual(await store.observationPageJson(plain, q), { json: pageJson(page.observations), nextBefore: page.nextBefore }, JSON.stringify(q));
    }
    // 3,000 random rows on one device: decimals of up to 9 places and up to 10^12 (a fast path
    // may take those with up to 6 places), times from before year 0 to after 9999 in random
    // order, no temperature, free fields; read whole and page by page, every page compared.
    let seed = 0x51a7_0c3d;
    const rand = () => {
      seed = (Math.imul(seed ^ (seed >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) | 0;
      return (seed >>> 0) / 2 ** 32;
    };
    const many = randomUUID();
    await store.createDevice({ id: many, tenantId: a.tenantId, groupId: a.groupId, solution: 'page', deviceType: 'VirtualDevice', domainInfo: {} });
    const taken = new Set<number>();
    const rows: ObservationRecord[] = [];
    while (rows.length < 3000) {
      const ts = rand() < 0.7 ? Math.floor(rand() * 253402300800000) : Math.floor((rand() - 0.5) * 2 * 8.64e15);
      if (taken.has(ts)) continue;
      taken.add(ts);
      const places = Math.floor(rand() * 10);
      const temperature = rand() < 0.1 ? null : Math.round((rand() - 0.5) * 10 ** Math.floor(rand() * 12) * 10 ** places) / 10 ** places;
      rows.push({ ts, temperature, extra: rand() < 0.1 ? { n: rand(), s: 'é😀' } : null });
    }
    await store.insertObservations(many, batchOf(rows));
    const wanted = async (q: ObservationQuery) => {
      const page = await store.queryObservations(many, q);
      assert.deepEqual(await store.observationPageJson!(many, q), { json: pageJson(page.observations), nextBefore: page.nextBefore }, JSON.stringify(q));
      return page;
    };
    // (Without `from`, a read starts at 1970: the rows before it are read with a negative `from`.)
    assert.equal((await wanted({ limit: 10_000 })).observations.length, rows.filter((r) => r.ts >= 0).length);
    assert.equal((await wanted({ limit: 10_000, from: -8.64e15 })).observations.length, 3000);
    let cursor: number | undefined;
    for (let pages = 0; pages < 200; pages++) {
      const page = await wanted({ limit: 1 + Math.floor(rand() * 40), ...(cursor === undefined ? {} : { before: cursor }) });
      if (page.nextBefore === null) break;
      cursor = page.nextBefore;
    }
    await rejectsWith(store.observationPageJson(randomUUID(), { limit: 1 }), 'DEVICE_NOT_FOUND');
  });

  it('buckets give min/avg/max per interval, oldest first, skipping empty ones', async () => {
    const a = account('lee');
    const id = randomUUID();
    await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 'b', deviceType: 'VirtualDevice', domainInfo: {} });
    await store.insertObservations(
      id,
      batchOf([
        { ts: T0, temperature: 1, extra: null },
        { ts: T0 + 500, temperature: 3, extra: null },
        { ts: T0 + 2500, temperature: 10, extra: null },
      ]),
    );
    const b = await store.bucketObservations(id, { from: T0, to: T0 + 3000, bucketMs: 1000 });
    assert.deepEqual(b, [
      { ts: T0, count: 2, min: 1, avg: 2, max: 3 },
      { ts: T0 + 2000, count: 1, min: 10, avg: 10, max: 10 },
    ]);
  });
}
