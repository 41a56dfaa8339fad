// The kit over real UDP: every resource, method and answer code of the wire reference's table, the
// prefix per firmware version, observe (RFC 7641), upstream messages and the announcement.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  ACK,
  Code,
  CoapEndpoint,
  type CoapMessage,
  CON,
  ContentFormat,
  decodeAnnouncement,
  decodeBlock,
  decodeEpoch32,
  decodeReading,
  decodeTimeTlv,
  decodeUnitConfig,
  emptyMessage,
  encodeTimeTlv,
  getOption,
  getUintOption,
  isAnnouncement,
  NON,
  Option,
  RST,
  uintOption,
  unwrapCbor,
  uriOptions,
  uriPath,
  uriQuery,
  codeToString,
} from '../../../src/coap/index.ts';
import type { Kit } from '../../../src/device/kit.ts';
import { RawClient, startKit, waitFor } from '../../helpers/device.ts';

const code = (m: CoapMessage): string => codeToString(m.code);

describe('kit resources over UDP (firmware build 117958, prefix /snsr)', () => {
  let kit: Kit;
  let client: CoapEndpoint;
  let port: number;
  const get = (uri: string, extra: Partial<Parameters<CoapEndpoint['request']>[1]> = {}) => client.request({ address: '127.0.0.1', port }, { method: Code.GET, uri, timeoutMs: 5000, ...extra });
  const req = (method: number, uri: string, extra: Partial<Parameters<CoapEndpoint['request']>[1]> = {}) => client.request({ address: '127.0.0.1', port }, { method, uri, timeoutMs: 5000, ...extra });

  before(async () => {
    // The client plays the kit's gateway: the only peer a kit answers in full (docs/device.md "Reach").
    client = await CoapEndpoint.create();
    kit = await startKit({ gateway: client.address(), allowDirect: false });
    port = kit.address().port;
  });
  after(async () => {
    await client.close();
    await kit.stop();
  });

  test("the network module's socket is the batched one, as the gateway's (a system call per batch of datagrams)", () => {
    assert.equal(kit.module.endpoint.socket.kind, 'batched');
  });

  test('GET of the bare prefix answers 2.05 with the server name and version', async () => {
    const r = await get('/snsr');
    assert.equal(code(r), '2.05');
    assert.equal(r.type, ACK);
    assert.equal(r.payload.toString(), 'Reef Reference CoAP Server: 1.0.0');
    assert.equal(getUintOption(r, Option.CONTENT_FORMAT), ContentFormat.TEXT_PLAIN);
  });

  test('GET ?sens answers a text reading <epoch>,<value>,<unit> in Fahrenheit by default, with Max-Age', async () => {
    const r = await get('/snsr/arduino/temp?sens');
    assert.equal(code(r), '2.05');
    const reading = decodeReading(r.payload, getUintOption(r, Option.CONTENT_FORMAT));
    assert.equal(reading.unit, 'F');
    assert.match(r.payload.toString(), /^\d+,-?\d+\.\d{2},F$/);
    assert.ok(Math.abs(reading.epoch - Date.now() / 1000) < 5);
    assert.equal(getUintOption(r, Option.MAX_AGE), 90);
  });

  test('PUT ?cfg=C answers 2.04, then GET ?cfg reads C and readings come in Celsius; PUT ?cfg=F restores', async () => {
    assert.equal(code(await req(Code.PUT, '/snsr/arduino/temp?cfg=C', { payload: Buffer.from('ignored') })), '2.04');
    const cfg = await get('/snsr/arduino/temp?cfg');
    assert.equal(code(cfg), '2.05');
    assert.equal(decodeUnitConfig(cfg.payload.toString()).unit, 'C');
    const r = decodeReading((await get('/snsr/arduino/temp?sens')).payload);
    assert.equal(r.unit, 'C');
    assert.ok(r.value > 5 && r.value < 40, `plausible room temperature, got ${r.value}`);
    assert.equal(code(await req(Code.PUT, '/snsr/arduino/temp?cfg=F')), '2.04');
    assert.equal(decodeUnitConfig((await get('/snsr/arduino/temp?cfg')).payload.toString()).unit, 'F');
  });

  test('error codes of the table: 4.05 without query or wrong method, 5.01 unknown query, 4.04 unknown resource, 4.00 bad unit', async () => {
    for (const m of [Code.GET, Code.PUT, Code.POST, Code.DELETE]) assert.equal(code(await req(m, '/snsr/arduino/temp')), '4.05');
    assert.equal(code(await req(Code.POST, '/snsr/arduino/temp?sens')), '4.05');
    assert.equal(code(await req(Code.PUT, '/snsr/arduino/temp?sens')), '4.05');
    assert.equal(code(await req(Code.GET, '/snsr/arduino/temp?cfg=C')), '4.05');
    // The original firmware: PUT ?cfg with the value in the payload is not implemented.
    assert.equal(code(await req(Code.PUT, '/snsr/arduino/temp?cfg', { payload: Buffer.from('C') })), '5.01');
    assert.equal(code(await req(Code.POST, '/snsr/arduino/temp?cfg')), '4.05');
    assert.equal(code(await get('/snsr/arduino/temp?humidity')), '5.01');
    assert.equal(code(await req(Code.PUT, '/snsr/arduino/temp?cfg=K')), '4.00');
    assert.equal(code(await get('/snsr/arduino/light?sens')), '4.04');
    assert.equal(code(await get('/snsr/nothing')), '4.04');
    assert.equal(code(await req(Code.DELETE, '/snsr')), '4.05');
  });

  test('the wrong prefix, or none, is 4.04 at the module', async () => {
    assert.equal(code(await get('/sensor/arduino/temp?sens')), '4.04');
    assert.equal(code(await get('/arduino/temp?sens')), '4.04');
    assert.equal(code(await get('/')), '4.04');
    assert.ok(kit.module.stats.wrongPrefix >= 3);
  });

  test('system time: GET on /system/time and /sys/time gives a 4-byte epoch (cf 42); PUT with the TLV sets it; malformed is 4.06', async () => {
    for (const p of ['/snsr/system/time', '/snsr/sys/time']) {
      const r = await get(p);
      assert.equal(code(r), '2.05');
      assert.equal(getUintOption(r, Option.CONTENT_FORMAT), ContentFormat.OCTET_STREAM);
      assert.ok(Math.abs(decodeEpoch32(r.payload) - Date.now() / 1000) < 5);
    }
    const set = Date.UTC(2030, 0, 1, 12, 0, 0, 250);
    assert.equal(code(await req(Code.PUT, '/snsr/system/time', { payload: encodeTimeTlv(set) })), '2.04');
    const t = decodeEpoch32((await get('/snsr/sys/time')).payload);
    assert.ok(Math.abs(t - set / 1000) < 5, 'clock follows the PUT');
    const reading = decodeReading((await get('/snsr/arduino/temp?sens')).payload);
    assert.ok(Math.abs(reading.epoch - set / 1000) < 5, 'readings are stamped by the kit clock');
    const text = await get('/snsr/system/time', { options: [uintOption(Option.ACCEPT, 0)] });
    assert.match(text.payload.toString(), /^\d+$/);
    assert.equal(code(await req(Code.PUT, '/snsr/sys/time', { payload: Buffer.from([6, 8, 1, 2]) })), '4.06');
    assert.equal(code(await req(Code.PUT, '/snsr/sys/time', { payload: Buffer.from('0123456789') })), '4.06');
    assert.equal(code(await req(Code.POST, '/snsr/sys/time')), '4.05');
    assert.equal(code(await req(Code.PUT, '/snsr/sys/time', { payload: encodeTimeTlv(Date.now()) })), '2.04');
  });

  test('/.well-known/core answers link format (cf 40), block-wise at 128 bytes, listing the prefixed resources', async () => {
    const first = await get('/.well-known/core');
    assert.equal(code(first), '2.05');
    assert.equal(getUintOption(first, Option.CONTENT_FORMAT), ContentFormat.LINK_FORMAT);
    const b0 = decodeBlock(getUintOption(first, Option.BLOCK2)!);
    assert.equal(b0.szx, 3);
    assert.equal(b0.more, true);
    const parts = [first.payload];
    for (let num = 1; ; num++) {
      const r = await get('/.well-known/core', { options: [uintOption(Option.BLOCK2, (num << 4) | 3)] });
      parts.push(r.payload);
      if (!decodeBlock(getUintOption(r, Option.BLOCK2)!).more) break;
    }
    const links = Buffer.concat(parts).toString();
    assert.equal(Buffer.concat(parts).length, getUintOption(first, Option.SIZE2));
    assert.match(links, /<\/snsr\/arduino\/temp>;[^,]*obs/);
    assert.match(links, /<\/snsr\/system\/time>/);
    const same = await get('/snsr/.well-known/core');
    assert.equal(code(same), '2.05');
  });

  test('a NON request gets a NON response; a CON one a piggy-backed ACK with the same MID', async () => {
    const c = await RawClient.open();
    // Hand-made datagrams from a socket of their own: a kit that lets direct peers in (--allow-direct).
    const direct = await startKit({ allowDirect: true });
    const port = direct.address().port;
    const kit = direct;
    try {
      c.send(port, { type: NON, code: Code.GET, mid: 0x1234, token: Buffer.from([1, 2]), options: uriOptions('/snsr/arduino/temp?sens'), payload: Buffer.alloc(0) });
      const r = await c.nextMessage();
      assert.equal(r.type, NON);
      assert.equal(code(r), '2.05');
      assert.deepEqual(r.token, Buffer.from([1, 2]));
      c.send(port, { type: CON, code: Code.GET, mid: 0x4321, token: Buffer.from([9]), options: uriOptions('/snsr/arduino/temp?cfg'), payload: Buffer.alloc(0) });
      const a = await c.nextMessage();
      assert.equal(a.type, ACK);
      assert.equal(a.mid, 0x4321);
      assert.deepEqual(a.token, Buffer.from([9]));
      // A retransmitted CON (same MID) gets the same answer without a second exchange (RFC 7252 §4.5).
      const before = kit.module.stats.forwarded;
      c.send(port, { type: CON, code: Code.GET, mid: 0x4321, token: Buffer.from([9]), options: uriOptions('/snsr/arduino/temp?cfg'), payload: Buffer.alloc(0) });
      const again = await c.nextMessage();
      assert.deepEqual(again, a);
      assert.equal(kit.module.stats.forwarded, before);
      // The same MID with another token is not a copy but a new message (a peer that ran through
      // its Message IDs within EXCHANGE_LIFETIME): answered, for its own token.
      c.send(port, { type: CON, code: Code.GET, mid: 0x4321, token: Buffer.from([10]), options: uriOptions('/snsr/arduino/temp?cfg'), payload: Buffer.alloc(0) });
      const fresh = await c.nextMessage();
      assert.equal(fresh.type, ACK);
      assert.deepEqual(fresh.token, Buffer.from([10]));
      assert.equal(kit.module.stats.forwarded, before + 1);
      // An empty CON (ping) gets RST.
      c.send(port, emptyMessage(CON, 0x0777));
      const rst = await c.nextMessage();
      assert.equal(rst.type, RST);
      assert.equal(rst.mid, 0x0777);
    } finally {
      c.close();
      await direct.stop();
    }
  });

  test('an unknown critical option in a CON request is 4.02; an unknown elective one is ignored', async () => {
    const bad = await get('/snsr/arduino/temp?sens', { options: [{ number: 2049, value: Buffer.from([1]) }] });
    assert.equal(code(bad), '4.02');
    const ok = await get('/snsr/arduino/temp?sens', { options: [{ number: 2048, value: Buffer.from([1]) }] });
    assert.equal(code(ok), '2.05');
  });
});

