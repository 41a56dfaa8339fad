// Added sensors and the original firmware's answers, over real UDP: the
// kit alone (the test plays its gateway), then two added sensors observed through the gateway with
// coap-client and stored as observations of their own fields.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Code, CoapEndpoint, codeToString, ContentFormat, decodeSensorReading, getUintOption, Option, uintOption, unwrapCbor, type CoapMessage } from '../../../src/coap/index.ts';
import { isReefError } from '../../../src/core/errors.ts';
import type { Kit } from '../../../src/device/kit.ts';
import { parseSensorConfig } from '../../../src/device/sensors.ts';
import { freePort, openSession, startGateway, until, viaGateway, type GatewayHarness } from '../../helpers/gateway.ts';
import { tempDir } from '../../helpers/server.ts';
import { startKit } from '../../helpers/device.ts';

const code = (m: CoapMessage): string => codeToString(m.code);

const SENSORS = {
  sensors: [
    { type: 'humidity', uri: '/arduino/humidity', unit: '%', base: 45, swing: 5, noise: 1, min: 0, max: 100, decimals: 1 },
    { type: 'battery', uri: '/sys/battery', unit: 'V', base: 3.7, noise: 0.01, decimals: 2, payload: 'cbor' },
  ],
};

function sensorFile(doc: unknown = SENSORS): string {
  const dir = tempDir('reef-sensors-');
  const f = path.join(dir, 'sensors.json');
  fs.writeFileSync(f, JSON.stringify(doc));
  return f;
}

describe('added sensors on the kit', () => {
  let kit: Kit;
  let client: CoapEndpoint;
  const get = (uri: string, options = [] as { number: number; value: Buffer }[]) =>
    client.request({ address: '127.0.0.1', port: kit.address().port }, { method: Code.GET, uri, options, timeoutMs: 5000 });

  before(async () => {
    client = await CoapEndpoint.create();
    kit = await startKit({ gateway: client.address(), allowDirect: false, sensors: sensorFile(), periodMs: 50 });
  });
  after(async () => {
    await client.close();
    await kit.stop();
  });

  test('each registered sensor answers ?sens with its reading and unit (text or CBOR {0: type, 1: text})', async () => {
    const h = await get('/snsr/arduino/humidity?sens');
    assert.equal(code(h), '2.05');
    assert.equal(getUintOption(h, Option.CONTENT_FORMAT), ContentFormat.TEXT_PLAIN);
    assert.match(h.payload.toString(), /^\d+,\d+\.\d,%$/);
    const hv = decodeSensorReading(h.payload, 0).value;
    assert.ok(hv >= 0 && hv <= 100);
    const b = await get('/snsr/sys/battery?sens');
    assert.equal(getUintOption(b, Option.CONTENT_FORMAT), ContentFormat.CBOR);
    assert.equal(unwrapCbor(b.payload).kind, 'battery');
    assert.match(unwrapCbor(b.payload).text, /^\d+,3\.\d\d,V$/);
    const asText = await get('/snsr/sys/battery?sens', [uintOption(Option.ACCEPT, 0)]);
    assert.match(asText.payload.toString(), /,V$/);
  });

  test('discovery lists them with rt=<type>, obs; an unregistered URI stays 4.04', async () => {
    // Reassemble /.well-known/core from its 128-byte blocks.
    let body = '';
    for (let num = 0; ; num++) {
      const r = await get('/.well-known/core', num ? [uintOption(Option.BLOCK2, (num << 4) | 3)] : []);
      body += r.payload.toString();
      const b2 = getUintOption(r, Option.BLOCK2);
      if (b2 === undefined || (b2 & 8) === 0) break;
    }
    assert.match(body, /<\/snsr\/arduino\/humidity>;rt="humidity";if="sensor";obs;ct=0/);
    assert.match(body, /<\/snsr\/sys\/battery>;rt="battery";if="sensor";obs;ct=60/);
    assert.equal(code(await get('/snsr/arduino/light?sens')), '4.04');
    assert.equal(code(await get('/snsr/arduino/humidity')), '4.05');
  });

  test('an added sensor is observable, with its own observe slot next to the temperature', async () => {
    const peer = { address: '127.0.0.1', port: kit.address().port };
    const hum: string[] = [];
    const temp: string[] = [];
    const o1 = client.observe(peer, { uri: '/snsr/arduino/humidity?sens', timeoutMs: 5000 }, (m) => hum.push(m.payload.toString()));
    const o2 = client.observe(peer, { uri: '/snsr/arduino/temp?sens', timeoutMs: 5000 }, (m) => temp.push(m.payload.toString()));
    assert.notEqual(getUintOption(await o1.first, Option.OBSERVE), undefined);
    assert.notEqual(getUintOption(await o2.first, Option.OBSERVE), undefined);
    await until(() => hum.length >= 2 && temp.length >= 2, 'notifications of both resources');
    assert.ok(hum.every((p) => /,%$/.test(p)));
    assert.ok(temp.every((p) => /,[CF]$/.test(p)));
    await o1.cancel();
    await o2.cancel();
  });

  test('a sensor configuration is checked whole: every problem named together', () => {
    try {
      parseSensorConfig(
        JSON.stringify({
          sensors: [
            { type: 'Humidity', uri: '/arduino/temp', unit: 'a,b' },
            { type: 'temperature', uri: '/x', unit: '%', decimals: 9, colour: 1 },
          ],
        }),
      );
      assert.fail('accepted');
    } catch (e) {
      assert.ok(isReefError(e) && e.code === 'VALIDATION_FAILED');
      for (const part of ['sensors[0].type', '/arduino/temp is a built-in', 'sensors[0].unit', '"temperature" is reserved', 'sensors[1].decimals', 'sensors[1].colour'])
        assert.ok(e.message.includes(part), `${part} in ${e.message}`);
    }
    assert.throws(() => parseSensorConfig('{"sensors": 3}'), /must be \{"sensors": \[\.\.\.\]\}/);
    assert.throws(() => parseSensorConfig('not json'), /not JSON/);
  });
});

