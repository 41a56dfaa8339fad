// Alarm notifications on MQTT, `<tenantId>/alarms/<deviceId>` (docs/alarms.md), from
// the alarm events on the bus, so every node's broker carries them. A real `mqtt` client
// subscribes; another tenant cannot subscribe to them.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createAlarmComponent } from '../../../src/alarms/component.ts';
import { testConfig } from '../../../src/config/config.ts';
import { mqttComponent, type MqttFactory } from '../../../src/mqtt/component.ts';
import { createRule, newDevice, upload } from '../../helpers/alarms.ts';
import { until } from '../../helpers/gateway.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { connect, grants, inbox } from '../../helpers/mqtt.ts';

describe('alarms on MQTT', () => {
  let t: TestServer;
  let factory: MqttFactory;
  before(async () => {
    factory = mqttComponent();
    const mqtt = { ...testConfig({ dataDir: '/nonexistent' }).mqtt, port: 0, tlsPort: 0 };
    t = await startTestServer({ mqtt }, [createAlarmComponent({ silenceCheckMs: 0, deliveryPollMs: 0 }), factory]);
  });
  after(() => t.close());

  it('a raised and a cleared alarm arrive on <tenantId>/alarms/<deviceId>; another tenant is refused that topic', async () => {
    const owner = await t.login('alarm-owner');
    const dev = await newDevice(t, owner.token);
    await createRule(t, owner.token, { condition: 'above', threshold: 8, hysteresis: 1, deviceId: dev });
    const url = `mqtt://127.0.0.1:${factory.last!.broker.address().port}`;
    const c = await connect({ url }, owner.token);
    const got = inbox(c);
    assert.deepEqual(await grants(c, [`${owner.tenantId}/alarms/+`]), [0]);
    const stranger = await t.login('alarm-stranger');
    const s = await connect({ url }, stranger.token);
    assert.deepEqual(await grants(s, [`${owner.tenantId}/alarms/+`]), [128], "another tenant's alarms are refused");
    const now = Date.now();
    await upload(t, owner.token, dev, [{ timestamp: new Date(now - 2000).toISOString(), temperature: 9.5 }]);
    await until(() => got.length >= 1, 'the raised alarm on MQTT');
    await upload(t, owner.token, dev, [{ timestamp: new Date(now - 1000).toISOString(), temperature: 6 }]);
    await until(() => got.length >= 2, 'the cleared alarm on MQTT');
    assert.deepEqual(
      got.map((m) => m.topic),
      [`${owner.tenantId}/alarms/${dev}`, `${owner.tenantId}/alarms/${dev}`],
    );
    const [raised, cleared] = got.map((m) => JSON.parse(m.payload.toString()) as { event: string; alarm: { deviceId: string; reading: { value: number } } });
    assert.equal(raised!.event, 'raised');
    assert.equal(raised!.alarm.deviceId, dev);
    assert.equal(raised!.alarm.reading.value, 9.5);
    assert.equal(cleared!.event, 'cleared');
    await c.endAsync();
    await s.endAsync();
  });
});
