// The dark theme is readable everywhere (WCAG 2.1 §1.4.3, contrast minimum): in Chromium with
// `prefers-color-scheme: dark`, every visible text of every panel — the connect form, the plot, the
// device table and its states, the map's caption, the device, dev kit, alarms and simulation
// panels, the latest tiles — has a contrast of at least 4.5:1 with the background it is drawn on
// (the colours of the element and its ancestors blended, opacity included). Disabled controls are
// exempt, as WCAG exempts inactive components. Text drawn on the plot's canvas (axis titles and tick
// labels) and the map clusters' counts are held to the same ratio.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { createAlarmComponent } from '../../../src/alarms/component.ts';
import { createSimulationComponent } from '../../../src/sim/component.ts';
import type { TestServer } from '../../helpers/server.ts';
import { connect, createDevice, launchBrowser, newPage, series, shot, startWebServer, upload, waitAttr } from './harness.ts';

const SIM = 'StudioSimulation';

interface Low {
  text: string;
  where: string;
  ratio: number;
  fg: string;
  bg: string;
}

/** Every visible text below 4.5:1 against its effective background, and the sections whose texts were measured. */
function lowContrast(page: Page): Promise<{ low: Low[]; measured: string[] }> {
  return page.evaluate(() => {
    const parse = (c: string): number[] | null => {
      const m = /^rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)(?:,\s*([\d.]+))?\)$/.exec(c);
      return m ? [Number(m[1]), Number(m[2]), Number(m[3]), m[4] === undefined ? 1 : Number(m[4])] : null;
    };
    const over = (top: number[], under: number[]): number[] => [0, 1, 2].map((i) => top[i]! * top[3]! + under[i]! * (1 - top[3]!)).concat(1);
    const lum = (c: number[]): number =>
      [0, 1, 2]
        .map((i) => c[i]! / 255)
        .map((v) => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4))
        .reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i]!, 0);
    const low: { text: string; where: string; ratio: number; fg: string; bg: string }[] = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    const seen = new Set<Element>();
    const measured = new Set<string>();
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const el = n.parentElement;
      if (!el || seen.has(el) || !(n.textContent ?? '').trim()) continue;
      seen.add(el);
      if (!(el instanceof HTMLElement) || el.closest('svg, script, style, option, datalist, .sr-only, [hidden], :disabled')) continue;
      const r = el.getBoundingClientRect();
      const cs = getComputedStyle(el);
      if (r.width < 2 || r.height < 2 || cs.visibility !== 'visible' || !el.checkVisibility({ opacityProperty: true } as CheckVisibilityOptions)) continue;
      // The background layers from the element up to the page, and the opacity they are drawn with.
      const layers: number[][] = [];
      let opacity = 1;
      for (let a: Element | null = el; a; a = a.parentElement) {
        const s = getComputedStyle(a);
        opacity *= Number(s.opacity);
        const bg = parse(s.backgroundColor);
        if (bg && bg[3]! > 0) layers.push(bg);
      }
      let bg = [255, 255, 255, 1];
      for (const l of layers.reverse()) bg = over(l, bg);
      const fgRaw = parse(cs.color);
      if (!fgRaw) {
        low.push({ text: n.textContent!.trim().slice(0, 40), where: el.id || el.className || el.tagName, ratio: 0, fg: cs.color, bg: 'unparsed colour' });
        continue;
      }
      // Opacity fades the text and its own background over what lies below alike; the text against its background is faded by it.
      const fg = over([fgRaw[0]!, fgRaw[1]!, fgRaw[2]!, fgRaw[3]! * opacity], bg);
      const [l1, l2] = [lum(fg), lum(bg)].sort((x, y) => y - x) as [number, number];
      const ratio = (l1 + 0.05) / (l2 + 0.05);
      measured.add(el.closest('section')?.id ?? el.closest('form')?.id ?? 'page');
      const where = `${el.tagName.toLowerCase()}${el.id ? `#${el.id}` : ''}${el.className && typeof el.className === 'string' ? `.${el.className.split(' ').join('.')}` : ''} in ${el.closest('section, header, form, .message')?.id ?? 'page'}`;
      if (ratio < 4.5)
        low.push({
          text: n.textContent!.trim().slice(0, 40),
          where,
          ratio: Math.round(ratio * 100) / 100,
          fg: `rgb(${fg.slice(0, 3).map(Math.round).join(',')})`,
          bg: `rgb(${bg.slice(0, 3).map(Math.round).join(',')})`,
        });
    }
    return { low, measured: [...measured].sort() };
  });
}

