// A subscriber that stops reading must cost the broker at most its queue bound and must never hold
// back another tenant's deliveries (docs/security.md "Limits"). Unbounded, one stalled subscriber
// keeps Aedes' shared delivery window (100 messages in flight) waiting for its socket to drain, so
// every tenant's messages wait up to the 60 s drain timeout, and the node buffers every message for
// it meanwhile.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { MqttClient } from 'mqtt';
import { testConfig } from '../../../src/config/config.ts';
import type { KitPayloadEvent } from '../../../src/events/bus.ts';
import { connectPacket, RawClient, subscribePacket } from '../../helpers/mqtt-wire.ts';
import { waitFor } from '../../helpers/wait.ts';
import { connect, inbox, startMqtt, type MqttHarness } from '../../helpers/mqtt.ts';

const MAC = '0013500500000001';

describe('MQTT: a stalled subscriber', () => {
  let h: MqttHarness;
  const clients: MqttClient[] = [];
  const raws: RawClient[] = [];

  before(async () => {
    const limits = { ...testConfig({ dataDir: '/x' }).mqtt.limits, maxQueuedBytes: 1 << 20, maxQueuedMessages: 200 };
    h = await startMqtt({ mqtt: { limits, retain: false } });
  });
  after(async () => {
    for (const r of raws) r.end();
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    await h.close();
  });

  const payload = (tenantId: string, bytes: Buffer): KitPayloadEvent => ({ kind: 'kit-payload', groupId: 'g', tenantId, mac: MAC, sensorType: 'temp', payload: bytes.toString('base64') });

  /** A raw client of `token` subscribed to its tenant's kit payloads, then no longer reading. */
  async function stalledSubscriber(token: string, tenantId: string): Promise<RawClient> {
    const r = RawClient.tcp(h.port);
    raws.push(r);
    await r.opened;
    r.send(connectPacket(token));
    await waitFor('CONNACK', () => r.connack !== undefined);
    assert.equal(r.connack, 0);
    r.send(subscribePacket(`${tenantId}/alert/+/+`));
    await waitFor('SUBACK', () => r.received.length >= 4 + 5);
    r.stall();
    return r;
  }

  /**
   * The broker cut the stalled client: once it reads again it finds its connection reset, having
   * received far less than was published for it (the old broker kept all of it and the connection).
   */
  async function cutOff(stalled: RawClient, cutBefore: number, published: number): Promise<void> {
    await waitFor('the broker cuts the stalled subscriber', () => h.mq.broker.stats.slowReadersCut > cutBefore, 20_000);
    stalled.socket.resume();
    await waitFor('the stalled subscriber finds its connection closed', () => stalled.isClosed, 20_000);
    assert.ok(stalled.received.length < published / 2, `received ${stalled.received.length} of ${published} bytes`);
  }

  it("disconnects a subscriber past its byte bound while another tenant's subscriber gets every message", async () => {
    const a = await h.t.login('stalled-bytes');
    const b = await h.t.login('reader-bytes');
    const stalled = await stalledSubscriber(a.token, a.tenantId);
    const reader = await connect(h, b.token);
    clients.push(reader);
    await reader.subscribeAsync(`${b.tenantId}/alert/+/+`);
    const got = inbox(reader);
    const cutBefore = h.mq.broker.stats.slowReadersCut;

    // 200 messages of 256 KiB (50 MB) for the stalled subscriber, far past what the kernel's socket
    // buffers take, with 20 small ones for the reader among them.
    const big = Buffer.alloc(256 * 1024, 7);
    for (let i = 0; i < 200; i++) {
      h.mq.broker.publishKitPayload(payload(a.tenantId, big));
      if (i % 10 === 9) h.mq.broker.publishKitPayload(payload(b.tenantId, Buffer.from(`reading ${i}`)));
    }
    await waitFor("every one of the reader's 20 messages", () => got.length === 20, 20_000);
    assert.deepEqual(
      got.map((m) => m.payload.toString()),
      Array.from({ length: 20 }, (_, k) => `reading ${k * 10 + 9}`),
    );
    await cutOff(stalled, cutBefore, 200 * big.length);
  });

  it('disconnects a subscriber past its message bound (small messages)', async () => {
    const a = await h.t.login('stalled-count');
    const b = await h.t.login('reader-count');
    const stalled = await stalledSubscriber(a.token, a.tenantId);
    const reader = await connect(h, b.token);
    clients.push(reader);
    await reader.subscribeAsync(`${b.tenantId}/alert/+/+`);
    const got = inbox(reader);
    const cutBefore = h.mq.broker.stats.slowReadersCut;

    // 1 KiB messages: 200 of them (the bound) are 200 KiB, under the byte bound; 20,000 are 20 MB,
    // more than the kernel buffers take, so the broker's own queue holds more than 200 of them.
    // Published in one go, most are still undelivered when the subscriber is cut: with Aedes'
    // delivery window they queued there and overflowed the stack once it was gone (MESSAGE_WINDOW).
    const small = Buffer.alloc(1024, 1);
    for (let i = 0; i < 20000; i++) h.mq.broker.publishKitPayload(payload(a.tenantId, small));
    h.mq.broker.publishKitPayload(payload(b.tenantId, Buffer.from('after the flood')));
    await waitFor("the reader's message", () => got.length === 1, 20_000);
    await cutOff(stalled, cutBefore, 20000 * small.length);
    assert.equal(got[0]!.payload.toString(), 'after the flood');
  });
});
