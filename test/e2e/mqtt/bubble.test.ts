// Bubble-up: every reading a software dev kit sends the CoAP gateway is published raw on
// `<tenantId>/alert/<mac>/<sensorType>` for the kit's owner, received here by mosquitto_sub and the
// `mqtt` client: the text form and the CBOR form, byte for byte what the kit sent (it matches the
// stored observation's kit fields), retained for a late subscriber, and never to another tenant.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { MqttClient } from 'mqtt';
import { Code, decodeReadingText, Option, stringOption, unwrapCbor } from '../../../src/coap/index.ts';
import { proxyUri } from '../../../src/gateway/gateway.ts';
import { DOMAIN, nodeClient } from '../../helpers/gateway.ts';
import { connect, grants, inbox, mosquittoSub, startMqtt, until, type MqttHarness, type MosquittoSub } from '../../helpers/mqtt.ts';

const TEXT_MAC = '00000000000014a1';
const CBOR_MAC = '00000000000014a2';
const BOB_MAC = '00000000000014b1';

describe('MQTT bubble-up of kit payloads', () => {
  let h: MqttHarness;
  let alice: { tenantId: string; token: string };
  let bob: { tenantId: string; token: string };
  const clients: MqttClient[] = [];
  const subs: MosquittoSub[] = [];

  before(async () => {
    h = await startMqtt({ gateway: true });
    alice = await h.t.login('alice');
    bob = await h.t.login('bob');
  });
  after(async () => {
    for (const s of subs) s.stop();
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    await h.close();
  });

  it("delivers a kit's text and CBOR readings, unchanged, to its owner's subscribers and no one else's", async () => {
    // Subscribers first, so what they receive is live, not only the retained copy.
    const sub = mosquittoSub(h.port, ['-u', 'notused', '-P', alice.token, '-t', `${alice.tenantId}/alert/+/+`, '-q', '1']);
    subs.push(sub);
    const cb = await connect(h, bob.token);
    clients.push(cb);
    const bobGot = inbox(cb);
    assert.deepEqual(await grants(cb, [`${bob.tenantId}/alert/+/+`, `${alice.tenantId}/alert/+/+`]), [0, 128]);
    await until(() => sub.granted.length === 1, 'mosquitto_sub is subscribed');
    assert.deepEqual(sub.granted, [1]);

    const { device } = await h.gw!.kit(alice.tenantId, TEXT_MAC);
    await h.gw!.kit(alice.tenantId, CBOR_MAC, { cbor: true });
    await h.gw!.kit(bob.tenantId, BOB_MAC);

    const of = (mac: string) => sub.lines.filter((l) => l.startsWith(`${alice.tenantId}/alert/${mac}/temp `));
    await until(() => of(TEXT_MAC).length >= 2 && of(CBOR_MAC).length >= 2, 'alice receives readings of both kits');
    await until(() => bobGot.some((m) => m.topic === `${bob.tenantId}/alert/${BOB_MAC}/temp`), "bob receives his kit's readings");

    // Text: `<epoch>,<value>,<unit>`, as the kit sent it; the same reading is stored with those figures.
    const text = Buffer.from(of(TEXT_MAC).at(-1)!.split(' ')[1]!, 'hex').toString('utf8');
    const r = decodeReadingText(text);
    await until(async () => {
      const page = await h.t.services.store.queryObservations(device.id, { limit: 1000 });
      // Stored at the kit's own second (or, with a kit clock off, at receipt with the kit's epoch kept).
      return page.observations.some((o) => (o.ts === r.epoch * 1000 || o.extra?.kitEpoch === r.epoch) && o.extra?.rawValue === r.value);
    }, 'the published reading is the stored one');

    // CBOR: the kit's own map {0:"temp",1:"<text>"}, bytes starting A2 00.
    const cbor = Buffer.from(of(CBOR_MAC).at(-1)!.split(' ')[1]!, 'hex');
    assert.equal(cbor.subarray(0, 2).toString('hex'), 'a200');
    const unwrapped = unwrapCbor(cbor);
    assert.equal(unwrapped.kind, 'temp');
    assert.doesNotThrow(() => decodeReadingText(unwrapped.text));

    // Nothing crossed tenants, either way.
    assert.equal(sub.lines.filter((l) => !l.startsWith(`${alice.tenantId}/`)).length, 0);
    assert.equal(bobGot.filter((m) => !m.topic.startsWith(`${bob.tenantId}/`)).length, 0);
    assert.ok(bobGot.every((m) => m.topic === `${bob.tenantId}/alert/${BOB_MAC}/temp`));
  });

  it('gives a new subscriber the last reading of each kit at once (retained)', async () => {
    const c = await connect(h, alice.token);
    clients.push(c);
    const got = inbox(c);
    await c.subscribeAsync(`${alice.tenantId}/alert/+/temp`);
    await until(() => new Set(got.filter((m) => m.retain).map((m) => m.topic)).size === 2, "both kits' retained readings");
    assert.deepEqual(new Set(got.filter((m) => m.retain).map((m) => m.topic)), new Set([`${alice.tenantId}/alert/${TEXT_MAC}/temp`, `${alice.tenantId}/alert/${CBOR_MAC}/temp`]));
  });

  it("gives a tenant group's members each other's kit payloads, under the owner's tenant id", async () => {
    const carol = await h.t.login('carol', 'lab');
    const dave = await h.t.login('dave', 'lab');
    const GROUP_MAC = '00000000000014c1';
    await h.gw!.kit(carol.tenantId, GROUP_MAC);
    const c = await connect(h, dave.token);
    clients.push(c);
    const got = inbox(c);
    assert.deepEqual(await grants(c, [`${carol.tenantId}/alert/+/+`, `${alice.tenantId}/alert/+/+`]), [0, 128]);
    await until(() => got.length >= 2, "dave receives carol's kit");
    assert.ok(got.every((m) => m.topic === `${carol.tenantId}/alert/${GROUP_MAC}/temp`));
  });

  it('filters by sensor type and kit: <tenant>/alert/+/temp and <tenant>/alert/<mac>/+', async () => {
    const c = await connect(h, alice.token);
    clients.push(c);
    const got = inbox(c);
    await c.subscribeAsync(`${alice.tenantId}/alert/${CBOR_MAC}/+`);
    await until(() => got.length >= 2, 'two readings of one kit');
    assert.ok(got.every((m) => m.topic === `${alice.tenantId}/alert/${CBOR_MAC}/temp`));
  });
});

