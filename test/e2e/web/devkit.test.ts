// The dev kit panel end to end: a software dev kit (src/device) announcing to the real gateway
// over UDP, reached from Chromium through the gateway's HTTP bridge.
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { testConfig } from '../../../src/config/config.ts';
import { loadDeviceConfig } from '../../../src/device/config.ts';
import { Kit } from '../../../src/device/kit.ts';
import { gatewayComponent } from '../../../src/gateway/component.ts';
import { provisionKit } from '../../../src/service/devices.ts';
import type { TestServer } from '../../helpers/server.ts';
import { waitFor } from '../../helpers/wait.ts';
import { connect, createDevice, launchBrowser, newPage, shot, startWebServer, waitAttr, waitText } from './harness.ts';

const MAC = '00000000000007a1';
const SILENT = '00000000000007d1';
const NEVER = '00000000000007e1';

describe('web app: dev kit panel', () => {
  let server: TestServer;
  let browser: Browser;
  let kit: Kit;
  let sink: dgram.Socket;
  let creds: { clientId: string; clientSecret: string };
  let kitId: string;
  let silentId: string;
  let neverId: string;
  let token: string;

  before(async () => {
    const factory = gatewayComponent();
    const gateway = { ...testConfig({ dataDir: '/nonexistent' }).gateway, enabled: true, port: 0, deadlineMs: 800 };
    server = await startWebServer({ gateway }, [factory]);
    const gw = factory.last!;
    browser = await launchBrowser();
    const c = await server.account('kit-owner');
    creds = c;
    const account = (await server.services.store.getAccountByTenantId(c.tenantId))!;
    const provisioned = await provisionKit(server.services.store, server.services.events, account, MAC);
    kitId = provisioned.device.id;
    kit = new Kit(
      loadDeviceConfig({ mac: MAC, host: '127.0.0.1', port: 0, gateway: { address: '127.0.0.1', port: gw.address().port }, monitorWindowMs: 0, logLevel: 0, periodMs: 300, key: provisioned.kitKey }),
    );
    await kit.start();
    // A kit that announced itself and then never answers: the deadline case.
    sink = dgram.createSocket('udp4');
    await new Promise<void>((r) => sink.bind(0, '127.0.0.1', () => r()));
    silentId = (await provisionKit(server.services.store, server.services.events, account, SILENT)).device.id;
    // Provisioned, never switched on: the gateway has never heard of it.
    neverId = (await provisionKit(server.services.store, server.services.events, account, NEVER)).device.id;
    token = await server.token(c);
    gw.gateway.kits.announce(
      { v: 1, mac: SILENT, host: '127.0.0.1', port: sink.address().port, prefix: 'snsr', fw: '1.2.1000.117958', cf: 0, seq: 0, boot: 1, period: 3600 },
      { address: '127.0.0.1', port: sink.address().port },
    );
    await waitFor('the gateway to learn the kit', () => gw.gateway.kits.get(MAC), 15_000);
  });

  after(async () => {
    await browser?.close();
    await kit?.stop().catch(() => undefined);
    sink?.close();
    await server?.close();
  });

  test('reads the kit, sets its unit, reads its clock, observes live, and shows a deadline plainly', async () => {
    const { page, errors, close } = await newPage(browser);
    await connect(page, server.url, creds, 'sandbox');
    const row = page.locator(`#devices tr[data-id="${kitId}"]`);
    await row.waitFor();
    assert.match((await row.textContent()) ?? '', new RegExp(MAC));
    // The API lists each kit with its network module; the app shows the kit alone (docs/api.md "A kit's network module").
    const listed = (await (await server.request('GET', '/api/solutions/sandbox/devices', { token })).json()) as { devices: { id: string; deviceType: string }[] };
    assert.deepEqual(
      listed.devices.map((d) => d.deviceType),
      ['NICDevKit', 'MILLI', 'NICDevKit', 'MILLI', 'NICDevKit', 'MILLI'],
    );
    assert.equal(await page.locator('#devices tr[data-id]').count(), 3);
    assert.equal((await page.locator('#device-count').textContent())?.trim(), '(3)');
    await row.click();
    await page.locator('#devkit-panel').waitFor();

    await page.getByRole('button', { name: 'Kit unit °F' }).click();
    await waitText(page, '#kit-status', /now reports in °F/);
    await waitText(page, '#kit-unit', /^°F$/);
    await page.getByRole('button', { name: 'Read now' }).click();
    await waitText(page, '#kit-value', /^-?\d+\.\d\d °F$/);
    await page.getByRole('button', { name: 'Kit unit °C' }).click();
    await waitText(page, '#kit-unit', /^°C$/);
    await page.getByRole('button', { name: 'Read now' }).click();
    await waitText(page, '#kit-value', /^-?\d+\.\d\d °C$/);

    await page.getByRole('button', { name: 'Read clock' }).click();
    const clock = await waitText(page, '#kit-clock', /epoch \d+/);
    const epoch = Number(/epoch (\d+)/.exec(clock)![1]);
    assert.ok(Math.abs(epoch - Date.now() / 1000) < 3600, `the kit's clock ${epoch} is near now`);

    await page.getByRole('button', { name: 'Start observing' }).click();
    await page.waitForFunction(() => document.querySelectorAll('#devkit-panel .log li').length >= 2, null, { timeout: 20_000 });
    assert.match((await page.locator('#devkit-panel .log li').first().textContent()) ?? '', /°[CF]$/);
    await shot(page, 'devkit-observing');
    await page.getByRole('button', { name: 'Stop observing' }).click();
    await waitText(page, '#kit-status', /Stopped observing/);
    const n = await page.locator('#devkit-panel .log li').count();
    assert.equal(await page.getByRole('button', { name: 'Start observing' }).count(), 1);

    // The silent kit: the deadline, in words.
    await page.locator(`#devices tr[data-id="${silentId}"]`).click();
    await page.locator('#devkit-panel h2', { hasText: silentId.slice(0, 8) }).waitFor();
    await page.getByRole('button', { name: 'Read now' }).click();
    await waitText(page, '#kit-status', /Reading the sensor failed: the kit did not answer within 0\.8 s/);
    await shot(page, 'devkit-deadline');
    assert.ok(n >= 2);
    assert.deepEqual(errors, []);
    await close();
  });
  test("on open the panel reads the kit (temperature, unit, clock); the unit confirmation is the kit's own answer", async () => {
    // The kit is switched to °F behind the app's back: the panel must show what the kit says.
    const put = await server.request('PUT', `/api/solutions/sandbox/devices/${kitId}/coap/snsr/arduino/temp?cfg=F`, { token });
    assert.equal(put.status, 200);
    const { page, errors, close } = await newPage(browser);
    await connect(page, server.url, creds, 'sandbox');
    await page.locator(`#devices tr[data-id="${kitId}"]`).click();
    await page.locator('#devkit-panel').waitFor();
    // No button pressed: everything is read on open.
    await waitText(page, '#kit-value', /^-?\d+\.\d\d °F$/);
    await waitText(page, '#kit-unit', /^°F$/);
    const clock = await waitText(page, '#kit-clock', /epoch \d+/);
    assert.match(clock, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC[+-]\d\d:\d\d \(epoch \d+\)$/);
    await waitText(page, '#kit-status', /Read the kit: temperature, unit and clock/);
    await waitText(page, '#kit-answer', /^The kit answered 2\.05 Content: /);
    await shot(page, 'devkit-opened');

    await page.getByRole('button', { name: 'Kit unit °C' }).click();
    await waitText(page, '#kit-status', /^The kit answered 2\.04 Changed and now reports in °C \(its \?cfg reads “\d+,C”\)\.$/);
    await waitText(page, '#kit-unit', /^°C$/);
    // The kit really changed: its next reading is in °C.
    const sens = (await (await server.request('GET', `/api/solutions/sandbox/devices/${kitId}/coap/snsr/arduino/temp?sens`, { token })).json()) as { reading: { unit: string } };
    assert.equal(sens.reading.unit, 'C');
    await page.getByRole('button', { name: 'Read now' }).click();
    await waitText(page, '#kit-answer', /^The kit answered 2\.05 Content: \d+,-?\d+\.\d\d,C$/);
    assert.deepEqual(errors, []);
    await close();
  });

  test('each kit shows whether the gateway can reach it, in the table and the tiles', async () => {
    const { page, errors, close } = await newPage(browser);
    await connect(page, server.url, creds, 'sandbox');
    await waitAttr(page, `#devices tr[data-id="${kitId}"]`, 'data-state', 'online');
    await waitText(page, `#devices tr[data-id="${kitId}"] td.state`, /^Online, heard \d+ (s|min) ago$/);
    await waitAttr(page, `#devices tr[data-id="${neverId}"]`, 'data-state', 'offline');
    assert.equal(await page.textContent(`#devices tr[data-id="${neverId}"] td.state`), 'Offline, never heard');
    await waitAttr(page, `#latest li[data-id="${neverId}"] .tile`, 'data-state', 'offline');
    assert.match((await page.getAttribute(`#latest li[data-id="${neverId}"] .tile`, 'aria-label')) ?? '', /Offline, never heard/);
    await shot(page, 'devkit-reachability');
    assert.deepEqual(errors, []);
    await close();
  });

  test('switches solution while connected, without the secret again; a wrong name keeps the current one', async () => {
    const virtual = await createDevice(server, token, 'StudioSimulation', { deviceType: 'VirtualDevice', domainInfo: { location: { latitude: 47.37, longitude: 8.54 } } });
    const { page, errors, close } = await newPage(browser);
    await connect(page, server.url, creds, 'sandbox');
    await page.locator(`#devices tr[data-id="${kitId}"]`).waitFor();
    assert.equal(await page.getByLabel('Client secret').inputValue(), '');
    await page.getByLabel('Solution').fill('StudioSimulation');
    await page.getByRole('button', { name: 'Switch' }).click();
    await page.locator(`#devices tr[data-id="${virtual}"]`).waitFor();
    assert.equal(await page.locator('#devices tbody tr').count(), 1);
    await waitText(page, '#status', /^Connected to StudioSimulation at /);
    assert.equal(await page.locator('#sim-panel').isVisible(), true);
    await shot(page, 'switched-solution');
    // An unknown name: said beside the field, the current solution stays.
    await page.getByLabel('Solution').fill('Nope');
    await page.getByLabel('Solution').press('Enter');
    await waitText(page, '#message', /No solution “Nope” in this account/);
    assert.equal(await page.locator(`#devices tr[data-id="${virtual}"]`).count(), 1);
    // Back to sandbox with Enter: the kits again.
    await page.getByLabel('Solution').fill('sandbox');
    await page.getByLabel('Solution').press('Enter');
    await page.locator(`#devices tr[data-id="${kitId}"]`).waitFor();
    await waitText(page, '#status', /^Connected to sandbox at /);
    assert.equal(await page.locator('#sim-panel').isHidden(), true);
    assert.deepEqual(errors, []);
    await close();
  });
});
