// Per-account quotas on devices, stored observations and simulation backfill, checked
// before any work starts, refused whole with 403 QUOTA_EXCEEDED naming the limit, settable by an
// operator per account.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createSimulationComponent } from '../../../src/sim/component.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/pg.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { assertClean, tally } from './tally.ts';

const ADMIN = 'an-operator-key-long-enough';
const SIMS = '/api/solutions/StudioSimulation/simulations';

describe('quotas', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ adminKey: ADMIN, quotas: { devices: 3, observations: 50, backfill: 1000 } }, [createSimulationComponent()]);
  });
  after(() => s.close());

  const newDevice = (token: string) => s.request('POST', '/api/solutions/StudioSimulation/devices', { token, body: { deviceType: 'VirtualDevice' } });
  const obs = (n: number, from = 0) => ({ observations: Array.from({ length: n }, (_, i) => ({ timestamp: new Date(Date.UTC(2026, 0, 1) + (from + i) * 1000).toISOString(), temperature: 20 })) });
  const admin = (method: string, path: string, body?: unknown) => s.request(method, path, { headers: { 'x-reef-admin-key': ADMIN }, ...(body === undefined ? {} : { body }) });

  it('devices: the quota holds for the API, provisioning and simulations; an operator raises it', async () => {
    const probe = tally('quota: devices');
    const a = await s.login('dev-quota');
    for (let i = 0; i < 3; i++) probe.status((await newDevice(a.token)).status, 201, 'within the quota');
    const over = await newDevice(a.token);
    probe.status(over.status, 403, 'past the quota');
    const body = (await over.json()) as { code: string; message: string };
    assert.equal(body.code, 'QUOTA_EXCEEDED');
    assert.match(body.message, /device quota.*3/);
    probe.status((await admin('POST', '/api/admin/provision', { clientId: a.clientId, mac: '00000000000022b1' })).status, 403, 'provisioning past the quota');
    probe.status((await s.request('POST', SIMS, { token: a.token, body: { devices: 2, interval: '1m' } })).status, 403, 'a simulation past the quota');
    assert.equal(await s.services.store.countDevices(a.tenantId), 3, 'nothing was created');
    // Another account has its own quota.
    const b = await s.login('dev-quota-other');
    probe.status((await newDevice(b.token)).status, 201, "another account's device");
    // The operator raises it for this account only.
    const put = await admin('PUT', `/api/admin/accounts/${a.tenantId}/quotas`, { devices: 5 });
    assert.equal(put.status, 200);
    assert.equal(((await put.json()) as { limits: { devices: number } }).limits.devices, 5);
    probe.status((await newDevice(a.token)).status, 201, 'after the operator raised it');
    const got = (await (await admin('GET', `/api/admin/accounts/${a.clientId}/quotas`)).json()) as { limits: { devices: number; observations: number }; usage: { devices: number } };
    assert.deepEqual([got.limits.devices, got.limits.observations, got.usage.devices], [5, 50, 4]);
    assert.equal((await admin('PUT', `/api/admin/accounts/${a.tenantId}/quotas`, { devices: -1 })).status, 400);
    assertClean(probe);
  });

  it('stored observations: an upload that would pass the quota is refused whole; the count survives a recount', async () => {
    const probe = tally('quota: observations');
    const a = await s.login('obs-quota');
    const id = ((await (await newDevice(a.token)).json()) as { id: string }).id;
    const url = `/api/solutions/StudioSimulation/devices/${id}/observations`;
    probe.status((await s.request('POST', url, { token: a.token, body: obs(40) })).status, 201, 'within the quota');
    const over = await s.request('POST', url, { token: a.token, body: obs(20, 100) });
    probe.status(over.status, 403, 'past the quota');
    assert.match(((await over.json()) as { message: string }).message, /observation quota.*50/);
    const stored = (await (await s.request('GET', `${url}?limit=1000`, { token: a.token })).json()) as { observations: unknown[] };
    assert.equal(stored.observations.length, 40, 'nothing of the refused batch was stored');
    probe.status((await s.request('POST', url, { token: a.token, body: obs(10, 200) })).status, 201, 'up to the quota exactly');
    await s.services.quotas.recount();
    probe.status((await s.request('POST', url, { token: a.token, body: obs(1, 300) })).status, 403, 'after the recount');
    assertClean(probe);
  });

  it('simulation backfill: refused before it starts when it would write more than the quota', async () => {
    const a = await s.login('backfill-quota');
    const r = await s.request('POST', SIMS, { token: a.token, body: { devices: 2, interval: '1m', backfill: '1d' } });
    assert.equal(r.status, 403);
    assert.match(((await r.json()) as { message: string }).message, /backfill quota.*1000.*2880/);
    assert.equal(await s.services.store.countDevices(a.tenantId), 0, 'no device was created');
    const ok = await s.request('POST', SIMS, { token: a.token, body: { devices: 1, interval: '1h', backfill: '1d' } });
    assert.equal(ok.status, 201, 'a backfill within the quota starts');
  });
});

// The limit is decided with each insert (Store.createDevice): on PostgreSQL, where requests
// interleave between a count and an insert, a count taken first let racing creators past it.
for (const backend of ['sqlite', 'postgres'] as const) {
  describe(`device quota under concurrent requests (${backend})`, () => {
    let s: TestServer;
    let db: TestDatabase | undefined;
    before(async () => {
      if (backend === 'postgres') db = await createTestDatabase('reef_quota');
      s = await startTestServer({ adminKey: ADMIN, quotas: { devices: 3, observations: 50, backfill: 1000 }, ...(db ? { databaseUrl: db.url } : {}) });
    });
    after(async () => {
      await s?.close();
      await db?.drop();
    });
    const newDevice = (token: string) => s.request('POST', '/api/solutions/StudioSimulation/devices', { token, body: { deviceType: 'VirtualDevice' } });
    const admin = (method: string, path: string, body?: unknown) => s.request(method, path, { headers: { 'x-reef-admin-key': ADMIN }, ...(body === undefined ? {} : { body }) });

    it('devices: requests racing at the limit never pass it together, on the API and provisioning alike', async () => {
      const probe = tally(`quota: devices, racing (${backend})`);
      const a = await s.login('dev-quota-race');
      probe.status((await newDevice(a.token)).status, 201, 'the first device');
      // Eight device creations and two kit provisionings at once, for the two places left.
      const replies = await Promise.all([
        ...Array.from({ length: 8 }, () => newDevice(a.token)),
        admin('POST', '/api/admin/provision', { clientId: a.clientId, mac: '00000000000022c1' }),
        admin('POST', '/api/admin/provision', { clientId: a.clientId, mac: '00000000000022c2' }),
      ]);
      const statuses = replies.map((r) => r.status);
      assert.equal(statuses.filter((x) => x === 201).length, 2, statuses.join(' '));
      for (const r of replies) {
        if (r.status === 201) continue;
        probe.status(r.status, 403, 'past the quota');
        assert.equal(((await r.json()) as { code: string }).code, 'QUOTA_EXCEEDED');
      }
      assert.equal(await s.services.store.countDevices(a.tenantId), 3);
      assertClean(probe);
    });
  });
}
