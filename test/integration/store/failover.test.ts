// A PostgreSQL primary and its synchronous standby of the test's own (test/helpers/pg-cluster.ts),
// and two Reef nodes given both hosts in one URL. The nodes are never restarted:
// - with no writable host in the list, the start fails naming what each host is;
// - a primary turned read-only is given up at the first write refused (SQLSTATE 25006): uploads
//   answer 503 STORE_UNAVAILABLE with Retry-After meanwhile, and 201 again once it is writable;
// - the primary killed (SIGKILL) and the standby promoted: uploads answer 503 + Retry-After until the
//   promotion, then 201 on both nodes, each warning that the new primary has no synchronous standby;
//   every upload acknowledged is on the new primary; events cross
//   nodes again and one node leads, its lock held on the new primary;
// - the old primary rebuilt as the new primary's synchronous standby, and that primary killed in
//   turn: every upload acknowledged is on the newest primary.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { NO_SYNC_STANDBY } from '../../../src/store/postgres/hosts.ts';
import { LOCK_LEADER } from '../../../src/store/postgres/migrations.ts';
import { query as sql, replicationState, startPrimaryAndStandby, type PgCluster } from '../../helpers/pg-cluster.ts';
import { freePort } from '../../helpers/ports.ts';
import { keptWarnings, startTestServer, tempDir, type TestServer } from '../../helpers/server.ts';
import { readSse } from '../../helpers/sse.ts';
import { waitFor } from '../../helpers/wait.ts';
import pg from 'pg';

const T0 = Date.UTC(2026, 10, 1);
const PER_BATCH = 10;

/** When a client connected to this host alone first commits a write (a transaction id is assigned only outside recovery). */
async function firstWrite(url: string): Promise<number> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  c.on('error', () => undefined);
  await c.connect();
  try {
    return await waitFor(
      'the promoted standby to take a write',
      async () => {
        await c.query('SELECT txid_current()');
        return Date.now();
      },
      60_000,
      5,
    );
  } finally {
    await c.end().catch(() => undefined);
  }
}

/** A node in the test's process whose warnings (host changes among them) are kept. */
async function startNode(url: string): Promise<{ node: TestServer; log: string[] }> {
  const { logger, log } = keptWarnings();
  const node = await startTestServer({ databaseUrl: url }, [], { log: logger });
  return { node, log };
}

interface Refusal {
  node: string;
  status: number;
  code: string | undefined;
  retryAfter: string | null;
}

/**
 * Clients uploading without pause, each to its own device through one node: timestamps never repeat,
 * so what is stored can be compared with what was acknowledged, exactly.
 */
class Uploads {
  readonly acked = new Map<string, number[]>();
  readonly sent = new Map<string, number[]>();
  readonly refused: Refusal[] = [];
  /** Per node: each 201, when it was answered and when its request had started. */
  readonly oks = new Map<string, { startedAt: number; at: number }[]>();
  private stopped = false;
  private readonly running: Promise<void>[] = [];
  private seq = 0;

  /** Uploads through each node given, each to a device of its own made through that node (a node given twice: two). */
  static async on(token: string, nodes: readonly (readonly [string, { node: TestServer }])[]): Promise<Uploads> {
    const uploads = new Uploads();
    for (const [name, n] of nodes) {
      const r = await n.node.request('POST', '/api/solutions/StudioSimulation/devices', { token, body: { deviceType: 'VirtualDevice', domainInfo: {} } });
      assert.equal(r.status, 201);
      uploads.start(n.node, name, token, ((await r.json()) as { id: string }).id);
    }
    return uploads;
  }

  start(node: TestServer, name: string, token: string, deviceId: string): void {
    this.acked.set(deviceId, []);
    this.sent.set(deviceId, []);
    this.oks.set(name, this.oks.get(name) ?? []);
    this.running.push(this.loop(node, name, token, deviceId));
  }

