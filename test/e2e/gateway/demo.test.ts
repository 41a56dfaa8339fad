// The demo (docs/coap.md "Try it"): the first start provisions one simulated kit to the demo account
// and runs it; a new user reaches it through the gateway with coap-client at once. A restart runs
// the same kit again without provisioning another.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import fs from 'node:fs';
import { testConfig } from '../../../src/config/config.ts';
import { demoKitComponent, demoKitMac } from '../../../src/demo/component.ts';
import { gatewayComponent } from '../../../src/gateway/component.ts';
import { startTestServer, tempDir, type TestServer } from '../../helpers/server.ts';
import { closeSession, coapClient, freePort, until } from '../../helpers/gateway.ts';
import { proxyUri } from '../../../src/gateway/gateway.ts';

describe('demo kit', () => {
  const dataDir = tempDir();
  let t: TestServer | undefined;
  after(async () => {
    await t?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  async function start() {
    const f = gatewayComponent();
    const k = demoKitComponent(() => f.last, { periodMs: 200 });
    t = await startTestServer({ dataDir, demo: true, gateway: { ...testConfig({ dataDir }).gateway, enabled: true, port: 0, deadlineMs: 2000 } }, [f, k]);
    return {
      gateway: f.last!.gateway,
      address: () => f.last!.address(),
      get demoMac() {
        return k.last!.demoMac;
      },
    };
  }

  it('is provisioned to the demo account on first start and reachable through the gateway with coap-client', async () => {
    const gw = await start();
    const demo = t!.demo!;
    assert.ok(demo, 'a demo account');
    const mac = demoKitMac(demo.tenantId);
    await until(() => gw.demoMac === mac && gw.gateway.kits.get(mac) !== undefined, 'the demo kit announces itself');
    const token = await t!.token(demo);
    const list = (await (await t!.request('GET', '/api/solutions/sandbox/devices', { token })).json()) as {
      devices: { id: string; deviceType: string; provisioningInfo?: { ssniMacAddress: string } }[];
    };
    const kits = list.devices.filter((d) => d.deviceType === 'NICDevKit');
    assert.equal(kits.length, 1);
    assert.equal(kits[0]!.provisioningInfo!.ssniMacAddress, mac);

    const port = await freePort();
    const gwUri = `coap://127.0.0.1:${gw.address().port}`;
    const open = await coapClient(['-p', String(port), '-B', '5', '-m', 'post', '-e', token, `${gwUri}/sessions`]);
    assert.match(open.out, /session open/);
    const get = await coapClient(['-p', String(port), '-B', '5', '-P', gwUri, proxyUri(mac, 'mesh.reef.local', '/snsr/arduino/temp?sens')]);
    assert.match(get.stdout.trim(), /^\d+,-?\d+\.\d\d,[CF]$/);
    await closeSession({ addr: gw.address() } as never, port);
    // Its readings reach the platform without any client.
    await until(async () => {
      const r = await t!.request('GET', `/api/solutions/sandbox/devices/${kits[0]!.id}/observations`, { token });
      return ((await r.json()) as { observations: unknown[] }).observations.length > 0;
    }, 'demo readings are stored');
    await t!.close();
    t = undefined;
  });

  it('a restart runs the same kit again and provisions no other', async () => {
    const gw = await start();
    const demo = t!.demo!;
    const mac = demoKitMac(demo.tenantId);
    await until(() => gw.demoMac === mac && gw.gateway.kits.get(mac) !== undefined, 'the demo kit runs again');
    const token = await t!.token(demo);
    const list = (await (await t!.request('GET', '/api/solutions/sandbox/devices', { token })).json()) as { devices: { deviceType: string }[] };
    assert.equal(list.devices.filter((d) => d.deviceType === 'NICDevKit').length, 1);
  });
});
