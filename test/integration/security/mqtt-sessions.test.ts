// What a client can make a node keep for it (docs/security.md "Limits"): QoS 2 messages awaiting
// their PUBREL (unbounded, up to 1,000 × 16 MiB per connection), the largest packet, what a
// persistent session (clean session 0) stores while its client is away and for how long; and client
// ids, which are each tenant's own (so no tenant's persistent session holds a client id against
// every other tenant).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import mqtt, { type MqttClient } from 'mqtt';
import { testConfig } from '../../../src/config/config.ts';
import { testClock } from '../../helpers/clock.ts';
import { connectPacket, publishPacket, RawClient, varint } from '../../helpers/mqtt-wire.ts';
import { waitFor } from '../../helpers/wait.ts';
import { startMqtt, type MqttHarness } from '../../helpers/mqtt.ts';

const MAC = '0013500500000001';

describe('MQTT sessions and what they hold', () => {
  let h: MqttHarness;
  const clock = testClock();
  const clients: MqttClient[] = [];
  const raws: RawClient[] = [];

  before(async () => {
    const limits = { ...testConfig({ dataDir: '/x' }).mqtt.limits, maxPacketBytes: 64 * 1024, sessionMessages: 5, sessionBytes: 10 * 1024, sessionExpiryMs: 60_000 };
    h = await startMqtt({ mqtt: { limits, retain: false }, broker: { now: clock.now } });
  });
  after(async () => {
    for (const r of raws) r.end();
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    await h.close();
  });

  const kitPayload = (tenantId: string, text: string) =>
    h.mq.broker.publishKitPayload({ kind: 'kit-payload', groupId: 'g', tenantId, mac: MAC, sensorType: 'temp', payload: Buffer.from(text).toString('base64') });

  /** A persistent-session client: whether the broker had its session, and what it receives from the start. */
  async function session(token: string, clientId: string): Promise<{ c: MqttClient; present: boolean; got: string[] }> {
    const c = mqtt.connect(h.url, { username: 'notused', password: token, clientId, clean: false, protocolVersion: 4, reconnectPeriod: 0 });
    clients.push(c);
    const got: string[] = [];
    c.on('message', (_t, payload) => got.push(payload.toString()));
    const present = await new Promise<boolean>((resolve, reject) => {
      c.once('connect', (connack) => resolve(connack.sessionPresent));
      c.once('error', reject);
    });
    return { c, present, got };
  }

  /** Subscribes at QoS 1 to the tenant's kit payloads with a persistent session, then goes away. */
  async function leaveSession(token: string, tenantId: string, clientId: string): Promise<void> {
    const s = await session(token, clientId);
    await s.c.subscribeAsync(`${tenantId}/alert/+/+`, { qos: 1 });
    await s.c.endAsync();
    await waitFor('the broker keeps the session', () => h.mq.broker.stored.isAway(`${tenantId}/${clientId}`));
  }

  it('closes a connection that leaves more QoS 2 messages awaiting PUBREL than allowed, keeping none of their payloads', async () => {
    const a = await h.t.login('qos2');
    const r = RawClient.tcp(h.port);
    raws.push(r);
    await r.opened;
    r.send(connectPacket(a.token, { clientId: 'no-pubrel' }));
    await waitFor('CONNACK', () => r.connack !== undefined);
    const payload = Buffer.alloc(32 * 1024, 1);
    // 32 (REEF_MQTT_MAX_INFLIGHT's default) are answered with PUBREC and held by packet id only.
    for (let id = 1; id <= 32; id++) r.send(publishPacket(`${a.tenantId}/x`, payload, 0x34, id));
    await waitFor('32 PUBRECs (4 bytes each, after the CONNACK)', () => r.received.length >= 4 + 32 * 4);
    const store = (h.mq.broker.aedes as unknown as { persistence: { incomingGetPacket(c: { id: string }, p: { messageId: number }): Promise<{ payload: Buffer }> } }).persistence;
    const held = await store.incomingGetPacket({ id: `${a.tenantId}/no-pubrel` }, { messageId: 7 });
    assert.equal(held.payload.length, 0, 'a message awaiting PUBREL is remembered without its payload');
    assert.equal(r.isClosed, false);
    r.send(publishPacket(`${a.tenantId}/x`, payload, 0x34, 33));
    await waitFor('the 33rd closes the connection', () => r.isClosed, 15_000);
  });

  it('cuts a packet larger than REEF_MQTT_MAX_PACKET at its header, far below the HTTP body limit', async () => {
    const a = await h.t.login('big-packet');
    const r = RawClient.tcp(h.port);
    raws.push(r);
    await r.opened;
    r.send(connectPacket(a.token));
    await waitFor('CONNACK', () => r.connack === 0);
    const before = h.mq.broker.stats.oversizedPackets;
    // A PUBLISH announcing 64 KiB + 1 bytes: only its header is sent.
    r.send(Buffer.concat([Buffer.from([0x30]), varint(64 * 1024 + 1)]));
    await waitFor('the connection is closed', () => r.isClosed, 15_000);
    assert.equal(h.mq.broker.stats.oversizedPackets, before + 1);
  });

  it('keeps at most REEF_MQTT_SESSION_MESSAGES messages for a client that is away, the first ones', async () => {
    const a = await h.t.login('away-count');
    await leaveSession(a.token, a.tenantId, 'sensor-count');
    for (let i = 0; i < 20; i++) kitPayload(a.tenantId, `m${i}`);
    await waitFor('the session holds its bound', async () => (await h.mq.broker.stored.held(`${a.tenantId}/sensor-count`)).messages === 5);
    const back = await session(a.token, 'sensor-count');
    assert.equal(back.present, true);
    await waitFor('the queued messages', () => back.got.length === 5);
    assert.deepEqual(back.got, ['m0', 'm1', 'm2', 'm3', 'm4']);
    await back.c.endAsync();
  });

  it('keeps at most REEF_MQTT_SESSION_BYTES of payload for a client that is away', async () => {
    const a = await h.t.login('away-bytes');
    await leaveSession(a.token, a.tenantId, 'sensor-bytes');
    for (let i = 0; i < 10; i++) kitPayload(a.tenantId, `${i}`.padEnd(4096, '.'));
    await waitFor('two 4 KiB messages fit in 10 KiB', async () => (await h.mq.broker.stored.held(`${a.tenantId}/sensor-bytes`)).messages === 2);
    const back = await session(a.token, 'sensor-bytes');
    await waitFor('the queued messages', () => back.got.length === 2);
    assert.deepEqual(
      back.got.map((m) => m[0]),
      ['0', '1'],
    );
    await back.c.endAsync();
  });

  it('forgets a session whose client stays away past REEF_MQTT_SESSION_EXPIRY', async () => {
    const a = await h.t.login('away-long');
    await leaveSession(a.token, a.tenantId, 'sensor-gone');
    kitPayload(a.tenantId, 'while away');
    await waitFor('one message held', async () => (await h.mq.broker.stored.held(`${a.tenantId}/sensor-gone`)).messages === 1);
    clock.advance(61_000);
    await waitFor('the session expires', async () => !(await h.mq.broker.stored.isAway(`${a.tenantId}/sensor-gone`)));
    assert.equal((await h.mq.broker.stored.held(`${a.tenantId}/sensor-gone`)).messages, 0);
    const back = await session(a.token, 'sensor-gone');
    assert.equal(back.present, false, 'no session left');
    assert.deepEqual(back.got, []);
    await back.c.endAsync();
  });

  it('lets another tenant use a client id one tenant keeps a session under, without touching that session', async () => {
    const a = await h.t.login('mac-owner');
    const b = await h.t.login('mac-squatter');
    await leaveSession(a.token, a.tenantId, 'SSN00135005');
    const other = await session(b.token, 'SSN00135005');
    assert.equal(other.present, false, "the other tenant's CONNECT is accepted and gets a session of its own");
    await other.c.subscribeAsync(`${b.tenantId}/alert/+/+`, { qos: 1 });
    kitPayload(a.tenantId, 'for the owner');
    kitPayload(b.tenantId, 'for the other');
    await waitFor("the other tenant's own message", () => other.got.length === 1);
    assert.deepEqual(other.got, ['for the other']);
    const owner = await session(a.token, 'SSN00135005');
    assert.equal(owner.present, true, "the owner's session is still there");
    await waitFor("the owner's queued message", () => owner.got.length === 1);
    assert.deepEqual(owner.got, ['for the owner']);
    assert.equal(other.c.connected, true, "the owner's return does not cut the other tenant's client off");
    await Promise.all([owner.c.endAsync(), other.c.endAsync()]);
  });

  it('answers an empty client id with clean session 0 with CONNACK 0x02, and accepts it with clean session 1', async () => {
    const a = await h.t.login('no-id');
    const persistent = RawClient.tcp(h.port);
    const clean = RawClient.tcp(h.port);
    raws.push(persistent, clean);
    await Promise.all([persistent.opened, clean.opened]);
    persistent.send(connectPacket(a.token, { clientId: '', flags: 0xc0 }));
    clean.send(connectPacket(a.token, { clientId: '', flags: 0xc2 }));
    await waitFor('both answered', () => persistent.connack !== undefined && clean.connack !== undefined);
    assert.equal(persistent.connack, 2, 'identifier rejected (MQTT 3.1.1 §3.1.3-8)');
    assert.equal(clean.connack, 0);
    await waitFor('the refused connection is closed', () => persistent.isClosed);
  });
});
