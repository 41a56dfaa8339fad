// Conformance cases every store backend passes (index.ts runs them on each):
// devices, solutions, device templates and the device quota.
import { it, before } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { isReefError } from '../../../../src/core/errors.ts';
import type { Account } from '../../../../src/core/types.ts';
import type { Store } from '../../../../src/store/store.ts';
import { batchOf } from '../../../../src/core/observation-batch.ts';
import { account, T0, series, rejectsWith, type StoreRef } from './fixtures.ts';

export function deviceCases(ref: StoreRef): void {
  let store!: Store;
  before(() => {
    store = ref.store;
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
}
