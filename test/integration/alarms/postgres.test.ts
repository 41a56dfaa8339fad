// Alarms on two nodes sharing one PostgreSQL: one node (the leader) evaluates, every alarm is raised
// once whichever node the readings arrive at, and the other node takes over when the leader goes.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createTestDatabase } from '../../helpers/pg.ts';
import { waitFor } from '../../helpers/wait.ts';
import { alarms, at, createRule, newDevice, nextEvent, startAlarmServer, upload, type AlarmServer } from '../../helpers/alarms.ts';

test('two PostgreSQL nodes raise each alarm once; rules made on either node apply; the survivor takes over', async () => {
  const db = await createTestDatabase('reef_alarms');
  const clock = { now: Date.now() };
  let a: AlarmServer | null = null;
  let b: AlarmServer | null = null;
  try {
    a = await startAlarmServer({ databaseUrl: db.url }, {}, clock);
    b = await startAlarmServer({ databaseUrl: db.url }, {}, clock);
    assert.ok(a.parts.engine.running, 'the leader evaluates');
    assert.ok(!b.parts.engine.running, 'the other node does not');
    const creds = await a.account('twins');
    const ta = await a.token(creds);
    const tb = await b.token(creds);
    const dev = await newDevice(a, ta);
    // Made on the node that does not evaluate: the leader hears of it over the bus.
    const ruleMade = nextEvent(a, (e) => e.kind === 'alarm-rule');
    await createRule(b, tb, { condition: 'above', threshold: 8, hysteresis: 1, deviceId: dev });
    await ruleMade;
    await a.parts.engine.flush();

    const raised = nextEvent(a, (e) => e.kind === 'alarm' && e.event === 'raised');
    // The same breach reaches both nodes (a client retrying on the other one, two gateways...).
    await upload(b, tb, dev, [at(b, 0, 9)]);
    await upload(a, ta, dev, [at(a, 1, 9.5)]);
    await upload(b, tb, dev, [at(b, 2, 10)]);
    await raised;
    const cleared = nextEvent(a, (e) => e.kind === 'alarm' && e.event === 'cleared');
    await upload(b, tb, dev, [at(b, 3, 6)]);
    await cleared;
    await a.parts.engine.flush();
    const list = await alarms(b, tb);
    assert.deepEqual(
      list.map((x) => x.status),
      ['cleared-unacknowledged'],
      'one alarm, raised once and cleared once',
    );

    // The leader goes: the other node takes over evaluation and continues from the stored state.
    await a.close();
    a = null;
    await b.parts.engine.whenRunning();
    await upload(b, tb, dev, [at(b, 4, 12)]);
    await b.parts.engine.flush();
    assert.deepEqual(
      (await alarms(b, tb)).map((x) => x.status),
      ['raised', 'cleared-unacknowledged'],
    );
  } finally {
    await a?.close();
    await b?.close();
    await db.drop();
  }
});

test('a PostgreSQL node alone with no rules builds no observation events; a rule made there applies to the next upload', async () => {
  const db = await createTestDatabase('reef_alarms');
  const clock = { now: Date.now() };
  let a: AlarmServer | null = null;
  try {
    a = await startAlarmServer({ databaseUrl: db.url }, {}, clock);
    const events = a.services.events;
    assert.ok(events.idleFor, 'the PostgreSQL bus says per kind whether anyone listens');
    // The bus assumes another node until its presence check says it is alone.
    await waitFor('the bus to find itself alone', () => events.idleFor!('observations') || null);
    assert.equal(events.idleFor('observations'), true, 'the engine listens for rule changes only');
    assert.equal(events.idleFor('alarm-rule'), false);
    const creds = await a.account('alone');
    const t = await a.token(creds);
    const dev = await newDevice(a, t);
    await createRule(a, t, { condition: 'above', threshold: 8, hysteresis: 1, deviceId: dev });
    assert.equal(events.idleFor('observations'), false, 'with a rule, observations are listened to');
    const raised = nextEvent(a, (e) => e.kind === 'alarm' && e.event === 'raised');
    await upload(a, t, dev, [at(a, 0, 9)]);
    await raised;
    await a.parts.engine.flush();
    assert.deepEqual(
      (await alarms(a, t)).map((x) => x.status),
      ['raised'],
    );
  } finally {
    await a?.close();
    await db.drop();
  }
});
