// The PostgreSQL event bus sends nothing while its node is alone on the database, and learns at once
// of a node that arrives: events then flow both ways.
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { fromOtherNode, type ReefEvent } from '../../../src/events/bus.ts';
import { PgEventBus } from '../../../src/events/pg-bus.ts';
import { PostgresStore } from '../../../src/store/postgres/postgres-store.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/pg.ts';
import { waitFor } from '../../helpers/wait.ts';

let db: TestDatabase;
let store: PostgresStore;
before(async () => {
  db = await createTestDatabase('reef_pgbus');
  store = new PostgresStore({ connectionString: db.url, maxConnections: 4 });
  await store.migrate();
});
after(async () => {
  await store?.close();
  await db?.drop();
});

const open = () => PgEventBus.open({ newClient: (c) => store.hosts.client(c), pool: store.pool, readObservations: async () => [] });
const device = (deviceId: string): ReefEvent => ({ kind: 'device', groupId: 'G', solution: 'S', deviceId, action: 'created' });

it('a node alone sends nothing; a node that arrives is known at once, and events reach it', async () => {
  const a = await open();
  try {
    await a.ready;
    assert.equal(a.othersListening, false, 'alone on the database: nothing to send');
    const local: string[] = [];
    const off = a.subscribe((e) => local.push((e as { deviceId: string }).deviceId));
    a.publish(device('d0'));
    assert.deepEqual(local, ['d0'], 'still delivered in process');
    off();
    const b = await open();
    try {
      await b.ready;
      assert.equal(b.othersListening, true, 'the newcomer sees the node already there');
      // The newcomer's hello tells the first node without waiting for its next presence check.
      await waitFor('the first node to hear of the second', () => a.othersListening || null);
      const got = new Promise<ReefEvent>((resolve) => b.subscribe(resolve));
      const mine = new Promise<ReefEvent>((resolve) => a.subscribe(resolve));
      a.publish(device('d1'));
      const there = await got;
      assert.equal((there as { deviceId: string }).deviceId, 'd1');
      // Who acts on an event once for all nodes (MQTT on Redis) tells the two apart.
      assert.equal(fromOtherNode(there), true, 'marked on the node that received it');
      assert.equal(fromOtherNode(await mine), false, 'not on the node that published it');
      assert.equal(JSON.stringify(there), JSON.stringify(device('d1')), 'the mark is not part of the event');
      const back = new Promise<string>((resolve) => a.subscribe((e) => resolve((e as { deviceId: string }).deviceId)));
      b.publish(device('d2'));
      assert.equal(await back, 'd2');
    } finally {
      await b.close();
    }
  } finally {
    await a.close();
  }
});

it('a node alone is idle for a kind nobody here takes: uploads then build no event; a listener here or another node ends that', async () => {
  const a = await open();
  try {
    await a.ready;
    // The previous test's nodes may linger in pg_stat_activity for a moment after closing.
    await waitFor('the node to find itself alone, with no subscriber', () => a.idleFor('observations') || null);
    const offRules = a.subscribe(() => undefined, ['alarm-rule']);
    assert.equal(a.idleFor('observations'), true, 'a subscriber of other kinds does not count');
    assert.equal(a.idleFor('alarm-rule'), false);
    const offAll = a.subscribe(() => undefined);
    assert.equal(a.idleFor('observations'), false, 'a subscriber of every kind (a live stream) here');
    offAll();
    assert.equal(a.idleFor('observations'), true);
    const b = await open();
    try {
      await b.ready;
      await waitFor('the first node to hear of the second', () => a.othersListening || null);
      assert.equal(a.idleFor('observations'), false, 'another node may be listening');
      assert.equal(b.idleFor('observations'), false);
    } finally {
      await b.close();
    }
    offRules();
  } finally {
    await a.close();
  }
});

it('a node reads back the observations another node announces only when something here takes observations', async () => {
  const reads: string[] = [];
  const spans: [string, number, number, number][] = [];
  const a = await open();
  const b = await PgEventBus.open({
    newClient: (c) => store.hosts.client(c),
    pool: store.pool,
    readObservations: async (deviceId, from, to, count) => {
      reads.push(deviceId);
      spans.push([deviceId, from, to, count]);
      return [{ timestamp: '2026-01-01T00:00:00.000Z', temperature: 1 }];
    },
  });
  try {
    await Promise.all([a.ready, b.ready]);
    await waitFor('the first node to hear of the second', () => a.othersListening || null);
    // An upload of 100 readings is announced by reference (its rows are stored), not inline: the
    // time span its publisher attaches (src/service/observations.ts) is what the other node is told.
    const upload = (deviceId: string): ReefEvent => {
      const e = { kind: 'observations' as const, groupId: 'G', solution: 'S', deviceId, observations: [] };
      Object.defineProperty(e, 'span', { value: { from: Date.UTC(2026, 0, 1), to: Date.UTC(2026, 0, 1) + 99_000, count: 100 }, enumerable: false });
      return e;
    };
    const rules: string[] = [];
    b.subscribe((e) => rules.push((e as { deviceId: string }).deviceId), ['alarm-rule', 'device']);
    a.publish(upload('u1'));
    a.publish(device('d1')); // sent after u1: once it arrives, u1 has been handled
    await waitFor('the device event', () => rules.includes('d1') || null);
    assert.deepEqual(reads, [], 'no subscriber of observations on b: u1 is not read back');
    const got = new Promise<string>((resolve) => b.subscribe((e) => resolve((e as { deviceId: string }).deviceId), ['observations']));
    a.publish(upload('u2'));
    assert.equal(await got, 'u2');
    assert.deepEqual(reads, ['u2']);
    assert.deepEqual(spans, [['u2', Date.UTC(2026, 0, 1), Date.UTC(2026, 0, 1) + 99_000, 100]]);
  } finally {
    await b.close();
    await a.close();
  }
});
