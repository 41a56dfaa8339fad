// A Reef node started while no host of its list is writable (the primary dead, the standby not yet
// promoted: a failover under way) waits for one, logging each look with what each host is, and
// serves once the standby is promoted (REEF_DATABASE_START_WAIT); past the wait it gives up with
// STORE_UNAVAILABLE naming each host's state, and at once when the settings are wrong. A cluster of the test's own (test/helpers/pg-cluster.ts).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { startPrimaryAndStandby, type PgCluster } from '../../helpers/pg-cluster.ts';
import { keptWarnings, startTestServer, tempDir, type TestServer } from '../../helpers/server.ts';
import { waitFor } from '../../helpers/wait.ts';

const WAITING = 'no writable PostgreSQL host yet';

/** A node in the test's process whose warnings are kept; started, not awaited. */
function startNode(url: string, waitMs: number, dataDir: string): { started: Promise<TestServer>; log: string[] } {
  const { logger, log } = keptWarnings();
  const started = startTestServer({ databaseUrl: url, dataDir, databaseStartWaitMs: waitMs }, [], { log: logger });
  // Awaited by the test; this keeps an early rejection from counting as unhandled meanwhile.
  started.catch(() => undefined);
  return { started, log };
}

describe('a node started during a failover waits for a writable host', () => {
  let pgc: PgCluster;
  const dirs: string[] = [];
  const nodes: TestServer[] = [];

  before(async () => {
    pgc = await startPrimaryAndStandby();
    await pgc.kill(pgc.primary);
  });

  after(async () => {
    for (const n of nodes) await n.close().catch(() => undefined);
    await pgc?.stop();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it('past the wait, the start fails naming what each host is, having looked more than once', async () => {
    const dataDir = tempDir();
    dirs.push(dataDir);
    const { started, log } = startNode(pgc.url(), 1500, dataDir);
    const states = `127.0.0.1:${pgc.primary.port} refused connection; 127.0.0.1:${pgc.standby.port} read-only (standby)`;
    await assert.rejects(started, (e: Error & { code?: string }) => {
      assert.equal(e.code, 'STORE_UNAVAILABLE');
      assert.equal(e.message, `no writable PostgreSQL host: ${states}`);
      return true;
    });
    const looks = log.map((l) => JSON.parse(l) as { msg: string; err?: { message: string; attempt: number } }).filter((l) => l.msg.startsWith(WAITING));
    assert.ok(looks.length >= 2, `looked again before giving up:\n${log.join('')}`);
    for (const l of looks) assert.equal(l.err?.message, `no writable PostgreSQL host: ${states}`);
    assert.deepEqual(
      looks.map((l) => l.err?.attempt),
      looks.map((_, i) => i + 1),
    );
  });

  it('a database that does not exist stops the start at once: waiting would not make it', async () => {
    const dataDir = tempDir();
    dirs.push(dataDir);
    const { started, log } = startNode(`postgres://postgres@127.0.0.1:${pgc.standby.port}/reef_no_such_database`, 120_000, dataDir);
    await assert.rejects(started, (e: Error & { code?: string }) => {
      assert.equal(e.code, 'STORE_UNAVAILABLE');
      assert.match(e.message, /database "reef_no_such_database" does not exist/);
      return true;
    });
    assert.equal(log.filter((l) => l.includes(WAITING)).length, 0, `no second look:\n${log.join('')}`);
  });

  it('the standby promoted while the node waits: the start completes and uploads answer 201', async () => {
    const dataDir = tempDir();
    dirs.push(dataDir);
    const { started, log } = startNode(pgc.url(), 120_000, dataDir);
    await waitFor('the node to log that it waits for a writable host', () => log.some((l) => l.includes(WAITING)), 30_000);
    let done = false;
    void started.then(() => (done = true));
    assert.equal(done, false, 'the node is not up before a host is writable');
    await pgc.promote(pgc.standby);
    const node = await started;
    nodes.push(node);
    assert.equal((await node.request('GET', '/readyz')).status, 200);
    const { token } = await node.login('started-in-failover');
    const dev = await node.request('POST', '/api/solutions/StudioSimulation/devices', { token, body: { deviceType: 'VirtualDevice', domainInfo: {} } });
    assert.equal(dev.status, 201);
    const id = ((await dev.json()) as { id: string }).id;
    const up = await node.request('POST', `/api/solutions/StudioSimulation/devices/${id}/observations`, {
      token,
      body: { observations: [{ timestamp: '2026-11-01T00:00:00Z', temperature: 1 }] },
    });
    assert.equal(up.status, 201);
  });
});
