// PostgreSQL restarts in the middle of a stream of uploads: every upload answered 201 is in the
// database afterwards, every other one was answered 503 with Retry-After and STORE_UNAVAILABLE, and
// the server never exits and serves again by itself once PostgreSQL is back.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createAccount } from '../../../src/auth/accounts.ts';
import { PostgresStore } from '../../../src/store/postgres/postgres-store.ts';
import { startPrimaryAndStandby, type PgCluster } from '../../helpers/pg-cluster.ts';
import { json, startNode, waitFor, type ReefNode } from '../../helpers/reef-node.ts';

// A PostgreSQL of the test's own (test/helpers/pg-cluster.ts: a primary and its synchronous
// standby; the primary is restarted), so that the restart disturbs no other test.
describe('PostgreSQL restarts during uploads', () => {
  let pgc: PgCluster;
  let url: string;
  let node: ReefNode;

  before(async () => {
    pgc = await startPrimaryAndStandby();
    url = pgc.primary.url();
    node = await startNode(url);
  });

  after(async () => {
    await node?.kill();
    await pgc?.stop();
  });

  it('acknowledged uploads survive; the rest get 503 + Retry-After; the server recovers by itself', async (t) => {
    let store = new PostgresStore({ connectionString: url, maxConnections: 1 });
    const c = await createAccount(store, { name: 'fault' });
    await store.close();
    const tr = await fetch(`${node.url}/api/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(c) });
    const token = (await json(tr)).accessToken as string;
    const headers = { authorization: token, 'content-type': 'application/json' };
    const dev = await json(await fetch(`${node.url}/api/solutions/StudioSimulation/devices`, { method: 'POST', headers, body: JSON.stringify({ deviceType: 'VirtualDevice', domainInfo: {} }) }));

    const T0 = Date.UTC(2026, 10, 1);
    const PER_BATCH = 20;
    const acked: number[][] = [];
    const refused: { status: number; retryAfter: string | null; code: string }[] = [];
    let seq = 0;
    let stop = false;
    let restarted = false;
    let okAfterRestart = 0;

    const worker = async () => {
      while (!stop) {
        const n = seq++;
        const ts = Array.from({ length: PER_BATCH }, (_, i) => T0 + (n * PER_BATCH + i) * 1000);
        const body = JSON.stringify({ observations: ts.map((t) => ({ timestamp: new Date(t).toISOString(), temperature: (n % 50) + 0.25 })) });
        let r: Response;
        try {
          r = await fetch(`${node.url}/api/solutions/StudioSimulation/devices/${dev.id}/observations`, { method: 'POST', headers, body });
        } catch (e) {
          assert.fail(`the server stopped answering: ${String(e)}\n${node.output()}`);
        }
        if (r.status === 201) {
          acked.push(ts);
          if (restarted) okAfterRestart++;
        } else {
          const b = await json(r);
          refused.push({ status: r.status, retryAfter: r.headers.get('retry-after'), code: b.code });
        }
        await r.body?.cancel().catch(() => undefined);
      }
    };
    const workers = Array.from({ length: 4 }, worker);
    try {
      await waitFor('some uploads before the restart', async () => acked.length >= 20);
      // Asynchronously, so that the uploads go on while PostgreSQL stops and starts.
      await pgc.restart(pgc.primary);
      restarted = true;
      await waitFor('uploads acknowledged again after the restart', async () => okAfterRestart >= 20, 60_000);
    } finally {
      stop = true;
      await Promise.all(workers);
    }

    assert.equal(node.hasExited(), false, 'the server never exited');
    assert.ok(refused.length > 0, 'uploads met the restart');
    t.diagnostic(`${acked.length} uploads acknowledged, ${refused.length} refused with 503`);
    for (const r of refused) assert.deepEqual(r, { status: 503, retryAfter: r.retryAfter, code: 'STORE_UNAVAILABLE' });
    assert.ok(
      refused.every((r) => Number(r.retryAfter) >= 1),
      'every 503 carries Retry-After',
    );

    store = new PostgresStore({ connectionString: url, maxConnections: 1 });
    try {
      const stored = new Set((await store.pool.query('SELECT o.ts FROM observations o JOIN devices d ON d.pk = o.device_pk WHERE d.id = $1', [dev.id])).rows.map((x) => x.ts as number));
      const lost = acked.flat().filter((t) => !stored.has(t));
      assert.deepEqual(lost, [], 'every observation acknowledged with 201 is stored');
    } finally {
      await store.close();
    }
    const ready = await fetch(`${node.url}/readyz`);
    assert.equal(ready.status, 200);
  });
});
