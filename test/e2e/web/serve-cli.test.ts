// The app as a user first meets it: `reef serve` started as a process on an empty data directory
// prints the demo account; Chromium connects with it and sees the demo simulation's devices.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { serveReef, type ServingReef } from '../../helpers/reef.ts';
import { connect, ensureWebBuilt, launchBrowser, newPage, shot } from './harness.ts';

describe('web app on `reef serve`', () => {
  let reef: ServingReef;
  let browser: Browser;
  let dataDir: string;
  let out = '';

  before(async () => {
    ensureWebBuilt();
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-web-cli-'));
    reef = await serveReef(['--port', '0', '--gateway-port', '0', '--mqtt-port', '0', '--data-dir', dataDir], { until: /client secret:\s+\S+/ });
    out = reef.output();
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await reef?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('connects with the printed demo account and lists the demo devices', async () => {
    const url = /Reef is running at (http:\/\/\S+)/.exec(out)![1]!;
    const clientId = /client id:\s+(\S+)/.exec(out)![1]!;
    const clientSecret = /client secret:\s+(\S+)/.exec(out)![1]!;
    const { page, errors, close } = await newPage(browser);
    await connect(page, url, { clientId, clientSecret }, 'StudioSimulation');
    await page.waitForFunction(() => document.querySelectorAll('#devices tbody tr').length >= 1, null, { timeout: 30_000 });
    // The demo's day of history is plotted once its backfill is done.
    await page.waitForFunction(
      () => document.querySelector('#plot-info')?.getAttribute('data-state') === 'ready' && Number(document.querySelector('#plot-info')?.getAttribute('data-points')) > 0,
      null,
      { timeout: 30_000 },
    );
    assert.equal(await page.locator('#sim-panel').isVisible(), true);
    await shot(page, 'reef-serve-demo');
    assert.deepEqual(errors, []);
    await close();
  });
});
