// Two Reef nodes on one PostgreSQL database and one Redis (REEF_REDIS_URL, docs/mqtt.md "Several
// nodes"), each running its broker in this process, with a real redis-server: a kit reading received
// by node A's gateway reaches subscribers on both nodes exactly once (every node gets it from the
// event bus, only A publishes it), is retained in Redis for a fresh subscriber on B, and reaches no
// other tenant; an ingest message published on B reaches a subscriber on A once; and a persistent
// session's bounds hold in Redis.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { after, before, describe, it } from 'node:test';
import { Aedes } from 'aedes';
import { Redis } from 'ioredis';
import mqtt, { type MqttClient } from 'mqtt';
import { testConfig } from '../../../src/config/config.ts';
import { mqttComponent, type MqttComponent } from '../../../src/mqtt/component.ts';
import { connect, inbox, startMqtt, until, type MqttHarness } from '../../helpers/mqtt.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/pg.ts';
import { startRedis, type RedisServer } from '../../helpers/redis.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { waitFor } from '../../helpers/wait.ts';

const MAC = '00000000000016a1';

describe('MQTT state in Redis, shared by two nodes', () => {
  let db: TestDatabase;
  let redis: RedisServer;
  let a: MqttHarness;
  let b: TestServer;
  let bMq: MqttComponent;
  let bUrl: string;
  const clients: MqttClient[] = [];
  const limits = { ...testConfig({ dataDir: '/x' }).mqtt.limits, sessionMessages: 5, sessionBytes: 10 * 1024 };

  before(async () => {
    db = await createTestDatabase('reef_mqtt_redis');
    redis = await startRedis();
    const mqttConfig = { redisUrl: redis.url, limits };
    a = await startMqtt({ gateway: true, config: { databaseUrl: db.url }, mqtt: mqttConfig });
    // B sends the wills of nodes silent for three of its heartbeats: 200 ms here (60 s by default).
    const factory = mqttComponent({ heartbeatMs: 200 });
    b = await startTestServer({ databaseUrl: db.url, mqtt: { ...a.t.services.config.mqtt, port: 0 } }, [factory]);
    bMq = factory.last!;
    bUrl = `mqtt://127.0.0.1:${bMq.broker.address().port}`;
    assert.equal(a.mq.broker.shared, true, 'node A keeps its MQTT state in Redis');
    assert.equal(bMq.broker.shared, true, 'node B too');
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    await a?.close();
    await b?.close();
    await redis?.stop();
    await db?.drop();
  });

  it("delivers each kit reading once to its owner's subscribers on both nodes, retains it for a new subscriber on B, and to no one else", async () => {
    const alice = await a.t.login('alice');
    const mallory = await a.t.login('mallory');
    const onA = await connect(a, alice.token);
    const onB = await connect({ url: bUrl }, alice.token);
    const otherOnB = await connect({ url: bUrl }, mallory.token);
    clients.push(onA, onB, otherOnB);
    const gotA = inbox(onA);
    const gotB = inbox(onB);
    const leaked = inbox(otherOnB);
    await onA.subscribeAsync(`${alice.tenantId}/alert/+/+`, { qos: 1 });
    await onB.subscribeAsync(`${alice.tenantId}/alert/+/+`, { qos: 1 });
    await otherOnB.subscribeAsync(`${mallory.tenantId}/#`, { qos: 1 });

    const { kit } = await a.gw!.kit(alice.tenantId, MAC);
    await until(() => gotB.length >= 5, 'readings reach node B');
    await kit.stop();
    const published = () => a.mq.broker.stats.published;
    await until(() => gotA.length >= published() && gotB.length >= published(), 'every reading A published reaches both subscribers');
    // Asserting that nothing more arrives: a reading delivered once per node would come a second
    // time through B's event bus, well within this second.
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(gotA.length, published(), 'each reading once on A');
    assert.equal(gotB.length, published(), 'each reading once on B');
    assert.equal(bMq.broker.stats.published, 0, 'node B publishes no kit payload of node A');
    assert.ok(gotB.every((m) => m.topic === `${alice.tenantId}/alert/${MAC}/temp` && /^\d+,-?\d+\.\d\d,[CF]$/.test(m.payload.toString())));
    assert.equal(leaked.length, 0, 'another tenant gets nothing');

    // Retained in Redis: a new subscriber on B gets the last reading at once, flagged retained.
    const late = await connect({ url: bUrl }, alice.token);
    clients.push(late);
    const lateGot = inbox(late);
    await late.subscribeAsync(`${alice.tenantId}/alert/+/+`, { qos: 1 });
    await until(() => lateGot.length >= 1, 'the retained reading');
    assert.equal(lateGot.length, 1);
    assert.equal(lateGot[0]!.retain, true);
    assert.deepEqual(lateGot[0]!.payload, gotB.at(-1)!.payload);
    assert.equal(await redis.client().hexists('retained', `${alice.tenantId}/alert/${MAC}/temp`), 1, 'kept in Redis');
    // Another tenant's wildcard under its own id finds none of it.
    const mal = await connect({ url: bUrl }, mallory.token);
    clients.push(mal);
    const malGot = inbox(mal);
    await mal.subscribeAsync(`${mallory.tenantId}/alert/+/+`, { qos: 1 });
    await mal.subscribeAsync(`${alice.tenantId}/alert/+/+`).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 300)); // asserting that nothing arrives
    assert.equal(malGot.length, 0);
  });

  it('passes an ingest message published on B to a subscriber on A, once', async () => {
    const bob = await a.t.login('bob');
    const r = await a.t.request('POST', '/api/solutions/plant/devices', { token: bob.token, body: { deviceType: 'Thermo' } });
    const { id } = (await r.json()) as { id: string };
    const topic = `${bob.tenantId}/solutions/plant/devices/${id}/observations`;
    const sub = await connect(a, bob.token);
    clients.push(sub);
    const got = inbox(sub);
    await sub.subscribeAsync(topic, { qos: 1 });
    const pub = await connect({ url: bUrl }, bob.token);
    clients.push(pub);
    const body = '{"observations":[{"timestamp":"2026-05-01T00:00:00Z","temperature":12.5}]}';
    await pub.publishAsync(topic, body, { qos: 1 });
    await until(() => got.length === 1, 'the message reaches node A');
    await new Promise((r) => setTimeout(r, 300)); // asserting that it does not come twice
    assert.equal(got.length, 1);
    assert.equal(got[0]!.payload.toString(), body);
  });

  it("holds a session's bound in Redis, whichever node queues the messages", async () => {
    const carol = await a.t.login('carol');
    const clientId = 'bounded';
    const s = mqtt.connect(a.url, { username: 'notused', password: carol.token, clientId, clean: false, protocolVersion: 4, reconnectPeriod: 0 });
    clients.push(s);
    await new Promise((resolve, reject) => s.once('connect', resolve).once('error', reject));
    await s.subscribeAsync(`${carol.tenantId}/alert/+/+`, { qos: 1 });
    await s.endAsync();
    await waitFor('the session is away, counted for the account on both nodes', async () => (await bMq.broker.stored.awayOf(carol.tenantId)) === 1);
    assert.equal(await a.mq.broker.stored.awayOf(carol.tenantId), 1);
    assert.equal(await bMq.broker.stored.isAway(`${carol.tenantId}/${clientId}`), true);
    // A witness on B sees each payload once it has been queued and passed on (the session, back at
    // once, could otherwise get one both from its queue and live, as QoS 1 allows).
    const witness = await connect({ url: bUrl }, carol.token);
    clients.push(witness);
    const seen = inbox(witness);
    await witness.subscribeAsync(`${carol.tenantId}/alert/+/+`, { qos: 1 });
    // Twelve payloads, queued in turn by A and B (each node's own, as if from its gateway).
    for (let i = 0; i < 12; i++) {
      const node = i % 2 ? bMq.broker : a.mq.broker;
      node.publishKitPayload({ kind: 'kit-payload', groupId: 'g', tenantId: carol.tenantId, mac: MAC, sensorType: 'temp', payload: Buffer.from(`m${i}`).toString('base64') });
      await waitFor('queued', async () => i >= 5 || (await a.mq.broker.stored.held(`${carol.tenantId}/${clientId}`)).messages === i + 1);
    }
    await waitFor('seven dropped', () => a.mq.broker.stored.stats.sessionDropped + bMq.broker.stored.stats.sessionDropped === 7);
    await waitFor('all twelve passed on', () => seen.length === 12);
    assert.equal((await bMq.broker.stored.held(`${carol.tenantId}/${clientId}`)).messages, 5, 'REEF_MQTT_SESSION_MESSAGES for the session, not per node');
    const back = mqtt.connect(bUrl, { username: 'notused', password: carol.token, clientId, clean: false, protocolVersion: 4, reconnectPeriod: 0 });
    clients.push(back);
    const got: string[] = [];
    back.on('message', (_t, p) => got.push(p.toString()));
    const present = await new Promise<boolean>((resolve, reject) => back.once('connect', (c) => resolve(c.sessionPresent)).once('error', reject));
    assert.equal(present, true, 'the session is found on the other node');
    await until(() => got.length === 5, 'the queued messages');
    assert.deepEqual(got, ['m0', 'm1', 'm2', 'm3', 'm4']);
    await waitFor('acknowledged messages leave the queue', async () => (await a.mq.broker.stored.held(`${carol.tenantId}/${clientId}`)).messages === 0);
  });

  it("sends the will a dead node left in Redis, as its client's message, checked against its account", async () => {
    const dave = await a.t.login('dave');
    const erin = await a.t.login('erin');
    const device = async (token: string) => ((await (await a.t.request('POST', '/api/solutions/plant/devices', { token, body: { deviceType: 'Thermo' } })).json()) as { id: string }).id;
    const daveTopic = `${dave.tenantId}/solutions/plant/devices/${await device(dave.token)}/observations`;
    const erinTopic = `${erin.tenantId}/solutions/plant/devices/${await device(erin.token)}/observations`;
    const onA = await connect(a, dave.token);
    const erinOnA = await connect(a, erin.token);
    clients.push(onA, erinOnA);
    const got = inbox(onA);
    const erinGot = inbox(erinOnA);
    await onA.subscribeAsync(daveTopic, { qos: 1 });
    await erinOnA.subscribeAsync(erinTopic, { qos: 1 });

    // A node on the same Redis held two of dave's clients with wills (one aimed at erin's device),
    // then died: it never beats again and hands nothing over.
    const require = createRequire(import.meta.url);
    const conns = [new Redis(redis.url), new Redis(redis.url), new Redis(redis.url)];
    const ghost = new Aedes({
      persistence: require('aedes-persistence-redis')({ conn: conns[0] }),
      mq: require('mqemitter-redis')({ subConn: conns[1], pubConn: conns[2], matchEmptyLevels: true }),
    });
    await ghost.listen();
    const store = (ghost as unknown as { persistence: { putWill(c: { id: string }, p: object): Promise<void> } }).persistence;
    const will = '{"observations":[{"timestamp":"2026-08-01T00:00:00Z","temperature":-3.5}]}';
    await store.putWill({ id: `${dave.tenantId}/gone-router` }, { cmd: 'publish', topic: daveTopic, payload: Buffer.from(will), qos: 1, retain: false });
    await store.putWill({ id: `${dave.tenantId}/gone-rogue` }, { cmd: 'publish', topic: erinTopic, payload: Buffer.from(will), qos: 1, retain: false });
    for (const t of ['_heartbeatInterval', '_clearWillInterval']) clearInterval((ghost as unknown as Record<string, NodeJS.Timeout>)[t]);
    for (const c of conns) c.disconnect();

    await until(() => got.length === 1, "the will reaches dave's subscriber on A");
    assert.equal(got[0]!.payload.toString(), will);
    const stored = await a.t.request('GET', `/api/solutions/plant/devices/${daveTopic.split('/')[4]}/observations`, { token: dave.token });
    assert.deepEqual(((await stored.json()) as { observations: unknown[] }).observations, [{ timestamp: '2026-08-01T00:00:00.000Z', temperature: -3.5 }]);
    await waitFor('both wills taken from Redis', async () => (await redis.client().llen('will')) === 0);
    assert.equal(erinGot.length, 0, "a will aimed at another tenant's device is not delivered");
  });
});
