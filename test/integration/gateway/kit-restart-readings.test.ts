// A kit that restarts lost its observers: the gateway must see the restart and observe it again at
// once, not after the readings bridge's quiet check (three announcement periods: three minutes and
// more for a kit announcing every minute). On the same port within the same second (its
// announcement's `boot` unchanged: its reboot event tells), on another port (a new address), and
// after a downtime long enough for the gateway to forget the kit (its next announcement is "new",
// while the bridge's observation of the kit's previous run still counts as active).
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { after, test } from 'node:test';
import { loadDeviceConfig } from '../../../src/device/config.ts';
import { Kit } from '../../../src/device/kit.ts';
import { provisionKit } from '../../../src/service/devices.ts';
import { startGateway, type GatewayHarness } from '../../helpers/gateway.ts';
import { waitFor } from '../../helpers/wait.ts';

let h: GatewayHarness;
after(async () => h?.close());

async function freePort(): Promise<number> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', () => r()));
  const p = s.address().port;
  await new Promise<void>((r) => s.close(() => r()));
  return p;
}

/** Starts a kit, stops it, starts `next` from the same configuration but `port`; true when readings of the second start are stored. */
async function restart(mac: string, samePort: boolean, forgotten = false): Promise<void> {
  h ??= await startGateway({ gateway: { readings: true } });
  const c = await h.t.account(`restart-${mac}`);
  const account = (await h.t.services.store.getAccountByTenantId(c.tenantId))!;
  const { device, kitKey } = await provisionKit(h.t.services.store, null, account, mac);
  const port = await freePort();
  // Both built in the same second: the same `boot` in their announcements, as a quick restart has.
  while (Date.now() % 1000 > 500) await new Promise((r) => setTimeout(r, 10));
  const cfg = loadDeviceConfig({
    mac,
    host: '127.0.0.1',
    port,
    gateway: { address: '127.0.0.1', port: h.addr.port },
    monitorWindowMs: 0,
    logLevel: 0,
    periodMs: 200,
    // Announcing every second, the gateway forgets a silent kit after 8 s; the readings' Max-Age
    // stays the default 90 s, so the bridge's quiet check would wait 270 s.
    announceIntervalMs: forgotten ? 1000 : 60_000,
    key: kitKey,
  });
  const first = new Kit(cfg);
  const second = new Kit(samePort ? cfg : { ...cfg, port: 0 });
  const stored = async () => (await h.t.services.store.queryObservations(device.id, { limit: 1 })).observations[0]?.ts ?? 0;
  await first.start();
  await waitFor('readings of the first start', async () => ((await stored()) > 0 ? true : null), 20_000);
  await first.stop();
  const stoppedAt = Date.now();
  // The kit status route (the app's "Online") asks the directory, which drops an expired kit: asked
  // here the same way until the gateway has forgotten the stopped kit.
  if (forgotten) await waitFor('the gateway forgets the stopped kit', () => (h.gw.gateway.kits.get(mac) === undefined ? true : null), 20_000);
  await second.start();
  try {
    await waitFor('readings after the restart', async () => ((await stored()) > stoppedAt + 500 ? true : null), 20_000);
  } finally {
    await second.stop();
  }
  assert.ok((await stored()) > stoppedAt);
}

test('a kit restarted on its port within the same second (same boot) is observed again at once', async () => {
  await restart('00000000000009c1', true);
});

test('a kit restarted on another port is observed again at once', async () => {
  await restart('00000000000009c2', false);
});

test('a kit restarted after the gateway forgot it is observed again at once', async () => {
  await restart('00000000000009c3', true, true);
});
