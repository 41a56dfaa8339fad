// The simulation panel end to end: a fresh account starts a simulation from the browser, watches
// its devices appear and its readings arrive, then stops it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import type { TestServer } from '../../helpers/server.ts';
import { createSimulationComponent } from '../../../src/sim/component.ts';
import { connect, launchBrowser, newPage, shot, startWebServer, waitText } from './harness.ts';

describe('web app: simulation panel', () => {
  let server: TestServer;
  let browser: Browser;

  before(async () => {
    server = await startWebServer({}, [createSimulationComponent({ demo: null })]);
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.close();
  });

  test('starts a simulation from the panel, shows its progress and devices, stops it', async () => {
    const c = await server.account('sim');
    const { page, errors, close } = await newPage(browser);
    await connect(page, server.url, c, 'StudioSimulation');
    await page.waitForFunction(() => /No devices found in StudioSimulation/.test(document.querySelector('#message')?.textContent ?? ''));
    await page.locator('#sim-panel').waitFor();

    await page.getByLabel('Name').fill('Web test');
    await page.getByLabel('Devices', { exact: true }).fill('4');
    await page.getByLabel('Interval').fill('1s');
    await page.getByLabel('Backfill').fill('1h');
    await page.getByLabel('Latitude').fill('47.37');
    await page.getByLabel('Longitude').fill('8.54');
    await page.getByLabel('Radius (km)').fill('5');
    await page.getByRole('button', { name: 'Start simulation' }).click();

    const item = page.locator('#sim-panel li.sim').first();
    await item.waitFor();
    assert.match((await item.textContent()) ?? '', /Web test/);
    // Its virtual devices appear in the table and on the map without a reload.
    await page.waitForFunction(() => document.querySelectorAll('#devices tbody tr').length === 4, null, { timeout: 30_000 });
    // On the map: every device is a point or counted in a cluster (random spots may fall together).
    await page.waitForFunction(() => {
      const dots = document.querySelectorAll('#map circle.dot').length;
      const clustered = Array.from(document.querySelectorAll<SVGGElement>('#map g.cluster')).reduce((n, g) => n + Number(g.dataset.count), 0);
      return dots + clustered === 4;
    });
    // Backfill finishes and live readings keep coming: the count grows past the history.
    await page.waitForFunction(() => document.querySelector('#sim-panel li.sim')?.getAttribute('data-status') === 'running', null, { timeout: 30_000 });
    const produced = async () => Number(((await item.locator('.produced').textContent()) ?? '0').replace(/[^0-9]/g, ''));
    const first = await produced();
    assert.ok(first >= 4 * 360, `backfill of an hour at 1 s for 4 devices gives at least 1440 readings, saw ${first}`);
    await page.waitForFunction((n) => Number((document.querySelector('#sim-panel li.sim .produced')?.textContent ?? '0').replace(/[^0-9]/g, '')) > n, first, { timeout: 30_000 });
    // Latest of all fills in live.
    await page.waitForFunction(() => Array.from(document.querySelectorAll('#latest .val')).filter((e) => /°C/.test(e.textContent ?? '')).length === 4, null, { timeout: 30_000 });
    await shot(page, 'simulation-running');

    await item.getByRole('button', { name: /^Stop/ }).click();
    await page.waitForFunction(() => document.querySelector('#sim-panel li.sim')?.getAttribute('data-status') === 'stopped');
    assert.equal(await item.getByRole('button', { name: /^Stop/ }).count(), 0);
    await shot(page, 'simulation-stopped');
    assert.deepEqual(errors, []);
    await close();
  });
  test('phone: a failed start is said beside the Start button, and the previous "Started" is gone', async () => {
    const c = await server.account('sim-phone');
    const { page, errors, close } = await newPage(browser, { width: 390, height: 844 });
    await connect(page, server.url, c, 'StudioSimulation');
    await page.locator('#sim-panel').waitFor();
    await page.getByLabel('Devices', { exact: true }).fill('8');
    await page.getByLabel('Interval').fill('5s');
    await page.getByLabel('Backfill').fill('');
    await page.getByRole('button', { name: 'Start simulation' }).click();
    await waitText(page, '#sim-panel .sim-status', /^Started .* with 8 devices\.$/);
    // The page settles first: the started simulation's devices fill the table above the panel (a
    // reload the start asks for), which would move the panel while its boxes are measured below.
    await page.waitForFunction(() => document.querySelectorAll('#devices tbody tr').length === 8, null, { timeout: 30_000 });

    await page.getByLabel('Interval').fill('soon');
    await page.getByRole('button', { name: 'Start simulation' }).click();
    const err = page.locator('#sim-panel #sim-error');
    await waitText(page, '#sim-error', /^The simulation did not start: .*interval/);
    assert.equal(await page.textContent('#sim-panel .sim-status'), '', 'the previous outcome is cleared');
    assert.doesNotMatch((await page.textContent('#message')) ?? '', /did not start/, 'not at the top of the page');
    // Beside the control: on screen, just below the button that caused it.
    // Both boxes in one layout (two round trips could straddle a live reading's re-render).
    const { b, e } = await page.evaluate(() => {
      const [rb, re] = ['sim-start', 'sim-error'].map((id) => document.getElementById(id)!.getBoundingClientRect());
      return { b: { y: rb!.y, height: rb!.height }, e: { y: re!.y, height: re!.height } };
    });
    assert.ok(e.y >= b.y && e.y - (b.y + b.height) < 80, `error at ${e.y}, button at ${b.y}`);
    assert.ok(e.y >= 0 && e.y + e.height <= 844, `the error is in view (${e.y})`);
    await shot(page, 'simulation-error-phone');
    // Fixed and started again: the error goes.
    await page.getByLabel('Interval').fill('5s');
    await page.getByRole('button', { name: 'Start simulation' }).click();
    await waitText(page, '#sim-panel .sim-status', /^Started /);
    assert.equal(await err.isHidden(), true);
    assert.deepEqual(errors, []);
    await close();
  });
});
