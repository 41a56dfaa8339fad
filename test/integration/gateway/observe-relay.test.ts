// The observe relay and the proxy's message-layer behaviour, seen by node CoAP clients (src/coap) on
// their own UDP sockets: shared upstream observations, deregistration, RST and session-end teardown,
// the session limit, de-duplication, Block2 pass-through and separate responses.
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { after, before, describe, it } from 'node:test';
import {
  Block2Assembler,
  Code,
  type CoapEndpoint,
  CON,
  decodeBlock,
  encodeBlock,
  getUintOption,
  NON,
  Option,
  serializeMessage,
  stringOption,
  uintOption,
  type CoapMessage,
} from '../../../src/coap/index.ts';
import { proxyUri } from '../../../src/gateway/gateway.ts';
import { provisionKit } from '../../../src/service/devices.ts';
import { DOMAIN, nodeClient, startGateway, until, type GatewayHarness } from '../../helpers/gateway.ts';

const SENS = '/snsr/arduino/temp?sens';

describe('observe relay and proxy behaviour', () => {
  let h: GatewayHarness;
  let alice: { tenantId: string; token: string };
  const MAC = '00000000000002a1';
  const clients: CoapEndpoint[] = [];

  async function client(token = alice.token): Promise<CoapEndpoint> {
    const c = await nodeClient();
    clients.push(c);
    const r = await c.request(h.addr, { method: Code.POST, uri: '/sessions', payload: Buffer.from(token), timeoutMs: 5000 });
    assert.equal(r.code, Code.CREATED);
    return c;
  }
  const proxied = (uri: string, extra: { options?: ReturnType<typeof uintOption>[]; confirmable?: boolean; token?: Buffer; method?: number } = {}) => ({
    method: extra.method ?? Code.GET,
    options: [stringOption(Option.PROXY_URI, proxyUri(MAC, DOMAIN, uri)), ...(extra.options ?? [])],
    confirmable: extra.confirmable ?? false,
    timeoutMs: 5000,
    ...(extra.token ? { token: extra.token } : {}),
  });
  const upstream = () => h.gw.gateway.observations().filter((o) => o.mac === MAC);

  before(async () => {
    // Readings off: every upstream observation here is held by clients only.
    h = await startGateway({ options: { readings: false, piggybackMs: 100 }, gateway: { maxSessionsPerAccount: 3 } });
    alice = await h.t.login('alice');
    await h.kit(alice.tenantId, MAC);
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await h.close();
  });

  it('several clients share one upstream observation; deregistration, RST and session end tear it down', async () => {
    const kit = h.kits[0]!;
    const a = await client();
    const b = await client();
    const seenA: CoapMessage[] = [];
    const seenB: CoapMessage[] = [];
    const obsA = a.observe(h.addr, proxied(SENS), (m) => seenA.push(m));
    const firstA = await obsA.first;
    assert.equal(firstA.code, Code.CONTENT);
    assert.notEqual(getUintOption(firstA, Option.OBSERVE), undefined);
    const obsB = b.observe(h.addr, proxied(SENS), (m) => seenB.push(m));
    await obsB.first;
    await until(() => seenA.length >= 3 && seenB.length >= 3, 'both clients get notifications');
    assert.equal(upstream().length, 1, 'one upstream observation');
    assert.equal(upstream()[0]!.subscribers, 2);
    assert.equal(kit.sensor.observers.size, 1, 'the kit has one observer: the gateway');
    // Notifications keep the kit's options and carry increasing Observe numbers.
    const n = seenA.at(-1)!;
    assert.equal(getUintOption(n, Option.CONTENT_FORMAT), 0);
    assert.notEqual(getUintOption(n, Option.MAX_AGE), undefined);
    assert.ok(getUintOption(seenA.at(-1)!, Option.OBSERVE)! > getUintOption(seenA[0]!, Option.OBSERVE)!);

    // A deregisters (GET with Observe 1, RFC 7641 §3.6).
    await obsA.cancel();
    await until(() => upstream()[0]?.subscribers === 1, 'A is removed');
    const countA = seenA.length;

    // B forgets its token: its next notification is answered RST, which ends B's subscription.
    obsB.forget();
    await until(() => upstream().length === 0, 'the last observer gone, the upstream observation ends');
    await until(() => kit.sensor.observers.size === 0, 'the kit is told (proactive cancellation)');
    assert.ok(seenA.length <= countA + 1, 'A gets no more notifications after deregistering');

    // C observes, then closes its session: its observation ends with it.
    const c = await client();
    const obsC = c.observe(h.addr, proxied(SENS), () => undefined);
    await obsC.first;
    assert.equal(upstream()[0]!.subscribers, 1);
    const del = await c.request(h.addr, { method: Code.DELETE, uri: '/sessions', timeoutMs: 5000 });
    assert.equal(del.code, Code.DELETED);
    await until(() => upstream().length === 0, 'session end tears the observation down');
    obsC.forget();
  });

  it('a late observer gets the latest representation at once, without a second upstream registration', async () => {
    const a = await client();
    const b = await client();
    const obsA = a.observe(h.addr, proxied(SENS), () => undefined);
    await obsA.first;
    const forwarded = h.gw.gateway.stats.forwarded;
    const obsB = b.observe(h.addr, proxied(SENS), () => undefined);
    const first = await obsB.first;
    assert.equal(first.code, Code.CONTENT);
    assert.notEqual(getUintOption(first, Option.OBSERVE), undefined);
    assert.equal(h.gw.gateway.stats.forwarded, forwarded, 'nothing new was sent to the kit');
    await obsA.cancel();
    await obsB.cancel();
    await until(() => upstream().length === 0, 'released');
  });

  it('at most N sessions per account: one more closes the least recently used', async () => {
    const fresh = await h.t.login('dora');
    const cs = [await client(fresh.token), await client(fresh.token), await client(fresh.token)];
    assert.equal(h.gw.gateway.sessions.countFor(fresh.tenantId), 3);
    // Use the 2nd and 3rd so the 1st is least recently used.
    for (const c of cs.slice(1)) assert.equal((await c.request(h.addr, { method: Code.GET, uri: '/sessions', timeoutMs: 5000 })).code, Code.CONTENT);
    await client(fresh.token);
    assert.equal(h.gw.gateway.sessions.countFor(fresh.tenantId), 3);
    assert.equal((await cs[0]!.request(h.addr, { method: Code.GET, uri: '/sessions', timeoutMs: 5000 })).code, Code.UNAUTHORIZED);
    assert.equal((await cs[1]!.request(h.addr, { method: Code.GET, uri: '/sessions', timeoutMs: 5000 })).code, Code.CONTENT);
  });

  it('a re-sent CON (same Message ID) is forwarded once and answered the same', async () => {
    const c = await client();
    const sock = c.socket;
    const msg: CoapMessage = {
      type: CON,
      code: Code.GET,
      mid: 4242,
      token: Buffer.from('dupe'),
      options: [stringOption(Option.PROXY_URI, proxyUri(MAC, DOMAIN, '/snsr/arduino/temp?cfg'))],
      payload: Buffer.alloc(0),
    };
    const replies: Buffer[] = [];
    // Take the socket over from the endpoint for this raw exchange.
    sock.listen(
      (b) => replies.push(b),
      () => undefined,
    );
    const before = h.kits[0]!.module.stats.forwarded;
    const data = serializeMessage(msg);
    sock.send(data, h.addr.port, h.addr.address);
    sock.send(data, h.addr.port, h.addr.address);
    await until(() => replies.length >= 1, 'an answer');
    sock.send(data, h.addr.port, h.addr.address);
    await until(() => replies.length >= 2, 'the same answer again for the late duplicate');
    assert.deepEqual(replies[1], replies[0]);
    assert.equal(h.kits[0]!.module.stats.forwarded - before, 1, 'the kit saw one request');
  });

  it('Block2 passes through: the client asks for 32-byte blocks and reassembles the kit’s link format', async () => {
    const c = await client();
    const asm = new Block2Assembler();
    let body: Buffer | undefined;
    let num = 0;
    let blocks = 0;
    while (!body) {
      const r = await c.request(h.addr, proxied('/.well-known/core', { options: [uintOption(Option.BLOCK2, encodeBlock({ num, more: false, szx: 1 }))] }));
      assert.equal(r.code, Code.CONTENT);
      const blk = decodeBlock(getUintOption(r, Option.BLOCK2)!);
      assert.equal(blk.szx, 1);
      assert.ok(r.payload.length <= 32);
      body = asm.add(blk, r.payload);
      num++;
      blocks++;
    }
    assert.ok(blocks > 2);
    assert.match(body.toString(), /<\/snsr\/arduino\/temp>;rt="temperature"/);
  });

  it('a CON the kit is slow to answer gets an empty ACK, then a CON separate response (here 5.04 at the deadline)', async () => {
    const sink = dgram.createSocket('udp4');
    await new Promise<void>((r) => sink.bind(0, '127.0.0.1', () => r()));
    const mac = '00000000000002d1';
    const account = (await h.t.services.store.getAccountByTenantId(alice.tenantId))!;
    await provisionKit(h.t.services.store, null, account, mac);
    h.gw.gateway.kits.announce(
      { v: 1, mac, host: '127.0.0.1', port: sink.address().port, prefix: 'snsr', fw: '1.2.1000.117958', cf: 0, seq: 0, boot: 1, period: 3600 },
      { address: '127.0.0.1', port: sink.address().port },
    );
    const c = await client();
    const before = h.gw.gateway.stats.separateResponses;
    const r = await c.request(h.addr, { method: Code.GET, options: [stringOption(Option.PROXY_URI, proxyUri(mac, DOMAIN, SENS))], confirmable: true, timeoutMs: 5000 });
    assert.equal(r.code, Code.GATEWAY_TIMEOUT);
    assert.equal(r.type, CON, 'a separate response, confirmable like the request');
    assert.equal(h.gw.gateway.stats.separateResponses - before, 1);
    // The same with NON: a NON answer.
    const n = await c.request(h.addr, { method: Code.GET, options: [stringOption(Option.PROXY_URI, proxyUri(mac, DOMAIN, SENS))], confirmable: false, timeoutMs: 5000 });
    assert.equal(n.code, Code.GATEWAY_TIMEOUT);
    assert.equal(n.type, NON);
    // Two NONs with the same token while the first is in flight: forwarded once.
    const fw = h.gw.gateway.stats.forwarded;
    const token = Buffer.from('same');
    const [x, y] = await Promise.all([
      c.request(h.addr, { method: Code.GET, options: [stringOption(Option.PROXY_URI, proxyUri(mac, DOMAIN, SENS))], confirmable: false, timeoutMs: 5000, token }),
      until(() => h.gw.gateway.stats.forwarded > fw, 'the first NON forwarded').then(() => {
        c.sendNon(h.addr, { type: NON, code: Code.GET, mid: c.nextMid(), token, options: [stringOption(Option.PROXY_URI, proxyUri(mac, DOMAIN, SENS))], payload: Buffer.alloc(0) });
      }),
    ]);
    void y;
    assert.equal(x.code, Code.GATEWAY_TIMEOUT);
    assert.equal(h.gw.gateway.stats.forwarded - fw, 1);
    sink.close();
  });

  it('one token toward two kits at once is two forwards, each answered: only identical requests are merged', async () => {
    const MAC2 = '00000000000002a2';
    await h.kit(alice.tenantId, MAC2);
    const c = await client();
    const answers: Buffer[] = [];
    c.socket.listen(
      (b) => answers.push(b),
      () => undefined,
    );
    const before = h.gw.gateway.stats.forwarded;
    for (const [i, mac] of [MAC, MAC2].entries()) {
      const msg: CoapMessage = {
        type: NON,
        code: Code.GET,
        mid: 900 + i,
        token: Buffer.from('twin'),
        options: [stringOption(Option.PROXY_URI, proxyUri(mac, DOMAIN, SENS))],
        payload: Buffer.alloc(0),
      };
      c.socket.send(serializeMessage(msg), h.addr.port, h.addr.address);
    }
    await until(() => answers.length >= 2, 'both answers');
    assert.equal(h.gw.gateway.stats.forwarded - before, 2, 'each kit asked');
    assert.deepEqual(
      answers.map((b) => b[1]),
      [Code.CONTENT, Code.CONTENT],
    );
  });
});
