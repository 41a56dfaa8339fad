// npm run bench:web — the browser app's figures:
//   1. JavaScript for the first paint (gzipped bytes of what index.html loads; target ≤ 150 KB), and
//      what loads later (the map chunk, the Natural Earth data);
//   2. time from Connect to a plotted 7-day range of 10 s data of 3 devices (3 × 60 480
//      observations) in Chromium, the devices and range named by the page's address (docs/web.md);
//   3. the same range fetched raw (every observation, paged) vs bucketed (min/avg/max per 5 min),
//      raw being the baseline measured in the same run.
//   4. a wall screen: BENCH_WALL_DEVICES (200) live devices (a simulation), the app left open BENCH_WALL_MINUTES (30)
//      following one of them live; JS heap after GC and DOM node count sampled every minute: flat.
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
import { createSimulationComponent } from '../src/sim/component.ts';
import { CHROMIUM, CHROMIUM_ARGS, ensureWebBuilt } from '../test/e2e/web/harness.ts';
import { median } from './lib.ts';

const DAYS = 7;
const STEP_S = 10;
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const WALL_MINUTES = Number(process.env.BENCH_WALL_MINUTES ?? 30);
const WALL_DEVICES = Number(process.env.BENCH_WALL_DEVICES ?? 200);
/** Devices plotted together in the Connect → plot figure. */
const COMPARED = 3;

const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;

