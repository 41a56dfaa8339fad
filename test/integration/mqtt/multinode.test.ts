// Two Reef nodes on one PostgreSQL database: a kit reading received by node A's gateway reaches an
// MQTT subscriber connected to node B (through the LISTEN/NOTIFY event bus), with a token node A
// issued; an ingest message published on B is read on A; and another tenant on B gets nothing.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { MqttClient } from 'mqtt';
import { mqttComponent } from '../../../src/mqtt/component.ts';
import { createTestDatabase, type TestDatabase } from '../../helpers/pg.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { connect, inbox, startMqtt, until, type MqttHarness } from '../../helpers/mqtt.ts';

const MAC = '00000000000015a1';

describe('MQTT across nodes on PostgreSQL', () => {
  let db: TestDatabase;
  let a: MqttHarness;
  let b: TestServer;
  let bUrl: string;
  const clients: MqttClient[] = [];

  before(async () => {
    db = await createTestDatabase('reef_mqtt');
    a = await startMqtt({ gateway: true, config: { databaseUrl: db.url } });
    const factory = mqttComponent();
    b = await startTestServer({ databaseUrl: db.url, mqtt: { ...a.t.services.config.mqtt, port: 0 } }, [factory]);
    bUrl = `mqtt://127.0.0.1:${factory.last!.broker.address().port}`;
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  it("delivers a reading received on node A to a subscriber on node B, and only to the kit's owner", async () => {
    const alice = await a.t.login('alice');
    const mallory = await a.t.login('mallory');
    const onB = await connect({ url: bUrl }, alice.token);
    const otherOnB = await connect({ url: bUrl }, mallory.token);
    clients.push(onB, otherOnB);
    const got = inbox(onB);
    const leaked = inbox(otherOnB);
    await onB.subscribeAsync(`${alice.tenantId}/alert/+/+`);
    await otherOnB.subscribeAsync(`${mallory.tenantId}/alert/+/+`);

    await a.gw!.kit(alice.tenantId, MAC);
    await until(() => got.length >= 2, 'readings reach node B');
    assert.ok(got.every((m) => m.topic === `${alice.tenantId}/alert/${MAC}/temp` && /^\d+,-?\d+\.\d\d,[CF]$/.test(m.payload.toString())));
    assert.equal(leaked.length, 0);
  });

  it('stores an ingest message published on node B, read on node A', async () => {
    const bob = await a.t.login('bob');
    const r = await a.t.request('POST', '/api/solutions/plant/devices', { token: bob.token, body: { deviceType: 'Thermo' } });
    const { id } = (await r.json()) as { id: string };
    const c = await connect({ url: bUrl }, bob.token);
    clients.push(c);
    await c.publishAsync(`${bob.tenantId}/solutions/plant/devices/${id}/observations`, '{"observations":[{"timestamp":"2026-05-01T00:00:00Z","temperature":12.5}]}', { qos: 1 });
    const read = await a.t.request('GET', `/api/solutions/plant/devices/${id}/observations`, { token: bob.token });
    assert.deepEqual(((await read.json()) as { observations: unknown[] }).observations, [{ timestamp: '2026-05-01T00:00:00.000Z', temperature: 12.5 }]);
  });
});
