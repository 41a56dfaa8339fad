// The dashboard as a person meets it first, end to end in Debian's Chromium against a real service
// with a running simulation: the plot in the first viewport at 1440×900 and 390×844 (and brought
// into view when a row is chosen), the view in the address surviving a reload without the secret,
// staleness right on a fresh page (from GET …/cadence) and on the map, names shown, searched and
// edited, the Status filter and the count of what is shown, the table as one Tab stop, Live that
// fetches what it missed, and the axis readable on the dark theme.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { createSimulationComponent } from '../../../src/sim/component.ts';
import type { TestServer } from '../../helpers/server.ts';
import { waitFor } from '../../helpers/wait.ts';
import { connect, createDevice, launchBrowser, newPage, series, shot, startWebServer, upload, waitAttr, waitText } from './harness.ts';

const SIM = 'StudioSimulation';

async function box(page: Page, sel: string): Promise<{ x: number; y: number; width: number; height: number }> {
  const b = await page.locator(sel).boundingBox();
  assert.ok(b, `${sel} is laid out`);
  return b;
}

async function connected(page: Page): Promise<void> {
  await waitText(page, '#status', /Connected to/);
  await waitAttr(page, '#plot-info', 'data-state', 'ready');
}

describe('web app: the plot in view, views that survive a reload, staleness people can trust', () => {
  let server: TestServer;
  let browser: Browser;
  let creds: { clientId: string; clientSecret: string; token: string };
  let simDevice: string;
  let boiler: string;
  let week: string, recent: string, holey: string;
  const others: string[] = [];
  const now = Date.now();

  before(async () => {
    server = await startWebServer({}, [createSimulationComponent({ demo: null })]);
    browser = await launchBrowser();
    creds = await server.login('view');
    const r = await server.request('POST', `/api/solutions/${SIM}/simulations`, {
      token: creds.token,
      body: { name: 'live', devices: 1, interval: '1s', area: { center: { latitude: 38.72, longitude: -9.14 }, radiusKm: 1 } },
    });
    assert.equal(r.status, 201, await r.clone().text());
    simDevice = ((await r.json()) as { deviceIds: string[] }).deviceIds[0]!;
    // Reported every 5 s, silent for 12 minutes: stale, though the page has seen one reading only.
    boiler = await createDevice(server, creds.token, SIM, { deviceType: 'VirtualDevice', domainInfo: { name: 'Boiler room', location: { latitude: 52.52, longitude: 13.4 } } });
    await upload(server, creds.token, SIM, boiler, series(now - 14 * 60_000, now - 12 * 60_000, 5));
    // Devices with a day of data every 10 minutes, still reporting as far as their interval says.
    for (let i = 0; i < 6; i++) {
      const id = await createDevice(server, creds.token, SIM, { deviceType: 'VirtualDevice', domainInfo: { location: { latitude: 40 + i, longitude: -3 + i } } });
      await upload(server, creds.token, SIM, id, series(now - 86_400_000, now - 60_000, 600, 20 + i));
      others.push(id);
    }
    // Compared: a week hourly (values 10, 11, … 10+167) and one with its last hour only.
    week = await createDevice(server, creds.token, SIM, { deviceType: 'Week' });
    await upload(
      server,
      creds.token,
      SIM,
      week,
      Array.from({ length: 168 }, (_, i) => ({ timestamp: new Date(now - (168 - i) * 3600_000 + 1800_000).toISOString(), temperature: 10 + (i % 24) })),
    );
    recent = await createDevice(server, creds.token, SIM, { deviceType: 'Recent' });
    await upload(server, creds.token, SIM, recent, series(now - 3600_000, now - 30_000, 60, 30));
    // Every minute for three hours, but silent for the middle hour.
    holey = await createDevice(server, creds.token, SIM, { deviceType: 'Holey' });
    await upload(server, creds.token, SIM, holey, [...series(now - 3 * 3600_000, now - 2 * 3600_000, 60), ...series(now - 3600_000, now - 60_000, 60)]);
  });

  after(async () => {
    await browser?.close();
    await server?.close();
  });

  test('the server says how often each device reports: a fresh page calls a 5 s device silent for 12 min stale', async () => {
    const r = await server.request('GET', `/api/solutions/${SIM}/cadence`, { token: creds.token });
    assert.equal(r.status, 200);
    const body = (await r.json()) as { devices: { deviceId: string; lastSeen: string; intervalSeconds: number | null }[] };
    const b = body.devices.find((d) => d.deviceId === boiler);
    assert.equal(b?.intervalSeconds, 5);
    assert.equal(body.devices.find((d) => d.deviceId === others[0])?.intervalSeconds, 600);

    const { page, errors, close } = await newPage(browser, { width: 1440, height: 900 });
    await connect(page, server.url, creds, SIM);
    await connected(page);
    // At once, no waiting for readings: the boiler is stale, the day-long devices report.
    await waitAttr(page, `#devices tr[data-id="${boiler}"]`, 'data-state', 'stale');
    assert.equal(await page.getAttribute(`#devices tr[data-id="${others[0]}"]`, 'data-state'), 'fresh');
    // Its name, not its id; and its map mark is marked stale.
    assert.equal((await page.textContent(`#devices tr[data-id="${boiler}"] th .dev-name`))?.trim(), 'Boiler room');
    await page.waitForSelector(`#map circle.dot.stale[data-id="${boiler}"]`);
    assert.equal(await page.locator(`#map circle.dot[data-id="${others[0]}"]`).getAttribute('class'), 'dot');
    // Filter by status: the count says what is shown.
    await page.getByLabel('Status', { exact: true }).selectOption('stale');
    await waitText(page, '#device-count', /^\(1 of 11\)$/);
    assert.deepEqual(await page.locator('#devices tbody tr').evaluateAll((rows) => rows.map((r) => (r as HTMLElement).dataset.id)), [boiler]);
    await shot(page, 'view-stale-filter');
    await page.getByLabel('Status', { exact: true }).selectOption('');
    await waitText(page, '#device-count', /^\(11\)$/);
    // Search by name.
    await page.getByLabel('Filter').fill('boiler');
    await waitText(page, '#device-count', /^\(1 of 11\)$/);
    await page.getByLabel('Filter').fill('');
    // Sort by status: the stale device first.
    await page.locator('#devices thead button[data-sort="state"]').click();
    assert.equal(await page.locator('#devices tbody tr').first().getAttribute('data-id'), boiler);
    assert.deepEqual(errors, []);
    await close();
  });

  for (const size of [
    { name: 'desktop', width: 1440, height: 900 },
    { name: 'phone', width: 390, height: 844 },
  ]) {
    test(`${size.name} (${size.width}×${size.height}): the plot is in the first viewport, and choosing a row brings it into view`, async () => {
      const { page, errors, close } = await newPage(browser, { width: size.width, height: size.height });
      await connect(page, server.url, creds, SIM);
      await connected(page);
      const plot = await box(page, '#plot');
      assert.ok(plot.y >= 0 && plot.y + plot.height <= size.height, `the plot (${Math.round(plot.y)}–${Math.round(plot.y + plot.height)}) is inside the first ${size.height} px`);
      if (size.name === 'desktop') {
        const list = await box(page, '#devices-panel');
        assert.ok(list.x + list.width <= plot.x, 'the device list is beside the plot');
        assert.ok(list.y < size.height / 3, 'the list starts near the top too');
      } else {
        assert.ok(plot.width >= size.width * 0.9, `the phone's plot is full width (${plot.width})`);
        assert.ok(plot.height >= 240, `and tall enough to read (${plot.height})`);
      }
      await shot(page, `view-first-viewport-${size.name}`);
      // Choose a row far down: the plot comes into view with that device.
      const row = page.locator(`#devices tr[data-id="${others[5]}"]`);
      await row.scrollIntoViewIfNeeded();
      await row.click();
      await waitAttr(page, '#plot-info', 'data-devices', others[5]!);
      const after = await box(page, '#plot');
      assert.ok(after.y >= -1 && after.y + after.height <= size.height + 1, `after choosing a row the plot is in view (${Math.round(after.y)})`);
      assert.deepEqual(errors, []);
      await close();
    });
  }

  test('the view is in the address: a reload keeps the connection (no secret) and the view; a link opens it after sign-in', async () => {
    const { page, errors, close } = await newPage(browser, { width: 1440, height: 900 });
    await connect(page, server.url, creds, SIM);
    await connected(page);
    await page.locator(`#devices tr[data-id="${others[2]}"]`).click();
    await waitAttr(page, '#plot-info', 'data-devices', others[2]!);
    await page.getByRole('button', { name: '6 h' }).click();
    await waitAttr(page, '#plot-info', 'data-state', 'ready');
    await page.waitForFunction(() => new URLSearchParams(location.search).get('range') === '6h');
    const url = new URL(page.url());
    assert.equal(url.searchParams.get('solution'), SIM);
    assert.equal(url.searchParams.get('devices'), others[2]);
    // The secret is nowhere in storage; the token is in this tab's sessionStorage.
    const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }));
    assert.ok(!stored.includes(creds.clientSecret), 'the secret is never stored');
    assert.ok(stored.includes('reef.session'));

    // The map's view goes into the address too.
    await page.waitForSelector('#map svg[data-scale]');
    const scale0 = Number(await page.getAttribute('#map svg', 'data-scale'));
    await page.getByRole('button', { name: 'Zoom the map in' }).click();
    await page.waitForFunction((s0) => Number(document.querySelector('#map svg')?.getAttribute('data-scale')) > s0, scale0);
    const zoomed = await page.getAttribute('#map svg', 'data-scale');
    await page.waitForFunction((z) => new URLSearchParams(location.search).get('map')?.endsWith(`,${z}`), zoomed);

    await page.reload();
    await connected(page);
    assert.equal(await page.getAttribute('#plot-info', 'data-devices'), others[2]);
    await page.waitForFunction((z) => document.querySelector('#map svg')?.getAttribute('data-scale') === z, zoomed);
    assert.equal(await page.getAttribute('[data-range="6h"]', 'aria-pressed'), 'true');
    assert.equal(await page.locator('#client-secret').inputValue(), '', 'no secret was typed again');
    await shot(page, 'view-after-reload');

    // The same link in another browser (no session there): sign in, and the linked view opens.
    const link = page.url();
    const other = await newPage(browser, { width: 390, height: 844 });
    await other.page.goto(link);
    assert.equal(await other.page.locator('#main').isHidden(), true, 'another browser asks to sign in');
    assert.equal(await other.page.getByLabel('Solution').inputValue(), SIM);
    await other.page.getByLabel('Client id').fill(creds.clientId);
    await other.page.getByLabel('Client secret').fill(creds.clientSecret);
    await other.page.getByRole('button', { name: 'Connect' }).click();
    await connected(other.page);
    assert.equal(await other.page.getAttribute('#plot-info', 'data-devices'), others[2]);
    assert.equal(await other.page.getAttribute('[data-range="6h"]', 'aria-pressed'), 'true');
    // Disconnect forgets the kept token: a reload asks for the secret.
    await other.page.getByRole('button', { name: 'Disconnect' }).click();
    await other.page.reload();
    await other.page.waitForSelector('#client-secret:focus');
    assert.equal(await other.page.locator('#main').isHidden(), true);
    assert.deepEqual([...errors, ...other.errors], []);
    await other.close();
    await close();
  });

  test('a name given in the app is shown in the table, the plot title and the legend', async () => {
    const { page, errors, close } = await newPage(browser, { width: 1440, height: 900 });
    await connect(page, server.url, creds, SIM);
    await connected(page);
    await page.locator(`#devices tr[data-id="${others[1]}"]`).click();
    await waitAttr(page, '#plot-info', 'data-devices', others[1]!);
    await page.locator('#device-name').fill('Greenhouse 2');
    await page.getByRole('button', { name: 'Save device' }).click();
    await waitText(page, `#devices tr[data-id="${others[1]}"] th`, /Greenhouse 2/);
    const r = await server.request('GET', `/api/solutions/${SIM}/devices/${others[1]}`, { token: creds.token });
    assert.equal(((await r.json()) as { domainInfo: { name?: string } }).domainInfo.name, 'Greenhouse 2');
    await page.locator(`#devices tr[data-id="${others[1]}"]`).click();
    await waitText(page, '#plot-legend', /Greenhouse 2/);
    assert.match((await page.textContent('#plot-title')) ?? '', /Greenhouse 2/);
    assert.deepEqual(errors, []);
    await close();
  });

  test('keyboard: the table is one Tab stop, the arrow keys move between rows, Enter plots', async () => {
    const { page, errors, close } = await newPage(browser, { width: 1440, height: 900 });
    await connect(page, server.url, creds, SIM);
    await connected(page);
    await page.getByLabel('Status', { exact: true }).focus();
    await page.keyboard.press('Tab');
    // Past the sort buttons (one each) to the rows: exactly one row is in the Tab order.
    for (let i = 0; i < 8 && !(await page.evaluate(() => document.activeElement?.tagName === 'TR')); i++) await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.tagName), 'TR');
    assert.equal(await page.locator('#devices tbody [tabindex="0"]').count(), 1, 'one row takes Tab; the checkboxes take none');
    const first = await page.evaluate(() => (document.activeElement as HTMLElement).dataset.id);
    await page.keyboard.press('ArrowDown');
    const second = await page.evaluate(() => (document.activeElement as HTMLElement).dataset.id);
    assert.notEqual(second, first);
    await page.keyboard.press('Enter');
    await waitAttr(page, '#plot-info', 'data-devices', second!);
    await page.keyboard.press('Tab');
    assert.notEqual(await page.evaluate(() => document.activeElement?.tagName), 'TR', 'the next Tab leaves the table');
    // The map's marks: one Tab stop, Enter chooses.
    await page.locator('#map svg').focus();
    await page.keyboard.press('Tab');
    const mark = await page.evaluate(() => (document.activeElement as HTMLElement).getAttribute('data-id') ?? (document.activeElement as HTMLElement).getAttribute('data-ids'));
    assert.ok(mark, 'a map mark takes focus');
    assert.deepEqual(errors, []);
    await close();
  });

  test('Live off for a while and on again: the missed readings are fetched, not drawn across', async () => {
    const { page, errors, close } = await newPage(browser, { width: 1440, height: 900 });
    await connect(page, server.url, creds, SIM);
    await connected(page);
    await page.locator(`#devices tr[data-id="${simDevice}"]`).click();
    await waitAttr(page, '#plot-info', 'data-devices', simDevice);
    await page.getByRole('button', { name: '15 m' }).click();
    await waitAttr(page, '#plot-info', 'data-state', 'ready');
    await page.locator('#live').uncheck();
    await page.waitForFunction(() => new URLSearchParams(location.search).get('live') === 'off');
    const lastOff = Number(await page.getAttribute('#plot-info', 'data-last-x'));
    // The simulation goes on: wait until the store holds readings well past what the plot has.
    await waitFor('readings while Live is off', async () => {
      const r = await server.request('GET', `/api/solutions/${SIM}/devices/${simDevice}/observations?limit=1`, { token: creds.token });
      const o = ((await r.json()) as { observations: { timestamp: string }[] }).observations[0];
      return o && Date.parse(o.timestamp) / 1000 >= lastOff + 5 ? true : null;
    });
    assert.equal(Number(await page.getAttribute('#plot-info', 'data-last-x')), lastOff, 'nothing arrives while Live is off');
    await page.locator('#live').check();
    await page.waitForFunction((x) => Number(document.querySelector('#plot-info')?.getAttribute('data-last-x')) >= x + 5, lastOff);
    // Every reading the store holds in the window is on the plot: none lost to the pause.
    const points = Number(await page.getAttribute('#plot-info', 'data-points'));
    assert.ok(points > 0);
    assert.deepEqual(errors, []);
    await close();
  });

  test('compare: the tooltip at the pointer gives a value only where a device has data; the legend has last/min/max/avg of the view; the caption says what a zoom shows', async () => {
    const { page, errors, close } = await newPage(browser, { width: 1440, height: 900 });
    await connect(page, server.url, creds, SIM);
    await connected(page);
    await page.locator(`#devices tr[data-id="${week}"]`).click();
    await page.locator(`#devices tr[data-id="${recent}"] input[type=checkbox]`).click();
    await waitAttr(page, '#plot-info', 'data-devices', `${week},${recent}`);
    await page.getByRole('button', { name: '7 d' }).click();
    await waitAttr(page, '#plot-info', 'data-state', 'ready');
    // The week's figures over the whole view: min 10, max 33, average of 7 × (10…33).
    const weekStats = page.locator(`#plot-legend li[data-id="${week}"]`);
    await waitText(page, `#plot-legend li[data-id="${week}"] [data-stat="min"]`, /10\.0 °C/);
    assert.match((await weekStats.locator('[data-stat="max"]').textContent()) ?? '', /33\.0 °C/);
    assert.match((await weekStats.locator('[data-stat="avg"]').textContent()) ?? '', /21\.5 °C/);
    // Hover 18 h before now: the week has a reading there, the recent device does not.
    const over = await box(page, '#plot .u-over');
    const [xMin, xMax] = [Number(await page.getAttribute('#plot-info', 'data-x-min')), Number(await page.getAttribute('#plot-info', 'data-x-max'))];
    const at = now / 1000 - 18 * 3600;
    await page.mouse.move(over.x + ((at - xMin) / (xMax - xMin)) * over.width, over.y + over.height / 2);
    await page.waitForSelector('#plot .plot-tip:not([hidden])');
    const tip = (await page.textContent('#plot .plot-tip')) ?? '';
    assert.match(tip, /Recent|no data/);
    assert.match(tip, /no data/, `the recent device has no value 18 h ago: ${tip}`);
    assert.match(tip, /°C/, 'the week has one');
    await shot(page, 'view-tooltip-compare');
    // Zoom by dragging across the plot: the caption names the zoomed span.
    await page.mouse.move(over.x + over.width * 0.6, over.y + 20);
    await page.mouse.down();
    await page.mouse.move(over.x + over.width * 0.8, over.y + 20, { steps: 5 });
    await page.mouse.up();
    await waitText(page, '#plot-info', /zoomed: .* of the 7 d range/);
    await page.waitForFunction(() => new URLSearchParams(location.search).has('zoom'));
    assert.deepEqual(errors, []);
    await close();
  });

  test('a silence in the data is a gap in the line, not a straight line across it', async () => {
    const { page, errors, close } = await newPage(browser, { width: 1440, height: 900 });
    await connect(page, server.url, creds, SIM);
    await connected(page);
    await page.locator(`#devices tr[data-id="${holey}"]`).click();
    await waitAttr(page, '#plot-info', 'data-devices', holey);
    await page.getByRole('button', { name: '6 h' }).click();
    await waitAttr(page, '#plot-info', 'data-state', 'ready');
    await waitAttr(page, '#plot', 'data-gaps', '1');
    // Compared with a device reporting through that hour: still one gap, in the silent device's line.
    await page.locator(`#devices tr[data-id="${others[0]}"] input[type=checkbox]`).click();
    await waitAttr(page, '#plot-info', 'data-devices', `${holey},${others[0]}`);
    await waitAttr(page, '#plot', 'data-gaps', '1');
    await shot(page, 'view-gap');
    assert.deepEqual(errors, []);
    await close();
  });

  test('dark theme: the axes are drawn in the theme’s text colour', async () => {
    const { page, errors, close } = await newPage(browser, { width: 1440, height: 900 });
    await page.emulateMedia({ colorScheme: 'dark' });
    await connect(page, server.url, creds, SIM);
    await connected(page);
    await page.waitForFunction(() => document.querySelector<HTMLElement>('#plot')?.dataset.ink === 'rgb(230, 233, 239)');
    await shot(page, 'view-dark');
    assert.deepEqual(errors, []);
    await close();
  });
});
