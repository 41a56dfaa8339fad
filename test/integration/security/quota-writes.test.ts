// Every write counts against the observation quota before it commits (docs/security.md "Quotas"):
// uploads racing at the limit never pass it together (the check and the reservation are one step),
// and a running simulation stops with a clear state when it reaches the quota. Before, 20 parallel
// uploads stored 1,800 against a quota of 1,000, and simulation writes were never counted.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createSimulationComponent } from '../../../src/sim/component.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { waitFor } from '../../helpers/wait.ts';

const SOL = '/api/solutions/StudioSimulation';

describe('observation quota on every write path', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ quotas: { observations: 1000 } }, [createSimulationComponent()]);
  });
  after(() => s.close());

  const stored = async (tenantId: string) => (await s.services.store.countObservationsByTenant()).get(tenantId) ?? 0;

  it('20 parallel uploads of 90 against a quota of 1,000: the accepted ones fit, the rest are refused whole', async () => {
    const a = await s.login('racer');
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      const r = await s.request('POST', `${SOL}/devices`, { token: a.token, body: { deviceType: 'VirtualDevice' } });
      ids.push(((await r.json()) as { id: string }).id);
    }
    const t0 = Date.UTC(2026, 0, 1);
    const body = { observations: Array.from({ length: 90 }, (_, i) => ({ timestamp: new Date(t0 + i * 1000).toISOString(), temperature: 20 })) };
    const answers = await Promise.all(ids.map((id) => s.request('POST', `${SOL}/devices/${id}/observations`, { token: a.token, body })));
    const ok = answers.filter((r) => r.status === 201).length;
    const refused = answers.filter((r) => r.status === 403);
    assert.equal(ok + refused.length, 20, 'every upload is stored or refused');
    assert.equal(ok, 11, 'as many as fit: 11 × 90 = 990');
    for (const r of refused) assert.equal(((await r.json()) as { code: string }).code, 'QUOTA_EXCEEDED');
    assert.equal(await stored(a.tenantId), ok * 90, 'nothing of a refused upload was stored');
    assert.ok((await stored(a.tenantId)) <= 1000);
  });

  it('a running simulation that reaches the quota stops as failed, saying why, and writes no more', async () => {
    const a = await s.login('simmer');
    const r = await s.request('POST', `${SOL}/simulations`, { token: a.token, body: { devices: 50, interval: '1s' } });
    assert.equal(r.status, 201, await r.clone().text());
    const sim = (await r.json()) as { id: string };
    const done = await waitFor(
      'the simulation to stop at the quota',
      async () => {
        const g = (await (await s.request('GET', `${SOL}/simulations/${sim.id}`, { token: a.token })).json()) as { status: string; error: string | null };
        return g.status === 'failed' ? g : null;
      },
      60_000,
    );
    assert.match(done.error ?? '', /^QUOTA_EXCEEDED: observation quota: this account may keep 1000 observations/);
    const n = await stored(a.tenantId);
    assert.ok(n <= 1000, `stored ${n} against a quota of 1000`);
    // Stopped: nothing more is written.
    await new Promise((res) => setTimeout(res, 1500));
    assert.equal(await stored(a.tenantId), n);
  });
});
