// A dev kit's state told honestly, in Debian's Chromium against a real gateway and a software kit
// over UDP, on a desktop and a phone: Online while it announces; once it stops, Offline as soon as
// its announcements are overdue (not when the gateway forgets it three periods later); a read of
// the stopped kit ends with a plain "no answer" within the panel's deadline, and the last value
// stays on screen marked as old.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { testConfig } from '../../../src/config/config.ts';
import { loadDeviceConfig } from '../../../src/device/config.ts';
import { Kit } from '../../../src/device/kit.ts';
import { gatewayComponent } from '../../../src/gateway/component.ts';
import { provisionKit } from '../../../src/service/devices.ts';
import type { TestServer } from '../../helpers/server.ts';
import { waitFor } from '../../helpers/wait.ts';
import { connect, launchBrowser, newPage, shot, startWebServer, waitAttr, waitText } from './harness.ts';

const MACS = { desktop: '00000000000008a1', phone: '00000000000008b1' };

describe('web app: a dev kit that goes away', () => {
  let server: TestServer;
  let browser: Browser;
  let gwPort: number;
  let account: NonNullable<Awaited<ReturnType<TestServer['services']['store']['getAccountByTenantId']>>>;
  let creds: { clientId: string; clientSecret: string };
  let isKnown: (mac: string) => boolean;

  before(async () => {
    const factory = gatewayComponent();
    const gateway = { ...testConfig({ dataDir: '/nonexistent' }).gateway, enabled: true, port: 0, deadlineMs: 800 };
    server = await startWebServer({ gateway }, [factory]);
    const gw = factory.last!;
    gwPort = gw.address().port;
    isKnown = (mac) => !!gw.gateway.kits.get(mac);
    browser = await launchBrowser();
    const c = await server.account('kit-state');
    creds = c;
    account = (await server.services.store.getAccountByTenantId(c.tenantId))!;
  });

  after(async () => {
    await browser?.close();
    await server?.close();
  });

  for (const size of [
    { name: 'desktop' as const, width: 1440, height: 900 },
    { name: 'phone' as const, width: 390, height: 844 },
  ]) {
    test(`${size.name}: Online while announcing, Offline once announcements stop, a read says "no answer" and marks the old value`, async () => {
      const provisioned = await provisionKit(server.services.store, server.services.events, account, MACS[size.name]);
      const id = provisioned.device.id;
      // Announcing every second: its announcements are overdue 6.5 s after the last.
      const kit = new Kit(
        loadDeviceConfig({
          mac: MACS[size.name],
          host: '127.0.0.1',
          port: 0,
          gateway: { address: '127.0.0.1', port: gwPort },
          monitorWindowMs: 0,
          logLevel: 0,
          periodMs: 300,
          announceIntervalMs: 1000,
          key: provisioned.kitKey,
        }),
      );
      await kit.start();
      const { page, errors, close } = await newPage(browser, { width: size.width, height: size.height });
      try {
        await waitFor('the gateway learns the kit', () => isKnown(MACS[size.name]) || null, 15_000);
        await connect(page, server.url, creds, 'sandbox');
        await page.locator(`#devices tr[data-id="${id}"]`).click();
        await waitAttr(page, `#devices tr[data-id="${id}"]`, 'data-state', 'online');
        await waitText(page, '#kit-value', /°[CF]/);
        assert.equal(await page.locator('#kit-value.stale-value').count(), 0);

        await kit.stop();
        // The announcements stop: Offline while the gateway still holds the kit's entry.
        await waitAttr(page, `#devices tr[data-id="${id}"]`, 'data-state', 'offline', 60_000);
        assert.match((await page.getAttribute(`#devices tr[data-id="${id}"] td.state`, 'title')) ?? '', /^Offline, announcements stopped/);
        // A read now fails plainly; the value read before stays, marked as old.
        await page.locator('#kit-read').click();
        await waitText(page, '#kit-status', /Reading the sensor failed: /, 30_000);
        assert.equal(await page.locator('#kit-value.stale-value').count(), 1);
        assert.match((await page.textContent('#kit-when')) ?? '', /\(no answer since\)/);
        await shot(page, `kit-gone-${size.name}`);
        assert.deepEqual(errors, []);
      } finally {
        await kit.stop().catch(() => undefined);
        await close();
      }
    });
  }
});