  private async loop(node: TestServer, name: string, token: string, deviceId: string): Promise<void> {
    while (!this.stopped) {
      const n = this.seq++;
      const ts = Array.from({ length: PER_BATCH }, (_, i) => T0 + (n * PER_BATCH + i) * 1000);
      this.sent.get(deviceId)!.push(...ts);
      const startedAt = Date.now();
      const r = await node.request('POST', `/api/solutions/StudioSimulation/devices/${deviceId}/observations`, {
        token,
        body: { observations: ts.map((t) => ({ timestamp: new Date(t).toISOString(), temperature: (n % 40) + 0.5 })) },
      });
      const body = (await r.json().catch(() => ({}))) as { code?: string };
      if (r.status === 201) {
        this.acked.get(deviceId)!.push(...ts);
        this.oks.get(name)!.push({ startedAt, at: Date.now() });
      } else {
        this.refused.push({ node: name, status: r.status, code: body.code, retryAfter: r.headers.get('retry-after') });
        // A client would wait Retry-After (1 s); these retry sooner, to see the first moment writes work again.
        await new Promise((res) => setTimeout(res, 20));
      }
    }
  }

  okSince(name: string, t: number): number {
    return (this.oks.get(name) ?? []).filter((x) => x.startedAt >= t).length;
  }

  refusedBy(name: string): number {
    return this.refused.filter((r) => r.node === name).length;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.running);
  }
}

/** Every refusal was 503 STORE_UNAVAILABLE with a Retry-After: never a 500. */
function assertRefusalsUnavailable(refused: readonly Refusal[]): void {
  const other = refused.filter((r) => r.status !== 503 || r.code !== 'STORE_UNAVAILABLE' || !(Number(r.retryAfter) >= 1));
  assert.deepEqual(other, [], 'every refused upload was 503 STORE_UNAVAILABLE with Retry-After');
}

/**
 * Every observation acknowledged with 201 is stored on the host, and nothing is stored that was not
 * sent (beyond the 201s, uploads answered 503 may or may not have committed).
 */
async function assertStored(url: string, uploads: Uploads): Promise<void> {
  for (const [device, acked] of uploads.acked) {
    const stored = (await sql<{ ts: number }>(url, 'SELECT o.ts FROM observations o JOIN devices d ON d.pk = o.device_pk WHERE d.id = $1', [device])).map((r) => Number(r.ts));
    const have = new Set(stored);
    const sent = new Set(uploads.sent.get(device));
    assert.deepEqual(
      acked.filter((x) => !have.has(x)),
      [],
      `every observation of ${device} acknowledged with 201 is stored`,
    );
    assert.deepEqual(
      stored.filter((x) => !sent.has(x)),
      [],
      `nothing is stored for ${device} that was not sent`,
    );
  }
}

/** Who holds the leader lock on a host: the application names of the sessions holding it. */
async function leaderSessions(url: string): Promise<string[]> {
  const rows = await sql<{ app: string }>(
    url,
    `SELECT a.application_name AS app FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
     WHERE l.locktype = 'advisory' AND l.granted AND ((l.classid::bigint << 32) | l.objid::bigint) = $1::bigint`,
    [LOCK_LEADER.toString()],
  );
  return rows.map((r) => r.app);
}

