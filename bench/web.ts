// npm run bench:web — the browser app's figures:
//   1. JavaScript shipped (gzipped bytes of web/dist; target ≤ 150 KB);
//   2. time from Connect to a plotted 7-day range of 10 s data (60 480 observations) in Chromium;
//   3. the same range fetched raw (every observation, paged) vs bucketed (min/avg/max per 5 min),
//      raw being the baseline measured in the same run.
// A real service on loopback with a SQLite store in a temp dir; Debian's Chromium via playwright-core.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { chromium } from 'playwright-core';
import { testConfig } from '../src/config/config.ts';
import { createAccount } from '../src/auth/accounts.ts';
import { startServer } from '../src/server.ts';
import { webComponent } from '../src/web/component.ts';
import { CHROMIUM, CHROMIUM_ARGS, ensureWebBuilt } from '../test/web/harness.ts';

const DAYS = 7;
const STEP_S = 10;
const RUNS = Number(process.env.BENCH_RUNS ?? 5);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;

async function main(): Promise<void> {
  ensureWebBuilt();
  const dist = path.resolve('web/dist/assets');
  let js = 0, jsGz = 0, css = 0, cssGz = 0;
  for (const f of fs.readdirSync(dist)) {
    const b = fs.readFileSync(path.join(dist, f));
    if (f.endsWith('.js')) [js, jsGz] = [js + b.length, jsGz + gzipSync(b, { level: 9 }).length];
    if (f.endsWith('.css')) [css, cssGz] = [css + b.length, cssGz + gzipSync(b, { level: 9 }).length];
  }
  console.log(`JavaScript shipped: ${jsGz} bytes gzipped (${kb(jsGz)}; ${kb(js)} minified), target ≤ 150 KB → ${jsGz <= 150 * 1024 ? 'met' : 'MISSED'}`);
  console.log(`CSS shipped:        ${cssGz} bytes gzipped (${kb(css)} minified)`);

  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-bench-web-'));
  const server = await startServer(testConfig({ dataDir }), { components: [webComponent] });
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });
  try {
    const c = await createAccount(server.services.store, { name: 'bench' });
    const tok = await fetch(`${server.url}/api/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(c) });
    const token = ((await tok.json()) as { accessToken: string }).accessToken;
    const dev = await fetch(`${server.url}/api/solutions/StudioSimulation/devices`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: token },
      body: JSON.stringify({ deviceType: 'VirtualDevice', domainInfo: { location: { latitude: 38.72, longitude: -9.14 } } }),
    });
    const id = ((await dev.json()) as { id: string }).id;
    const now = Date.now();
    const from = now - DAYS * 86_400_000;
    const obs: { timestamp: string; temperature: number }[] = [];
    for (let t = Math.ceil(from / 10_000) * 10_000; t < now; t += STEP_S * 1000) {
      obs.push({ timestamp: new Date(t).toISOString(), temperature: Math.round((18 + 5 * Math.sin((t / 86_400_000) * 2 * Math.PI) + Math.sin(t / 700_000)) * 100) / 100 });
    }
    for (let i = 0; i < obs.length; i += 10_000) {
      const r = await fetch(`${server.url}/api/solutions/StudioSimulation/devices/${id}/observations`, {
        method: 'POST', headers: { 'content-type': 'application/json', authorization: token }, body: JSON.stringify({ observations: obs.slice(i, i + 10_000) }),
      });
      if (r.status !== 201) throw new Error(`upload failed: ${r.status}`);
    }
    console.log(`\nData: one device, ${DAYS} days every ${STEP_S} s = ${obs.length} observations`);

    // Raw vs bucketed, as the app asks for them (raw: pages of 10 000 following next_page).
    const q = `from=${new Date(from).toISOString()}&to=${new Date(now + 1).toISOString()}`;
    const raw: number[] = [], rawBytes: number[] = [], bucketed: number[] = [], bucketBytes: number[] = [];
    let rawCount = 0, bucketCount = 0;
    for (let run = 0; run < RUNS; run++) {
      let t0 = performance.now();
      let url: string | null = `${server.url}/api/solutions/StudioSimulation/devices/${id}/observations?${q}&limit=10000`;
      let bytes = 0;
      rawCount = 0;
      while (url) {
        const r: Response = await fetch(url, { headers: { authorization: token } });
        const text = await r.text();
        bytes += text.length;
        rawCount += (JSON.parse(text) as { observations: unknown[] }).observations.length;
        url = r.headers.get('next_page');
      }
      raw.push(performance.now() - t0);
      rawBytes.push(bytes);
      t0 = performance.now();
      const r = await fetch(`${server.url}/api/solutions/StudioSimulation/devices/${id}/observations?${q}&bucket=5m`, { headers: { authorization: token } });
      const text = await r.text();
      bucketCount = (JSON.parse(text) as { buckets: unknown[] }).buckets.length;
      bucketed.push(performance.now() - t0);
      bucketBytes.push(text.length);
    }
    const rm = median(raw), bm = median(bucketed);
    console.log(`Fetch 7 days raw (baseline): ${rm.toFixed(0)} ms median of ${RUNS}, ${rawCount} observations, ${kb(median(rawBytes))} JSON`);
    console.log(`Fetch 7 days bucketed (5m):  ${bm.toFixed(0)} ms median of ${RUNS}, ${bucketCount} buckets, ${kb(median(bucketBytes))} JSON → ${(rm / bm).toFixed(1)}× faster, ${(median(rawBytes) / median(bucketBytes)).toFixed(0)}× smaller`);

    // Connect → plotted 7-day range in Chromium (a fresh page each run; the 7 d preset remembered).
    const times: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const page = await context.newPage();
      await page.goto(server.url + '/');
      await page.evaluate(() => localStorage.setItem('reef.range', '7d'));
      await page.reload();
      await page.getByLabel('Client id').fill(c.clientId);
      await page.getByLabel('Client secret').fill(c.clientSecret);
      await page.getByLabel('Solution').fill('StudioSimulation');
      const t0 = await page.evaluate(() => {
        const t = performance.now();
        (document.getElementById('connect-btn') as HTMLButtonElement).click();
        return t;
      });
      const t1 = (await (await page.waitForFunction(() => {
        const info = document.getElementById('plot-info');
        return info?.dataset.state === 'ready' && info.dataset.bucketed === 'true' && Number(info.dataset.points) > 0 ? performance.now() : 0;
      }, null, { polling: 'raf', timeout: 60_000 })).jsonValue()) as number;
      times.push(t1 - t0);
      const obsShown = Number(await page.getAttribute('#plot-info', 'data-observations'));
      // The page's 7 days end a little later than the upload's: the oldest few may fall outside.
      if (obsShown < obs.length - 100 || obsShown > obs.length) throw new Error(`the plot stands for ${obsShown} observations, not about ${obs.length}`);
      await context.close();
    }
    console.log(`Connect → plotted 7 days in Chromium: ${median(times).toFixed(0)} ms median of ${RUNS} (min ${Math.min(...times).toFixed(0)}, max ${Math.max(...times).toFixed(0)}) — target well under 1 s`);
  } finally {
    await browser.close();
    await server.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