describe('web app: the dark theme', () => {
  let server: TestServer;
  let browser: Browser;
  let creds: { clientId: string; clientSecret: string; token: string };
  let fresh: string;
  const now = Date.now();

  before(async () => {
    server = await startWebServer({}, [createSimulationComponent({ demo: null }), createAlarmComponent({ silenceCheckMs: 0 })]);
    browser = await launchBrowser();
    creds = await server.login('dark');
    const r = await server.request('POST', `/api/solutions/${SIM}/simulations`, {
      token: creds.token,
      body: { name: 'dark', devices: 2, interval: '2s', area: { center: { latitude: 38.72, longitude: -9.14 }, radiusKm: 1 } },
    });
    assert.equal(r.status, 201, await r.clone().text());
    fresh = await createDevice(server, creds.token, SIM, { deviceType: 'VirtualDevice', domainInfo: { location: { latitude: 48.85, longitude: 2.35 } } });
    await upload(server, creds.token, SIM, fresh, series(now - 30 * 60_000, now - 5000, 30));
    // Silent for two hours: a stale row, tile and mark.
    const stale = await createDevice(server, creds.token, SIM, { deviceType: 'VirtualDevice', domainInfo: { location: { latitude: 52.52, longitude: 13.4 } } });
    await upload(server, creds.token, SIM, stale, series(now - 3 * 3600_000, now - 2 * 3600_000, 300));
    // Readings far apart, so the colour scale has a middle, and two devices side by side near it: a
    // cluster whose fill is mid-scale, where a white count reads worst.
    for (const [latitude, longitude, base] of [
      [40.42, -3.7, 20],
      [40.421, -3.701, 21],
      [59.33, 18.07, -20],
      [37.98, 23.73, 60],
    ] as const) {
      const id = await createDevice(server, creds.token, SIM, { deviceType: 'VirtualDevice', domainInfo: { location: { latitude, longitude } } });
      await upload(server, creds.token, SIM, id, series(now - 30 * 60_000, now - 5000, 30, base));
    }
  });

  after(async () => {
    await browser?.close();
    await server?.close();
  });

  test('every visible text has a contrast of at least 4.5:1 in dark mode, before and after connecting', async () => {
    const { page, errors, close } = await newPage(browser, { width: 1440, height: 900, colorScheme: 'dark' });
    // tsx's transform names the inner functions of lowContrast with a __name helper the page lacks.
    await page.addInitScript('window.__name = (f) => f');
    await page.goto(server.url + '/');
    await page.waitForLoadState('load');
    assert.equal(await page.evaluate(() => matchMedia('(prefers-color-scheme: dark)').matches), true, 'the page is in dark mode');
    const first = await lowContrast(page);
    assert.deepEqual(first.low, [], 'the connect form');
    assert.ok(first.measured.includes('connect'), `the connect form was measured: ${first.measured}`);
    await connect(page, server.url, creds, SIM);
    await page.locator(`#devices tr[data-id="${fresh}"]`).click();
    await waitAttr(page, '#plot-info', 'data-state', 'ready');
    await page.locator('#device-panel:not([hidden])').waitFor();
    await page.locator('#sim-panel:not([hidden])').waitFor();
    await page.locator('#alarms-panel h2').waitFor();
    await page.locator('#custom summary').click();
    const app = await lowContrast(page);
    assert.deepEqual(app.low, [], 'the connected app');
    for (const panel of ['plot-panel', 'devices-panel', 'device-panel', 'alarms-panel', 'sim-panel', 'latest-panel']) assert.ok(app.measured.includes(panel), `${panel} was measured: ${app.measured}`);
    // Canvas and SVG text is no DOM text the walk above measures: the plot's axes (titles, tick
    // labels) are drawn in the colour the code hands uPlot, over the plot's background, and each map
    // cluster's count over the cluster's own fill.
    const drawn = await page.evaluate(() => {
      const rgb = (c: string): number[] => {
        const m = /^rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)(?:,\s*([\d.]+))?\)$/.exec(c);
        if (!m) throw new Error(`unparsed colour ${c}`);
        return [Number(m[1]), Number(m[2]), Number(m[3]), m[4] === undefined ? 1 : Number(m[4])];
      };
      const over = (top: number[], under: number[]): number[] => [0, 1, 2].map((i) => top[i]! * top[3]! + under[i]! * (1 - top[3]!)).concat(1);
      const lum = (c: number[]): number =>
        [0, 1, 2]
          .map((i) => c[i]! / 255)
          .map((v) => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4))
          .reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i]!, 0);
      const ratio = (a: number[], b: number[]): number => {
        const [l1, l2] = [lum(a), lum(b)].sort((x, y) => y - x) as [number, number];
        return Math.round(((l1 + 0.05) / (l2 + 0.05)) * 100) / 100;
      };
      // A probe resolves any CSS colour (hsl(), #rgba) to rgb() the way the page would draw it.
      const probe = document.createElement('span');
      document.body.append(probe);
      const resolve = (c: string): number[] => {
        probe.style.color = '';
        probe.style.color = c;
        return rgb(getComputedStyle(probe).color);
      };
      const plot = document.getElementById('plot')!;
      let bg = [255, 255, 255, 1];
      const layers: number[][] = [];
      for (let a: Element | null = plot; a; a = a.parentElement) layers.push(rgb(getComputedStyle(a).backgroundColor));
      for (const l of layers.reverse()) if (l[3]! > 0) bg = over(l, bg);
      const ink = resolve(plot.dataset.ink ?? '');
      const clusters = Array.from(document.querySelectorAll<SVGGElement>('#map g.cluster')).map((g) => {
        const fill = rgb(getComputedStyle(g.querySelector('circle')!).fill);
        const text = rgb(getComputedStyle(g.querySelector('text')!).fill);
        return { count: g.dataset.count, fill: fill.join(','), text: text.join(','), ratio: ratio(over(text, fill), fill) };
      });
      probe.remove();
      return { axes: ratio(over(ink, bg), bg), ink: ink.join(','), bg: bg.join(','), clusters };
    });
    assert.ok(drawn.axes >= 4.5, `the plot's axis text ${drawn.ink} on ${drawn.bg}: ${drawn.axes}:1`);
    assert.ok(drawn.clusters.length > 0, 'the map shows a cluster (the two simulated devices)');
    for (const c of drawn.clusters) assert.ok(c.ratio >= 4.5, `a cluster's count: ${JSON.stringify(c)}`);
    await shot(page, 'dark-theme');
    assert.deepEqual(errors, []);
    await close();
  });
});
