// The forwarding fast path (native/coap-forward.c, src/gateway/fast-path.ts): once the full path
// has forwarded a client's NON GET, the same client's next ones of that Proxy-Uri are relayed
// without JavaScript. Hand-made datagrams over real UDP, to a software kit and to a kit of hand-made
// answers (a static kit the test speaks for): what a client gets must be what the full path gives,
// and nobody else's session, a closed one, an ended observation or a bad answer may ride a route.
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { after, before, describe, it } from 'node:test';
import { Code, CON, NON, Option, parseMessage, serializeMessage, stringOption, uintOption, type CoapMessage, type CoapOption } from '../../../src/coap/index.ts';
import { mulberry32 as prng } from '../../../src/core/random.ts';
import type { FastPathStats } from '../../../src/gateway/fast-path.ts';
import { proxyUri } from '../../../src/gateway/gateway.ts';
import { provisionKit } from '../../../src/service/devices.ts';
import { DOMAIN, startGateway, until, type GatewayHarness } from '../../helpers/gateway.ts';

const REAL = '00000000000004a1';
const FAKE = '00000000000004b2';
const EVE = '00000000000004c3';
const TEMP = '/snsr/arduino/temp?sens';

/** A UDP socket speaking hand-made CoAP: what it received, and a send. */
interface Raw {
  sock: dgram.Socket;
  port: number;
  got: { msg: CoapMessage; port: number; raw: Buffer }[];
  send(m: CoapMessage | Buffer, port: number): void;
  close(): void;
}

async function raw(): Promise<Raw> {
  const sock = dgram.createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
  const r: Raw = {
    sock,
    port: sock.address().port,
    got: [],
    send: (m, port) => sock.send(Buffer.isBuffer(m) ? m : serializeMessage(m), port, '127.0.0.1'),
    close: () => sock.close(),
  };
  sock.on('message', (b, rinfo) => {
    try {
      r.got.push({ msg: parseMessage(b), port: rinfo.port, raw: b });
    } catch {
      r.got.push({ msg: { type: 3, code: 0xff, mid: -1, token: Buffer.alloc(0), options: [], payload: b }, port: rinfo.port, raw: b });
    }
  });
  return r;
}

