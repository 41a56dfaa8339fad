// A gateway bound to one specific address (REEF_GATEWAY_HOST=127.0.0.2, as a LAN address would be)
// reaches its kits: its requests leave from the address the kit announces to, the only one a kit
// answers (docs/device.md "Reach"). Over real UDP: the gateway on 127.0.0.2, the kit on 127.0.0.1,
// libcoap's coap-client through the gateway. And a kit that drops datagrams from a peer that is not
// its gateway says so once, at WARN, with both addresses.
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { after, before, describe, it } from 'node:test';
import { Code, NON, serializeMessage, uriOptions } from '../../../src/coap/index.ts';
import type { Kit } from '../../../src/device/kit.ts';
import { freePort, openSession, startGateway, until, viaGateway, type GatewayHarness } from '../../helpers/gateway.ts';

const READING = /^\d{9,12},-?\d+\.\d{2},[CF]$/;
const MAC = '00000000000002a1';

describe('a gateway bound to 127.0.0.2 and a kit on 127.0.0.1', () => {
  let h: GatewayHarness;
  let alice: { tenantId: string; token: string };
  let kit: Kit;
  let deviceId: string;

  before(async () => {
    h = await startGateway({ gateway: { host: '127.0.0.2', deadlineMs: 5000 } });
    alice = await h.t.login('alice');
    const k = await h.kit(alice.tenantId, MAC);
    kit = k.kit;
    deviceId = k.device.id;
  });
  after(() => h.close());

  it("answers coap-client's request with the kit's reading, and stores the kit's readings", async () => {
    assert.equal(h.addr.address, '127.0.0.2');
    assert.equal(kit.module.address().address, '127.0.0.1');
    const port = await freePort();
    assert.match((await openSession(h, port, alice.token)).out, /session open until \d{4}-/);
    const get = await viaGateway(h, port, MAC, '/snsr/arduino/temp?sens');
    assert.match(get.stdout.trim(), READING, get.out);
    await until(async () => {
      const r = await h.t.request('GET', `/api/solutions/sandbox/devices/${deviceId}/observations?limit=5`, { token: alice.token });
      return ((await r.json()) as { observations: unknown[] }).observations.length >= 1;
    }, 'a reading of the kit is stored');
    assert.equal(kit.module.endpoint.stats.filtered, 0, 'the kit dropped none of the gateway datagrams');
  });

  it('a kit logs the datagrams of a peer that is not its gateway once, at WARN, with both addresses', async () => {
    const lines: string[] = [];
    kit.log.level = 4;
    kit.log.sink = (l) => lines.push(l);
    const stranger = dgram.createSocket('udp4');
    await new Promise<void>((r) => stranger.bind(0, '127.0.0.1', () => r()));
    try {
      const filtered = kit.module.endpoint.stats.filtered;
      const kitAt = kit.module.address();
      for (let mid = 1; mid <= 3; mid++) {
        const get = serializeMessage({ type: NON, code: Code.GET, mid, token: Buffer.from([mid]), options: uriOptions('/snsr/arduino/temp?sens'), payload: Buffer.alloc(0) });
        stranger.send(get, kitAt.port, kitAt.address);
      }
      await until(() => kit.module.endpoint.stats.filtered - filtered === 3, 'the kit drops the three datagrams');
      const from = `127.0.0.1:${stranger.address().port}`;
      const warned = lines.filter((l) => l.includes('dropped a datagram'));
      assert.equal(warned.length, 1, lines.join('\n'));
      assert.match(warned[0]!, / WARN /);
      assert.ok(warned[0]!.includes(from), 'the source address');
      assert.ok(warned[0]!.includes(`its gateway, 127.0.0.2 port ${h.addr.port}`), 'the gateway address the kit answers');
    } finally {
      stranger.close();
      kit.log.sink = undefined;
    }
  });
});
