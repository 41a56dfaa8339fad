// The gateway's correctness does not depend on the batched UDP addon being built: with both its
// sockets on node:dgram (batchedUdp: false, what runs where native/udp-batch.c did not build) a user
// gets what docs/coap.md describes, over real UDP with libcoap's coap-client: a session, a NON GET
// and a CON one, a PUT, an observation, and the kit's readings stored.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { closeSession, freePort, openSession, startGateway, until, viaGateway, type GatewayHarness } from '../../helpers/gateway.ts';

const READING = /^\d{9,12},-?\d+\.\d{2},[CF]$/;
const MAC = '00000000000005a1';

describe('the gateway on node:dgram', () => {
  let h: GatewayHarness;
  let alice: { tenantId: string; token: string };
  let deviceId: string;

  before(async () => {
    h = await startGateway({ options: { batchedUdp: false } });
    alice = await h.t.login('alice');
    deviceId = (await h.kit(alice.tenantId, MAC)).device.id;
  });
  after(() => h.close());

  it('proxies, observes and stores as on the batched socket', async () => {
    assert.equal(h.gw.gateway.front.socket.kind, 'dgram');
    assert.equal(h.gw.gateway.back.socket.kind, 'dgram');
    const port = await freePort();
    assert.match((await openSession(h, port, alice.token)).out, /session open until \d{4}-/);
    assert.match((await viaGateway(h, port, MAC, '/snsr/arduino/temp?sens', ['-N'])).stdout.trim(), READING);
    assert.match((await viaGateway(h, port, MAC, '/snsr/arduino/temp?sens')).stdout.trim(), READING, 'CON');
    const put = await viaGateway(h, port, MAC, '/snsr/arduino/temp?cfg=C', ['-m', 'put']);
    assert.equal(put.code, 0);
    assert.match((await viaGateway(h, port, MAC, '/snsr/arduino/temp?cfg')).stdout.trim(), /^\d+,C$/);
    const obs = await viaGateway(h, port, MAC, '/snsr/arduino/temp?sens', ['-s', '2', '-N', '-w']);
    assert.ok(obs.stdout.split('\n').filter((l) => READING.test(l.trim())).length >= 3, obs.out);
    await until(async () => {
      const r = await h.t.request('GET', `/api/solutions/sandbox/devices/${deviceId}/observations?limit=5`, { token: alice.token });
      return ((await r.json()) as { observations: unknown[] }).observations.length >= 2;
    }, 'readings of the kit are stored');
    assert.equal((await closeSession(h, port)).code, 0);
    assert.match((await viaGateway(h, port, MAC, '/snsr/arduino/temp?sens')).out, /4\.01/);
  });
});
