// The store conformance suite: one set of tests that every backend must pass, run by
// test/integration/store/<backend>.test.ts with a factory that makes a fresh, empty, migrated store.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it, before, after } from 'node:test';
import { isReefError } from '../../../src/core/errors.ts';
import { getSolutionWebhook, setSolutionWebhook } from '../../../src/alarms/notify.ts';
import type { AlarmRecord, AlarmRuleRecord, AlarmRuleSpec, WebhookDeliveryRecord } from '../../../src/core/alarms.ts';
import type { Account, ObservationRecord } from '../../../src/core/types.ts';
import { latestJson, pageJson } from '../../../src/core/observation-json.ts';
import type { ObservationQuery, Store } from '../../../src/store/store.ts';
import { batchOf, type ObservationBatch } from '../../../src/core/observation-batch.ts';

export interface StoreFactory {
  /** A fresh, migrated, empty store. */
  open(): Promise<Store>;
  /** Drops whatever open() made (files, databases). */
  cleanup(): Promise<void>;
}

function account(n: string, group?: string): Account {
  return {
    tenantId: `TN${n.toUpperCase()}${randomUUID().slice(0, 8)}`,
    name: n,
    groupId: group ?? `G-${n}`,
    clientId: randomUUID(),
    secretHash: 'scrypt$test',
    disabled: false,
    createdAt: Date.now(),
  };
}

const T0 = Date.UTC(2026, 0, 1);

function series(n: number, step = 1000, start = T0): ObservationRecord[] {
  return Array.from({ length: n }, (_, i) => ({ ts: start + i * step, temperature: 20 + (i % 100) / 10, extra: null }));
}

async function rejectsWith(p: Promise<unknown>, code: string) {
  await assert.rejects(p, (e: unknown) => isReefError(e) && e.code === code);
}