describe('firmware answers (the original Sensor API firmware)', () => {
  let kit: Kit;
  let client: CoapEndpoint;
  const req = (method: number, uri: string, extra: { payload?: Buffer; options?: { number: number; value: Buffer }[] } = {}) =>
    client.request({ address: '127.0.0.1', port: kit.address().port }, { method, uri, timeoutMs: 5000, ...extra });

  before(async () => {
    client = await CoapEndpoint.create();
    kit = await startKit({ gateway: client.address(), allowDirect: false });
  });
  after(async () => {
    await client.close();
    await kit.stop();
  });

  test('PUT ?cfg with the value in the payload answers 5.01 and leaves the unit', async () => {
    const r = await req(Code.PUT, '/snsr/arduino/temp?cfg', { payload: Buffer.from('C') });
    assert.equal(code(r), '5.01');
    assert.equal(kit.sensor.unit, 'F');
  });

  test('GET /sys/stats?mod=coap answers the CoAP statistics, counting what happened', async () => {
    const first = await req(Code.GET, '/snsr/sys/stats?mod=coap');
    assert.equal(code(first), '2.05');
    const parse = (m: CoapMessage) =>
      Object.fromEntries(
        m.payload
          .toString()
          .split(',')
          .map((kv) => kv.split('=') as [string, string])
          .map(([k, v]) => [k, Number(v)]),
      );
    const a = parse(first);
    for (const k of ['rx', 'tx', 'req', '2xx', '4xx', '5xx', 'ntf', 'con', 'obs', 'obsdrop', 'up']) assert.equal(typeof a[k], 'number', k);
    await req(Code.GET, '/snsr/nothing-here');
    const b = parse(await req(Code.GET, '/snsr/sys/stats?mod=coap'));
    assert.equal(b.req! - a.req!, 2);
    assert.equal(b['4xx']! - a['4xx']!, 1);
    assert.equal(code(await req(Code.GET, '/snsr/sys/stats?mod=radio')), '5.01');
    assert.equal(code(await req(Code.GET, '/snsr/sys/stats')), '4.00');
    assert.equal(code(await req(Code.PUT, '/snsr/sys/stats?mod=coap')), '4.05');
  });

  test('with the 2.03 option an observe registration is answered 2.03 with Observe; notifications follow as 2.05', async () => {
    const gw = await CoapEndpoint.create();
    const k = await startKit({ gateway: gw.address(), allowDirect: false, observe203: true, periodMs: 50 });
    try {
      const notes: CoapMessage[] = [];
      const o = gw.observe({ address: '127.0.0.1', port: k.address().port }, { uri: '/snsr/arduino/temp?sens', timeoutMs: 5000 }, (m) => notes.push(m));
      const first = await o.first;
      assert.equal(code(first), '2.03');
      assert.notEqual(getUintOption(first, Option.OBSERVE), undefined);
      await until(() => notes.length >= 2, 'notifications');
      assert.equal(code(notes[0]!), '2.05');
      await o.cancel();
    } finally {
      await k.stop();
      await gw.close();
    }
  });
});

