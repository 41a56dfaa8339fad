// A node that dies takes no MQTT session with it when the nodes share Redis (REEF_REDIS_URL,
// docs/mqtt.md "Several nodes"): two `reef serve` processes on one PostgreSQL database and one
// redis-server; a persistent-session subscriber (clean session 0, QoS 1) on node A; node A killed
// with SIGKILL (nothing handed over); a QoS 1 message published meanwhile through node B; the
// subscriber, reconnecting to B with the same client id, finds its session and gets the message.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import mqtt, { type MqttClient } from 'mqtt';
import { createAccount } from '../../../src/auth/accounts.ts';
import { PostgresStore } from '../../../src/store/postgres/postgres-store.ts';
import { connect, inbox } from '../../helpers/mqtt.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/pg.ts';
import { startRedis, type RedisServer } from '../../helpers/redis.ts';
import { json, startNode, waitFor, type ReefNode } from '../../helpers/reef-node.ts';

/** The MQTT URL a node prints in its banner. */
function mqttUrl(node: ReefNode): string {
  const m = /MQTT broker: (mqtt:\/\/127\.0\.0\.1:\d+)/.exec(node.output());
  assert.ok(m, `no MQTT line in the banner:\n${node.output()}`);
  return m[1]!;
}

/**
 * A persistent-session client (clean session 0) with a fixed client id: its CONNACK's session-present
 * flag, and what it receives from the first packet on (queued messages follow the CONNACK at once).
 */
async function persistent(url: string, token: string, clientId: string): Promise<{ c: MqttClient; present: boolean; got: ReturnType<typeof inbox> }> {
  const c = mqtt.connect(url, { username: 'notused', password: token, clientId, clean: false, protocolVersion: 4, reconnectPeriod: 0 });
  const got = inbox(c);
  const present = await new Promise<boolean>((resolve, reject) => c.once('connect', (connack) => resolve(connack.sessionPresent)).once('error', reject));
  return { c, present, got };
}

describe('MQTT sessions outlive a killed node (Redis)', () => {
  let db: TestDatabase;
  let redis: RedisServer;
  let store: PostgresStore;
  let a: ReefNode;
  let b: ReefNode;
  const clients: MqttClient[] = [];

  before(async () => {
    db = await createTestDatabase('reef_mqtt_failover');
    redis = await startRedis();
    const env = { REEF_REDIS_URL: redis.url, REEF_LOG_LEVEL: 'info' };
    [a, b] = await Promise.all([startNode(db.url, env), startNode(db.url, env)]);
    store = new PostgresStore({ connectionString: db.url, maxConnections: 2 });
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    await Promise.all([a?.kill(), b?.kill()]);
    await store?.close();
    await redis?.stop();
    await db?.drop();
  });

  it('delivers a QoS 1 message published on B while A was dead to the session A held', async () => {
    assert.match(a.output(), /MQTT state in Redis/);
    const creds = await createAccount(store, { name: 'failover' });
    const tr = await fetch(`${b.url}/api/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(creds) });
    assert.equal(tr.status, 201);
    const token = (await json<{ accessToken: string }>(tr)).accessToken;
    const dr = await fetch(`${b.url}/api/solutions/plant/devices`, {
      method: 'POST',
      headers: { authorization: token, 'content-type': 'application/json' },
      body: JSON.stringify({ deviceType: 'Thermo' }),
    });
    assert.equal(dr.status, 201);
    const { id } = await json<{ id: string }>(dr);
    const tenantId = creds.tenantId;
    const topic = `${tenantId}/solutions/plant/devices/${id}/observations`;
    const body = (t: string, v: number) => JSON.stringify({ observations: [{ timestamp: t, temperature: v }] });

    // The subscriber on A, QoS 1, persistent; a first message through B shows B knows its subscription.
    const first = await persistent(mqttUrl(a), token, 'field-router');
    clients.push(first.c);
    assert.equal(first.present, false);
    const live = first.got;
    await first.c.subscribeAsync(`${tenantId}/solutions/+/devices/+/observations`, { qos: 1 });
    const pub = mqtt.connect(mqttUrl(b), { username: 'notused', password: token, protocolVersion: 4, reconnectPeriod: 0 });
    clients.push(pub);
    await new Promise((resolve, reject) => pub.once('connect', resolve).once('error', reject));
    await pub.publishAsync(topic, body('2026-06-01T00:00:00Z', 1), { qos: 1 });
    await waitFor('the live message on A', () => live.length === 1);
    // ...and acknowledged: it leaves the session's queue in Redis (else it would come again, QoS 1).
    const queue = `outgoing:${encodeURIComponent(`${tenantId}/field-router`)}`;
    await waitFor('the PUBACK on A', async () => (await redis.client().llen(queue)) === 0);

    // Node A dies: no clean shutdown, nothing handed over.
    const gone = new Promise<void>((r) => first.c.once('close', () => r()));
    await a.kill('SIGKILL');
    await gone;
    first.c.end(true);

    // Meanwhile, a QoS 1 message through B. Aedes acknowledges a QoS 1 PUBLISH before it queues and
    // passes it on: a witness subscribed on B shows it has gone through (else the subscriber, back
    // at once, could get it both from its queue and live, as QoS 1 allows).
    const witness = await connect({ url: mqttUrl(b) }, token);
    clients.push(witness);
    const seen = inbox(witness);
    await witness.subscribeAsync(topic, { qos: 1 });
    await pub.publishAsync(topic, body('2026-06-01T00:01:00Z', 2), { qos: 1 });
    await waitFor('the message passed on by B', () => seen.length === 1);

    // The subscriber comes back through B with the same client id: its session, and the message.
    const back = await persistent(mqttUrl(b), token, 'field-router');
    clients.push(back.c);
    const got = back.got;
    assert.equal(back.present, true, 'the session held by the dead node is found on B');
    await waitFor('the message queued while A was dead', () => got.length >= 1);
    assert.equal(got[0]!.topic, topic);
    assert.equal(got[0]!.payload.toString(), body('2026-06-01T00:01:00Z', 2));
    // Its subscription came with the session: a new message reaches it live on B.
    await pub.publishAsync(topic, body('2026-06-01T00:02:00Z', 3), { qos: 1 });
    await waitFor('a live message on B', () => got.length >= 2);
    assert.deepEqual(
      got.map((m) => m.payload.toString()),
      [body('2026-06-01T00:01:00Z', 2), body('2026-06-01T00:02:00Z', 3)],
    );
    assert.ok(!b.hasExited(), b.output());
  });
});