describe('prefix per firmware version (seed §9)', () => {
  test('build 112738 and earlier answers under /sensor only; /snsr is 4.04', async () => {
    const kit = await startKit({ firmware: '1.2.1000.112738' });
    const client = await CoapEndpoint.create();
    try {
      const peer = { address: '127.0.0.1', port: kit.address().port };
      assert.equal(kit.module.prefix, 'sensor');
      assert.equal(code(await client.request(peer, { method: Code.GET, uri: '/sensor/arduino/temp?sens' })), '2.05');
      assert.equal(code(await client.request(peer, { method: Code.GET, uri: '/snsr/arduino/temp?sens' })), '4.04');
    } finally {
      await client.close();
      await kit.stop();
    }
  });
});

describe('CBOR readings and a missing sensor', () => {
  test('with the CBOR option a reading is {0:"temp",1:text}, content-format 60, starting A2 00; Accept 0 still gives text', async () => {
    const kit = await startKit({ cbor: true, sensorPresent: false, unit: 'C' });
    const client = await CoapEndpoint.create();
    try {
      const peer = { address: '127.0.0.1', port: kit.address().port };
      const r = await client.request(peer, { method: Code.GET, uri: '/snsr/arduino/temp?sens' });
      assert.equal(getUintOption(r, Option.CONTENT_FORMAT), 60);
      assert.deepEqual([...r.payload.subarray(0, 2)], [0xa2, 0x00]);
      assert.equal(unwrapCbor(r.payload).kind, 'temp');
      const reading = decodeReading(r.payload, 60);
      assert.equal(reading.value, 100);
      assert.equal(reading.unit, 'C');
      const t = await client.request(peer, { method: Code.GET, uri: '/snsr/arduino/temp?sens', options: [uintOption(Option.ACCEPT, 0)] });
      assert.match(t.payload.toString(), /^\d+,100\.00,C$/);
      const n = await client.request(peer, { method: Code.GET, uri: '/snsr/arduino/temp?sens', options: [uintOption(Option.ACCEPT, 50)] });
      assert.equal(code(n), '4.06');
    } finally {
      await client.close();
      await kit.stop();
    }
  });
});

