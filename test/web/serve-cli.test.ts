// The app as a user first meets it: `reef serve` started as a process on an empty data directory
// prints the demo account; Chromium connects with it and sees the demo simulation's devices.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright-core';
import { connect, ensureWebBuilt, launchBrowser, newPage, shot } from './harness.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

describe('web app on `reef serve`', () => {
  let child: ChildProcess;
  let browser: Browser;
  let dataDir: string;
  let out = '';

  before(async () => {
    ensureWebBuilt();
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-web-cli-'));
    child = spawn(process.execPath, [path.join(ROOT, 'bin', 'reef.js'), 'serve', '--port', '0', '--gateway-port', '0', '--data-dir', dataDir], {
      cwd: ROOT,
      env: { ...process.env, REEF_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (out += d));
    await new Promise<void>((resolve, reject) => {
      const check = () => (/client secret:\s+\S+/.test(out) ? resolve() : undefined);
      child.stdout!.on('data', check);
      child.once('exit', (code) => reject(new Error(`reef serve exited (${code}):\n${out}`)));
    });
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    if (child && child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
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
