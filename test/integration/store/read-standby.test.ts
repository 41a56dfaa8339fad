// Observation reads from a standby (REEF_DATABASE_READ_URL, docs/operations.md "Reads from a
// standby"), on a PostgreSQL primary and synchronous standby of the test's own
// (test/helpers/pg-cluster.ts) and two Reef nodes given both:
// - a reading acknowledged by one node is read back through the other at once, and those reads ran
//   on the standby (its pg_stat_database counts them; its pg_stat_activity shows `reef-reads`);
// - a read the store's writes depend on (`fresh`) runs on the primary;
// - with the standby killed, the same reads answer from the primary, and the node says so.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { registry } from '../../../src/metrics/metrics.ts';
import type { PostgresStore } from '../../../src/store/postgres/postgres-store.ts';
import { query as sql, startPrimaryAndStandby, type PgCluster } from '../../helpers/pg-cluster.ts';
import { keptWarnings, startTestServer, type TestServer } from '../../helpers/server.ts';
import { waitFor } from '../../helpers/wait.ts';

const T0 = Date.UTC(2026, 10, 1);
const ROUNDS = 20;

/** reef_store_standby_reads_total of this process (both nodes), by result. */
async function standbyReads(): Promise<{ served: number; failed: number }> {
  const m = await registry.getSingleMetric('reef_store_standby_reads_total')!.get();
  const of = (result: string) => m.values.find((v) => v.labels.result === result)?.value ?? 0;
  return { served: of('served'), failed: of('failed') };
}

/** Transactions ended on a host's database, as its statistics have them so far. */
async function transactions(url: string): Promise<number> {
  const [r] = await sql<{ n: string }>(url, "SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = 'postgres'");
  return Number(r!.n);
}

describe('PostgreSQL: observation reads from a standby', () => {
  let cluster: PgCluster;
  const nodes: { node: TestServer; log: string[] }[] = [];
  let token: string;
  let deviceId: string;

  before(async () => {
    cluster = await startPrimaryAndStandby();
    for (let i = 0; i < 2; i++) {
      const { logger, log } = keptWarnings();
      nodes.push({ node: await startTestServer({ databaseUrl: cluster.url(), databaseReadUrl: cluster.standby.url() }, [], { log: logger }), log });
    }
    token = (await nodes[0]!.node.login('reader')).token;
    const r = await nodes[0]!.node.request('POST', '/api/solutions/StudioSimulation/devices', { token, body: { deviceType: 'VirtualDevice', domainInfo: {} } });
    assert.equal(r.status, 201);
    deviceId = ((await r.json()) as { id: string }).id;
  });
  // The cluster first: with its synchronous standby killed, the primary would hold any commit a
  // closing node still makes.
  after(async () => {
    await cluster?.stop();
    for (const n of nodes) await n.node.close();
  });

  const page = (node: TestServer) => node.request('GET', `/api/solutions/StudioSimulation/devices/${deviceId}/observations?limit=1000`, { token });

  it('a reading acknowledged by one node is read back through the other at once, from the standby', async () => {
    const [a, b] = [nodes[0]!.node, nodes[1]!.node];
    // Every commit waits for the synchronous standby to apply it: that is what makes "at once" hold.
    const writes = (a.services.store as PostgresStore).pool;
    assert.equal((await writes.query('SHOW synchronous_commit')).rows[0].synchronous_commit, 'remote_apply');
    await page(b); // the read pool's first connection, made before the count starts
    const before = await transactions(cluster.standby.url());
    const counted = await standbyReads();
    for (let n = 0; n < ROUNDS; n++) {
      const ts = new Date(T0 + n * 1000).toISOString();
      const up = await a.request('POST', `/api/solutions/StudioSimulation/devices/${deviceId}/observations`, { token, body: { observations: [{ timestamp: ts, temperature: n }] } });
      assert.equal(up.status, 201);
      const r = await page(b);
      assert.equal(r.status, 200);
      const got = (await r.json()) as { observations: { timestamp: string; temperature: number }[] };
      assert.equal(got.observations.length, n + 1, `round ${n}: every acknowledged reading is read back`);
      assert.deepEqual(got.observations[0], { timestamp: ts, temperature: n });
    }
    const latest = await b.request('GET', '/api/solutions/StudioSimulation/observations', { token });
    assert.equal(latest.status, 200);
    const text = await latest.text();
    assert.ok(text.includes(deviceId) && text.includes(`"temperature":${ROUNDS - 1}`), text);
    // Statistics reach pg_stat_database within a second of a transaction's end.
    await waitFor('the standby to count the reads', async () => (await transactions(cluster.standby.url())) - before >= ROUNDS + 1);
    assert.ok((await standbyReads()).served - counted.served >= ROUNDS + 1, 'the node counts the reads the standby served');
    assert.equal((await standbyReads()).failed, counted.failed);
    const readers = await sql<{ n: string }>(cluster.standby.url(), "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'reef-reads'");
    assert.ok(Number(readers[0]!.n) >= 1, 'the reading node holds read connections on the standby');
  });

  it('a fresh read runs on the primary', async () => {
    const store = nodes[1]!.node.services.store;
    const before = await transactions(cluster.standby.url());
    for (let i = 0; i < 30; i++) assert.equal((await store.queryObservations(deviceId, { limit: 1000, fresh: true })).observations.length, ROUNDS);
    // The count moves only by this test's own query connection, not by 30 reads.
    await new Promise((r) => setTimeout(r, 1200)); // one statistics flush, for reads that should not be there
    assert.ok((await transactions(cluster.standby.url())) - before < 10);
  });

  it('with the standby killed, the same reads answer from the primary', async () => {
    const counted = await standbyReads();
    await cluster.kill(cluster.standby);
    for (const { node } of nodes) {
      const r = await page(node);
      assert.equal(r.status, 200);
      assert.equal(((await r.json()) as { observations: unknown[] }).observations.length, ROUNDS);
      const latest = await node.request('GET', '/api/solutions/StudioSimulation/observations', { token });
      assert.equal(latest.status, 200);
    }
    for (const { log } of nodes)
      assert.ok(
        log.some((l) => l.includes('a read failed on the read standby')),
        'the node warns that it reads from the primary',
      );
    // Each node counts its failed read (then reads the primary for 5 s; on a slow machine a later
    // read may try the standby again, and fail again).
    assert.ok((await standbyReads()).failed - counted.failed >= 2);
  });
});