describe('the forwarding fast path', () => {
  let h: GatewayHarness;
  let kit: Raw;
  let eveKit: Raw;
  let alice: { tenantId: string; token: string };
  let bob: { tenantId: string; token: string };
  /** How the hand-made kit answers a request (undefined: silence). */
  let answer: (req: CoapMessage) => (CoapMessage | Buffer)[] | undefined;
  let mid = 1000;
  let tok = 1;

  before(async () => {
    kit = await fakeKit();
    eveKit = await fakeKit();
    h = await startGateway({
      options: {
        readings: false,
        kits: [
          { mac: FAKE, host: '127.0.0.1', port: kit.port },
          { mac: EVE, host: '127.0.0.1', port: eveKit.port },
        ],
      },
    });
    alice = await h.t.login('alice');
    bob = await h.t.login('bob');
    await h.kit(alice.tenantId, REAL);
    await provisionKit(h.t.services.store, null, (await h.t.services.store.getAccountByTenantId(alice.tenantId))!, FAKE);
    answer = plain;
  });
  after(async () => {
    kit.close();
    eveKit.close();
    await h.close();
  });

  /** A kit of hand-made answers: each request is answered as `answer` says, to where it came from. */
  async function fakeKit(): Promise<Raw> {
    const k = await raw();
    k.sock.on('message', (b, rinfo) => {
      let req: CoapMessage;
      try {
        req = parseMessage(b);
      } catch {
        return;
      }
      if (req.code === Code.EMPTY) return;
      for (const a of answer(req) ?? []) k.send(a, rinfo.port);
    });
    return k;
  }

  function plain(req: CoapMessage): CoapMessage[] {
    return [{ type: NON, code: Code.CONTENT, mid: mid++ & 0xffff, token: req.token, options: [uintOption(Option.CONTENT_FORMAT, 0)], payload: Buffer.from('1700000000,21.50,C') }];
  }

  async function client(who: { token: string }): Promise<Raw> {
    const c = await raw();
    const t = Buffer.from([0x5e, tok++]);
    c.send({ type: CON, code: Code.POST, mid: mid++, token: t, options: [stringOption(Option.URI_PATH, 'sessions')], payload: Buffer.from(who.token) }, h.addr.port);
    await until(() => c.got.some((g) => g.msg.token.equals(t) && g.msg.code === Code.CREATED), 'the session opens');
    return c;
  }

  function get(mac: string, token: Buffer, m = mid++, path = TEMP, extra: CoapOption[] = []): CoapMessage {
    return { type: NON, code: Code.GET, mid: m & 0xffff, token, options: [stringOption(Option.PROXY_URI, proxyUri(mac, DOMAIN, path)), ...extra], payload: Buffer.alloc(0) };
  }

  /** Sends a request and waits for the answer with its token. */
  async function ask(c: Raw, m: CoapMessage): Promise<CoapMessage> {
    const n = c.got.length;
    c.send(m, h.addr.port);
    await until(() => c.got.slice(n).some((g) => g.msg.token.equals(m.token)), `the answer to token ${m.token.toString('hex')}`);
    return c.got.slice(n).find((g) => g.msg.token.equals(m.token))!.msg;
  }

  function nextToken(): Buffer {
    const t = Buffer.alloc(4);
    t.writeUInt32BE(0xf0000000 + tok++);
    return t;
  }

  function fast() {
    const s = h.gw.gateway.fastPathStats();
    assert.ok(s, 'the fast path is on (the batched socket is built)');
    return s;
  }

  /** One request through the full path, which installs the route; the next ones take the fast path. */
  async function warm(c: Raw, mac: string, path = TEMP): Promise<void> {
    const before = fast().forwarded;
    assert.equal((await ask(c, get(mac, nextToken(), mid++, path))).code, Code.CONTENT);
    await until(async () => {
      await ask(c, get(mac, nextToken(), mid++, path));
      return fast().forwarded > before;
    }, 'a request takes the fast path');
  }

  /** How many requests the last fastAsk sent (a route can lapse on a loaded machine: then one more). */
  let fastAsks = 0;
  /**
   * A request that the fast path takes, as `counter` shows: a route lives about a second (its
   * checks' cache time), so a request may find it gone and take the full path; then it is tried
   * again on a fresh route. The kit answers the warming requests plainly, then as `how` says.
   */
  async function fastAsk(c: Raw, mac: string, counter: keyof FastPathStats, how: typeof answer, m = () => get(mac, nextToken())): Promise<CoapMessage> {
    for (let i = 0; i < 5; i++) {
      fastAsks = i + 1;
      answer = plain;
      await warm(c, mac);
      answer = how;
      const before = fast()[counter];
      const a = await ask(c, m());
      answer = plain;
      if (fast()[counter] > before) return a;
    }
    assert.fail(`no request took the fast path (${counter})`);
  }

  it('relays the usual request after the first: the same answers, the token echoed, counted as forwarded', async () => {
    const c = await client(alice);
    await warm(c, REAL);
    const fw = fast().forwarded;
    const stats = h.gw.gateway.stats.forwarded;
    const mids = new Set<number>();
    for (let i = 0; i < 20; i++) {
      const t = nextToken();
      const a = await ask(c, get(REAL, t));
      assert.equal(a.code, Code.CONTENT);
      assert.equal(a.type, NON, 'a NON request gets a NON answer (RFC 7252 §5.2.3)');
      assert.deepEqual(a.token, t);
      assert.match(a.payload.toString(), /^\d{9,12},-?\d+\.\d{2},[CF]$/);
      mids.add(a.mid);
    }
    // A route lives about a second: the full path may have taken one now and then.
    assert.ok(fast().forwarded - fw >= 10, 'most of them by the fast path');
    assert.equal(h.gw.gateway.stats.forwarded - stats, 20, "the gateway's own count includes them");
    assert.equal(mids.size, 20, 'each answer has its own Message ID');
    c.close();
  });

  it("relays the kit's answer as it is: code, options, payload; a CON answer is acknowledged to the kit", async () => {
    const c = await client(alice);
    const etag = Buffer.from([1, 2, 3]);
    let a = await fastAsk(c, FAKE, 'relayed', (req) => [
      {
        type: NON,
        code: Code.CONTENT,
        mid: mid++ & 0xffff,
        token: req.token,
        options: [{ number: Option.ETAG, value: etag }, uintOption(Option.CONTENT_FORMAT, 50), uintOption(Option.MAX_AGE, 30)],
        payload: Buffer.from('{"t":1}'),
      },
    ]);
    assert.equal(a.code, Code.CONTENT);
    assert.deepEqual(a.options.find((o) => o.number === Option.ETAG)?.value, etag);
    assert.equal(a.options.find((o) => o.number === Option.CONTENT_FORMAT)?.value.readUIntBE(0, 1), 50);
    assert.equal(a.options.find((o) => o.number === Option.MAX_AGE)?.value.readUIntBE(0, 1), 30);
    assert.equal(a.payload.toString(), '{"t":1}');
    const errors = h.gw.gateway.stats.kitErrors;
    a = await fastAsk(c, FAKE, 'kitErrors', (req) => [{ type: NON, code: Code.NOT_FOUND, mid: mid++ & 0xffff, token: req.token, options: [], payload: Buffer.from('no such sensor') }]);
    assert.equal(a.code, Code.NOT_FOUND);
    assert.equal(a.payload.toString(), 'no such sensor');
    assert.equal(h.gw.gateway.stats.kitErrors - errors, fastAsks, "each counted once, in the gateway's count");
    // A CON answer (a separate response, RFC 7252 §5.2.2): the kit gets its ACK, the client the answer.
    const conMid = 0x7a7a;
    const n = kit.got.length;
    a = await fastAsk(c, FAKE, 'relayed', (req) => [{ type: CON, code: Code.CONTENT, mid: conMid, token: req.token, options: [], payload: Buffer.from('late') }]);
    assert.equal(a.payload.toString(), 'late');
    await until(() => kit.got.slice(n).some((g) => g.msg.type === 2 && g.msg.code === Code.EMPTY && g.msg.mid === conMid), 'the kit gets an ACK');
    c.close();
  });

  it("an answer with an option it does not pass as it is goes through the endpoint's checks", async () => {
    const c = await client(alice);
    // 2048: an elective option nobody here knows (even number, RFC 7252 §5.4.6): dropped, the rest relayed.
    let a = await fastAsk(c, FAKE, 'handedOver', (req) => [
      { type: NON, code: Code.CONTENT, mid: mid++ & 0xffff, token: req.token, options: [{ number: 2048, value: Buffer.from('x') }, uintOption(Option.CONTENT_FORMAT, 0)], payload: Buffer.from('ok') },
    ]);
    assert.equal(a.code, Code.CONTENT);
    assert.equal(a.payload.toString(), 'ok');
    assert.ok(!a.options.some((o) => o.number === 2048), 'the unknown elective option is not relayed');
    // 2049: critical and unknown: an invalid answer from upstream, 5.02 (RFC 7252 §5.9.3.3).
    a = await fastAsk(c, FAKE, 'handedOver', (req) => [
      { type: NON, code: Code.CONTENT, mid: mid++ & 0xffff, token: req.token, options: [{ number: 2049, value: Buffer.from('x') }], payload: Buffer.from('ok') },
    ]);
    assert.equal(a.code, Code.BAD_GATEWAY);
    c.close();
  });

  it('no answer, a forged one from elsewhere, or a malformed one: 5.04 at the deadline, counted once', async () => {
    const c = await client(alice);
    const forger = await raw();
    const cases: ((req: CoapMessage) => (CoapMessage | Buffer)[] | undefined)[] = [
      () => undefined,
      (req) => {
        // The right token from another port: not the kit (RFC 7252 §5.3.2).
        forger.send({ type: NON, code: Code.CONTENT, mid: 1, token: req.token, options: [], payload: Buffer.from('forged') }, h.gw.gateway.back.address().port);
        return undefined;
      },
      // A payload marker with no payload (§3): a format error, ignored.
      (req) => [Buffer.concat([Buffer.from([0x58, Code.CONTENT, 0, 1]), req.token, Buffer.from([0xff])])],
    ];
    for (const how of cases) {
      const before = h.gw.gateway.stats.timeouts;
      const seen = c.got.length;
      const a = await fastAsk(c, FAKE, 'timeouts', how);
      assert.equal(a.code, Code.GATEWAY_TIMEOUT);
      assert.match(a.payload.toString(), /did not answer/);
      // fastAsk may have tried more than once (a route that lapsed sends a request the full path,
      // which times out too): every 5.04 the client got is counted once, whichever path sent it.
      const told = c.got.slice(seen).filter((g) => g.msg.code === Code.GATEWAY_TIMEOUT).length;
      assert.equal(h.gw.gateway.stats.timeouts - before, told, "each counted once, in the gateway's count");
    }
    answer = plain;
    forger.close();
    c.close();
  });

  it('a NON sent twice is forwarded once, the first of a route included (RFC 7252 §4.5)', async () => {
    const c = await client(alice);
    let asked = 0;
    answer = (req) => {
      asked++;
      return plain(req);
    };
    const dups = fast().duplicates;
    // The request that installs the route (the full path forwards it), then its duplicate: the
    // route must not carry it to the kit again.
    const first = get(FAKE, nextToken());
    await ask(c, first);
    c.send(first, h.addr.port);
    // A request the route carries, then its duplicate.
    const second = get(FAKE, nextToken());
    await ask(c, second);
    c.send(second, h.addr.port);
    // Two more exchanges: a duplicate forwarded by mistake would have reached the kit before them.
    await ask(c, get(FAKE, nextToken()));
    await ask(c, get(FAKE, nextToken()));
    assert.equal(asked, 4, 'the kit was asked once per distinct request');
    for (const m of [first, second]) assert.equal(c.got.filter((g) => g.msg.token.equals(m.token)).length, 1, 'one answer each');
    assert.ok(fast().duplicates - dups >= 1, 'the fast path dropped the duplicate of the request it learned the route from');
    // The same request re-sent with a new Message ID while the first is on its way (a client's
    // retry): the kit is asked once, and the client's token gets its answer.
    const back = h.gw.gateway.back.address().port;
    for (let tries = 0; ; tries++) {
      answer = plain;
      await warm(c, FAKE);
      const merged = fast().duplicates;
      let late = 0;
      answer = (req) => {
        late++;
        setTimeout(() => kit.send(plain(req)[0]!, back), 150); // a slow kit: its answer leaves after the client's retry
        return undefined;
      };
      const t = nextToken();
      c.send(get(FAKE, t), h.addr.port);
      const a = await ask(c, get(FAKE, t));
      assert.equal(a.code, Code.CONTENT);
      answer = plain;
      await ask(c, get(FAKE, nextToken()));
      assert.equal(late, 1, 'the kit was asked once for the request and its retry');
      if (fast().duplicates > merged) break;
      assert.ok(tries < 5, 'the fast path merged a retry');
    }
    answer = plain;
    c.close();
  });

  it("another client never rides a client's route; a closed session is refused at once", async () => {
    const a = await client(alice);
    await warm(a, REAL);
    // Bob has a session, but the kit is Alice's: the full path's answer, as if the kit did not exist.
    const b = await client(bob);
    assert.equal((await ask(b, get(REAL, nextToken()))).code, Code.NOT_FOUND);
    // A client with no session from another port of the same address.
    const x = await raw();
    assert.equal((await ask(x, get(REAL, nextToken()))).code, Code.UNAUTHORIZED);
    // Alice closes her session: her very next request is refused.
    const t = Buffer.from([0xde, 0x1e]);
    a.send({ type: CON, code: Code.DELETE, mid: mid++, token: t, options: [stringOption(Option.URI_PATH, 'sessions')], payload: Buffer.alloc(0) }, h.addr.port);
    await until(() => a.got.some((g) => g.msg.token.equals(t)), 'the session closes');
    assert.equal((await ask(a, get(REAL, nextToken()))).code, Code.UNAUTHORIZED);
    for (const s of [a, b, x]) s.close();
  });

  it('a kit removed from the sandbox is refused within the cache time of its device record', async () => {
    const eve = await h.t.login('eve');
    const account = (await h.t.services.store.getAccountByTenantId(eve.tenantId))!;
    const mac = EVE;
    const { device } = await provisionKit(h.t.services.store, null, account, mac);
    const e = await client(eve);
    answer = plain;
    await warm(e, mac);
    assert.ok(await h.t.services.store.deleteDevice(device.groupId, device.solution, device.id));
    await until(async () => (await ask(e, get(mac, nextToken()))).code === Code.NOT_FOUND, 'the deleted kit is refused');
    e.close();
  });

  it("a client that observes takes the full path: a request with its observation's token ends it (RFC 7641 §3.6)", async () => {
    const c = await client(alice);
    await warm(c, REAL);
    const t = nextToken();
    const reg = await ask(c, get(REAL, t, mid++, TEMP, [uintOption(Option.OBSERVE, 0)]));
    assert.equal(reg.code, Code.CONTENT);
    const subscribed = () => h.gw.gateway.observations().reduce((n, o) => n + o.subscribers, 0);
    assert.ok(subscribed() >= 1);
    const fw = fast().forwarded;
    // The same token without Observe: the observation ends, and the request is answered.
    assert.equal((await ask(c, get(REAL, t))).code, Code.CONTENT);
    await until(() => subscribed() === 0, 'the observation ends');
    assert.equal(fast().forwarded, fw, 'the full path took it');
    c.close();
  });

  it('survives seeded mutations of the usual request and of kit answers, and keeps serving', async () => {
    const rnd = prng(0xfa57);
    const c = await client(alice);
    answer = plain;
    await warm(c, FAKE);
    const base = serializeMessage(get(FAKE, Buffer.from([1, 2, 3, 4]), 0x4242));
    for (let i = 0; i < 400; i++) {
      const d = Buffer.from(base);
      const flips = 1 + Math.floor(rnd() * 3);
      for (let k = 0; k < flips; k++) d[Math.floor(rnd() * d.length)] = Math.floor(rnd() * 256);
      const cut = rnd() < 0.2 ? d.subarray(0, Math.floor(rnd() * d.length)) : d;
      c.send(cut, h.addr.port);
      if (i % 50 === 0) await warm(c, FAKE);
    }
    // Kit answers with random bytes after the right header and token.
    answer = (req) => {
      const tail = Buffer.alloc(Math.floor(rnd() * 24));
      for (let k = 0; k < tail.length; k++) tail[k] = Math.floor(rnd() * 256);
      return [Buffer.concat([Buffer.from([0x50 | req.token.length, Code.CONTENT, 0, 9]), req.token, tail])];
    };
    for (let i = 0; i < 30; i++) {
      const a = await ask(c, get(FAKE, nextToken()));
      assert.ok([Code.CONTENT, Code.BAD_GATEWAY, Code.GATEWAY_TIMEOUT].includes(a.code), `answer ${a.code}`);
    }
    answer = plain;
    assert.equal((await ask(c, get(FAKE, nextToken()))).code, Code.CONTENT);
    assert.equal((await ask(c, get(REAL, nextToken()))).code, Code.CONTENT);
    c.close();
  });
});
