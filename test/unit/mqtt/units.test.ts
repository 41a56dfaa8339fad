// The pure parts of the broker: the topic tree's tenant rule, the packet-size guard's framing and
// the node's connection cap beside the open-file limit.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { connectionCap } from '../../../src/mqtt/connections.ts';
import { FrameTracker, PacketTooLarge } from '../../../src/mqtt/guard.ts';
import { alertTopic, errorsTopic, ingestTarget, topicTenant } from '../../../src/mqtt/topics.ts';

const T = 'TN0123456789ABCDEF0123';

it('takes the tenant of a topic or filter only from a literal first level', () => {
  assert.equal(topicTenant(`${T}/alert/+/+`), T);
  assert.equal(topicTenant(`${T}/#`), T);
  assert.equal(topicTenant(T), T);
  for (const f of ['#', '+/alert/+/+', '$SYS/#', '$share/g/x', '', '/x', 'TN+/x', 'a b/x']) assert.equal(topicTenant(f), null, f);
});

it('names the ingest target and nothing else', () => {
  assert.deepEqual(ingestTarget(`${T}/solutions/plant/devices/abc/observations`), { tenantId: T, solution: 'plant', deviceId: 'abc' });
  for (const t of [
    `${T}/solutions/plant/devices/abc`,
    `${T}/solutions//devices/abc/observations`,
    `${T}/solutions/plant/devices/abc/observations/x`,
    `${T}/alert/m/temp`,
    `#/solutions/p/devices/d/observations`,
  ]) {
    assert.equal(ingestTarget(t), null, t);
  }
  assert.equal(alertTopic(T, '0013500500000001', 'temp'), `${T}/alert/0013500500000001/temp`);
  assert.equal(errorsTopic(T, 'a/b+c#d\u0001'), `${T}/errors/a_b_c_d_`);
  assert.equal(errorsTopic(T, ''), `${T}/errors/anonymous`);
});

it('follows packet boundaries across chunks and cuts a packet that announces too much at its header', () => {
  const t = new FrameTracker({ firstPacket: 10, packet: 200 });
  // CONNECT of 8 bytes split across chunks, then a PUBLISH of 150 (two length bytes), then PINGREQ.
  // feed() counts the packets that end in each chunk (the outgoing queue bound counts unsent packets so).
  assert.equal(t.feed(Buffer.from([0x10, 0x08, 1, 2, 3])), 0);
  assert.equal(t.feed(Buffer.from([4, 5, 6, 7, 8, 0x30, 0x96])), 1);
  assert.equal(t.feed(Buffer.concat([Buffer.from([0x01]), Buffer.alloc(150), Buffer.from([0xc0, 0x00])])), 2);
  // The next PUBLISH announces 201: refused before any of its body.
  assert.throws(
    () => t.feed(Buffer.from([0x30, 0xc9, 0x01])),
    (e: unknown) => e instanceof PacketTooLarge && e.announced === 201 && e.limit === 200,
  );
  // The first packet has its own, smaller allowance.
  assert.throws(() => new FrameTracker({ firstPacket: 10, packet: 200 }).feed(Buffer.from([0x10, 0x0b])), PacketTooLarge);
  // A Remaining Length of five bytes is malformed (MQTT 3.1.1 §2.2.3).
  assert.throws(() => new FrameTracker({ firstPacket: 1e9, packet: 1e9 }).feed(Buffer.from([0x10, 0x80, 0x80, 0x80, 0x80, 0x01])), /malformed/);
});

it('keeps the MQTT connection cap below the open-file limit, leaving a tenth of it (at least 256) to the rest', () => {
  assert.equal(connectionCap(10_000, 1_048_576), 10_000);
  assert.equal(connectionCap(10_000, 20_000), 10_000);
  assert.equal(connectionCap(10_000, 10_000), 9_000);
  assert.equal(connectionCap(10_000, 1024), 768);
  assert.equal(connectionCap(10_000, null), 10_000, 'where the limit cannot be read, as configured');
});
