// Who can reach a kit: only its gateway by default (seed §4.4,
// §5: direct-to-device CoAP is not supported); with --allow-direct a direct peer is answered, but
// never more than three times the bytes it sent (RFC 7252 §11.3), and it cannot take the observe
// slot the gateway holds. Real UDP: hand-made datagrams and libcoap's coap-client.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Block2Assembler, Code, CoapEndpoint, codeToString, CON, decodeBlock, getUintOption, NON, Option, parseMessage, serializeMessage, uintOption, uriOptions } from '../../../src/coap/index.ts';
import { AMPLIFICATION_LIMIT } from '../../../src/device/module.ts';
import { freePort, openSession, startGateway, until, viaGateway, type GatewayHarness } from '../../helpers/gateway.ts';
import { RawClient, startKit } from '../../helpers/device.ts';

const READING = /^\d{9,12},-?\d+\.\d{2},[CF]$/;

describe('a kit answers only its gateway', () => {
  let h: GatewayHarness;
  let alice: { tenantId: string; token: string };
  const MAC = '00000000000016a1';
  let kitPort: number;

  before(async () => {
    h = await startGateway();
    alice = await h.t.login('alice');
    const { kit } = await h.kit(alice.tenantId, MAC, { unit: 'F' });
    kitPort = kit.address().port;
    // The gateway's signed answer told the kit where the gateway's requests come from.
    await until(() => kit.module.gatewayFrom !== undefined, 'the kit learns the gateway port');
  });
  after(() => h.close());

  test('a direct PUT ?cfg=C is dropped unanswered and changes nothing; the same PUT through the gateway answers 2.04', async () => {
    const kit = h.kits[0]!;
    const c = await RawClient.open();
    try {
      for (const type of [CON, NON] as const) {
        c.send(kitPort, { type, code: Code.PUT, mid: 0x1600 + type, token: Buffer.from([7, type]), options: uriOptions('/snsr/arduino/temp?cfg=C'), payload: Buffer.alloc(0) });
      }
      // Garbage, a ping and a discovery request get nothing either (not even a RST).
      c.send(kitPort, Buffer.from([0x40, 0x00, 0x12, 0x34]));
      c.send(kitPort, Buffer.from([0xff, 0xff, 0xff]));
      c.send(kitPort, { type: CON, code: Code.GET, mid: 0x1611, token: Buffer.alloc(0), options: uriOptions('/.well-known/core'), payload: Buffer.alloc(0) });
      await until(() => kit.module.endpoint.stats.filtered >= 5, 'the kit drops all five datagrams');
      assert.equal(c.inbox.length, 0, 'no answer to a direct peer');
      assert.equal(kit.sensor.unit, 'F', 'the unit did not change');
    } finally {
      c.close();
    }
    const port = await freePort();
    await openSession(h, port, alice.token);
    const put = await viaGateway(h, port, MAC, '/snsr/arduino/temp?cfg=C', ['-m', 'put']);
    assert.equal(put.code, 0);
    assert.doesNotMatch(put.out, /^[45]\.\d\d/m);
    assert.equal(kit.sensor.unit, 'C');
    const get = await viaGateway(h, port, MAC, '/snsr/arduino/temp?sens');
    assert.match(get.stdout.trim(), /,C$/);
  });

  test('coap-client straight at the kit gets no answer, while through the gateway it reads the temperature', async () => {
    const { coapClient } = await import('../../helpers/gateway.ts');
    const direct = await coapClient(['-B', '2', '-m', 'get', `coap://127.0.0.1:${kitPort}/snsr/arduino/temp?sens`]);
    assert.doesNotMatch(direct.stdout, READING);
    const port = await freePort();
    await openSession(h, port, alice.token);
    const via = await viaGateway(h, port, MAC, '/snsr/arduino/temp?sens');
    assert.match(via.stdout.trim(), READING);
  });

  test('an announcement answer not signed with the kit key does not open the kit to another port', async () => {
    const kit = h.kits[0]!;
    const from = kit.module.gatewayFrom;
    const { verifyAnnouncementAck, encodeAnnouncementAck } = await import('../../../src/coap/index.ts');
    const forged = encodeAnnouncementAck(MAC, { seq: 3, from: 9999 }, Buffer.alloc(32, 1));
    assert.equal(verifyAnnouncementAck(forged, MAC, 3, Buffer.alloc(32, 2)), undefined);
    assert.equal(verifyAnnouncementAck(forged, MAC, 4, Buffer.alloc(32, 1)), undefined, 'an answer to another announcement');
    assert.deepEqual(verifyAnnouncementAck(forged, MAC, 3, Buffer.alloc(32, 1)), { seq: 3, from: 9999 });
    assert.equal(kit.module.gatewayFrom, from);
  });
});

