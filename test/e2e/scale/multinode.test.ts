// Two real `reef serve` processes on one PostgreSQL database act as one service: a token from one
// works on the other, an upload on one is read on the other at once, a live-update event raised on
// one reaches a listener on the other (LISTEN/NOTIFY), and the leader-only job moves to the
// surviving node when the leader is killed.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createAccount } from '../../../src/auth/accounts.ts';
import { UPKEEP_STATE_KEY } from '../../../src/jobs/upkeep.ts';
import { PostgresStore } from '../../../src/store/postgres/postgres-store.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/pg.ts';
import { json, startNode, waitFor, type ReefNode } from '../../helpers/reef-node.ts';
import { readSse } from '../../helpers/sse.ts';

describe('several nodes on one PostgreSQL', () => {
  let db: TestDatabase;
  let store: PostgresStore;
  let a: ReefNode;
  let b: ReefNode;

  before(async () => {
    db = await createTestDatabase('reef_multinode');
    // Both start at once: migrations are applied once, under the advisory lock.
    [a, b] = await Promise.all([startNode(db.url), startNode(db.url)]);
    store = new PostgresStore({ connectionString: db.url, maxConnections: 2 });
  });

  after(async () => {
    await Promise.all([a?.kill(), b?.kill()]);
    await store?.close();
    await db?.drop();
  });

  async function token(node: ReefNode, c: { clientId: string; clientSecret: string }): Promise<string> {
    const r = await fetch(`${node.url}/api/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(c) });
    assert.equal(r.status, 201, await r.clone().text());
    return (await json(r)).accessToken;
  }
  const call = (node: ReefNode, method: string, p: string, tok: string, body?: unknown) =>
    fetch(`${node.url}${p}`, {
      method,
      headers: { authorization: tok, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });

  it('a token issued by one node is accepted by the other; an upload on A is read on B at once', async () => {
    const c = await createAccount(store, { name: 'multi' });
    const tokA = await token(a, c);
    const dev = await call(b, 'POST', '/api/solutions/StudioSimulation/devices', tokA, { deviceType: 'VirtualDevice', domainInfo: {} });
    assert.equal(dev.status, 201, 'token from A used on B');
    const { id } = await json(dev);
    const obs = [
      { timestamp: '2026-11-01T10:00:00.000Z', temperature: 21.25 },
      { timestamp: '2026-11-01T10:00:01.000Z', temperature: 21.5, humidity: 40 },
    ];
    const up = await call(a, 'POST', `/api/solutions/StudioSimulation/devices/${id}/observations`, tokA, { observations: obs });
    assert.equal(up.status, 201);
    const read = await call(b, 'GET', `/api/solutions/StudioSimulation/devices/${id}/observations`, tokA);
    assert.equal(read.status, 200);
    assert.deepEqual((await json(read)).observations, [...obs].reverse());
    const latest = await json(await call(b, 'GET', '/api/solutions/StudioSimulation/observations', tokA));
    assert.deepEqual(latest, [{ deviceId: id, observations: [obs[1]] }]);
  });

  it('an event raised on A reaches a listener on B', async () => {
    const c = await createAccount(store, { name: 'events' });
    const tokB = await token(b, c);
    const tokA = await token(a, c);
    const { id } = await json(await call(a, 'POST', '/api/solutions/StudioSimulation/devices', tokA, { deviceType: 'VirtualDevice', domainInfo: {} }));
    const ac = new AbortController();
    const r = await fetch(`${b.url}/api/solutions/StudioSimulation/events`, { headers: { authorization: tokB }, signal: ac.signal });
    assert.equal(r.status, 200);
    const stream = await readSse(r, { subscribed: true });
    // A large batch too: it exceeds a NOTIFY payload and travels through event_payloads.
    const big = Array.from({ length: 300 }, (_, i) => ({ timestamp: new Date(Date.UTC(2026, 10, 2) + i * 1000).toISOString(), temperature: 20 + i / 100 }));
    assert.equal(
      (await call(a, 'POST', `/api/solutions/StudioSimulation/devices/${id}/observations`, tokA, { observations: [{ timestamp: '2026-11-02T00:00:00.000Z', temperature: 7.5 }] })).status,
      201,
    );
    assert.equal((await call(a, 'POST', `/api/solutions/StudioSimulation/devices/${id}/observations`, tokA, { observations: big })).status, 201);
    const got = await stream.take(2, 'observations');
    ac.abort();
    const [first, second] = got.filter((m) => m.event === 'observations').map((m) => JSON.parse(m.data));
    assert.deepEqual(first, { deviceId: id, observations: [{ timestamp: '2026-11-02T00:00:00.000Z', temperature: 7.5 }] });
    assert.deepEqual(second, { deviceId: id, observations: big });
  });

  it('the leader-only job runs on one node and resumes on the other when the leader is killed', async () => {
    const pids = new Map([
      [a.pid, a],
      [b.pid, b],
    ]);
    const ran = async () => {
      const v = await store.getState(UPKEEP_STATE_KEY);
      return v ? (JSON.parse(v) as { node: string; at: string }) : null;
    };
    const first = await waitFor('the first upkeep run', ran);
    const leaderPid = Number(first.node.split('/')[1]);
    const leader = pids.get(leaderPid);
    assert.ok(leader, `the job ran on one of our nodes (${first.node})`);
    const survivor = leader === a ? b : a;
    await leader.kill('SIGKILL');
    const next = await waitFor('the job on the surviving node', async () => {
      const r = await ran();
      return r && Number(r.node.split('/')[1]) === survivor.pid ? r : null;
    });
    assert.ok(Date.parse(next.at) >= Date.parse(first.at));
    assert.equal(survivor.hasExited(), false);
    // The survivor serves alone: tokens and reads keep working.
    const c = await createAccount(store, { name: 'after' });
    assert.equal((await call(survivor, 'GET', '/api/solutions/sandbox/devices', await token(survivor, c))).status !== 401, true);
  });
});
