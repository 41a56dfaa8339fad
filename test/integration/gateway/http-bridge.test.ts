// The HTTP bridge (docs/coap.md "HTTP bridge"): a browser or script reaches its kit with the usual
// token; JSON answers, Server-Sent Events for observe, and the HTTP face of the gateway's errors.
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { after, before, describe, it } from 'node:test';
import { provisionKit } from '../../../src/service/devices.ts';
import { startGateway, until, type GatewayHarness } from '../../helpers/gateway.ts';
import { readSse } from '../../helpers/sse.ts';

interface Bridge {
  deviceId: string;
  mac: string;
  code: string;
  codeName: string;
  contentFormat: number | null;
  payload: string | null;
  payloadEncoding: 'text' | 'base64' | null;
  reading: { epoch: number; value: number; unit: string } | null;
  maxAge: number | null;
  observe?: number;
}

/** SSE events of a fetch body (the SDK's parser) until `want` of the given name arrived; the stream stays open. */
async function readEvents(res: Response, want: number, name = 'notification'): Promise<{ event: string; data: unknown }[]> {
  const messages = await (await readSse(res)).take(want, name);
  return messages.map((m) => ({ event: m.event, data: JSON.parse(m.data) }));
}

describe('HTTP bridge to dev kits', () => {
  let h: GatewayHarness;
  let alice: { tenantId: string; token: string };
  let bob: { tenantId: string; token: string };
  const MAC = '00000000000001a1';
  let id: string;
  let bobId: string;
  const url = (dev: string, rest: string) => `/api/solutions/sandbox/devices/${dev}/coap/${rest}`;

  before(async () => {
    h = await startGateway();
    alice = await h.t.login('alice');
    bob = await h.t.login('bob');
    id = (await h.kit(alice.tenantId, MAC)).device.id;
    bobId = (await h.kit(bob.tenantId, '00000000000001b1')).device.id;
  });
  after(() => h.close());

  it('GET ?sens answers the CoAP code, content-format, payload and the decoded reading', async () => {
    const r = await h.t.request('GET', url(id, 'snsr/arduino/temp?sens'), { token: alice.token });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('x-coap-code'), '2.05');
    const b = (await r.json()) as Bridge;
    assert.equal(b.deviceId, id);
    assert.equal(b.mac, MAC);
    assert.equal(b.code, '2.05');
    assert.equal(b.codeName, 'Content');
    assert.equal(b.contentFormat, 0);
    assert.equal(b.payloadEncoding, 'text');
    assert.match(b.payload!, /^\d+,-?\d+\.\d\d,[CF]$/);
    const [epoch, value, unit] = b.payload!.split(',');
    assert.deepEqual(b.reading, { epoch: Number(epoch), value: Number(value), unit });
    assert.equal(typeof b.maxAge, 'number');
  });

  it('the path works without the prefix too, and PUT ?cfg=C changes the unit', async () => {
    const put = await h.t.request('PUT', url(id, 'arduino/temp?cfg=C'), { token: alice.token });
    assert.equal(put.status, 200);
    const b = (await put.json()) as Bridge;
    assert.equal(b.code, '2.04');
    assert.equal(b.payload, null);
    assert.equal(b.reading, null);
    const cfg = (await (await h.t.request('GET', url(id, 'snsr/arduino/temp?cfg'), { token: alice.token })).json()) as Bridge;
    assert.match(cfg.payload!, /,C$/);
    const sens = (await (await h.t.request('GET', url(id, 'snsr/arduino/temp?sens'), { token: alice.token })).json()) as Bridge;
    assert.equal(sens.reading!.unit, 'C');
    await h.t.request('PUT', url(id, 'snsr/arduino/temp?cfg=F'), { token: alice.token });
  });

  it('binary payloads come base64: the 4-byte clock', async () => {
    const b = (await (await h.t.request('GET', url(id, 'snsr/system/time'), { token: alice.token })).json()) as Bridge;
    assert.equal(b.code, '2.05');
    assert.equal(b.contentFormat, 42);
    assert.equal(b.payloadEncoding, 'base64');
    const epoch = Buffer.from(b.payload!, 'base64').readUInt32BE(0);
    assert.ok(Math.abs(epoch - Date.now() / 1000) < 120);
  });

  it('a kit error is 502 with the CoAP code; another group or a non-kit device is 404; no token is 401', async () => {
    const bad = await h.t.request('GET', url(id, 'snsr/arduino/temp'), { token: alice.token });
    assert.equal(bad.status, 502);
    assert.equal(bad.headers.get('x-coap-code'), '4.05');
    const e = (await bad.json()) as { code: string; message: string };
    assert.equal(e.code, 'BAD_GATEWAY');
    assert.match(e.message, /4\.05/);

    const theirs = await h.t.request('GET', url(bobId, 'snsr/arduino/temp?sens'), { token: alice.token });
    assert.equal(theirs.status, 404);
    const created = await h.t.request('POST', '/api/solutions/sandbox/devices', { token: alice.token, body: { deviceType: 'VirtualDevice' } });
    const virtual = ((await created.json()) as { id: string }).id;
    const notKit = await h.t.request('GET', url(virtual, 'snsr/arduino/temp?sens'), { token: alice.token });
    assert.equal(notKit.status, 404);
    const anon = await h.t.request('GET', url(id, 'snsr/arduino/temp?sens'));
    assert.equal(anon.status, 401);
  });

  it('504 at the deadline for a kit that never answers; 503 for one that never announced', async () => {
    const sink = dgram.createSocket('udp4');
    await new Promise<void>((r) => sink.bind(0, '127.0.0.1', () => r()));
    const account = (await h.t.services.store.getAccountByTenantId(alice.tenantId))!;
    const { device: silent } = await provisionKit(h.t.services.store, null, account, '00000000000001d1');
    h.gw.gateway.kits.announce(
      { v: 1, mac: '00000000000001d1', host: '127.0.0.1', port: sink.address().port, prefix: 'snsr', fw: '1.2.1000.117958', cf: 0, seq: 0, boot: 1, period: 3600 },
      { address: '127.0.0.1', port: sink.address().port },
    );
    const r = await h.t.request('GET', url(silent.id, 'snsr/arduino/temp?sens'), { token: alice.token });
    assert.equal(r.status, 504);
    assert.equal(((await r.json()) as { code: string }).code, 'GATEWAY_TIMEOUT');
    sink.close();

    const { device: offline } = await provisionKit(h.t.services.store, null, account, '00000000000001e1');
    const o = await h.t.request('GET', url(offline.id, 'snsr/arduino/temp?sens'), { token: alice.token });
    assert.equal(o.status, 503);
    assert.equal(((await o.json()) as { code: string }).code, 'KIT_OFFLINE');
  });

  it('observes as Server-Sent Events, sharing the one upstream observation, and tears down when the client goes', async () => {
    const shared = () => h.gw.gateway.observations().find((o) => o.mac === MAC && o.path === '/snsr/arduino/temp?sens');
    await until(() => shared()?.state === 'active', 'the readings bridge observes the kit');
    const ac = new AbortController();
    const res = await fetch(`${h.t.url}${url(id, 'snsr/arduino/temp?sens')}&access_token=${encodeURIComponent(alice.token)}`, {
      headers: { accept: 'text/event-stream' },
      signal: ac.signal,
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type')!, /text\/event-stream/);
    const events = await readEvents(res, 3);
    const notes = events.filter((e) => e.event === 'notification').map((e) => e.data as Bridge);
    assert.ok(notes.length >= 3);
    for (const n of notes) {
      assert.equal(n.code, '2.05');
      assert.ok(n.reading);
      assert.equal(typeof n.observe, 'number');
    }
    assert.ok(notes[2]!.observe! > notes[1]!.observe!, 'Observe numbers increase');
    // One upstream observation: the readings bridge's, with the stream as a subscriber.
    assert.equal(h.gw.gateway.observations().filter((o) => o.mac === MAC).length, 1);
    assert.equal(shared()!.subscribers, 1);
    ac.abort();
    await until(() => shared()!.subscribers === 0, 'the stream subscriber is released');
    assert.equal(shared()!.state, 'active', 'the readings bridge keeps observing');
  });

  it('an unobservable resource streams one event and ends', async () => {
    const res = await fetch(`${h.t.url}${url(id, 'snsr/arduino/temp?cfg')}`, { headers: { accept: 'text/event-stream', authorization: alice.token } });
    assert.equal(res.status, 200);
    const events = await readEvents(res, 1, 'end');
    assert.equal(events[0]!.event, 'notification');
    assert.match((events[0]!.data as Bridge).payload!, /^\d+,[CF]$/);
    assert.equal(events.at(-1)!.event, 'end');
  });
});
