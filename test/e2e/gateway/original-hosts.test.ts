// Kit host names from the original samples: every original CoAP sample addresses a kit
// as SSN<mac>.SG.YEL01.SSN.SSNSGS.NET (some in lower case), and the Java client opens its session
// with PUT as often as with POST. Driven with libcoap's coap-client over real UDP, as the samples do.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ORIGINAL_MESH_DOMAIN } from '../../../src/gateway/target.ts';
import { closeSession, coapClient, DOMAIN, freePort, openSession, startGateway, type GatewayHarness } from '../../helpers/gateway.ts';

const READING = /^\d{9,12},-?\d+\.\d{2},[CF]$/;

describe('original kit host names and session calls', () => {
  let h: GatewayHarness;
  let alice: { tenantId: string; token: string };
  let bob: { tenantId: string; token: string };
  const MAC = '00135005ff0000a1';
  const BOB_MAC = '00135005ff0000b1';

  before(async () => {
    h = await startGateway();
    alice = await h.t.login('alice');
    bob = await h.t.login('bob');
    await h.kit(alice.tenantId, MAC);
    await h.kit(bob.tenantId, BOB_MAC);
  });
  after(() => h.close());

  const via = (port: number, uri: string) => coapClient(['-p', String(port), '-B', '5', '-P', `coap://127.0.0.1:${h.addr.port}`, uri]);

  it('PUT /sessions with the token opens a session as POST does', async () => {
    const port = await freePort();
    const put = await coapClient(['-p', String(port), '-B', '5', '-m', 'put', '-t', '0', '-e', alice.token, `coap://127.0.0.1:${h.addr.port}/sessions`]);
    assert.match(put.out, /session open until \d{4}-/);
    const get = await via(port, `coap://SSN${MAC.toUpperCase()}.${DOMAIN}:4849/snsr/arduino/temp?sens`);
    assert.match(get.stdout.trim(), READING);
    await closeSession(h, port);
    // A PUT with a bad token opens nothing.
    const bad = await coapClient(['-p', String(port), '-B', '5', '-m', 'put', '-t', '0', '-e', 'not-a-token', `coap://127.0.0.1:${h.addr.port}/sessions`]);
    assert.match(bad.out, /4\.01/);
  });

  it("reaches a kit under the original's domain, upper and lower case, with the configured domain still working", async () => {
    const port = await freePort();
    await openSession(h, port, alice.token);
    for (const host of [`SSN${MAC.toUpperCase()}.${ORIGINAL_MESH_DOMAIN}`, `ssn${MAC}.${ORIGINAL_MESH_DOMAIN.toLowerCase()}`, `SSN${MAC}.${DOMAIN}`]) {
      const r = await via(port, `coap://${host}:4849/snsr/arduino/temp?sens`);
      assert.match(r.stdout.trim(), READING, `${host}: ${r.out}`);
    }
    await closeSession(h, port);
  });

  it("the original's domain opens nothing new: another tenant's kit is 4.04, an unknown domain 5.05 naming the domains expected", async () => {
    const port = await freePort();
    await openSession(h, port, alice.token);
    const theirs = await via(port, `coap://SSN${BOB_MAC.toUpperCase()}.${ORIGINAL_MESH_DOMAIN}:4849/snsr/arduino/temp?sens`);
    assert.match(theirs.out, /4\.04/);
    assert.doesNotMatch(theirs.stdout, READING);
    const other = await via(port, `coap://SSN${MAC.toUpperCase()}.mesh.example.org:4849/snsr/arduino/temp?sens`);
    assert.match(other.out, /5\.05/);
    assert.ok(other.out.includes(DOMAIN) && other.out.includes(ORIGINAL_MESH_DOMAIN), `the diagnostic names the domains: ${other.out}`);
    await closeSession(h, port);
  });
});
