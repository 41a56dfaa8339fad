// The SDK in a browser: bundled for the browser platform (no Node module may be on its path), loaded
// in Debian's Chromium from a page on another origin than the service (so CORS, the exposed
// next_page header and the Authorization header on the event stream are all exercised for real).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { build } from 'esbuild';
import { chromium, type Browser } from 'playwright-core';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const SDK = path.join(ROOT, 'src', 'sdk');

const SCENARIO = `async ({ endpoint, creds }) => {
  const sdk = await import('/sdk.js');
  const client = new sdk.ReefClient({ endpoint, credentials: creds });
  const d = await client.createDevice({ deviceType: 'Thermo' });
  const obs = Array.from({ length: 2500 }, (_, i) => ({ timestamp: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString(), temperature: i }));
  const up = await client.uploadObservations(d.id, obs, { batchSize: 1000 });
  const pages = [];
  for await (const p of client.observationPages(d.id, { pageSize: 1000 })) pages.push(p.observations.length);
  let status = 0;
  let code = '';
  try {
    await client.getDevice('00000000-0000-4000-8000-000000000000');
  } catch (e) {
    status = e instanceof sdk.ApiError ? e.status : -1;
    code = e.code;
  }
  const ac = new AbortController();
  let event = null;
  for await (const e of client.stream({ deviceId: d.id, signal: ac.signal, onOpen: () => void client.uploadBatch(d.id, [{ timestamp: '2026-05-01T00:00:00.000Z', temperature: 7 }]) })) {
    event = e;
    ac.abort();
  }
  return { up, pages, status, code, event, id: d.id };
}`;

describe('SDK in the browser', () => {
  let s: TestServer;
  let page: http.Server;
  let pageUrl: string;
  let browser: Browser;
  let bundle: string;

  before(async () => {
    s = await startTestServer();
    const out = await build({ entryPoints: [path.join(SDK, 'index.ts')], bundle: true, format: 'esm', platform: 'browser', write: false, logLevel: 'silent' });
    bundle = out.outputFiles[0]!.text;
    page = http.createServer((req, res) => {
      if (req.url === '/sdk.js') {
        res.writeHead(200, { 'content-type': 'text/javascript' });
        res.end(bundle);
      } else {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end('<!doctype html><title>sdk</title>');
      }
    });
    await new Promise<void>((r) => page.listen(0, '127.0.0.1', r));
    // "localhost" vs 127.0.0.1: a different origin from the service's.
    pageUrl = `http://localhost:${(page.address() as AddressInfo).port}`;
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-quic'] });
  });
  after(async () => {
    await browser?.close();
    page?.closeAllConnections();
    page?.close();
    await s?.close();
  });

  it('imports no Node module: every import in src/sdk is relative', () => {
    for (const f of fs.readdirSync(SDK)) {
      const text = fs.readFileSync(path.join(SDK, f), 'utf8');
      for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s+['"]([^'"]+)['"]/g)) {
        assert.ok(m[1]!.startsWith('./'), `${f} imports ${m[1]}`);
      }
      assert.ok(!/\b(process|Buffer|require)\s*[.(]/.test(text), `${f} uses a Node global`);
    }
  });

  it('logs in, uploads, pages across origins through next_page, and streams with the Authorization header', async () => {
    const creds = await s.account('browser');
    const ctx = await browser.newContext();
    const tab = await ctx.newPage();
    const errors: string[] = [];
    tab.on('pageerror', (e) => errors.push(e.message));
    await tab.goto(pageUrl + '/');
    // Plain JavaScript text: tsx would otherwise wrap a function with helpers the page lacks.
    const result: any = await tab.evaluate(`(${SCENARIO})(${JSON.stringify({ endpoint: s.url, creds: { clientId: creds.clientId, clientSecret: creds.clientSecret } })})`);
    await ctx.close();
    assert.deepEqual(errors, []);
    assert.deepEqual(result.up, { stored: 2500, batches: 3 });
    assert.deepEqual(result.pages, [1000, 1000, 500], 'next_page was readable cross-origin');
    assert.equal(result.status, 404);
    assert.equal(result.code, 'DEVICE_NOT_FOUND');
    assert.deepEqual(result.event, { type: 'observations', deviceId: result.id, observations: [{ timestamp: '2026-05-01T00:00:00.000Z', temperature: 7 }] });
  });
});
