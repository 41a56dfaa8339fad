// Malformed and hostile datagrams (seeded fuzz, as for the device): the gateway keeps serving,
// answers per RFC 7252 (4.00 / RST / silence), never amplifies toward a peer without a session, and
// forged announcements cannot redirect a kit.
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { after, before, describe, it } from 'node:test';
import { announcementMessage, Code, CON, encodeAnnouncement, NON, Option, serializeMessage, stringOption, uintOption, type CoapMessage } from '../../../src/coap/index.ts';
import { mulberry32 as prng } from '../../../src/core/random.ts';
import { proxyUri } from '../../../src/gateway/gateway.ts';
import { DOMAIN, nodeClient, startGateway, until, type GatewayHarness } from '../../helpers/gateway.ts';

interface Probe {
  sock: dgram.Socket;
  replies: Buffer[];
  send(b: Buffer, port?: number): void;
  /** Sends one datagram and collects what comes back within a short settle (no assertion on time). */
  exchange(b: Buffer): Promise<Buffer[]>;
  close(): void;
}

async function probe(h: GatewayHarness): Promise<Probe> {
  const sock = dgram.createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
  const replies: Buffer[] = [];
  sock.on('message', (b) => replies.push(b));
  const p: Probe = {
    sock,
    replies,
    send: (b, port = h.addr.port) => sock.send(b, port, '127.0.0.1'),
    async exchange(b) {
      const n = replies.length;
      p.send(b);
      // Follow with a ping (empty CON) and wait for its RST: everything the first datagram drew
      // has arrived before it (one socket, in order on loopback).
      const mid = 0xfffe;
      p.send(Buffer.from([0x40, 0x00, mid >> 8, mid & 0xff]));
      await until(() => replies.slice(n).some((r) => r.length === 4 && r[0] === 0x70 && r.readUInt16BE(2) === mid), 'the ping answer');
      return replies.slice(n).filter((r) => !(r.length === 4 && r[0] === 0x70 && r.readUInt16BE(2) === mid));
    },
    close: () => sock.close(),
  };
  return p;
}