describe('added sensors through the gateway', () => {
  let h: GatewayHarness;
  let alice: { tenantId: string; token: string };
  const MAC = '00000000000016b2';
  let deviceId: string;

  before(async () => {
    h = await startGateway();
    alice = await h.t.login('alice');
    deviceId = (await h.kit(alice.tenantId, MAC, { sensors: sensorFile(), periodMs: 100 })).device.id;
  });
  after(() => h.close());

  test('coap-client observes both added sensors through the gateway', async () => {
    const port = await freePort();
    await openSession(h, port, alice.token);
    const hum = await viaGateway(h, port, MAC, '/snsr/arduino/humidity?sens', ['-s', '1', '-N']);
    // libcoap prints each notification's payload as it comes (no separator).
    assert.ok((hum.stdout.match(/\d{9,12},\d+\.\d,%/g) ?? []).length >= 2, hum.out);
    // Another client address: the observing one above may still get the last notifications.
    const port2 = await freePort();
    await openSession(h, port2, alice.token);
    const bat = await viaGateway(h, port2, MAC, '/snsr/sys/battery?sens', ['-A', '0']);
    assert.match(bat.stdout.trim(), /^\d+,3\.\d\d,V$/);
    const none = await viaGateway(h, port2, MAC, '/snsr/arduino/light?sens');
    assert.match(none.out, /4\.04/);
  });

  test('the readings bridge stores each added sensor as its own field, by sensor type', async () => {
    const fields = async (): Promise<Record<string, unknown>[]> => {
      const r = await h.t.request('GET', `/api/solutions/sandbox/devices/${deviceId}/observations?limit=1000`, { token: alice.token });
      return ((await r.json()) as { observations: Record<string, unknown>[] }).observations;
    };
    let obs: Record<string, unknown>[] = [];
    await until(async () => {
      obs = await fields();
      return obs.some((o) => o.sensor === 'humidity') && obs.some((o) => o.sensor === 'battery') && obs.some((o) => typeof o.temperature === 'number');
    }, 'humidity, battery and temperature observations');
    const hum = obs.find((o) => o.sensor === 'humidity')!;
    assert.equal(typeof hum.humidity, 'number');
    assert.equal(hum.humidityUnit, '%');
    assert.equal(hum.temperature, undefined);
    assert.equal(hum.mac, MAC);
    const bat = obs.find((o) => o.sensor === 'battery')!;
    assert.ok(Math.abs((bat.battery as number) - 3.7) < 0.1);
    assert.equal(bat.batteryUnit, 'V');
    // The kit notifies all three in the same tick: no added sensor's reading replaces another or a
    // temperature reading (one timestamp each). Temperature readings sit on the kit's own reading
    // second, so two in the same kit second are one observation, as an upload of both.
    await h.kits[0]!.stop();
    await until(async () => {
      const r = await h.t.request('GET', `/api/solutions/sandbox/devices/${deviceId}/observations?limit=10000`, { token: alice.token });
      const all = (await r.json()) as { observations: { timestamp: string; sensor?: string; temperature?: number }[] };
      const sensors = all.observations.filter((o) => o.sensor !== undefined);
      const temperatures = all.observations.filter((o) => o.temperature !== undefined);
      return (
        sensors.length === h.gw.gateway.stats.sensorReadingsStored &&
        sensors.every((o) => !o.timestamp.endsWith('.000Z')) &&
        temperatures.length > 0 &&
        temperatures.every((o) => o.timestamp.endsWith('.000Z'))
      );
    }, 'every added sensor reading is kept beside the temperature readings');
  });
});