describe('observe (RFC 7641)', () => {
  const obsReq = (mid: number, token: Buffer, observe: number, type: 0 | 1 = CON): CoapMessage => ({
    type,
    code: Code.GET,
    mid,
    token,
    options: [...uriOptions('/snsr/arduino/temp?sens'), uintOption(Option.OBSERVE, observe)],
    payload: Buffer.alloc(0),
  });

  test('registration answers 2.05 with Observe; notifications carry the token, increasing 24-bit Observe, Max-Age and a reading; every 5th is CON; Observe=1 deregisters', async () => {
    // The raw client is the kit's gateway here: the cadence below is what the gateway sees (a direct
    // peer's first notification is CON, to validate its address: test/e2e/device/reach.test.ts).
    const c = await RawClient.open();
    const kit = await startKit({ periodMs: 50, conEvery: 5, maxAgeSec: 33, gateway: { address: '127.0.0.1', port: c.port }, allowDirect: false });
    try {
      const port = kit.address().port;
      const token = Buffer.from([0xaa, 0xbb]);
      c.send(port, obsReq(100, token, 0));
      // (The kit's own upstream messages, its announcement and clock, also come to its gateway.)
      const first = await c.until((m) => m.type === ACK && m.mid === 100);
      assert.equal(first.type, ACK);
      assert.equal(code(first), '2.05');
      const seq0 = getUintOption(first, Option.OBSERVE);
      assert.notEqual(seq0, undefined);
      let last = seq0!;
      const types: number[] = [];
      for (let i = 0; i < 6; i++) {
        const n = await c.until((m) => m.token.equals(token));
        assert.equal(code(n), '2.05');
        assert.deepEqual(n.token, token);
        assert.equal(getUintOption(n, Option.MAX_AGE), 33);
        assert.ok(getOption(n, Option.OBSERVE)!.length <= 3);
        const seq = getUintOption(n, Option.OBSERVE)!;
        assert.ok(seq > last, 'Observe values increase');
        last = seq;
        decodeReading(n.payload);
        types.push(n.type);
        if (n.type === CON) c.send(port, emptyMessage(ACK, n.mid));
      }
      assert.deepEqual(types, [NON, NON, NON, NON, CON, NON]);
      assert.equal(kit.sensor.observers.size, 1);
      c.send(port, obsReq(101, token, 1));
      const dereg = await c.until((m) => m.type === ACK && m.mid === 101);
      assert.equal(code(dereg), '2.05');
      assert.equal(getUintOption(dereg, Option.OBSERVE), undefined);
      assert.equal(kit.sensor.observers.size, 0);
    } finally {
      c.close();
      await kit.stop();
    }
  });

  test('a RST to a NON notification deregisters the observer', async () => {
    const kit = await startKit({ periodMs: 50, conEvery: 0 });
    const c = await RawClient.open();
    try {
      const port = kit.address().port;
      c.send(port, obsReq(200, Buffer.from([7]), 0, NON));
      const first = await c.nextMessage();
      assert.equal(first.type, NON);
      assert.notEqual(getUintOption(first, Option.OBSERVE), undefined);
      const n = await c.nextMessage();
      c.send(port, emptyMessage(RST, n.mid));
      await waitFor(() => kit.sensor.observers.size === 0, 5000, 'observer dropped');
      assert.equal(kit.sensor.stats.observersDropped, 1);
    } finally {
      c.close();
      await kit.stop();
    }
  });

  test('a CON notification that is never acknowledged drops the observer (after the module gives up)', async () => {
    const kit = await startKit({ periodMs: 40, conEvery: 2, ackTimeoutMs: 20, maxRetransmit: 1 });
    const c = await RawClient.open();
    try {
      const port = kit.address().port;
      c.send(port, obsReq(300, Buffer.from([8]), 0));
      await c.nextMessage();
      await c.until((m) => m.type === CON, 5000); // ignored: no ACK
      await waitFor(() => kit.sensor.observers.size === 0, 5000, 'observer dropped');
      assert.ok(kit.sensor.stats.observersDropped >= 1);
    } finally {
      c.close();
      await kit.stop();
    }
  });

  test('a CON notification answered RST drops the observer', async () => {
    const kit = await startKit({ periodMs: 40, conEvery: 1 });
    const c = await RawClient.open();
    try {
      const port = kit.address().port;
      c.send(port, obsReq(400, Buffer.from([9]), 0));
      await c.nextMessage();
      const n = await c.until((m) => m.type === CON);
      c.send(port, emptyMessage(RST, n.mid));
      await waitFor(() => kit.sensor.observers.size === 0, 5000, 'observer dropped');
    } finally {
      c.close();
      await kit.stop();
    }
  });

  test('one observer per resource: a new registration replaces the old', async () => {
    const kit = await startKit({ periodMs: 60_000 });
    const a = await RawClient.open();
    const b = await RawClient.open();
    try {
      const port = kit.address().port;
      a.send(port, obsReq(500, Buffer.from([1]), 0));
      await a.nextMessage();
      b.send(port, obsReq(501, Buffer.from([2]), 0));
      await b.nextMessage();
      assert.equal(kit.sensor.observers.size, 1);
      kit.sensor.notifyAll();
      const n = await b.nextMessage();
      assert.deepEqual(n.token, Buffer.from([2]));
      assert.equal(await a.quiet(150), true, 'the replaced observer gets nothing');
    } finally {
      a.close();
      b.close();
      await kit.stop();
    }
  });

  test('the endpoint client observes: first response, then notifications, then cancel', async () => {
    const kit = await startKit({ periodMs: 50 });
    const client = await CoapEndpoint.create();
    try {
      const seen: CoapMessage[] = [];
      const obs = client.observe({ address: '127.0.0.1', port: kit.address().port }, { uri: '/snsr/arduino/temp?sens' }, (m) => seen.push(m));
      const first = await obs.first;
      assert.equal(code(first), '2.05');
      await waitFor(() => seen.length >= 3, 5000, 'three notifications');
      const r = await obs.cancel();
      assert.equal(r && code(r), '2.05');
      assert.equal(kit.sensor.observers.size, 0);
    } finally {
      await client.close();
      await kit.stop();
    }
  });
});

