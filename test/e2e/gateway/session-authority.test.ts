// CoAP gateway sessions end when the authority they were opened with ends, within about a second,
// as event streams do (src/gateway/sessions.ts): the client secret rotated, the account disabled.
// Over real UDP with libcoap's coap-client; the secret is rotated and the account disabled through
// the account functions `reef account` uses, which write the store and tell this process nothing.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { rotateSecret, setDisabled } from '../../../src/auth/accounts.ts';
import { freePort, openSession, startGateway, until, viaGateway, type GatewayHarness } from '../../helpers/gateway.ts';

const READING = /^\d{9,12},-?\d+\.\d{2},[CF]$/;

describe('gateway sessions end with their authority', () => {
  let h: GatewayHarness;

  before(async () => {
    h = await startGateway();
  });
  after(() => h.close());

  /** A session of `name`'s account from a fixed coap-client port, shown working through a kit. */
  async function liveSession(name: string, mac: string): Promise<{ tenantId: string; token: string; port: number }> {
    const a = await h.t.login(name);
    await h.kit(a.tenantId, mac);
    const port = await freePort();
    assert.match((await openSession(h, port, a.token)).out, /session open until \d{4}-/);
    assert.match((await viaGateway(h, port, mac, '/snsr/arduino/temp?sens')).stdout.trim(), READING);
    return { ...a, port };
  }

  it('a rotated client secret ends the session: the next request through it is 4.01, and the old token opens none', async () => {
    const mac = '00000000000003a1';
    const a = await liveSession('rosa', mac);
    const peer = { address: '127.0.0.1', port: a.port };
    await rotateSecret(h.t.services.store, a.tenantId);
    await until(() => h.gw.gateway.sessions.peek(peer) === undefined, 'the session ends');
    const next = await viaGateway(h, a.port, mac, '/snsr/arduino/temp?sens');
    assert.match(next.out, /4\.01/);
    assert.doesNotMatch(next.stdout, READING);
    const reopen = await openSession(h, a.port, a.token);
    assert.match(reopen.out, /4\.01/);
    assert.equal(h.gw.gateway.sessions.peek(peer), undefined);
  });

  it('a disabled account ends the session: the next request through it is 4.01', async () => {
    const mac = '00000000000003b1';
    const a = await liveSession('dora', mac);
    const peer = { address: '127.0.0.1', port: a.port };
    await setDisabled(h.t.services.store, a.tenantId, true);
    await until(() => h.gw.gateway.sessions.peek(peer) === undefined, 'the session ends');
    const next = await viaGateway(h, a.port, mac, '/snsr/arduino/temp?sens');
    assert.match(next.out, /4\.01/);
    assert.doesNotMatch(next.stdout, READING);
  });

  it('another account, untouched, keeps its session', async () => {
    const mac = '00000000000003c1';
    const a = await liveSession('tess', mac);
    await h.gw.gateway.sessions.recheckAll();
    assert.ok(h.gw.gateway.sessions.peek({ address: '127.0.0.1', port: a.port }));
    assert.match((await viaGateway(h, a.port, mac, '/snsr/arduino/temp?sens')).stdout.trim(), READING);
  });
});
