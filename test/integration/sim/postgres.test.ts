// Simulations on PostgreSQL with two nodes: state in the shared store, the run on the leader only
// (advisory lock), and a hand-over when the leader goes: same devices, the grid continues.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createSimulationComponent } from '../../../src/sim/component.ts';
import { deviceModel, temperatureAt } from '../../../src/sim/model.ts';
import { hashString } from '../../../src/sim/prng.ts';
import type { Simulation } from '../../../src/sim/simulations.ts';
import { createTestDatabase } from '../../helpers/pg.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { waitFor } from '../../helpers/wait.ts';

const BASE = '/api/solutions/StudioSimulation/simulations';
const component = () => createSimulationComponent({ limits: { minIntervalMs: 50 }, reconcileMs: 100, demo: null });

async function get<T>(s: TestServer, token: string, path: string): Promise<T> {
  const r = await s.request('GET', path, { token });
  assert.equal(r.status, 200, await r.clone().text());
  return (await r.json()) as T;
}

test('two nodes on one PostgreSQL: only the leader runs a simulation; the other resumes it when the leader goes', async () => {
  const db = await createTestDatabase('reef_sim');
  let a: TestServer | null = null;
  let b: TestServer | null = null;
  try {
    a = await startTestServer({ databaseUrl: db.url }, [component()]);
    b = await startTestServer({ databaseUrl: db.url }, [component()]);
    assert.ok(a.services.leadership.isLeader(), 'the first node leads');
    assert.ok(!b.services.leadership.isLeader());
    const creds = await a.account('erin');
    const tokenB = await b.token(creds);

    // Created through the follower: the leader finds it in the store and runs it.
    const r = await b.request('POST', BASE, { token: tokenB, body: { devices: 3, interval: '100ms', seed: 'pg', backfill: '5s' } });
    assert.equal(r.status, 201);
    const sim = (await r.json()) as Simulation;
    await waitFor('readings from the leader', async () => (await get<Simulation>(b!, tokenB, `${BASE}/${sim.id}`)).observationsProduced >= 3 * 80);

    await a.close();
    a = null;
    const handOver = Date.now();
    await waitFor('the follower leads', async () => b!.services.leadership.isLeader());
    await waitFor('readings after the hand-over', async () => {
      const obs = (await get<{ observations: { timestamp: string }[] }>(b!, tokenB, `/api/solutions/StudioSimulation/devices/${sim.deviceIds![0]}/observations?limit=1`)).observations;
      return obs.length > 0 && Date.parse(obs[0]!.timestamp) > handOver + 300;
    });
    const { devices } = await get<{ devices: { id: string }[] }>(b, tokenB, '/api/solutions/StudioSimulation/devices');
    assert.deepEqual(devices.map((d) => d.id).sort(), [...sim.deviceIds!].sort(), 'the devices were provisioned once');
    const stop = await b.request('DELETE', `${BASE}/${sim.id}`, { token: tokenB });
    assert.equal(((await stop.json()) as Simulation).status, 'stopped');

    const model = deviceModel(hashString('pg'), 0, sim.params.area, sim.params.profile);
    const obs = (
      await get<{ observations: { timestamp: string; temperature: number }[] }>(b, tokenB, `/api/solutions/StudioSimulation/devices/${sim.deviceIds![0]}/observations?limit=10000`)
    ).observations
      .map((o) => ({ t: Date.parse(o.timestamp), v: o.temperature }))
      .reverse();
    assert.equal(obs[0]!.t, Math.ceil((Date.parse(sim.startedAt) - 5000) / 100) * 100);
    for (let k = 1; k < obs.length; k++) assert.equal(obs[k]!.t - obs[k - 1]!.t, 100, 'contiguous on the grid across the hand-over');
    for (const o of obs) assert.equal(o.v, temperatureAt(model, o.t));
  } finally {
    await a?.close();
    await b?.close();
    await db.drop();
  }
});
