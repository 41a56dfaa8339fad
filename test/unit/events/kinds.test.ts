// Subscribing to some kinds of events: a subscriber that takes only kit payloads (the MQTT broker)
// gets nothing else, and does not make stored batches build observation events nobody reads.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { LocalEventBus, type ReefEvent } from '../../../src/events/bus.ts';

const payload: ReefEvent = { kind: 'kit-payload', groupId: 'g', tenantId: 't', mac: '0000000000000001', sensorType: 'temp', payload: 'MQ==' };
const observations: ReefEvent = { kind: 'observations', groupId: 'g', solution: 's', deviceId: 'd', observations: [] };

it('delivers only the kinds asked for, and is idle for the others', () => {
  const bus = new LocalEventBus();
  assert.equal(bus.idleFor('observations'), true);
  const got: string[] = [];
  const off = bus.subscribe((e) => got.push(e.kind), ['kit-payload']);
  assert.equal(bus.idleFor('observations'), true, 'a kit-payload subscriber does not count for observations');
  assert.equal(bus.idleFor('kit-payload'), false);
  bus.publish(observations);
  bus.publish(payload);
  assert.deepEqual(got, ['kit-payload']);

  const all: string[] = [];
  const offAll = bus.subscribe((e) => all.push(e.kind));
  assert.equal(bus.idleFor('observations'), false);
  bus.publish(observations);
  assert.deepEqual(all, ['observations']);
  offAll();
  off();
  assert.equal(bus.idle, true);
});