describe('--allow-direct: no amplification, and the gateway keeps the observe slot', () => {
  test('every answer to a hand-made direct datagram is at most three times its size (RFC 7252 §11.3)', async () => {
    const kit = await startKit({ allowDirect: true });
    const c = await RawClient.open();
    try {
      const port = kit.address().port;
      let mid = 0x2000;
      const probes: Buffer[] = [
        // The shortest requests that drew the largest answers: discovery, the bare prefix, a wrong prefix.
        serializeMessage({ type: CON, code: Code.GET, mid: mid++, token: Buffer.alloc(0), options: uriOptions('/.well-known/core'), payload: Buffer.alloc(0) }),
        serializeMessage({ type: CON, code: Code.GET, mid: mid++, token: Buffer.alloc(0), options: uriOptions('/snsr'), payload: Buffer.alloc(0) }),
        serializeMessage({ type: CON, code: Code.GET, mid: mid++, token: Buffer.alloc(0), options: [], payload: Buffer.alloc(0) }),
        serializeMessage({ type: NON, code: Code.GET, mid: mid++, token: Buffer.alloc(0), options: uriOptions('/x'), payload: Buffer.alloc(0) }),
        serializeMessage({ type: CON, code: Code.POST, mid: mid++, token: Buffer.alloc(0), options: uriOptions('/snsr'), payload: Buffer.alloc(0) }),
        serializeMessage({ type: CON, code: Code.GET, mid: mid++, token: Buffer.alloc(0), options: uriOptions('/snsr/arduino/temp?bogus'), payload: Buffer.alloc(0) }),
        // Many unknown critical options (number 9, repeated): the 4.02 diagnostic names them.
        Buffer.from([0x40, 0x01, 0x20, 0x01, 0x90, ...Array(10).fill(0x00)]),
      ];
      // And a burst of random datagrams, as the fuzzing did.
      let seed = 16;
      const rnd = (): number => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
      for (let i = 0; i < 200; i++) {
        const len = 4 + Math.floor(rnd() * 12);
        const b = Buffer.from(Array.from({ length: len }, () => Math.floor(rnd() * 256)));
        b[0] = 0x40 | (b[0]! & 0x37); // version 1, CON or NON, any TKL
        b[1] = rnd() < 0.7 ? 0x01 : b[1]!;
        probes.push(b);
      }
      let answered = 0;
      let marker = 0x8000; // probes use MIDs below 0x8000, so a marker is never taken for a duplicate
      for (const p of probes) {
        p[2] = p[2]! & 0x7f;
        c.send(port, p);
        // A NON GET ?cfg after each probe: the kit handles datagrams in order (and its link one
        // message at a time), so whatever arrives before the marker's answer is the probe's.
        const tok = Buffer.from([0xee, marker & 0xff, marker >> 8]);
        c.send(port, { type: NON, code: Code.GET, mid: marker++, token: tok, options: uriOptions('/snsr/arduino/temp?cfg'), payload: Buffer.alloc(0) });
        for (;;) {
          const g = await c.next();
          const m = (() => {
            try {
              return parseMessage(g);
            } catch {
              return undefined;
            }
          })();
          if (m && m.token.equals(tok)) break;
          answered++;
          assert.ok(g.length <= AMPLIFICATION_LIMIT * p.length, `a ${p.length}-byte datagram drew ${g.length} bytes: ${p.toString('hex')}`);
        }
      }
      assert.ok(answered >= 7, `the kit still answers direct peers (${answered})`);
    } finally {
      c.close();
      await kit.stop();
    }
  });

  test('a direct client still reads discovery and readings, in blocks that fit', async () => {
    const kit = await startKit({ allowDirect: true, cbor: true });
    const client = await CoapEndpoint.create();
    try {
      const peer = { address: '127.0.0.1', port: kit.address().port };
      const asm = new Block2Assembler();
      let body: Buffer | undefined;
      let szx = -1;
      for (let num = 0; body === undefined && num < 64; num++) {
        const r = await client.request(peer, { method: Code.GET, uri: '/.well-known/core', options: num ? [uintOption(Option.BLOCK2, (num << 4) | szx)] : [], timeoutMs: 3000 });
        assert.equal(codeToString(r.code), '2.05');
        const b = decodeBlock(getUintOption(r, Option.BLOCK2)!);
        assert.ok(b.szx < 3, 'smaller blocks than the 128 bytes the kit gives its gateway');
        szx = b.szx;
        body = asm.add(b, r.payload);
      }
      assert.match(body!.toString(), /<\/snsr\/arduino\/temp>;rt="temperature"/);
      const r = await client.request(peer, { method: Code.GET, uri: '/snsr/arduino/temp?sens', timeoutMs: 3000 });
      assert.equal(codeToString(r.code), '2.05');
    } finally {
      await client.close();
      await kit.stop();
    }
  });

  test('a forged observe registration draws its answer and one CON notification, then the kit drops it', async () => {
    const kit = await startKit({ allowDirect: true, periodMs: 30, ackTimeoutMs: 100 });
    const c = await RawClient.open();
    try {
      const port = kit.address().port;
      const req = serializeMessage({
        type: NON,
        code: Code.GET,
        mid: 0x4001,
        token: Buffer.from([0xf0]),
        options: [...uriOptions('/snsr/arduino/temp?sens'), uintOption(Option.OBSERVE, 0)],
        payload: Buffer.alloc(0),
      });
      c.send(port, req);
      // The "victim" behind the forged address never acknowledges anything.
      await until(() => kit.sensor.observers.size === 1, 'the registration');
      await until(() => kit.sensor.observers.size === 0, 'the unacknowledged observer is dropped');
      const raw = c.inbox.splice(0);
      const got = raw.map((b) => parseMessage(b));
      assert.equal(got.length, 2, JSON.stringify(got.map((m) => [m.type, codeToString(m.code)])));
      assert.equal(got[1]!.type, CON, 'the first notification to an unvalidated peer is CON');
      const bytes = raw.reduce((n, b) => n + b.length, 0);
      assert.ok(bytes <= AMPLIFICATION_LIMIT * req.length, `${bytes} bytes for a ${req.length}-byte request`);
    } finally {
      c.close();
      await kit.stop();
    }
  });

  test('a direct peer cannot take the observe slot the gateway holds; the gateway keeps its notifications', async () => {
    // The "gateway" is a plain endpoint here: the kit knows it as its gateway address.
    const gw = await CoapEndpoint.create();
    const kit = await startKit({ allowDirect: true, gateway: gw.address(), periodMs: 50 });
    const direct = await RawClient.open();
    try {
      const peer = { address: '127.0.0.1', port: kit.address().port };
      const notes: number[] = [];
      const obs = gw.observe(peer, { uri: '/snsr/arduino/temp?sens', timeoutMs: 3000 }, (m) => notes.push(getUintOption(m, Option.OBSERVE) ?? -1));
      const first = await obs.first;
      assert.notEqual(getUintOption(first, Option.OBSERVE), undefined);
      // The direct registration: answered with the reading, without Observe (RFC 7641 §4.1), and no notifications follow.
      direct.send(peer.port, {
        type: CON,
        code: Code.GET,
        mid: 0x3001,
        token: Buffer.from([0xd1]),
        options: [...uriOptions('/snsr/arduino/temp?sens'), uintOption(Option.OBSERVE, 0)],
        payload: Buffer.alloc(0),
      });
      const r = parseMessage(await direct.next());
      assert.equal(codeToString(r.code), '2.05');
      assert.equal(getUintOption(r, Option.OBSERVE), undefined);
      assert.equal(kit.module.stats.observeRefused, 1);
      const n = notes.length;
      await until(() => notes.length >= n + 3, 'the gateway keeps receiving notifications');
      assert.equal(direct.inbox.length, 0, 'the direct peer gets no notifications');
      assert.equal(kit.sensor.observers.size, 1);
    } finally {
      direct.close();
      await kit.stop();
      await gw.close();
    }
  });
});
