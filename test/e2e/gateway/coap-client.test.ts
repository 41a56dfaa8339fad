// End to end over real UDP: libcoap's coap-client → the gateway inside a running Reef service →
// a software dev kit (src/device) → back. What a user does with the tools docs/coap.md describes.
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { after, before, describe, it } from 'node:test';
import { TokenService } from '../../../src/auth/tokens.ts';
import { provisionKit } from '../../../src/service/devices.ts';
import { closeSession, coapClient, freePort, openSession, startGateway, until, viaGateway, type GatewayHarness } from '../../helpers/gateway.ts';

const READING = /^\d{9,12},-?\d+\.\d{2},[CF]$/;

describe('coap-client through the gateway', () => {
  let h: GatewayHarness;
  let alice: { tenantId: string; token: string };
  let bob: { tenantId: string; token: string };
  const MAC = '00000000000000a1';
  const BOB_MAC = '00000000000000b1';
  let deviceId: string;

  before(async () => {
    h = await startGateway();
    alice = await h.t.login('alice');
    bob = await h.t.login('bob');
    deviceId = (await h.kit(alice.tenantId, MAC)).device.id;
    await h.kit(bob.tenantId, BOB_MAC);
  });
  after(() => h.close());

  it('opens a session with a real token, GETs ?sens, PUTs ?cfg=F, observes three notifications and closes the session', async () => {
    const port = await freePort();
    const open = await openSession(h, port, alice.token);
    assert.match(open.out, /session open until \d{4}-/);

    const get = await viaGateway(h, port, MAC, '/snsr/arduino/temp?sens');
    assert.match(get.stdout.trim(), READING);

    const put = await viaGateway(h, port, MAC, '/snsr/arduino/temp?cfg=F', ['-m', 'put']);
    assert.equal(put.code, 0);
    assert.doesNotMatch(put.out, /^[45]\.\d\d/m);
    const cfg = await viaGateway(h, port, MAC, '/snsr/arduino/temp?cfg');
    assert.match(cfg.stdout.trim(), /^\d+,F$/);
    const inF = await viaGateway(h, port, MAC, '/snsr/arduino/temp?sens');
    assert.match(inF.stdout.trim(), /,F$/);

    // Observe as NON (seed §6) for a second: the kit notifies every 100 ms in this set-up.
    const before = h.gw.gateway.stats.notificationsRelayed;
    const obs = await viaGateway(h, port, MAC, '/snsr/arduino/temp?sens', ['-s', '2', '-N', '-w']);
    const lines = obs.stdout.split('\n').filter((l) => READING.test(l.trim()));
    assert.ok(lines.length >= 3, `three notifications or more, got: ${JSON.stringify(obs.out)}`);
    assert.ok(h.gw.gateway.stats.notificationsRelayed - before >= 2);

    const del = await closeSession(h, port);
    assert.equal(del.code, 0);
    const afterClose = await viaGateway(h, port, MAC, '/snsr/arduino/temp?sens');
    assert.match(afterClose.out, /4\.01/);
    assert.doesNotMatch(afterClose.stdout, READING);
  });

  it('the older firmware prefix `sensor` reaches a `snsr` kit too (seed §9)', async () => {
    const port = await freePort();
    await openSession(h, port, alice.token);
    const get = await viaGateway(h, port, MAC, '/sensor/arduino/temp?sens');
    assert.match(get.stdout.trim(), READING);
    await closeSession(h, port);
  });

  it('refuses without a session: 4.01 with a short diagnostic', async () => {
    const port = await freePort();
    const r = await viaGateway(h, port, MAC, '/snsr/arduino/temp?sens');
    assert.match(r.out, /4\.01 no session/);
  });

  it('refuses a bad token and an expired token: 4.01, and no session is opened', async () => {
    const port = await freePort();
    const bad = await openSession(h, port, 'not-a-token');
    assert.match(bad.out, /4\.01/);
    const expiredIssuer = new TokenService(h.t.services.store, { ttlSeconds: -120, issuer: 'reef', secret: null });
    await expiredIssuer.init();
    const expired = (await expiredIssuer.issue(alice.tenantId)).accessToken;
    const r = await openSession(h, port, expired);
    assert.match(r.out, /4\.01.*expired/);
    const get = await viaGateway(h, port, MAC, '/snsr/arduino/temp?sens');
    assert.match(get.out, /4\.01/);
  });

  it("answers another tenant's kit exactly like an unprovisioned MAC: 4.04, same diagnostic", async () => {
    const port = await freePort();
    await openSession(h, port, alice.token);
    const other = await viaGateway(h, port, BOB_MAC, '/snsr/arduino/temp?sens');
    const none = await viaGateway(h, port, 'feedfacecafebeef', '/snsr/arduino/temp?sens');
    assert.match(other.out, /4\.04/);
    assert.equal(other.out.replace(/\s+$/, ''), none.out.replace(/\s+$/, ''));
    assert.doesNotMatch(other.stdout, READING);
    await closeSession(h, port);
  });

  it('is not an open relay: an arbitrary host, another port or scheme is refused with 5.05', async () => {
    const port = await freePort();
    await openSession(h, port, alice.token);
    const kitAddr = h.kits[0]!.address();
    const direct = await coapClient(['-p', String(port), '-B', '5', '-P', `coap://127.0.0.1:${h.addr.port}`, `coap://127.0.0.1:${kitAddr.port}/snsr/arduino/temp?sens`]);
    assert.match(direct.out, /5\.05/);
    const elsewhere = await coapClient(['-p', String(port), '-B', '5', '-P', `coap://127.0.0.1:${h.addr.port}`, 'coap://example.com/snsr/arduino/temp?sens']);
    assert.match(elsewhere.out, /5\.05/);
    const otherPort = await coapClient(['-p', String(port), '-B', '5', '-P', `coap://127.0.0.1:${h.addr.port}`, `coap://SSN${MAC.toUpperCase()}.mesh.reef.local:5683/snsr/arduino/temp?sens`]);
    assert.match(otherPort.out, /5\.05/);
    await closeSession(h, port);
  });

  it('a kit that never answers: 5.04 at the deadline', async () => {
    // A provisioned kit whose address swallows every datagram (configured statically).
    const sink = dgram.createSocket('udp4');
    await new Promise<void>((r) => sink.bind(0, '127.0.0.1', () => r()));
    const mac = '00000000000000d1';
    const account = (await h.t.services.store.getAccountByTenantId(alice.tenantId))!;
    await provisionKit(h.t.services.store, null, account, mac);
    h.gw.gateway.kits.announce(
      { v: 1, mac, host: '127.0.0.1', port: sink.address().port, prefix: 'snsr', fw: '1.2.1000.117958', cf: 0, seq: 0, boot: 1, period: 3600 },
      { address: '127.0.0.1', port: sink.address().port },
    );
    const port = await freePort();
    await openSession(h, port, alice.token);
    const con = await viaGateway(h, port, mac, '/snsr/arduino/temp?sens');
    assert.match(con.out, /5\.04/);
    const non = await viaGateway(h, port, mac, '/snsr/arduino/temp?sens', ['-N']);
    assert.match(non.out, /5\.04/);
    await closeSession(h, port);
    sink.close();
  });

  it("a disabled account's session dies: 4.01", async () => {
    const carol = await h.t.login('carol');
    await h.kit(carol.tenantId, '00000000000000c1');
    const port = await freePort();
    await openSession(h, port, carol.token);
    const ok = await viaGateway(h, port, '00000000000000c1', '/snsr/arduino/temp?sens');
    assert.match(ok.stdout.trim(), READING);
    await h.t.services.store.setAccountDisabled(carol.tenantId, true);
    await until(async () => (await viaGateway(h, port, '00000000000000c1', '/snsr/arduino/temp?sens')).out.includes('4.01'), 'the session ends');
  });

  it("stores the kit's readings as observations of the device, in °C with the raw value kept", async () => {
    await until(async () => {
      const r = await h.t.request('GET', `/api/solutions/sandbox/devices/${deviceId}/observations?limit=5`, { token: alice.token });
      return ((await r.json()) as { observations: unknown[] }).observations.length >= 2;
    }, 'readings are stored');
    const r = await h.t.request('GET', `/api/solutions/sandbox/devices/${deviceId}/observations?limit=50`, { token: alice.token });
    const { observations } = (await r.json()) as { observations: { temperature: number; rawValue: number; rawUnit: string; unit: string; timestamp: string }[] };
    for (const o of observations) {
      assert.equal(o.unit, 'C');
      const expected = o.rawUnit === 'F' ? Math.round((((o.rawValue - 32) * 5) / 9) * 10_000) / 10_000 : o.rawValue;
      assert.equal(o.temperature, expected);
    }
    assert.ok(
      observations.some((o) => o.rawUnit === 'F'),
      'the kit reports °F by default',
    );
    // Bob sees none of Alice's kit.
    const theirs = await h.t.request('GET', `/api/solutions/sandbox/devices/${deviceId}/observations`, { token: bob.token });
    assert.equal(theirs.status, 404);
  });
});
