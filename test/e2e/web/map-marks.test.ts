// The map's marks never overlap: at 1440×900, devices whose marks would cover each other at the
// current zoom are one numbered cluster, at the fitted view and after zooming out and in. Sixty
// devices scattered over Western Europe, some a few kilometres apart, many tens: at every zoom some
// pairs fall near each other on screen, across any fixed grid's cell boundaries.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import type { TestServer } from '../../helpers/server.ts';
import { connect, createDevice, launchBrowser, newPage, shot, startWebServer, waitAttr } from './harness.ts';

const SOL = 'MapMarks';

/** The drawn circles of every mark (dots and clusters) in screen pixels, and the device count each stands for. */
async function marks(page: Page): Promise<{ x: number; y: number; r: number; n: number; what: string }[]> {
  // No named functions inside: the page has no __name helper that tsx's transform would call.
  return page.evaluate(() =>
    [
      ...Array.from(document.querySelectorAll<SVGCircleElement>('#map circle.dot')).map((c) => ({ c, n: 1, what: `dot ${c.dataset.id}` })),
      ...Array.from(document.querySelectorAll<SVGGElement>('#map g.cluster')).map((g) => ({ c: g.querySelector('circle')!, n: Number(g.dataset.count), what: `cluster of ${g.dataset.count}` })),
    ].map(({ c, n, what }) => {
      const b = c.getBoundingClientRect();
      return { x: b.left + b.width / 2, y: b.top + b.height / 2, r: b.width / 2, n, what };
    }),
  );
}

function overlaps(ms: { x: number; y: number; r: number; what: string }[]): string[] {
  const bad: string[] = [];
  for (let i = 0; i < ms.length; i++)
    for (let j = i + 1; j < ms.length; j++) {
      const a = ms[i]!,
        b = ms[j]!;
      const d = Math.hypot(a.x - b.x, a.y - b.y);
      if (d < a.r + b.r) bad.push(`${a.what} and ${b.what}: ${d.toFixed(1)} px apart, radii ${a.r.toFixed(1)} + ${b.r.toFixed(1)}`);
    }
  return bad;
}

describe('web app: map marks', () => {
  let server: TestServer;
  let browser: Browser;
  let creds: { clientId: string; clientSecret: string; token: string };
  const N = 60;
  let prev = { latitude: 0, longitude: 0 };

  before(async () => {
    server = await startWebServer();
    browser = await launchBrowser();
    creds = await server.login('marks');
    // A fixed pseudo-random scatter (a linear congruential generator): the same spots every run.
    let seed = 12345;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let i = 0; i < N; i++) {
      // Pairs: every other device a few kilometres from the one before it.
      const at = i % 2 ? { latitude: prev.latitude + (rnd() - 0.5) * 0.2, longitude: prev.longitude + (rnd() - 0.5) * 0.3 } : { latitude: 40 + rnd() * 14, longitude: -8 + rnd() * 26 };
      prev = at;
      await createDevice(server, creds.token, SOL, { deviceType: 'Spot', domainInfo: { location: at } });
    }
  });

  after(async () => {
    await browser?.close();
    await server?.close();
  });

  test('no two marks overlap at 1440×900, fitted, zoomed out and zoomed in; every device is counted once', async () => {
    const { page, errors, close } = await newPage(browser, { width: 1440, height: 900 });
    await connect(page, server.url, creds, SOL);
    await waitAttr(page, '#map svg', 'data-located', String(N));
    await page.locator('#map circle.dot, #map g.cluster').first().waitFor();
    const check = async (when: string, all: boolean) => {
      const ms = await marks(page);
      if (all) assert.ok(ms.length > 0, `${when}: marks are drawn`);
      assert.deepEqual(overlaps(ms), [], `${when}: no overlapping marks`);
      if (all)
        assert.equal(
          ms.reduce((a, m) => a + m.n, 0),
          N,
          `${when}: every device is one dot or counted in one cluster`,
        );
      return ms;
    };
    const fitted = await check('fitted', true);
    assert.ok(
      fitted.some((m) => m.n > 1),
      'devices a few kilometres apart are clustered at the fitted view',
    );
    const scaleOf = async () => Number(await page.getAttribute('#map svg', 'data-scale'));
    // Zoomed out twice (all in view, crowded), then in four times from the fit (many out of view).
    for (let i = 0; i < 2; i++) {
      const s = await scaleOf();
      await page.getByRole('button', { name: 'Zoom the map out' }).click();
      await page.waitForFunction((v) => Number(document.querySelector('#map svg')?.getAttribute('data-scale')) < v, s);
      await check(`zoomed out ×${2 ** (i + 1)}`, true);
    }
    const out = await scaleOf();
    await page.getByRole('button', { name: 'Fit devices' }).click();
    await page.waitForFunction((v) => Number(document.querySelector('#map svg')?.getAttribute('data-scale')) > v, out);
    for (let i = 0; i < 4; i++) {
      const s = await scaleOf();
      await page.getByRole('button', { name: 'Zoom the map in' }).click();
      await page.waitForFunction((v) => Number(document.querySelector('#map svg')?.getAttribute('data-scale')) > v, s);
      await check(`zoomed in ×${2 ** (i + 1)}`, false);
    }
    // A selected mark grows (a ring, a larger dot): still no overlap.
    const zoomedIn = await scaleOf();
    await page.getByRole('button', { name: 'Fit devices' }).click();
    await page.waitForFunction((v) => Number(document.querySelector('#map svg')?.getAttribute('data-scale')) < v, zoomedIn);
    await page.locator('#devices tr[data-id]').first().click();
    await page.locator('#map circle.dot.selected, #map g.cluster.selected').first().waitFor();
    await check('fitted, with a selected mark', true);
    await shot(page, 'map-marks');
    assert.deepEqual(errors, []);
    await close();
  });
});