describe('PostgreSQL primary and synchronous standby: Reef nodes ride through', () => {
  let pgc: PgCluster;
  const nodes: { node: TestServer; log: string[] }[] = [];

  before(async () => {
    pgc = await startPrimaryAndStandby();
  });

  after(async () => {
    for (const n of nodes) await n.node.close().catch(() => undefined);
    await pgc?.stop();
  });

  it('a list with no writable host stops the start, naming what each host is (no start wait)', async () => {
    const refused = await freePort();
    const url = `postgres://postgres@127.0.0.1:${refused},127.0.0.1:${pgc.standby.port}/postgres`;
    const dataDir = tempDir();
    try {
      await assert.rejects(startTestServer({ databaseUrl: url, dataDir, databaseStartWaitMs: 0 }), (e: Error & { code?: string }) => {
        assert.equal(e.code, 'STORE_UNAVAILABLE');
        assert.equal(e.message, `no writable PostgreSQL host: 127.0.0.1:${refused} refused connection; 127.0.0.1:${pgc.standby.port} read-only (standby)`);
        return true;
      });
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('two nodes start on the list and find the primary, whichever host comes first', async () => {
    // The standby first: the nodes must pass over it.
    const url = `postgres://postgres@127.0.0.1:${pgc.standby.port},127.0.0.1:${pgc.primary.port}/postgres?target_session_attrs=read-write`;
    nodes.push(await startNode(url), await startNode(pgc.url()));
    for (const { node } of nodes) assert.equal((await node.request('GET', '/readyz')).status, 200);
    // The primary has its synchronous standby: nothing to warn of.
    for (const n of nodes) assert.ok(!n.log.some((l) => l.includes(NO_SYNC_STANDBY)), n.log.join(''));
    await waitFor(
      'one node to lead, its lock on the primary',
      async () => (await leaderSessions(pgc.primary.url())).length === 1 && nodes.filter((n) => n.node.services.leadership.isLeader()).length === 1,
    );
  });

  it('a primary turned read-only: uploads answer 503 with Retry-After, then 201 once it is writable, no node restarted', async () => {
    const [a, b] = nodes as [{ node: TestServer; log: string[] }, { node: TestServer; log: string[] }];
    const { token } = await a.node.login('read-only');
    const uploads = await Uploads.on(token, [
      ['a', a],
      ['b', b],
    ] as const);
    try {
      await waitFor('uploads on both nodes', () => uploads.okSince('a', 0) >= 5 && uploads.okSince('b', 0) >= 5);
      await sql(pgc.primary.url(), 'ALTER SYSTEM SET default_transaction_read_only = on');
      await sql(pgc.primary.url(), 'SELECT pg_reload_conf()');
      await waitFor('both nodes to refuse uploads', () => uploads.refusedBy('a') >= 3 && uploads.refusedBy('b') >= 3);
      await sql(pgc.primary.url(), 'ALTER SYSTEM RESET default_transaction_read_only');
      await sql(pgc.primary.url(), 'SELECT pg_reload_conf()');
      const writable = Date.now();
      await waitFor('uploads acknowledged again on both nodes', () => uploads.okSince('a', writable) >= 3 && uploads.okSince('b', writable) >= 3, 30_000);
    } finally {
      await uploads.stop();
    }
    assertRefusalsUnavailable(uploads.refused);
    // The write refused as read-only is what made each node give the host up (hosts.ts).
    for (const n of [a, b])
      assert.ok(
        n.log.some((l) => l.includes('refused a write')),
        `a node gave the primary up on a refused write:\n${n.log.join('')}`,
      );
    await assertStored(pgc.primary.url(), uploads);
    // The leader's session went with the host's other connections: one node leads again.
    await waitFor(
      'one node to lead again, its lock on the primary',
      async () => (await leaderSessions(pgc.primary.url())).length === 1 && nodes.filter((n) => n.node.services.leadership.isLeader()).length === 1,
      30_000,
    );
  });

  it('the primary killed and the standby promoted: 503 with Retry-After until then, 201 after; every 201 is on the new primary; events and leadership resume', async (t) => {
    const [a, b] = nodes as [{ node: TestServer; log: string[] }, { node: TestServer; log: string[] }];
    const { token } = await a.node.login('failover');
    const uploads = await Uploads.on(token, [
      ['a', a],
      ['a', a],
      ['b', b],
      ['b', b],
    ] as const);
    let promoting = 0;
    let directWrite = 0;
    try {
      await waitFor('uploads on both nodes', () => uploads.okSince('a', 0) >= 10 && uploads.okSince('b', 0) >= 10);
      await pgc.kill(pgc.primary);
      // No primary now: both nodes must be seen refusing before there is one again.
      await waitFor('both nodes to refuse uploads while no host is writable', () => uploads.refusedBy('a') >= 3 && uploads.refusedBy('b') >= 3);
      promoting = Date.now();
      // The same run's baseline: how soon a client connected to the standby alone can write there.
      const direct = firstWrite(pgc.standby.url());
      await pgc.promote(pgc.standby);
      const promoted = Date.now();
      directWrite = await direct;
      await waitFor('uploads acknowledged again on both nodes after the promotion', () => uploads.okSince('a', promoted) >= 5 && uploads.okSince('b', promoted) >= 5, 60_000);
    } finally {
      await uploads.stop();
    }
    // No host took writes between the kill and the promotion: every 201 answered since came from the new primary.
    const firstOk = (name: string) =>
      Math.min(
        ...uploads.oks
          .get(name)!
          .filter((x) => x.at >= promoting)
          .map((x) => x.at),
      );
    const s = (at: number) => ((at - promoting) / 1000).toFixed(2);
    t.diagnostic(`seconds from pg_ctl promote: a client on the standby alone writes at ${s(directWrite)}; the first 201 of node a at ${s(firstOk('a'))}, of node b at ${s(firstOk('b'))}`);
    t.diagnostic(`${[...uploads.acked.values()].reduce((n, x) => n + x.length, 0) / PER_BATCH} uploads acknowledged, ${uploads.refused.length} refused`);

    assertRefusalsUnavailable(uploads.refused);
    // The promoted standby has no synchronous standby of its own yet: each node says so as it takes it.
    for (const n of nodes)
      assert.ok(
        n.log.some((l) => l.includes(NO_SYNC_STANDBY) && l.includes(`127.0.0.1:${pgc.standby.port}`)),
        n.log.join(''),
      );
    const newPrimary = pgc.standby.url();
    await assertStored(newPrimary, uploads);

    // Leadership: one node leads again, and its lock is held on the new primary.
    await waitFor(
      'one node to lead, its lock on the new primary',
      async () => (await leaderSessions(newPrimary)).length === 1 && nodes.filter((n) => n.node.services.leadership.isLeader()).length === 1,
      30_000,
    );

    // Events cross nodes again, both ways: an upload on one node reaches a stream on the other.
    const probe = await a.node.login('failover-events');
    for (const [from, to] of [
      [a.node, b.node],
      [b.node, a.node],
    ] as const) {
      const dev = (
        (await (await from.request('POST', '/api/solutions/StudioSimulation/devices', { token: probe.token, body: { deviceType: 'VirtualDevice', domainInfo: {} } })).json()) as { id: string }
      ).id;
      const ac = new AbortController();
      const res = await fetch(`${to.url}/api/solutions/StudioSimulation/events`, { headers: { authorization: probe.token }, signal: ac.signal });
      const events = await readSse(res, { subscribed: true });
      let seen = false;
      const reading = (async () => {
        for (let m = await events.next(); m && !seen; m = await events.next()) if (m.event === 'observations' && m.data.includes(dev)) seen = true;
      })().catch(() => undefined);
      let k = 0;
      try {
        // Live events are best effort: those sent before the listener is back are not replayed, so keep sending.
        await waitFor(
          'an upload on one node to reach a stream on the other',
          async () => {
            const r = await from.request('POST', `/api/solutions/StudioSimulation/devices/${dev}/observations`, {
              token: probe.token,
              body: { observations: [{ timestamp: new Date(T0 + k++ * 1000).toISOString(), temperature: 1 }] },
            });
            assert.equal(r.status, 201);
            return seen;
          },
          30_000,
          200,
        );
      } finally {
        ac.abort();
        await reading;
      }
    }
    for (const { node } of nodes) assert.equal((await node.request('GET', '/readyz')).status, 200);
  });

  it('a second failover, the old primary rebuilt as the synchronous standby of the new: every 201 is on the newest primary', async () => {
    const [a, b] = nodes as [{ node: TestServer; log: string[] }, { node: TestServer; log: string[] }];
    // Promoted, the standby had no synchronous standby of its own: its commits were on it alone.
    assert.deepEqual(await replicationState(pgc.standby), { syncNames: '', standbys: [] });
    await pgc.rejoin(pgc.primary, pgc.standby);
    assert.deepEqual(await replicationState(pgc.standby), { syncNames: '*', standbys: [{ state: 'streaming', syncState: 'sync' }] });
    const { token } = await a.node.login('second-failover');
    const uploads = await Uploads.on(token, [
      ['a', a],
      ['b', b],
    ] as const);
    try {
      await waitFor('uploads on both nodes', () => uploads.okSince('a', 0) >= 10 && uploads.okSince('b', 0) >= 10);
      await pgc.kill(pgc.standby);
      await pgc.promote(pgc.primary);
      const promoted = Date.now();
      await waitFor('uploads acknowledged again on both nodes after the second promotion', () => uploads.okSince('a', promoted) >= 5 && uploads.okSince('b', promoted) >= 5, 60_000);
    } finally {
      await uploads.stop();
    }
    assertRefusalsUnavailable(uploads.refused);
    await assertStored(pgc.primary.url(), uploads);
  });
});