export function storeConformance(backend: string, factory: StoreFactory): void {
  describe(`store conformance: ${backend}`, () => {
    let store: Store;
    before(async () => {
      store = await factory.open();
    });
    after(async () => {
      await store.close();
      await factory.cleanup();
    });

    it('migrate is idempotent', async () => {
      await store.migrate();
      await store.migrate();
      await store.ping();
    });

    it('creates and finds accounts by client id and tenant id', async () => {
      const a = account('alice');
      await store.createAccount(a);
      assert.deepEqual(await store.getAccountByClientId(a.clientId), a);
      assert.deepEqual(await store.getAccountByTenantId(a.tenantId), a);
      assert.equal(await store.getAccountByClientId(randomUUID()), null);
      assert.ok((await store.listAccounts()).some((x) => x.tenantId === a.tenantId));
      assert.ok((await store.countAccounts()) >= 1);
    });

    it('rotates secrets and disables accounts; unknown accounts are ACCOUNT_NOT_FOUND', async () => {
      const a = account('bob');
      await store.createAccount(a);
      await store.setAccountSecret(a.tenantId, 'scrypt$new');
      await store.setAccountDisabled(a.tenantId, true);
      const got = await store.getAccountByTenantId(a.tenantId);
      assert.equal(got?.secretHash, 'scrypt$new');
      assert.equal(got?.disabled, true);
      await rejectsWith(store.setAccountDisabled('TNNOPE', true), 'ACCOUNT_NOT_FOUND');
      await rejectsWith(store.setAccountSecret('TNNOPE', 'x'), 'ACCOUNT_NOT_FOUND');
    });

    it('a duplicate client id is a CONFLICT', async () => {
      const a = account('carol');
      await store.createAccount(a);
      await rejectsWith(store.createAccount({ ...account('carol2'), clientId: a.clientId }), 'CONFLICT');
    });

    it('keeps signing keys; adding one twice keeps one', async () => {
      const k = { kid: randomUUID(), secret: 'x'.repeat(43), createdAt: Date.now() };
      await store.addSigningKey(k);
      await store.addSigningKey(k);
      const keys = (await store.listSigningKeys()).filter((x) => x.kid === k.kid);
      assert.deepEqual(keys, [k]);
    });

    it('lists signing keys oldest first and deletes a retired one', async () => {
      const base = Date.now() + 1_000_000;
      const k1 = { kid: `k1-${randomUUID()}`, secret: 'a'.repeat(43), createdAt: base };
      const k2 = { kid: `k2-${randomUUID()}`, secret: 'b'.repeat(43), createdAt: base + 1 };
      await store.addSigningKey(k2);
      await store.addSigningKey(k1);
      const mine = (await store.listSigningKeys()).filter((x) => x.kid === k1.kid || x.kid === k2.kid);
      assert.deepEqual(mine, [k1, k2]);
      await store.deleteSigningKey(k1.kid);
      await store.deleteSigningKey('no-such-key');
      assert.deepEqual(
        (await store.listSigningKeys()).filter((x) => x.kid === k1.kid || x.kid === k2.kid),
        [k2],
      );
    });

    it('creates devices, their solution, and lists them by group and solution', async () => {
      const a = account('dave');
      const id = randomUUID();
      assert.equal(await store.solutionExists(a.groupId, 'mySolution'), false);
      const d = await store.createDevice({
        id,
        tenantId: a.tenantId,
        groupId: a.groupId,
        solution: 'mySolution',
        deviceType: 'VirtualDevice',
        domainInfo: { location: { latitude: 1.5, longitude: -2.25 } },
      });
      assert.equal(d.id, id);
      assert.equal(await store.solutionExists(a.groupId, 'mySolution'), true);
      assert.equal(await store.solutionExists(a.groupId, 'mysolution'), false, 'solution names are case sensitive');
      const list = await store.listDevices(a.groupId, 'mySolution');
      assert.equal(list.length, 1);
      assert.deepEqual(list[0]!.domainInfo, { location: { latitude: 1.5, longitude: -2.25 } });
      assert.deepEqual(await store.listDevices(a.groupId, 'mysolution'), []);
      assert.deepEqual(await store.listDevices('G-other', 'mySolution'), []);
      assert.equal((await store.getDevice(a.groupId, 'mySolution', id))?.id, id);
      assert.equal(await store.getDevice('G-other', 'mySolution', id), null);
    });

    it('the solution version changes with every device created or deleted', async () => {
      const a = account('ver');
      assert.equal(await store.solutionVersion(a.groupId, 'v'), null);
      const id = randomUUID();
      await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 'v', deviceType: 'VirtualDevice', domainInfo: {} });
      const v1 = await store.solutionVersion(a.groupId, 'v');
      assert.equal(typeof v1, 'number');
      await store.insertObservations(id, batchOf(series(2)));
      assert.equal(await store.solutionVersion(a.groupId, 'v'), v1, 'observations do not change it');
      await store.createDevice({ id: randomUUID(), tenantId: a.tenantId, groupId: a.groupId, solution: 'v', deviceType: 'VirtualDevice', domainInfo: {} });
      const v2 = await store.solutionVersion(a.groupId, 'v');
      assert.notEqual(v2, v1);
      await store.deleteDevice(a.groupId, 'v', id);
      const v3 = await store.solutionVersion(a.groupId, 'v');
      assert.ok(v3 !== v2 && v3 !== v1);
    });

    it('ensureSolution creates a solution once and keeps its settings', async () => {
      const a = account('sol');
      await store.ensureSolution(a.groupId, 'sandbox');
      assert.equal(await store.solutionExists(a.groupId, 'sandbox'), true);
      await store.setRetention(a.groupId, 'sandbox', 30);
      await store.ensureSolution(a.groupId, 'sandbox');
      assert.equal(await store.getRetention(a.groupId, 'sandbox'), 30);
      assert.equal(await store.solutionExists('G-other', 'sandbox'), false);
    });

    it('filters devices by type and keeps provisioning info and MAC', async () => {
      const a = account('erin');
      const mac = randomUUID().replace(/-/g, '').slice(0, 16);
      const pi = { status: 'provisioned' as const, timestamp: new Date(T0).toISOString(), ssniMacAddress: mac, ssniNetworkDeviceType: 'MILLI' as const };
      await store.createDevice({ id: randomUUID(), tenantId: a.tenantId, groupId: a.groupId, solution: 'sandbox', deviceType: 'NICDevKit', domainInfo: {}, provisioningInfo: pi, mac });
      await store.createDevice({ id: randomUUID(), tenantId: a.tenantId, groupId: a.groupId, solution: 'sandbox', deviceType: 'Other', domainInfo: {} });
      const kits = await store.listDevices(a.groupId, 'sandbox', 'NICDevKit');
      assert.equal(kits.length, 1);
      assert.deepEqual(kits[0]!.provisioningInfo, pi);
      assert.equal((await store.getDeviceByMac(mac))?.id, kits[0]!.id);
      assert.equal(await store.getDeviceByMac('0000000000000000'), null);
      await rejectsWith(store.createDevice({ id: randomUUID(), tenantId: a.tenantId, groupId: 'G-x', solution: 'sandbox', deviceType: 'NICDevKit', domainInfo: {}, mac }), 'MAC_ALREADY_PROVISIONED');
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

    it('device templates: created in order, read, replaced, deleted; per group and solution; capped atomically', async () => {
      const a = account('tpl');
      const b = account('tpl-b');
      assert.deepEqual(await store.listTemplates(a.groupId, 'kit'), []);
      const sensors = ['temperature', { name: 'humidity', unit: '%', range: [0, 100] }];
      const t1 = await store.createTemplate({ id: randomUUID(), groupId: a.groupId, solution: 'kit', name: 'Env', sensors }, 3);
      const t2 = await store.createTemplate({ id: randomUUID(), groupId: a.groupId, solution: 'kit', name: 'Temp', sensors: ['temperature'] }, 3);
      assert.equal(await store.solutionExists(a.groupId, 'kit'), true, 'a template makes its solution');
      assert.deepEqual(
        (await store.listTemplates(a.groupId, 'kit')).map((t) => [t.id, t.name, t.sensors]),
        [
          [t1.id, 'Env', sensors],
          [t2.id, 'Temp', ['temperature']],
        ],
      );
      assert.deepEqual((await store.getTemplate(a.groupId, 'kit', t1.id))?.sensors, sensors);
      // Another group, another solution: nothing.
      assert.equal(await store.getTemplate(b.groupId, 'kit', t1.id), null);
      assert.equal(await store.getTemplate(a.groupId, 'other', t1.id), null);
      assert.deepEqual(await store.listTemplates(b.groupId, 'kit'), []);
      assert.equal(await store.updateTemplate(b.groupId, 'kit', t1.id, { name: 'Stolen', sensors: [] }), null);
      assert.equal(await store.deleteTemplate(b.groupId, 'kit', t1.id), null);
      const up = await store.updateTemplate(a.groupId, 'kit', t1.id, { name: 'Env v2', sensors: ['temperature', 'light'] });
      assert.deepEqual([up?.id, up?.name, up?.sensors], [t1.id, 'Env v2', ['temperature', 'light']]);
      assert.ok(up!.updatedAt >= up!.createdAt);
      // The cap holds even when creators race.
      const racers = await Promise.allSettled([1, 2, 3].map((i) => store.createTemplate({ id: randomUUID(), groupId: a.groupId, solution: 'kit', name: `R${i}`, sensors: [] }, 3)));
      assert.equal(racers.filter((r) => r.status === 'fulfilled').length, 1);
      for (const r of racers) if (r.status === 'rejected') assert.ok(isReefError(r.reason) && r.reason.code === 'TOO_MANY_TEMPLATES');
      assert.equal((await store.listTemplates(a.groupId, 'kit')).length, 3);
      const gone = await store.deleteTemplate(a.groupId, 'kit', t2.id);
      assert.equal(gone?.name, 'Temp');
      assert.equal(await store.deleteTemplate(a.groupId, 'kit', t2.id), null);
      assert.equal((await store.listTemplates(a.groupId, 'kit')).length, 2);
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

    it('updating a device replaces its type and domainInfo only if unchanged since read; other groups and gone devices are not touched', async () => {
      const a = account('upd');
      const id = randomUUID();
      const first = { location: { latitude: 1.5, longitude: 2.5 }, note: 'ü' };
      await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 'upd', deviceType: 'VirtualDevice', domainInfo: first });
      await store.insertObservations(id, batchOf(series(3)));
      const v1 = await store.solutionVersion(a.groupId, 'upd');
      const next = { location: { latitude: -3, longitude: 4 }, templateId: randomUUID() };
      const got = await store.updateDevice(a.groupId, 'upd', id, first, { deviceType: 'Fridge', domainInfo: next });
      assert.ok(typeof got === 'object');
      assert.deepEqual([got.id, got.deviceType, got.domainInfo], [id, 'Fridge', next]);
      const read = (await store.getDevice(a.groupId, 'upd', id))!;
      assert.deepEqual([read.deviceType, read.domainInfo], ['Fridge', next]);
      assert.notEqual(await store.solutionVersion(a.groupId, 'upd'), v1, 'lists built before are stale');
      assert.equal((await store.queryObservations(id, { limit: 10 })).observations.length, 3, 'observations stay');
      // A change based on what was read before the first one is refused, and changes nothing.
      assert.equal(await store.updateDevice(a.groupId, 'upd', id, first, { deviceType: 'Other', domainInfo: {} }), 'changed');
      assert.equal(await store.updateDevice('G-other', 'upd', id, next, { deviceType: 'Other', domainInfo: {} }), 'missing');
      assert.equal(await store.updateDevice(a.groupId, 'other-solution', id, next, { deviceType: 'Other', domainInfo: {} }), 'missing');
      assert.deepEqual((await store.getDevice(a.groupId, 'upd', id))!.domainInfo, next);
      await store.deleteDevice(a.groupId, 'upd', id);
      assert.equal(await store.updateDevice(a.groupId, 'upd', id, next, { deviceType: 'Other', domainInfo: {} }), 'missing');
    });

    it('deleting a device removes it, its observations and its latest', async () => {
      const a = account('kim');
      const id = randomUUID();
      await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 'del', deviceType: 'VirtualDevice', domainInfo: {} });
      await store.insertObservations(id, batchOf(series(10)));
      assert.equal(await store.deleteDevice('G-other', 'del', id), false, 'another group cannot delete it');
      assert.equal(await store.deleteDevice(a.groupId, 'del', id), true);
      assert.equal(await store.deleteDevice(a.groupId, 'del', id), false);
      assert.equal(await store.getDevice(a.groupId, 'del', id), null);
      assert.deepEqual(await store.latestObservations(a.groupId, 'del'), []);
      await rejectsWith(store.queryObservations(id, { limit: 1 }), 'DEVICE_NOT_FOUND');
    });

    it('counts devices per tenant and stored observations per tenant (the quotas)', async () => {
      const a = account('quota-a');
      const b = account('quota-b');
      assert.equal(await store.countDevices(a.tenantId), 0);
      const ids = [randomUUID(), randomUUID()];
      for (const id of ids) await store.createDevice({ id, tenantId: a.tenantId, groupId: a.groupId, solution: 'q', deviceType: 'VirtualDevice', domainInfo: {} });
      await store.createDevice({ id: randomUUID(), tenantId: b.tenantId, groupId: b.groupId, solution: 'q', deviceType: 'VirtualDevice', domainInfo: {} });
      assert.equal(await store.countDevices(a.tenantId), 2);
      assert.equal(await store.countDevices(b.tenantId), 1);
      // A deleted device leaves the count; another account's is untouched.
      const gone = randomUUID();
      await store.createDevice({ id: gone, tenantId: a.tenantId, groupId: a.groupId, solution: 'q2', deviceType: 'VirtualDevice', domainInfo: {} });
      assert.equal(await store.countDevices(a.tenantId), 3);
      assert.equal(await store.deleteDevice(a.groupId, 'q2', gone), true);
      assert.equal(await store.countDevices(a.tenantId), 2);
      assert.equal(await store.countDevices(b.tenantId), 1);
      await store.insertObservations(ids[0]!, batchOf(series(7)));
      await store.insertObservations(ids[1]!, batchOf(series(5)));
      await store.insertObservations(ids[1]!, batchOf(series(5))); // the same timestamps again: replaced, not added
      const counts = await store.countObservationsByTenant();
      assert.equal(counts.get(a.tenantId), 12);
      assert.equal(counts.get(b.tenantId) ?? 0, 0);
    });

    it('the device quota is decided with the insert: creators racing at the limit never pass it together', async () => {
      const a = account('quota-race');
      const b = account('quota-race-b');
      const make = (acc: Account, solution: string) => ({ id: randomUUID(), tenantId: acc.tenantId, groupId: acc.groupId, solution, deviceType: 'VirtualDevice', domainInfo: {} });
      await store.createDevice(make(a, 'one'), 3);
      await store.createDevice(make(b, 'one'), 1);
      // Six at once for the two places left, across two solutions (one of them new).
      const racers = await Promise.allSettled([1, 2, 3, 4, 5, 6].map((i) => store.createDevice(make(a, i % 2 ? 'one' : 'two'), 3)));
      assert.equal(racers.filter((r) => r.status === 'fulfilled').length, 2);
      for (const r of racers) {
        if (r.status === 'rejected') {
          assert.ok(isReefError(r.reason) && r.reason.code === 'QUOTA_EXCEEDED', String(r.reason));
          assert.match(r.reason.message, /may have 3 devices and has 3/);
        }
      }
      assert.equal(await store.countDevices(a.tenantId), 3);
      const listed = (await store.listDevices(a.groupId, 'one')).length + (await store.listDevices(a.groupId, 'two')).length;
      assert.equal(listed, 3);
      // A refused device makes no solution.
      await rejectsWith(store.createDevice(make(a, 'never'), 3), 'QUOTA_EXCEEDED');
      assert.equal(await store.solutionExists(a.groupId, 'never'), false);
      // Another account's limit is its own; without a limit (a simulation's devices, checked when it starts) none applies.
      await rejectsWith(store.createDevice(make(b, 'one'), 1), 'QUOTA_EXCEEDED');
      await store.createDevice(make(a, 'one'));
      assert.equal(await store.countDevices(a.tenantId), 4);
      assert.equal(await store.countDevices(b.tenantId), 1);
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

    it('keeps job state by key and lists it by prefix', async () => {
      await store.setState('sim:1', '{"a":1}');
      await store.setState('sim:2', '{"a":2}');
      await store.setState('other', 'x');
      await store.setState('sim:1', '{"a":3}');
      assert.equal(await store.getState('sim:1'), '{"a":3}');
      assert.deepEqual(await store.listState('sim:'), [
        { key: 'sim:1', value: '{"a":3}' },
        { key: 'sim:2', value: '{"a":2}' },
      ]);
      await store.deleteState('sim:1');
      assert.equal(await store.getState('sim:1'), null);
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
  });
}