describe('MQTT bubble-up of readings the gateway asks for', () => {
  it("publishes the answer to a GET of a kit's temperature (HTTP bridge), with the readings bridge off", async () => {
    const h = await startMqtt({ gateway: true, gatewayOptions: { readings: false } });
    try {
      const a = await h.t.login('erin');
      const { device } = await h.gw!.kit(a.tenantId, '00000000000014d1');
      const c = await connect(h, a.token);
      const got = inbox(c);
      await c.subscribeAsync(`${a.tenantId}/alert/+/+`);
      const r = await h.t.request('GET', `/api/solutions/sandbox/devices/${device.id}/coap/snsr/arduino/temp?sens`, { token: a.token });
      assert.equal(r.status, 200);
      const answer = (await r.json()) as { payload: string };
      await until(() => got.length === 1, 'the answer bubbles up');
      assert.equal(got[0]!.topic, `${a.tenantId}/alert/00000000000014d1/temp`);
      assert.equal(got[0]!.payload.toString(), answer.payload);
      await c.endAsync();
    } finally {
      await h.close();
    }
  });
});

describe("MQTT bubble-up of the answers to a client's GETs", () => {
  it("publishes every answer to a CoAP client's GET of the temperature", async () => {
    const h = await startMqtt({ gateway: true, gatewayOptions: { readings: false } });
    const coap = await nodeClient();
    try {
      const a = await h.t.login('gina');
      const mac = '00000000000014f1';
      await h.gw!.kit(a.tenantId, mac);
      const c = await connect(h, a.token);
      const got = inbox(c);
      await c.subscribeAsync(`${a.tenantId}/alert/+/+`);
      assert.equal((await coap.request(h.gw!.addr, { method: Code.POST, uri: '/sessions', payload: Buffer.from(a.token), timeoutMs: 5000 })).code, Code.CREATED);
      const get = () =>
        coap.request(h.gw!.addr, { method: Code.GET, options: [stringOption(Option.PROXY_URI, proxyUri(mac, DOMAIN, '/snsr/arduino/temp?sens'))], confirmable: false, timeoutMs: 5000 });
      const answers: string[] = [];
      for (let i = 0; i < 30; i++) {
        const r = await get();
        assert.equal(r.code, Code.CONTENT);
        answers.push(r.payload.toString());
      }
      await until(() => got.length === answers.length, 'every answer bubbles up');
      assert.deepEqual(
        got.map((m) => m.payload.toString()),
        answers,
        'each one, in order',
      );
      assert.ok(got.every((m) => m.topic === `${a.tenantId}/alert/${mac}/temp`));
      await c.endAsync();
    } finally {
      await coap.close();
      await h.close();
    }
  });
});

describe('MQTT bubble-up of added sensors', () => {
  it("publishes each added sensor's readings under its own type", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-mqtt-sensors-'));
    const file = path.join(dir, 'sensors.json');
    fs.writeFileSync(file, JSON.stringify({ sensors: [{ type: 'humidity', uri: '/arduino/humidity', unit: '%', base: 45, swing: 10, noise: 1, min: 0, max: 100, decimals: 1 }] }));
    const h = await startMqtt({ gateway: true });
    try {
      const a = await h.t.login('frank');
      const c = await connect(h, a.token);
      const got = inbox(c);
      await c.subscribeAsync(`${a.tenantId}/alert/00000000000014e1/+`);
      await h.gw!.kit(a.tenantId, '00000000000014e1', { sensors: file });
      await until(() => got.some((m) => m.topic.endsWith('/humidity')) && got.some((m) => m.topic.endsWith('/temp')), 'humidity and temperature payloads');
      for (const m of got.filter((x) => x.topic.endsWith('/humidity'))) assert.match(m.payload.toString(), /^\d+,\d+(\.\d)?,%$/);
      await c.endAsync();
    } finally {
      await h.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