async function main(): Promise<void> {
  ensureWebBuilt();
  const dist = path.resolve('web/dist');
  // The first paint is what index.html names (its script and modulepreloads); the rest loads on demand.
  const html = fs.readFileSync(path.join(dist, 'index.html'), 'utf8');
  const first = new Set([...html.matchAll(/(?:src|href)="\/(assets\/[^"]+\.js)"/g)].map((m) => m[1]!));
  let js = 0,
    jsGz = 0,
    lazyGz = 0,
    dataGz = 0,
    css = 0,
    cssGz = 0;
  for (const f of fs.readdirSync(path.join(dist, 'assets'))) {
    const b = fs.readFileSync(path.join(dist, 'assets', f));
    const gz = gzipSync(b, { level: 9 }).length;
    if (f.endsWith('.js') && first.has(`assets/${f}`)) [js, jsGz] = [js + b.length, jsGz + gz];
    else if (f.endsWith('.js')) lazyGz += gz;
    else if (f.endsWith('.json')) dataGz += gz;
    if (f.endsWith('.css')) [css, cssGz] = [css + b.length, cssGz + gz];
  }
  console.log(`JavaScript, first paint: ${jsGz} bytes gzipped (${kb(jsGz)}; ${kb(js)} minified), target ≤ 150 KB → ${jsGz <= 150 * 1024 ? 'met' : 'MISSED'}`);
  console.log(`Loaded after (map):      ${kb(lazyGz)} JavaScript + ${kb(dataGz)} Natural Earth data, gzipped`);
  console.log(`CSS shipped:             ${cssGz} bytes gzipped (${kb(css)} minified)`);

  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-bench-web-'));
  const server = await startServer(testConfig({ dataDir }), { components: [webComponent, createSimulationComponent({ demo: null })] });
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });
  try {
    const c = await createAccount(server.services.store, { name: 'bench' });
    const tok = await fetch(`${server.url}/api/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(c) });
    const token = ((await tok.json()) as { accessToken: string }).accessToken;
    const ids: string[] = [];
    for (let i = 0; i < COMPARED; i++) {
      const dev = await fetch(`${server.url}/api/solutions/StudioSimulation/devices`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: token },
        body: JSON.stringify({ deviceType: 'VirtualDevice', domainInfo: { location: { latitude: 38.72 + i, longitude: -9.14 } } }),
      });
      ids.push(((await dev.json()) as { id: string }).id);
    }
    const id = ids[0]!;
    const now = Date.now();
    const from = now - DAYS * 86_400_000;
    const obs: { timestamp: string; temperature: number }[] = [];
    for (let t = Math.ceil(from / 10_000) * 10_000; t < now; t += STEP_S * 1000) {
      obs.push({ timestamp: new Date(t).toISOString(), temperature: Math.round((18 + 5 * Math.sin((t / 86_400_000) * 2 * Math.PI) + Math.sin(t / 700_000)) * 100) / 100 });
    }
    for (const d of ids) {
      for (let i = 0; i < obs.length; i += 10_000) {
        const r = await fetch(`${server.url}/api/solutions/StudioSimulation/devices/${d}/observations`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: token },
          body: JSON.stringify({ observations: obs.slice(i, i + 10_000) }),
        });
        if (r.status !== 201) throw new Error(`upload failed: ${r.status}`);
      }
    }
    console.log(`\nData: ${COMPARED} devices, each ${DAYS} days every ${STEP_S} s = ${obs.length} observations`);

    // Raw vs bucketed, as the app asks for them (raw: pages of 10 000 following next_page).
    const q = `from=${new Date(from).toISOString()}&to=${new Date(now + 1).toISOString()}`;
    const raw: number[] = [],
      rawBytes: number[] = [],
      bucketed: number[] = [],
      bucketBytes: number[] = [];
    let rawCount = 0,
      bucketCount = 0;
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
    const rm = median(raw),
      bm = median(bucketed);
    console.log(`Fetch 7 days raw (baseline): ${rm.toFixed(0)} ms median of ${RUNS}, ${rawCount} observations, ${kb(median(rawBytes))} JSON`);
    console.log(
      `Fetch 7 days bucketed (5m):  ${bm.toFixed(0)} ms median of ${RUNS}, ${bucketCount} buckets, ${kb(median(bucketBytes))} JSON → ${(rm / bm).toFixed(1)}× faster, ${(median(rawBytes) / median(bucketBytes)).toFixed(0)}× smaller`,
    );

    // Connect → plotted 7-day range of 3 devices in Chromium (a fresh page each run; devices and range from the address).
    const times: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const page = await context.newPage();
      await page.goto(`${server.url}/?solution=StudioSimulation&devices=${ids.join(',')}&range=7d`);
      await page.getByLabel('Client id').fill(c.clientId);
      await page.getByLabel('Client secret').fill(c.clientSecret);
      await page.getByLabel('Solution').fill('StudioSimulation');
      const t0 = await page.evaluate(() => {
        const t = performance.now();
        (document.getElementById('connect-btn') as HTMLButtonElement).click();
        return t;
      });
      const t1 = (await (
        await page.waitForFunction(
          (n) => {
            const info = document.getElementById('plot-info');
            return info?.dataset.state === 'ready' && info.dataset.bucketed === 'true' && info.dataset.devices?.split(',').length === n && Number(info.dataset.points) > 0 ? performance.now() : 0;
          },
          COMPARED,
          { polling: 'raf', timeout: 60_000 },
        )
      ).jsonValue()) as number;
      times.push(t1 - t0);
      const obsShown = Number(await page.getAttribute('#plot-info', 'data-observations'));
      // The page's 7 days end a little later than the upload's: the oldest few may fall outside.
      if (obsShown < COMPARED * (obs.length - 100) || obsShown > COMPARED * obs.length) throw new Error(`the plot stands for ${obsShown} observations, not about ${COMPARED * obs.length}`);
      await context.close();
    }
    console.log(
      `Connect → plotted 7 days of ${COMPARED} devices in Chromium: ${median(times).toFixed(0)} ms median of ${RUNS} (min ${Math.min(...times).toFixed(0)}, max ${Math.max(...times).toFixed(0)}) — target well under 1 s`,
    );

    if (WALL_MINUTES > 0) await wallScreen(server.url, c, token, browser);
  } finally {
    await browser.close();
    await server.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

/**
 * The app left open on a wall screen: 100 devices reporting every 5 s, one followed live on the
 * 1 h view. Every minute: a forced GC, then the JS heap in use and the DOM node count (Chromium's
 * own counters over CDP). Flat means the last minutes hold what the first held.
 */
async function wallScreen(url: string, c: { clientId: string; clientSecret: string }, token: string, browser: import('playwright-core').Browser): Promise<void> {
  const r = await fetch(`${url}/api/solutions/StudioSimulation/simulations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: token },
    body: JSON.stringify({ name: 'wall', devices: WALL_DEVICES, interval: '5s', backfill: '1h', area: { center: { latitude: 38.72, longitude: -9.14 }, radiusKm: 30 } }),
  });
  if (r.status !== 201) throw new Error(`simulation: ${r.status} ${await r.text()}`);
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  await page.goto(url + '/');
  await page.evaluate(() => localStorage.setItem('reef.range', '1h'));
  await page.reload();
  await page.getByLabel('Client id').fill(c.clientId);
  await page.getByLabel('Client secret').fill(c.clientSecret);
  await page.getByLabel('Solution').fill('StudioSimulation');
  await page.getByRole('button', { name: 'Connect' }).click();
  await page.waitForFunction((n) => document.querySelectorAll('#devices tbody tr').length > n, WALL_DEVICES, { timeout: 120_000 });
  const cdp = await context.newCDPSession(page);
  await cdp.send('Performance.enable');
  const sample = async () => {
    await cdp.send('HeapProfiler.collectGarbage');
    const heap = (await cdp.send('Runtime.getHeapUsage')) as { usedSize: number };
    const m = (await cdp.send('Performance.getMetrics')) as { metrics: { name: string; value: number }[] };
    const get = (n: string) => m.metrics.find((x) => x.name === n)?.value ?? 0;
    const lastX = Number(await page.getAttribute('#plot-info', 'data-last-x'));
    return {
      heapMB: heap.usedSize / 2 ** 20,
      nodes: get('Nodes'),
      listeners: get('JSEventListeners'),
      points: Number(await page.getAttribute('#plot-info', 'data-points')),
      lagS: Date.now() / 1000 - lastX,
    };
  };
  console.log(`\nWall screen: ${WALL_DEVICES} devices every 5 s, one followed live (1 h view), ${WALL_MINUTES} min`);
  console.log('min  heap MB  DOM nodes  listeners  plot points  newest point age');
  const rows: Awaited<ReturnType<typeof sample>>[] = [];
  for (let minute = 0; minute <= WALL_MINUTES; minute++) {
    if (minute > 0) await new Promise((res) => setTimeout(res, 60_000));
    const s = await sample();
    rows.push(s);
    console.log(
      `${String(minute).padStart(3)}  ${s.heapMB.toFixed(2).padStart(7)}  ${String(s.nodes).padStart(9)}  ${String(s.listeners).padStart(9)}  ${String(s.points).padStart(11)}  ${s.lagS.toFixed(0).padStart(6)} s`,
    );
  }
  // The first minute settles (backfill, first draws); compare minute 1–3 with the last three.
  const avg = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const head = rows.slice(1, 4),
    tail = rows.slice(-3);
  const dh = avg(tail.map((x) => x.heapMB)) - avg(head.map((x) => x.heapMB));
  const dn = avg(tail.map((x) => x.nodes)) - avg(head.map((x) => x.nodes));
  console.log(`Heap change (last 3 min vs minutes 1–3): ${dh >= 0 ? '+' : ''}${dh.toFixed(2)} MB; DOM nodes: ${dn >= 0 ? '+' : ''}${dn.toFixed(0)}`);
  await context.close();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