describe('upstream: reboot event, clock PUT and the announcement to a gateway', () => {
  test('at boot the gateway receives POST /kits, PUT /sys/snsr?ev=rbt and PUT /sensor/arduino/time with the time TLV, from the kit address', async () => {
    const gw = await CoapEndpoint.create();
    const got: Array<{ m: CoapMessage; port: number }> = [];
    gw.handle((m, peer) => {
      got.push({ m, port: peer.port });
      return undefined;
    });
    const kit = await startKit({ gateway: { address: '127.0.0.1', port: gw.address().port }, mac: '00aabbccddeeff01', timeSyncIntervalMs: 100 });
    try {
      await waitFor(() => got.filter((g) => uriPath(g.m).join('/') === 'sensor/arduino/time').length >= 2, 5000, 'two clock PUTs');
      const ann = got.find((g) => isAnnouncement(g.m))!;
      assert.ok(ann, 'announcement received');
      assert.equal(ann.m.type, NON);
      const a = decodeAnnouncement(ann.m.payload);
      assert.equal(a.mac, '00aabbccddeeff01');
      assert.equal(a.port, kit.address().port);
      assert.equal(a.prefix, 'snsr');
      assert.equal(a.fw, '1.2.1000.117958');
      assert.equal(ann.port, kit.address().port, 'sent from the kit socket');
      const rbt = got.find((g) => uriPath(g.m).join('/') === 'sys/snsr')!;
      assert.equal(rbt.m.code, Code.PUT);
      assert.equal(rbt.m.type, NON);
      assert.deepEqual(uriQuery(rbt.m), ['ev=rbt']);
      const clock = got.find((g) => uriPath(g.m).join('/') === 'sensor/arduino/time')!;
      assert.equal(clock.m.code, Code.PUT);
      assert.ok(Math.abs(decodeTimeTlv(clock.m.payload) - Date.now()) < 5000);
      assert.equal(got.filter((g) => uriPath(g.m).join('/') === 'sys/snsr').length, 1, 'one reboot event per boot');
    } finally {
      await kit.stop();
      await gw.close();
    }
  });
});
