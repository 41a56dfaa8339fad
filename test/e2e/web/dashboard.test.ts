// The wall-screen dashboard end to end: a real service with a running simulation,
// Debian's Chromium, at desktop and phone sizes. Live keeps following; tick labels are exact;
// short data is fitted; any numeric field plots, tiles and exports; times in one format, local or
// UTC; stale devices show; the map draws Natural Earth offline and clusters; the phone layout.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { createSimulationComponent } from '../../../src/sim/component.ts';
import type { TestServer } from '../../helpers/server.ts';
import { waitFor } from '../../helpers/wait.ts';
import { connect, createDevice, launchBrowser, newPage, series, shot, startWebServer, upload, waitAttr, waitText } from './harness.ts';

const SIM = 'StudioSimulation';

async function plotOf(page: Page, id: string): Promise<void> {
  await page.locator(`#devices tr[data-id="${id}"]`).click();
  await waitAttr(page, '#plot-info', 'data-devices', id);
  await waitAttr(page, '#plot-info', 'data-state', 'ready');
}

const num = async (page: Page, attr: string) => Number(await page.getAttribute('#plot-info', attr));

describe('web app: the dashboard', () => {
  let server: TestServer;
  let browser: Browser;
  let creds: { clientId: string; clientSecret: string; token: string };
  let simDevice: string;
  let ramp: string, young: string, old: string, multi: string, stale: string;
  /** Ramps of many spans (no location): whatever the plot's height, some get ticks every 0.25. */
  const ramps: string[] = [];
  const spot: string[] = [];
  const now = Date.now();

  before(async () => {
    server = await startWebServer({}, [createSimulationComponent({ demo: null })]);
    browser = await launchBrowser();
    creds = await server.login('dash');
    // A simulation producing a reading every 2 s: the live source.
    const r = await server.request('POST', `/api/solutions/${SIM}/simulations`, {
      token: creds.token,
      body: { name: 'wall', devices: 1, interval: '2s', area: { center: { latitude: 38.72, longitude: -9.14 }, radiusKm: 1 } },
    });
    assert.equal(r.status, 201, await r.clone().text());
    simDevice = ((await r.json()) as { deviceIds: string[] }).deviceIds[0]!;
    const dev = (lat: number, lon: number) => createDevice(server, creds.token, SIM, { deviceType: 'VirtualDevice', domainInfo: { location: { latitude: lat, longitude: lon } } });
    // 20.00 → 22.50 °C over 50 minutes: y ticks every 0.25.
    ramp = await dev(52.52, 13.4);
    await upload(
      server,
      creds.token,
      SIM,
      ramp,
      Array.from({ length: 51 }, (_, i) => ({ timestamp: new Date(now - (51 - i) * 60_000).toISOString(), temperature: 20 + (2.5 * i) / 50 })),
    );
    // Spans 0.3 … 3 °C, each 7 % more than the last: at any plot height one falls where uPlot steps by 0.25.
    for (let span = 0.3; span < 3; span *= 1.07) {
      const id = await createDevice(server, creds.token, SIM, { deviceType: 'Ramp' });
      await upload(
        server,
        creds.token,
        SIM,
        id,
        Array.from({ length: 51 }, (_, i) => ({ timestamp: new Date(now - (51 - i) * 60_000).toISOString(), temperature: 20 + (span * i) / 50 })),
      );
      ramps.push(id);
    }
    // A kit started 10 minutes ago, and a device with two days of data.
    young = await dev(48.85, 2.35);
    await upload(server, creds.token, SIM, young, series(now - 10 * 60_000, now - 5000, 10));
    old = await dev(40.42, -3.7);
    await upload(server, creds.token, SIM, old, series(now - 2 * 86_400_000, now - 60_000, 600, 25));
    // Free-form fields, nested ones too.
    multi = await dev(41.9, 12.5);
    await upload(
      server,
      creds.token,
      SIM,
      multi,
      Array.from({ length: 30 }, (_, i) => ({
        timestamp: new Date(now - (30 - i) * 60_000).toISOString(),
        temperature: 19 + i / 10,
        humidity: 40 + i,
        battery: { level: 100 - i },
        acc: { x: i / 100, y: -i / 100, z: 0.98 },
      })),
    );
    // Silent for two hours.
    stale = await dev(59.33, 18.07);
    await upload(server, creds.token, SIM, stale, series(now - 3 * 3600_000, now - 2 * 3600_000, 300));
    // Three devices at one spot: one cluster on the map.
    for (let i = 0; i < 3; i++) spot.push(await dev(-33.87, 151.21));
  });

  after(async () => {
    await browser?.close();
    await server?.close();
  });

  test('Live keeps following for 30 s: the right edge advances with each reading, no "Reset zoom"', async () => {
    const { page, errors, close } = await newPage(browser);
    await connect(page, server.url, creds, SIM);
    await plotOf(page, simDevice);
    await page.getByRole('button', { name: '1 h' }).click();
    await waitAttr(page, '#plot-info', 'data-state', 'ready');
    let last = await num(page, 'data-last-x');
    let edge = await num(page, 'data-x-max');
    const first = edge;
    const end = Date.now() + 30_000;
    let readings = 0;
    while (Date.now() < end) {
      // The next reading from the simulation, over the event stream.
      await page.waitForFunction((x) => Number(document.querySelector('#plot-info')?.getAttribute('data-last-x')) > x, last, { timeout: 20_000 });
      const x = await num(page, 'data-last-x');
      const right = await num(page, 'data-x-max');
      assert.ok(right >= Math.floor(x), `the newest reading (${x}) is on screen (right edge ${right})`);
      assert.ok(right >= edge, `the right edge never goes back: ${edge} → ${right}`);
      assert.equal(await page.getAttribute('#plot-info', 'data-zoomed'), 'false');
      assert.equal(await page.locator('#reset-zoom').isHidden(), true, 'nobody zoomed: no Reset zoom');
      [last, edge] = [x, right];
      readings++;
    }
    assert.ok(readings >= 5, `readings arrived every 2 s: ${readings}`);
    assert.ok(edge - first >= 20, `over 30 s the right edge advanced with the readings: ${first} → ${edge}`);
    await shot(page, 'live-following');

    // A user's zoom stays put while readings arrive; Reset zoom follows again.
    await page.locator('#plot').focus();
    await page.keyboard.press('+');
    await page.locator('#reset-zoom').waitFor();
    const zoomed = await num(page, 'data-x-max');
    await page.waitForFunction((x) => Number(document.querySelector('#plot-info')?.getAttribute('data-last-x')) > x, last, { timeout: 20_000 });
    assert.equal(await num(page, 'data-x-max'), zoomed, 'the zoomed view did not move');
    await page.locator('#reset-zoom').click();
    await page.locator('#reset-zoom').waitFor({ state: 'hidden' });
    last = await num(page, 'data-last-x');
    await page.waitForFunction((x) => Number(document.querySelector('#plot-info')?.getAttribute('data-last-x')) > x, last, { timeout: 20_000 });
    assert.ok((await num(page, 'data-x-max')) >= Math.floor(await num(page, 'data-last-x')));
    assert.deepEqual(errors, []);
    await close();
  });

  test('with Live on, the window moves on with the clock for a device that went quiet', async () => {
    const { page, errors, close } = await newPage(browser);
    await connect(page, server.url, creds, SIM);
    await page.getByRole('button', { name: '1 h' }).click();
    await plotOf(page, ramp);
    const right = await num(page, 'data-x-max');
    const newest = await num(page, 'data-last-x');
    // No reading comes from this device; the right edge still follows now, leaving the gap in view.
    await page.waitForFunction((r) => Number(document.querySelector('#plot-info')?.getAttribute('data-x-max')) > r, right, { timeout: 20_000 });
    assert.equal(await num(page, 'data-last-x'), newest);
    assert.equal(await page.locator('#reset-zoom').isHidden(), true);
    assert.deepEqual(errors, []);
    await close();
  });

  test('y tick labels are exact: a tick at 21.25 reads 21.25', async () => {
    for (const [width, height] of [
      [1280, 800],
      [390, 844],
    ] as const) {
      const { page, close } = await newPage(browser, { width, height });
      await connect(page, server.url, creds, SIM);
      await page.getByRole('button', { name: '1 h' }).click();
      const seen: string[] = [];
      for (const id of ramps) {
        await plotOf(page, id);
        const labels = ((await page.getAttribute('#plot', 'data-y-ticks')) ?? '').split(' ');
        const values = ((await page.getAttribute('#plot', 'data-y-tick-values')) ?? '').split(' ').map(Number);
        assert.equal(labels.length, values.length);
        assert.ok(labels.length >= 3, `ticks: ${labels}`);
        for (const [i, l] of labels.entries()) assert.ok(Math.abs(Number(l) - values[i]!) < 1e-9, `label ${l} is the tick ${values[i]}`);
        // One step, one number of decimals: no "21.0" beside "21.25".
        assert.equal(new Set(labels.map((l) => l.split('.')[1]?.length ?? 0)).size, 1, `${labels}`);
        seen.push(labels.join(' '));
        if (labels.some((l) => /\.(25|75)$/.test(l))) {
          await shot(page, `y-ticks-${width}`);
          break;
        }
      }
      assert.ok(
        seen.some((t) => /\.25\b/.test(t)),
        `some ramp has quarter ticks, read as such: ${seen.join(' | ')}`,
      );
      await close();
    }
  });

  test('a device with less data than the window is fitted, and says so; one with more is not', async () => {
    const { page, errors, close } = await newPage(browser);
    await connect(page, server.url, creds, SIM);
    await page.getByRole('button', { name: '24 h' }).click();
    await plotOf(page, young);
    assert.equal(await page.getAttribute('#plot-info', 'data-fitted'), 'true');
    const [a, b] = [await num(page, 'data-x-min'), await num(page, 'data-x-max')];
    assert.ok(b - a < 20 * 60, `the view spans the 10 minutes of data, not 24 h: ${b - a} s`);
    assert.ok(a <= (now - 10 * 60_000) / 1000, 'the first reading is in view');
    await waitText(page, '#plot-info', /fitted to the data: \d+ min shown of the 24 h range/);
    await shot(page, 'fitted');
    await plotOf(page, old);
    assert.equal(await page.getAttribute('#plot-info', 'data-fitted'), 'false');
    const span = (await num(page, 'data-x-max')) - (await num(page, 'data-x-min'));
    assert.ok(Math.abs(span - 86_400) < 5, `the full 24 h: ${span}`);
    assert.doesNotMatch((await page.textContent('#plot-info')) ?? '', /fitted/);
    assert.deepEqual(errors, []);
    await close();
  });

  test('any numeric field, nested ones by path: plotted, tiled, in the table and exported', async () => {
    const { page, errors, close } = await newPage(browser);
    await connect(page, server.url, creds, SIM);
    await plotOf(page, multi);
    const options = await page.locator('#field option').evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value));
    for (const f of ['temperature', 'humidity', 'battery.level', 'acc.x', 'acc.y', 'acc.z']) assert.ok(options.includes(f), `${f} offered: ${options}`);
    assert.match((await page.locator('#field option[value="humidity"]').textContent()) ?? '', /humidity \(%\)/);
    await page.getByLabel('Field').selectOption('acc.x');
    await waitAttr(page, '#plot-info', 'data-field', 'acc.x');
    await waitAttr(page, '#plot-info', 'data-state', 'ready');
    assert.equal(await page.getAttribute('#plot-info', 'data-points'), '30');
    assert.match((await page.getAttribute('#plot', 'aria-label')) ?? '', /^acc\.x of /);
    await waitText(page, `#devices tr[data-id="${multi}"] td.temp`, /^0\.29$/);
    await waitText(page, `#latest li[data-id="${multi}"] .val`, /^0\.29$/);
    // Devices without the field show a dash, not a zero.
    assert.equal(await page.textContent(`#devices tr[data-id="${ramp}"] td.temp`), '—');
    await page.getByLabel('Field').selectOption('humidity');
    await waitText(page, `#devices tr[data-id="${multi}"] td.temp`, /^69 %$/);
    await page.getByRole('button', { name: '24 h' }).click();
    await waitAttr(page, '#plot-info', 'data-state', 'ready');
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download CSV' }).click()]);
    const lines = fs
      .readFileSync((await download.path())!, 'utf8')
      .trim()
      .split(/\r\n/);
    assert.equal(lines[0], 'device_id,timestamp,humidity');
    assert.equal(lines.length, 31);
    assert.equal(lines[30], `${multi},${new Date(now - 60_000).toISOString()},69`);
    await shot(page, 'field-humidity');
    assert.deepEqual(errors, []);
    await close();
  });

  test('one date format, the zone shown, a UTC/local switch, ages that tick', async () => {
    const { page, errors, close } = await newPage(browser, { timezoneId: 'Asia/Kolkata' });
    await connect(page, server.url, creds, SIM);
    await plotOf(page, ramp);
    await page.getByRole('button', { name: '1 h' }).click();
    await waitAttr(page, '#plot-info', 'data-state', 'ready');
    assert.match((await page.locator('#zone option[value="local"]').textContent()) ?? '', /Local \(UTC\+05:30\)/);
    await page.locator('#plot').focus();
    await page.keyboard.press('End');
    const lastTs = now - 60_000;
    const p2 = (n: number) => String(n).padStart(2, '0');
    const fmt = (d: Date) => `${d.getUTCFullYear()}-${p2(d.getUTCMonth() + 1)}-${p2(d.getUTCDate())} ${p2(d.getUTCHours())}:${p2(d.getUTCMinutes())}:${p2(d.getUTCSeconds())}`;
    const local = fmt(new Date(Math.floor(lastTs / 1000) * 1000 + 5.5 * 3600_000));
    const utc = fmt(new Date(Math.floor(lastTs / 1000) * 1000));
    await waitText(page, '#readout', new RegExp(`^${local} UTC\\+05:30 — `));
    await page.getByLabel('Times in').selectOption('UTC');
    await waitText(page, '#readout', new RegExp(`^${utc} UTC — `));
    assert.match((await page.getAttribute(`#devices tr[data-id="${ramp}"] td.age`, 'title')) ?? '', new RegExp(`^${utc} UTC$`));
    assert.match((await page.textContent('label[for="from"]')) ?? '', /\(UTC\)/);
    // Remembered across visits; the reload stays connected (docs/web.md "Reload and share").
    await page.reload();
    assert.equal(await page.locator('#zone').inputValue(), 'UTC');
    await waitText(page, '#status', /Connected to/);
    // Ages tick without new readings: one reading now, then only the clock moves.
    const tile = `#latest li[data-id="${young}"] .age`;
    await upload(server, creds.token, SIM, young, [{ timestamp: new Date().toISOString(), temperature: 22 }]);
    const first = await waitText(page, tile, /^\d+ s ago$/);
    await page.waitForFunction(([sel, t]) => document.querySelector(sel!)?.textContent !== t, [tile, first] as const, { timeout: 20_000 });
    await shot(page, 'times-utc');
    assert.deepEqual(errors, []);
    await close();
  });

  test('stale devices show as stale in the table and the tiles; reporting ones do not', async () => {
    const { page, close } = await newPage(browser);
    await connect(page, server.url, creds, SIM);
    await page.locator(`#devices tr[data-id="${stale}"]`).waitFor();
    await waitAttr(page, `#devices tr[data-id="${stale}"]`, 'data-state', 'stale');
    assert.equal(await page.textContent(`#devices tr[data-id="${stale}"] td.state`), 'Stale');
    assert.equal(await page.getAttribute(`#latest li[data-id="${stale}"] .tile`, 'data-state'), 'stale');
    assert.match((await page.getAttribute(`#latest li[data-id="${stale}"] .tile`, 'aria-label')) ?? '', /Stale/);
    await waitAttr(page, `#devices tr[data-id="${simDevice}"]`, 'data-state', 'fresh');
    assert.equal(await page.textContent(`#devices tr[data-id="${simDevice}"] td.state`), 'Reporting');
    await close();
  });

  test('the map: Natural Earth land and borders from this server only, loaded after the first paint; clusters; pan and zoom', async () => {
    const { page, errors, close } = await newPage(browser);
    const origin = new URL(server.url).origin;
    const requests: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    await page.goto(server.url + '/');
    await page.waitForLoadState('load');
    assert.ok(!requests.some((u) => /map-view|countries-50m/.test(u)), `nothing of the map before connecting: ${requests}`);
    await connect(page, server.url, creds, SIM);
    await waitAttr(page, '#map svg', 'data-atlas', 'loaded');
    assert.ok(
      requests.every((u) => u.startsWith(origin) || u.startsWith('data:') || u.startsWith('blob:')),
      `only Reef was asked: ${requests.filter((u) => !u.startsWith(origin))}`,
    );
    assert.ok(((await page.getAttribute('#map path.land-fill', 'd')) ?? '').length > 1000, 'land is drawn');
    assert.ok(((await page.getAttribute('#map path.borders', 'd')) ?? '').length > 100, 'borders are drawn');
    assert.equal(await page.getAttribute('#map svg', 'data-located'), String(9));
    // Seen from far enough to hold Europe and Sydney, the three at one spot are one numbered mark.
    await page.getByRole('button', { name: 'Fit devices' }).click();
    const cluster = page.locator(`#map g.cluster[data-ids*="${spot[0]}"]`);
    await cluster.waitFor();
    assert.equal(await cluster.getAttribute('data-count'), '3');
    assert.equal(await cluster.locator('text').textContent(), '3');
    // Choosing it selects its devices (they share one spot: no zoom parts them) in the table too.
    await cluster.dispatchEvent('click');
    for (const id of spot) await waitAttr(page, `#devices tr[data-id="${id}"]`, 'aria-selected', 'true');
    await waitAttr(page, '#plot-info', 'data-devices', spot.join(','));
    // Selecting in the table rings the point on the map.
    await page.locator(`#devices tr[data-id="${ramp}"]`).click();
    await page.waitForFunction((id) => !!document.querySelector(`#map circle.selected[data-id="${id}"], #map g.cluster.selected[data-ids*="${id}"]`), ramp);
    // Zoom in (button and keyboard), zoom out: the scale follows.
    const scale = Number(await page.getAttribute('#map svg', 'data-scale'));
    await page.getByRole('button', { name: 'Zoom the map in' }).click();
    await page.waitForFunction((s) => Number(document.querySelector('#map svg')?.getAttribute('data-scale')) > s * 1.5, scale);
    await page.locator('#map svg').focus();
    await page.keyboard.press('-');
    await page.keyboard.press('-');
    await page.waitForFunction((s) => Number(document.querySelector('#map svg')?.getAttribute('data-scale')) < s, scale);
    await shot(page, 'map');
    assert.deepEqual(errors, []);
    await close();
  });

  test('phone: the header shows the whole client id and endpoint; panels collapse; pinch zooms the plot; every control is named', async () => {
    const { page, errors, close } = await newPage(browser, { width: 390, height: 844, touch: true });
    await connect(page, server.url, creds, SIM);
    await plotOf(page, ramp);
    const status = (await page.textContent('#status')) ?? '';
    assert.ok(status.includes(creds.clientId) && status.includes(server.url), `full client id and endpoint: ${status}`);
    const clipped = await page.evaluate(
      () => Array.from(document.querySelectorAll('#status *, #status')).filter((e) => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).display !== 'inline').length,
    );
    assert.equal(clipped, 0, 'nothing in the header is cut off');
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 0, `the page scrolls sideways by ${overflow}px`);
    await shot(page, 'phone-connected');

    // Collapse the device list: the plot comes up; expanding brings it back.
    const toggle = page.getByRole('button', { name: 'Collapse Devices' });
    await toggle.click();
    assert.equal(await page.locator('#devices').isHidden(), true);
    assert.equal(await page.getAttribute('#devices-panel > .collapse', 'aria-expanded'), 'false');
    await shot(page, 'phone-collapsed');
    await page.getByRole('button', { name: 'Expand Devices' }).click();
    assert.equal(await page.locator('#devices').isVisible(), true);

    // Choosing a tile far down the page plots its device without scrolling the page away from it.
    const tileSel = `#latest li[data-id="${old}"] .tile`;
    await page.locator(tileSel).scrollIntoViewIfNeeded();
    await page.locator(tileSel).click();
    await waitAttr(page, '#plot-info', 'data-devices', old);
    await waitAttr(page, `#devices tr[data-id="${old}"]`, 'aria-selected', 'true');
    const t = (await page.locator(tileSel).boundingBox())!;
    assert.ok(t.y >= 0 && t.y + t.height <= 844, `the tapped tile is still on screen (at ${t.y})`);
    await plotOf(page, ramp);

    // Two fingers spread on the plot: it zooms in.
    await page.locator('#plot').scrollIntoViewIfNeeded();
    // The plot may still be laying itself out or moving after scrolling (a null box for a moment;
    // a box read mid-scroll puts the fingers beside the plot): the fingers go where two reads agree
    // it is with two frames drawn between them (on a loaded machine two quick reads see one frame).
    const box = await waitFor('the plot laid out and still on screen', async () => {
      const before = await page.locator('#plot .u-over').boundingBox();
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
      const b = await page.locator('#plot .u-over').boundingBox();
      return b !== null && JSON.stringify(b) === JSON.stringify(before) ? b : null;
    });
    const [cx, cy] = [box.x + box.width / 2, box.y + box.height / 2];
    const span0 = (await num(page, 'data-x-max')) - (await num(page, 'data-x-min'));
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Input.dispatchTouchEvent', {
      type: 'touchStart',
      touchPoints: [
        { x: cx - 30, y: cy, id: 1 },
        { x: cx + 30, y: cy, id: 2 },
      ],
    });
    await cdp.send('Input.dispatchTouchEvent', {
      type: 'touchMove',
      touchPoints: [
        { x: cx - 90, y: cy, id: 1 },
        { x: cx + 90, y: cy, id: 2 },
      ],
    });
    await cdp.send('Input.dispatchTouchEvent', { type: 'touchEnd', touchPoints: [] });
    await page.locator('#reset-zoom').waitFor();
    const span1 = (await num(page, 'data-x-max')) - (await num(page, 'data-x-min'));
    assert.ok(span1 < span0 / 2, `pinched from ${span0} s to ${span1} s`);
    await shot(page, 'phone-pinched');

    // Keyboard and screen readers: every control has an accessible name, the new ones too.
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
    assert.equal(await page.getAttribute('#map svg', 'tabindex'), '0');
    assert.match((await page.getAttribute('#map svg', 'aria-label')) ?? '', /Map of 9 device locations/);
    assert.deepEqual(errors, []);
    await close();
  });
});
