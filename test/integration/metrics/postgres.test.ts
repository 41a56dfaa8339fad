// /metrics of two nodes on one PostgreSQL database (docs/operations.md "Metrics and logs"): the
// PostgreSQL write groups, the event-bus lag of an upload on one node delivered to a stream on the
// other (inline and by reference), and exactly one leader. Both nodes run in this process and so
// share its registry: the figures are the process's, which is what each asserts.
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type { PgEventBus } from '../../../src/events/pg-bus.ts';
import { scrapeMetrics } from '../../helpers/metrics.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/pg.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { readSse } from '../../helpers/sse.ts';
import { waitFor } from '../../helpers/wait.ts';

const TOKEN = 'pg-scrape-token-60a2e1';
let db: TestDatabase;
let a: TestServer;
let b: TestServer;
before(async () => {
  db = await createTestDatabase('reef_metrics');
  a = await startTestServer({ databaseUrl: db.url, metrics: { token: TOKEN, listen: null } });
  b = await startTestServer({ databaseUrl: db.url, metrics: { token: TOKEN, listen: null } });
});
after(async () => {
  await b?.close();
  await a?.close();
  await db?.drop();
});

it('counts PostgreSQL write groups, the bus lag of events from the other node, and one leader', async () => {
  const scrape = () => scrapeMetrics(`${a.url}/metrics`, TOKEN);
  const { token } = await a.login('pg-metrics');
  const r = await a.request('POST', '/api/solutions/StudioSimulation/devices', { token, body: { deviceType: 'VirtualDevice', domainInfo: {} } });
  const id = ((await r.json()) as { id: string }).id;
  await waitFor('the nodes to know of each other', () => ((a.services.events as PgEventBus).othersListening && (b.services.events as PgEventBus).othersListening) || null);
  const ac = new AbortController();
  const res = await fetch(`${b.url}/api/solutions/StudioSimulation/events`, { headers: { authorization: token }, signal: ac.signal });
  assert.equal(res.status, 200);
  const stream = await readSse(res, { subscribed: true });
  try {
    const before = await scrape();
    const t0 = Date.now() - 100_000;
    // 3 observations go inline in the NOTIFY; 50 by reference, read back by the receiving node.
    for (const n of [3, 50]) {
      const observations = Array.from({ length: n }, (_, i) => ({ timestamp: new Date(t0 + n * 1000 + i).toISOString(), temperature: i }));
      assert.equal((await a.request('POST', `/api/solutions/StudioSimulation/devices/${id}/observations`, { token, body: { observations } })).status, 201);
    }
    const got = await stream.take(2, 'observations');
    assert.deepEqual(
      got.filter((m) => m.event === 'observations').map((m) => (JSON.parse(m.data) as { observations: unknown[] }).observations.length),
      [3, 50],
    );
    const after = await scrape();
    const delta = (name: string, labels: Record<string, string> = {}) => after.value(name, labels) - before.value(name, labels);
    assert.equal(delta('reef_event_bus_lag_seconds_count'), 2, 'both uploads crossed the bus');
    assert.equal(delta('reef_event_bus_lag_seconds_bucket', { le: '+Inf' }), 2);
    assert.ok(delta('reef_store_write_seconds_count', { store: 'postgres' }) >= 1);
    assert.equal(delta('reef_store_write_group_batches_sum', { store: 'postgres' }), 2, 'two uploads, in one group or two');
    assert.equal(delta('reef_observations_stored_total', { path: 'http' }), 53);
    assert.equal(after.value('reef_leader'), 1, 'one of the two nodes leads');
  } finally {
    ac.abort();
  }
});
