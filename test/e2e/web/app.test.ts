// The browser app end to end: real `reef serve` parts (SQLite store, HTTP API, web component),
// Debian's Chromium through playwright-core, fresh accounts, data uploaded over the API.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import type { TestServer } from '../../helpers/server.ts';
import { connect, countViaApi, createDevice, launchBrowser, newPage, series, shot, startWebServer, upload, waitAttr, waitText } from './harness.ts';

const SIM = 'StudioSimulation';

describe('web app', () => {
  let server: TestServer;
  let browser: Browser;
  let creds: { clientId: string; clientSecret: string; token: string };
  const ids: string[] = [];
  const now = Date.now();
  let hourly: { timestamp: string; temperature: number }[];

  before(async () => {
    server = await startWebServer();
    browser = await launchBrowser();
    creds = await server.login('web');
    // Three virtual devices around a lake; the first reports every 10 s for the last 50 minutes.
    const spots = [
      [47.37, 8.54],
      [47.31, 8.6],
      [47.25, 8.7],
    ];
    for (const [lat, lon] of spots) ids.push(await createDevice(server, creds.token, SIM, { deviceType: 'VirtualDevice', domainInfo: { location: { latitude: lat, longitude: lon } } }));
    hourly = series(now - 50 * 60_000, now - 60_000, 10);
    await upload(server, creds.token, SIM, ids[0]!, hourly);
    await upload(server, creds.token, SIM, ids[1]!, series(now - 3 * 3600_000, now - 120_000, 60, 15));
    await upload(server, creds.token, SIM, ids[2]!, series(now - 2 * 86_400_000, now - 300_000, 600, 27));
  });

  after(async () => {
    await browser?.close();
    await server?.close();
  });

  test('connects with a fresh account, lists the devices in a table and on the map', async () => {
    const { page, errors, close } = await newPage(browser);
    await connect(page, server.url, creds, SIM);
    await page.locator('#devices tbody tr').nth(2).waitFor();
    assert.equal(await page.locator('#devices tbody tr').count(), 3);
    for (const id of ids) assert.equal(await page.locator(`#devices tr[data-id="${id}"]`).count(), 1);
    // Latest temperature and its age in the row.
    const row = page.locator(`#devices tr[data-id="${ids[0]}"]`);
    const last = hourly[hourly.length - 1]!.temperature;
    assert.match((await row.locator('td.temp').textContent()) ?? '', new RegExp(`^${last.toFixed(1)} °C$`));
    assert.match((await row.locator('td.age').textContent()) ?? '', /ago$/);
    // The map draws one point per located device (apart by kilometres: no cluster), offline (SVG).
    await page.waitForFunction(() => document.querySelectorAll('#map svg circle.dot').length === 3);
    // The secret is never kept.
    const stored = await page.evaluate(() => JSON.stringify(localStorage));
    assert.ok(!stored.includes(creds.clientSecret));
    assert.ok(stored.includes(creds.clientId));
    // Latest of all: a tile per device.
    assert.equal(await page.locator('#latest li').count(), 3);
    await shot(page, 'connected');
    assert.deepEqual(errors, []);
    await close();
  });

  test('a selected device is plotted with as many points as the API returns; live points arrive; °F read-out', async () => {
    const { page, errors, close } = await newPage(browser);
    await connect(page, server.url, creds, SIM);
    await page.locator(`#devices tr[data-id="${ids[0]}"]`).click();
    await page.getByRole('button', { name: '1 h' }).click();
    await waitAttr(page, '#plot-info', 'data-devices', ids[0]!);
    await waitAttr(page, '#plot-info', 'data-state', 'ready');
    await waitAttr(page, '#plot-info', 'data-points', String(hourly.length));
    const fromApi = await countViaApi(server, creds.token, SIM, ids[0]!, new Date(now - 3600_000), new Date(Date.now() + 1000));
    assert.equal(fromApi, hourly.length);
    assert.equal(await page.getAttribute('#plot-info', 'data-points'), String(fromApi));
    // Selecting on the table marks the point on the map.
    assert.equal(await page.locator(`#map circle.selected[data-id="${ids[0]}"]`).count(), 1);

    // A live observation over Server-Sent Events: no reload, no polling.
    const r = await server.request('POST', `/api/solutions/${SIM}/devices/${ids[0]}/observations`, {
      token: creds.token,
      body: { observations: [{ timestamp: new Date().toISOString(), temperature: 30.5 }] },
    });
    assert.equal(r.status, 201);
    await waitAttr(page, '#plot-info', 'data-points', String(hourly.length + 1));
    await waitText(page, `#devices tr[data-id="${ids[0]}"] td.temp`, /^30\.5 °C$/);
    await waitText(page, `#latest li[data-id="${ids[0]}"] .val`, /^30\.5 °C$/);

    // The read-out, by keyboard: End puts it on the newest point.
    await page.locator('#plot').focus();
    await page.keyboard.press('End');
    await waitText(page, '#readout', /30\.50 °C/);
    await shot(page, 'plot-live-celsius');

    await page.locator('label[for="unit-f"]').click();
    await waitText(page, '#readout', /86\.90 °F/);
    await waitText(page, `#devices tr[data-id="${ids[0]}"] td.temp`, /^86\.9 °F$/);
    assert.match((await page.getAttribute('#plot', 'aria-label')) ?? '', /Temperature in °F/);
    await shot(page, 'plot-fahrenheit');
    assert.deepEqual(errors, []);
    await close();
  });

  test('several devices overlaid; 7 days come bucketed; a zoom fetches raw detail', async () => {
    const { page, errors, close } = await newPage(browser);
    await connect(page, server.url, creds, SIM);
    await page.locator(`#devices tr[data-id="${ids[2]}"]`).click();
    await page.locator(`#devices tr[data-id="${ids[1]}"] input[type=checkbox]`).check();
    await page.getByRole('button', { name: '7 d' }).click();
    await waitAttr(page, '#plot-info', 'data-devices', `${ids[2]},${ids[1]}`);
    await waitAttr(page, '#plot-info', 'data-state', 'ready');
    assert.equal(await page.getAttribute('#plot-info', 'data-bucketed'), 'true');
    const obs = Number(await page.getAttribute('#plot-info', 'data-observations'));
    const total =
      (await countViaApi(server, creds.token, SIM, ids[2]!, new Date(now - 7 * 86_400_000), new Date(Date.now() + 1000))) +
      (await countViaApi(server, creds.token, SIM, ids[1]!, new Date(now - 7 * 86_400_000), new Date(Date.now() + 1000)));
    assert.equal(obs, total);
    assert.equal(await page.locator('#plot-legend li').count(), 2);
    assert.equal(await page.locator('#map circle.selected').count(), 2);
    await page.locator('#plot').focus();
    await page.keyboard.press('End');
    await waitText(page, '#readout', /min .* max /);
    await shot(page, 'compare-7d');
    // Zoom in with the keyboard until the window is under a day: the detail is fetched raw.
    for (let i = 0; i < 10; i++) await page.keyboard.press('+');
    await page.locator('#reset-zoom').waitFor();
    await waitAttr(page, '#plot-info', 'data-detail', 'raw');
    await page.locator('#reset-zoom').click();
    await page.locator('#reset-zoom').waitFor({ state: 'hidden' });
    assert.deepEqual(errors, []);
    await close();
  });

  test('downloads the selected range as CSV', async () => {
    const { page, close } = await newPage(browser);
    await connect(page, server.url, creds, SIM);
    await page.locator(`#devices tr[data-id="${ids[1]}"]`).click();
    await page.getByRole('button', { name: '24 h' }).click();
    await waitAttr(page, '#plot-info', 'data-devices', ids[1]!);
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download CSV' }).click()]);
    const text = fs.readFileSync((await download.path())!, 'utf8');
    const lines = text.trim().split(/\r\n/);
    assert.equal(lines[0], 'device_id,timestamp,temperature_c,temperature_f');
    const n = await countViaApi(server, creds.token, SIM, ids[1]!, new Date(now - 86_400_000), new Date(Date.now() + 1000));
    assert.equal(lines.length - 1, n);
    assert.ok(lines.slice(1).every((l) => l.startsWith(ids[1]!)));
    await close();
  });

  test('the table sorts and filters, and is usable with the keyboard alone', async () => {
    const { page, close } = await newPage(browser);
    await connect(page, server.url, creds, SIM);
    await page.locator('#devices tbody tr').nth(2).waitFor();
    await page.getByRole('button', { name: /^Latest( [▲▼])?$/ }).click();
    // Descending by latest temperature.
    await waitAttr(page, 'th:has(button[data-sort="temp"])', 'aria-sort', 'descending');
    const temps = (await page.locator('#devices tbody td.temp').allTextContents()).map((t) => parseFloat(t));
    assert.deepEqual(
      temps,
      [...temps].sort((a, b) => b - a),
    );
    await page.getByRole('button', { name: /^Latest( [▲▼])?$/ }).click();
    await waitAttr(page, 'th:has(button[data-sort="temp"])', 'aria-sort', 'ascending');
    const up = (await page.locator('#devices tbody td.temp').allTextContents()).map((t) => parseFloat(t));
    assert.deepEqual(up, [...temps].reverse());
    await page.getByLabel('Filter').fill(ids[1]!.slice(0, 8));
    await page.waitForFunction(() => document.querySelectorAll('#devices tbody tr').length === 1);
    await page.getByLabel('Filter').fill('');
    await page.waitForFunction(() => document.querySelectorAll('#devices tbody tr').length === 3);
    // Tab into the table, arrow down, Enter: that device is selected and plotted.
    await page.locator('#devices tbody tr').first().focus();
    await page.keyboard.press('ArrowDown');
    const focused = await page.evaluate(() => document.activeElement?.getAttribute('data-id'));
    await page.keyboard.press('Enter');
    await waitAttr(page, `#devices tr[data-id="${focused}"]`, 'aria-selected', 'true');
    await waitAttr(page, '#plot-info', 'data-devices', focused!);
    // Every form control has an accessible name.
    const unnamed = await page.evaluate(() =>
      Array.from(document.querySelectorAll('input, button, select'))
        .filter((e) => {
          const el = e as HTMLInputElement;
          if (el.type === 'hidden' || el.closest('[hidden]')) return false;
          return !(el.labels?.length || el.getAttribute('aria-label') || (el.tagName === 'BUTTON' && el.textContent?.trim()));
        })
        .map((e) => e.outerHTML.slice(0, 80)),
    );
    assert.deepEqual(unnamed, []);
    await close();
  });

  test('fits a phone width', async () => {
    const { page, errors, close } = await newPage(browser, { width: 390, height: 844 });
    await connect(page, server.url, creds, SIM);
    await page.locator('#devices tbody tr').nth(2).waitFor();
    await waitAttr(page, '#plot-info', 'data-state', 'ready');
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 0, `the page scrolls sideways by ${overflow}px`);
    await shot(page, 'phone');
    assert.deepEqual(errors, []);
    await close();
  });

  test('plain messages: bad credentials, no devices, unknown solution, server unreachable', async () => {
    const { page, close } = await newPage(browser);
    await connect(page, server.url, { clientId: creds.clientId, clientSecret: 'not-the-secret' }, SIM);
    await waitText(page, '#message', /Client id or client secret is wrong/);
    assert.equal(await page.locator('#main').isHidden(), true);
    await shot(page, 'bad-credentials');

    const empty = await server.account('empty');
    await connect(page, server.url, empty, 'sandbox');
    await waitText(page, '#message', /No devices found in sandbox/);
    await shot(page, 'no-devices');

    await connect(page, server.url, empty, 'NoSuchSolution');
    await waitText(page, '#message', /No solution “NoSuchSolution” in this account/);

    // A port nothing listens on: the network is "down" for the app.
    const dead = await startWebServer();
    const deadUrl = dead.url;
    await dead.close();
    await connect(page, server.url, empty, 'sandbox', deadUrl);
    await waitText(page, '#message', /Cannot reach .*: the network is down or the server is not running/);
    await shot(page, 'network-down');
    await close();
  });
});
