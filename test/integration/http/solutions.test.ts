// Per-solution retention over HTTP: read, set, clear, validation, isolation, and the upkeep
// removing what expired.
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.close());

it('reads and sets retention; upkeep then removes expired observations', async () => {
  const { token } = await server.login('ret');
  assert.deepEqual(await (await server.request('GET', '/api/solutions/sandbox/retention', { token })).json(), { solution: 'sandbox', retentionDays: null });
  const put = await server.request('PUT', '/api/solutions/sandbox/retention', { token, body: { retentionDays: 7 } });
  assert.equal(put.status, 200);
  assert.deepEqual(await put.json(), { solution: 'sandbox', retentionDays: 7 });
  assert.deepEqual(await (await server.request('GET', '/api/solutions/sandbox/retention', { token })).json(), { solution: 'sandbox', retentionDays: 7 });

  const d = (await (await server.request('POST', '/api/solutions/sandbox/devices', { token, body: { deviceType: 'T' } })).json()) as { id: string };
  const now = Date.now();
  const old = new Date(now - 8 * 86_400_000).toISOString();
  const recent = new Date(now - 86_400_000).toISOString();
  await server.request('POST', `/api/solutions/sandbox/devices/${d.id}/observations`, {
    token,
    body: {
      observations: [
        { timestamp: old, temperature: 1 },
        { timestamp: recent, temperature: 2 },
      ],
    },
  });
  await server.services.store.maintain(now);
  const left = (await (await server.request('GET', `/api/solutions/sandbox/devices/${d.id}/observations`, { token })).json()) as { observations: { timestamp: string }[] };
  assert.deepEqual(
    left.observations.map((o) => o.timestamp),
    [recent],
  );

  assert.equal((await server.request('PUT', '/api/solutions/sandbox/retention', { token, body: { retentionDays: null } })).status, 200);
  assert.equal(((await (await server.request('GET', '/api/solutions/sandbox/retention', { token })).json()) as { retentionDays: null }).retentionDays, null);
});

it('refuses bad values and unknown solutions; another group is not affected', async () => {
  const a = await server.login('ret-a');
  const b = await server.login('ret-b');
  for (const body of [{ retentionDays: 0 }, { retentionDays: 1.5 }, { retentionDays: '7' }, { retentionDays: 40000 }, {}]) {
    const r = await server.request('PUT', '/api/solutions/StudioSimulation/retention', { token: a.token, body });
    assert.equal(r.status, 400, JSON.stringify(body));
  }
  assert.equal((await server.request('PUT', '/api/solutions/nosuch/retention', { token: a.token, body: { retentionDays: 5 } })).status, 404);
  await server.request('PUT', '/api/solutions/StudioSimulation/retention', { token: a.token, body: { retentionDays: 3 } });
  assert.deepEqual(await (await server.request('GET', '/api/solutions/StudioSimulation/retention', { token: b.token })).json(), { solution: 'StudioSimulation', retentionDays: null });
});