describe('hostile datagrams to the gateway', () => {
  let h: GatewayHarness;
  let alice: { tenantId: string; token: string };
  const MAC = '00000000000003a1';

  before(async () => {
    h = await startGateway();
    alice = await h.t.login('alice');
    await h.kit(alice.tenantId, MAC);
  });
  after(() => h.close());

  async function stillServes(): Promise<void> {
    const c = await nodeClient();
    try {
      assert.equal((await c.request(h.addr, { method: Code.POST, uri: '/sessions', payload: Buffer.from(alice.token), timeoutMs: 5000 })).code, Code.CREATED);
      const r = await c.request(h.addr, { method: Code.GET, options: [stringOption(Option.PROXY_URI, proxyUri(MAC, DOMAIN, '/snsr/arduino/temp?sens'))], confirmable: false, timeoutMs: 5000 });
      assert.equal(r.code, Code.CONTENT);
    } finally {
      await c.close();
    }
  }

  it('answers each malformed datagram as RFC 7252 says, never with more bytes than it got', async () => {
    const p = await probe(h);
    const get = (opts: Buffer, type = CON) => Buffer.concat([Buffer.from([0x40 | (type << 4) | 1, 0x01, 0x12, 0x34, 0xaa]), opts]);
    const cases: { name: string; data: Buffer; expect: 'rst' | 'none' | 'code'; code?: number }[] = [
      { name: 'shorter than a header', data: Buffer.from([0x40, 0x01]), expect: 'none' },
      { name: 'version 2', data: Buffer.from([0x80, 0x01, 0, 1]), expect: 'none' },
      { name: 'token length 9', data: Buffer.from([0x49, 0x01, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9]), expect: 'rst' },
      { name: 'reserved class 1 code', data: Buffer.from([0x40, 0x21, 0, 3]), expect: 'rst' },
      { name: 'option delta nibble 15', data: get(Buffer.from([0xf1, 0x00])), expect: 'rst' },
      { name: 'option length nibble 15', data: get(Buffer.from([0x1f, 0x00])), expect: 'rst' },
      { name: 'payload marker, no payload', data: get(Buffer.from([0xff])), expect: 'rst' },
      { name: 'option value past the end', data: get(Buffer.from([0x3c, 0x61])), expect: 'rst' },
      { name: 'empty message with a token', data: Buffer.from([0x41, 0x00, 0, 4, 9]), expect: 'rst' },
      { name: 'NON with a format error', data: Buffer.concat([Buffer.from([0x50, 0x01, 0, 5]), Buffer.from([0xf0])]), expect: 'rst' },
      { name: 'ACK with a format error', data: Buffer.from([0x6f, 0x45, 0, 6]), expect: 'none' },
      // 300 one-byte unknown critical options: the 4.02 diagnostic must not outgrow the request.
      { name: 'many unknown critical options', data: get(Buffer.concat([Buffer.from([0x90]), Buffer.alloc(300, 0x00)])), expect: 'code', code: Code.BAD_OPTION },
      { name: 'oversized request', data: get(Buffer.concat([Buffer.from([0xff]), Buffer.alloc(2000, 0x41)])), expect: 'code', code: Code.REQUEST_ENTITY_TOO_LARGE },
      { name: 'tiny GET of an unknown path', data: Buffer.from([0x40, 0x01, 0, 7]), expect: 'code', code: Code.NOT_FOUND },
      { name: 'unknown method 0.31', data: Buffer.from([0x40, 0x1f, 0, 8]), expect: 'code', code: Code.NOT_FOUND },
      { name: 'stray response', data: Buffer.from([0x50, 0x45, 0, 9, 0xff, 0x41]), expect: 'rst' },
      { name: 'stray RST', data: Buffer.from([0x70, 0x00, 0, 10]), expect: 'none' },
    ];
    for (const c of cases) {
      const got = await p.exchange(c.data);
      for (const r of got) assert.ok(r.length <= c.data.length, `${c.name}: answer of ${r.length} bytes to ${c.data.length}`);
      if (c.expect === 'none') assert.equal(got.length, 0, c.name);
      if (c.expect === 'rst') assert.ok(got.length === 1 && got[0]!.length === 4 && got[0]![0]! >> 4 === 0x7, `${c.name}: a RST`);
      if (c.expect === 'code') assert.equal(got[0]?.[1], c.code, c.name);
    }
    p.close();
    await stillServes();
  });

  it('without a session, proxied and session requests are refused with small answers', async () => {
    const p = await probe(h);
    let mid = 100;
    const msg = (m: Partial<CoapMessage>): Buffer => serializeMessage({ type: CON, code: Code.GET, mid: mid++, token: Buffer.alloc(0), options: [], payload: Buffer.alloc(0), ...m });
    const cases = [
      msg({ options: [stringOption(Option.PROXY_URI, proxyUri(MAC, DOMAIN, '/snsr/arduino/temp?sens'))] }),
      msg({ options: [stringOption(Option.PROXY_URI, 'coap://x')] }),
      msg({ options: [stringOption(Option.PROXY_SCHEME, 'coap')] }),
      msg({ code: Code.POST, options: [stringOption(Option.URI_PATH, 'sessions')], payload: Buffer.from('x') }),
      msg({ code: Code.POST, options: [stringOption(Option.URI_PATH, 'sessions')], payload: Buffer.alloc(1000, 0x61) }),
      msg({ code: Code.GET, options: [stringOption(Option.URI_PATH, 'sessions')] }),
      msg({ code: Code.PUT, options: [stringOption(Option.URI_PATH, 'sessions')] }),
      msg({ code: Code.POST, options: [stringOption(Option.URI_PATH, 'sessions'), uintOption(Option.CONTENT_FORMAT, 50)], payload: Buffer.from(alice.token) }),
    ];
    for (const data of cases) {
      const got = await p.exchange(data);
      assert.equal(got.length, 1);
      assert.ok(got[0]!.length <= data.length, `answer of ${got[0]!.length} bytes to ${data.length}`);
      assert.equal(got[0]![1]! >> 5, 4, 'a 4.xx');
    }
    p.close();
  });

  it('survives a seeded stream of random and mutated datagrams, and answers fewer bytes than it gets', async () => {
    const rnd = prng(0x5eed);
    const p = await probe(h);
    const valid = [
      serializeMessage({
        type: CON,
        code: Code.GET,
        mid: 1,
        token: Buffer.from('ab'),
        options: [stringOption(Option.PROXY_URI, proxyUri(MAC, DOMAIN, '/snsr/arduino/temp?sens')), uintOption(Option.OBSERVE, 0)],
        payload: Buffer.alloc(0),
      }),
      serializeMessage({ type: CON, code: Code.POST, mid: 2, token: Buffer.from('cd'), options: [stringOption(Option.URI_PATH, 'sessions')], payload: Buffer.from(alice.token.slice(0, 40)) }),
      serializeMessage(announcementMessage({ v: 1, mac: MAC, host: '127.0.0.1', port: 9, prefix: 'snsr', fw: '1.2.1000.117958', cf: 0, seq: 0, boot: 1, period: 60 }, 3, Buffer.from('ef'))),
      serializeMessage({
        type: NON,
        code: Code.PUT,
        mid: 4,
        token: Buffer.alloc(0),
        options: ['sensor', 'arduino', 'time'].map((s) => stringOption(Option.URI_PATH, s)),
        payload: Buffer.from([6, 8, 0, 0, 0, 1, 0, 0, 0, 2]),
      }),
    ];
    let sent = 0;
    for (let i = 0; i < 3000; i++) {
      let d: Buffer;
      const kind = rnd();
      if (kind < 0.3) {
        d = Buffer.alloc(Math.floor(rnd() * 64));
        for (let j = 0; j < d.length; j++) d[j] = Math.floor(rnd() * 256);
      } else if (kind < 0.9) {
        d = Buffer.from(valid[Math.floor(rnd() * valid.length)]!);
        const flips = 1 + Math.floor(rnd() * 4);
        for (let f = 0; f < flips; f++) {
          const at = Math.floor(rnd() * d.length);
          d.writeUInt8(d.readUInt8(at) ^ (1 << Math.floor(rnd() * 8)), at);
        }
        if (rnd() < 0.2) d = d.subarray(0, Math.floor(rnd() * d.length));
      } else {
        d = Buffer.from(valid[Math.floor(rnd() * valid.length)]!);
        d = Buffer.concat([d, Buffer.alloc(Math.floor(rnd() * 1500), Math.floor(rnd() * 256))]);
      }
      // Make each a fresh exchange, so de-duplication does not hide the parser from the input.
      if (d.length >= 4) d.writeUInt16BE(i & 0xffff, 2);
      p.send(d);
      sent += d.length;
      if (i % 200 === 199) await new Promise((r) => setImmediate(r));
    }
    await p.exchange(Buffer.from([0x40, 0x01, 0xff, 0xfd]));
    const got = p.replies.reduce((n, r) => n + r.length, 0);
    assert.ok(got <= sent, `answered ${got} bytes to ${sent}`);
    for (const r of p.replies) assert.ok(r.length <= 1152);
    p.close();
    // The forged announcement in the mix came from the wrong address: the kit was not moved.
    assert.notEqual(h.gw.gateway.kits.get(MAC)?.peer.port, 9);
    await stillServes();
  });

  it('a forged announcement cannot point a kit elsewhere; an unprovisioned MAC is not learned', async () => {
    const p = await probe(h);
    const real = h.kits[0]!.address();
    // Claims the real kit's MAC at the prober's address... but sent from another socket.
    const forged = announcementMessage({ v: 1, mac: MAC, host: '127.0.0.1', port: real.port + 1, prefix: 'snsr', fw: '1.2.1000.117958', cf: 0, seq: 9, boot: 2, period: 60 }, 5, Buffer.from('zz'));
    p.send(serializeMessage(forged));
    // An unprovisioned MAC announcing from its own address.
    const own = p.sock.address();
    p.send(
      serializeMessage(
        announcementMessage({ v: 1, mac: '0123456789abcdef', host: '127.0.0.1', port: own.port, prefix: 'snsr', fw: '1.2.1000.117958', cf: 0, seq: 0, boot: 1, period: 60 }, 6, Buffer.from('yy')),
      ),
    );
    // Not JSON, and JSON of the wrong shape.
    p.send(serializeMessage({ type: NON, code: Code.POST, mid: 7, token: Buffer.alloc(0), options: [stringOption(Option.URI_PATH, 'kits')], payload: Buffer.from('{"v":1,"mac":') }));
    p.send(
      serializeMessage({
        type: NON,
        code: Code.POST,
        mid: 8,
        token: Buffer.alloc(0),
        options: [stringOption(Option.URI_PATH, 'kits')],
        payload: encodeAnnouncement({ v: 1, mac: 'zz', host: '', port: 0, prefix: 'snsr', fw: 'x', cf: 0, seq: 0, boot: 0, period: 0 } as never),
      }),
    );
    await p.exchange(Buffer.from([0x40, 0x01, 0xff, 0xfc]));
    await until(() => h.gw.gateway.stats.announcementsRefused >= 4, 'the announcements are refused');
    assert.equal(h.gw.gateway.kits.get(MAC)!.peer.port, real.port);
    assert.equal(h.gw.gateway.kits.get('0123456789abcdef'), undefined);
    p.close();
    await stillServes();
  });

  it('junk sent to the kit-facing socket is ignored too', async () => {
    const p = await probe(h);
    const back = h.gw.gateway.back.address().port;
    const rnd = prng(7);
    for (let i = 0; i < 500; i++) {
      const d = Buffer.alloc(1 + Math.floor(rnd() * 100));
      for (let j = 0; j < d.length; j++) d[j] = Math.floor(rnd() * 256);
      p.send(d, back);
    }
    await p.exchange(Buffer.from([0x40, 0x01, 0xff, 0xfb]));
    p.close();
    await stillServes();
  });
});
