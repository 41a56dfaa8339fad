// A Redis outage never takes MQTT down (docs/mqtt.md "Several nodes"): with its redis-server killed,
// a node moves its MQTT state to memory, says so once, reconnects its clients, and goes on serving
// MQTT connections, publishes and HTTP; when Redis answers again it moves back, and says so once. A
// node started while Redis is down serves MQTT from memory at once and moves to Redis when it is up.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import mqtt, { type MqttClient } from 'mqtt';
import pino from 'pino';
import { testConfig } from '../../../src/config/config.ts';
import { mqttComponent, type MqttComponent } from '../../../src/mqtt/component.ts';
import { closed, connect, inbox } from '../../helpers/mqtt.ts';
import { startRedis, type RedisServer } from '../../helpers/redis.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { waitFor } from '../../helpers/wait.ts';

/** A node with the broker on Redis, its log lines kept. */
async function startNode(redisUrl: string): Promise<{ t: TestServer; mq: MqttComponent; url: string; logs: { level: number; msg: string }[] }> {
  const logs: { level: number; msg: string }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line) logs.push(JSON.parse(line) as { level: number; msg: string });
      done();
    },
  });
  const factory = mqttComponent();
  const mqttConfig = { ...testConfig({ dataDir: '/x' }).mqtt, port: 0, tlsPort: 0, redisUrl };
  const t = await startTestServer({ mqtt: mqttConfig }, [factory], { log: pino({ level: 'info' }, sink) });
  const mq = factory.last!;
  return { t, mq, url: `mqtt://127.0.0.1:${mq.broker.address().port}`, logs };
}

const WARN = 40;
const about = (logs: { level: number; msg: string }[], re: RegExp, level?: number) => logs.filter((l) => re.test(l.msg) && (level === undefined || l.level === level));

describe('MQTT through a Redis outage', () => {
  let redis: RedisServer;
  const nodes: TestServer[] = [];
  const clients: MqttClient[] = [];

  before(async () => {
    redis = await startRedis();
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    for (const t of nodes) await t.close();
    await redis?.stop();
  });

  it('keeps serving MQTT and HTTP from memory while Redis is down, then returns to Redis', async () => {
    const n = await startNode(redis.url);
    nodes.push(n.t);
    assert.equal(n.mq.broker.shared, true);
    const alice = await n.t.login('alice');
    const r = await n.t.request('POST', '/api/solutions/plant/devices', { token: alice.token, body: { deviceType: 'Thermo' } });
    const { id } = (await r.json()) as { id: string };
    const topic = `${alice.tenantId}/solutions/plant/devices/${id}/observations`;
    const upload = (i: number) => JSON.stringify({ observations: [{ timestamp: `2026-07-01T00:00:0${i}Z`, temperature: i }] });

    const before = mqtt.connect(n.url, { username: 'notused', password: alice.token, clientId: 'keeper', clean: false, protocolVersion: 4, reconnectPeriod: 0 });
    clients.push(before);
    await new Promise((resolve, reject) => before.once('connect', resolve).once('error', reject));
    await before.subscribeAsync(topic, { qos: 1 });
    assert.deepEqual(await redis.client().smembers('clients'), [`${alice.tenantId}/keeper`], 'the session is in Redis');

    // The outage: redis-server killed. The node's clients are disconnected, to reconnect to memory.
    const beforeClosed = closed(before);
    await redis.kill();
    await beforeClosed;
    await waitFor('the node to move to memory', () => !n.mq.broker.shared);

    // MQTT goes on: a subscriber and a publisher connect, a QoS 1 message is stored and delivered.
    const sub = await connect({ url: n.url }, alice.token);
    const pub = await connect({ url: n.url }, alice.token);
    clients.push(sub, pub);
    const got = inbox(sub);
    await sub.subscribeAsync(topic, { qos: 1 });
    for (let i = 1; i <= 5; i++) await pub.publishAsync(topic, upload(i), { qos: 1 });
    await waitFor('the messages', () => got.length === 5);
    // ...and HTTP: the observations are read back.
    const read = await n.t.request('GET', `/api/solutions/plant/devices/${id}/observations`, { token: alice.token });
    assert.equal(read.status, 200);
    assert.equal(((await read.json()) as { observations: unknown[] }).observations.length, 5);
    assert.equal(about(n.logs, /^Redis is lost/, WARN).length, 1, 'the outage is logged once, not per message');
    assert.equal(about(n.logs, /Redis/, WARN).length, 1, `and nothing else about Redis is warned of: ${JSON.stringify(about(n.logs, /Redis/, WARN))}`);

    // Redis back (empty: it keeps nothing): new connections go to Redis again; the clients
    // connected meanwhile are disconnected to reconnect there.
    const subClosed = closed(sub);
    await redis.restart();
    await waitFor('the node to move back to Redis', () => n.mq.broker.shared);
    await subClosed;
    assert.equal(about(n.logs, /^Redis answers again/).length, 1, JSON.stringify(about(n.logs, /Redis/)));
    const again = mqtt.connect(n.url, { username: 'notused', password: alice.token, clientId: 'keeper', clean: false, protocolVersion: 4, reconnectPeriod: 0 });
    clients.push(again);
    await new Promise((resolve, reject) => again.once('connect', resolve).once('error', reject));
    const gotAgain = inbox(again);
    await again.subscribeAsync(topic, { qos: 1 });
    assert.deepEqual(await redis.client().smembers('clients'), [`${alice.tenantId}/keeper`], 'sessions are kept in Redis again');
    const pub2 = await connect({ url: n.url }, alice.token);
    clients.push(pub2);
    await pub2.publishAsync(topic, upload(6), { qos: 1 });
    await waitFor('a message through Redis', () => gotAgain.length === 1);
  });

  it('starts serving MQTT from memory while Redis is down, and moves to Redis once it answers', async () => {
    await redis.kill();
    const n = await startNode(redis.url);
    nodes.push(n.t);
    assert.equal(n.mq.broker.shared, false);
    assert.equal(about(n.logs, /^Redis is unreachable/, WARN).length, 1);
    const bob = await n.t.login('bob');
    const c = await connect({ url: n.url }, bob.token);
    clients.push(c);
    await c.subscribeAsync(`${bob.tenantId}/alert/+/+`);
    const cClosed = closed(c);
    await redis.restart();
    await waitFor('the node to move to Redis', () => n.mq.broker.shared);
    await cClosed;
    const d = await connect({ url: n.url }, bob.token);
    clients.push(d);
    assert.deepEqual(await d.subscribeAsync(`${bob.tenantId}/alert/+/+`).then((g) => g.map((x) => x.qos)), [0]);
  });
});
