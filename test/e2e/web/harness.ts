// Shared pieces of the browser tests: the app built when web/dist is missing or older than its
// sources, Debian's Chromium driven by playwright-core, a real Reef server with the web component,
// data seeded over the HTTP API, and screenshots under test/e2e/web/screenshots/.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import type { Config } from '../../../src/config/config.ts';
import type { ComponentFactory } from '../../../src/server.ts';
import { webComponent } from '../../../src/web/component.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const WEB = path.join(ROOT, 'web');
const DIST_INDEX = path.join(WEB, 'dist', 'index.html');
export const SHOTS = path.join(ROOT, 'test', 'e2e', 'web', 'screenshots');

function newestMtime(p: string): number {
  const st = fs.statSync(p);
  if (!st.isDirectory()) return st.mtimeMs;
  let m = st.mtimeMs;
  for (const e of fs.readdirSync(p)) m = Math.max(m, newestMtime(path.join(p, e)));
  return m;
}

/** Builds web/dist when it is missing or stale, so `npm test` alone works on a fresh clone. */
export function ensureWebBuilt(): void {
  const sources = [path.join(WEB, 'src'), path.join(WEB, 'index.html'), path.join(WEB, 'vite.config.ts'), path.join(ROOT, 'src', 'sdk')].filter((p) => fs.existsSync(p));
  const newest = Math.max(...sources.map(newestMtime));
  if (fs.existsSync(DIST_INDEX) && fs.statSync(DIST_INDEX).mtimeMs >= newest) return;
  const r = spawnSync(path.join(ROOT, 'node_modules', '.bin', 'vite'), ['build', '--config', 'web/vite.config.ts'], { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`vite build failed:\n${r.stdout}\n${r.stderr}`);
}

export const CHROMIUM = '/usr/bin/chromium';
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });
}

export async function startWebServer(overrides: Partial<Config> = {}, components: ComponentFactory[] = []): Promise<TestServer> {
  ensureWebBuilt();
  return startTestServer(overrides, [webComponent, ...components]);
}

export async function shot(page: Page, name: string): Promise<string> {
  fs.mkdirSync(SHOTS, { recursive: true });
  const file = path.join(SHOTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

/** A page whose console errors and failed requests fail the test that reads `errors`. */
export async function newPage(
  browser: Browser,
  opts: { width?: number; height?: number; timezoneId?: string; touch?: boolean; colorScheme?: 'light' | 'dark' } = {},
): Promise<{ page: Page; errors: string[]; close: () => Promise<void> }> {
  const context = await browser.newContext({
    viewport: { width: opts.width ?? 1280, height: opts.height ?? 900 },
    acceptDownloads: true,
    ...(opts.timezoneId ? { timezoneId: opts.timezoneId } : {}),
    ...(opts.colorScheme ? { colorScheme: opts.colorScheme } : {}),
    ...(opts.touch ? { hasTouch: true, isMobile: true } : {}),
  });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    // A refused request is logged by Chromium itself: the tests that provoke one expect it.
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) errors.push(`console: ${m.text()}`);
  });
  return { page, errors, close: () => context.close() };
}

export async function connect(page: Page, baseUrl: string, c: { clientId: string; clientSecret: string }, solution: string, endpoint = ''): Promise<void> {
  await page.goto(baseUrl + '/');
  if (endpoint) await page.getByLabel('Endpoint').fill(endpoint);
  await page.getByLabel('Client id').fill(c.clientId);
  await page.getByLabel('Client secret').fill(c.clientSecret);
  await page.getByLabel('Solution').fill(solution);
  await page.getByRole('button', { name: 'Connect' }).click();
}

/** Waits until the element's text matches (polling in the page; the cap only stops a broken test). */
export async function waitText(page: Page, selector: string, re: RegExp, timeout = 20_000): Promise<string> {
  await page.waitForFunction(([sel, src, flags]) => new RegExp(src!, flags).test(document.querySelector(sel!)?.textContent ?? ''), [selector, re.source, re.flags], { timeout });
  return (await page.textContent(selector)) ?? '';
}

export async function waitAttr(page: Page, selector: string, attr: string, value: string, timeout = 20_000): Promise<void> {
  await page.waitForFunction(([sel, a, v]) => document.querySelector(sel!)?.getAttribute(a!) === v, [selector, attr, value], { timeout });
}

// ---- data over the API ----

export async function createDevice(server: TestServer, token: string, solution: string, body: Record<string, unknown>): Promise<string> {
  const r = await server.request('POST', `/api/solutions/${solution}/devices`, { token, body });
  if (r.status !== 201) throw new Error(`create device: ${r.status} ${await r.text()}`);
  return ((await r.json()) as { id: string }).id;
}

export async function upload(server: TestServer, token: string, solution: string, id: string, observations: ({ timestamp: string } & Record<string, unknown>)[]): Promise<void> {
  for (let i = 0; i < observations.length; i += 10000) {
    const r = await server.request('POST', `/api/solutions/${solution}/devices/${id}/observations`, { token, body: { observations: observations.slice(i, i + 10000) } });
    if (r.status !== 201) throw new Error(`upload: ${r.status} ${await r.text()}`);
  }
}

/** Observations every `stepS` seconds over [from, to), a daily-looking temperature curve. */
export function series(fromMs: number, toMs: number, stepS: number, base = 21): { timestamp: string; temperature: number }[] {
  const out: { timestamp: string; temperature: number }[] = [];
  const step = stepS * 1000;
  for (let t = Math.ceil(fromMs / step) * step; t < toMs; t += step) {
    out.push({ timestamp: new Date(t).toISOString(), temperature: Math.round((base + 3 * Math.sin((t / 86_400_000) * 2 * Math.PI) + Math.sin(t / 600_000)) * 100) / 100 });
  }
  return out;
}

/** How many observations the API returns for [from, to), across pages. */
export async function countViaApi(server: TestServer, token: string, solution: string, id: string, from: Date, to: Date): Promise<number> {
  let url: string | null = `${server.url}/api/solutions/${solution}/devices/${id}/observations?from=${from.toISOString()}&to=${to.toISOString()}&limit=10000`;
  let n = 0;
  while (url) {
    const r: Response = await fetch(url, { headers: { authorization: token } });
    if (r.status !== 200) throw new Error(`count: ${r.status} ${await r.text()}`);
    n += ((await r.json()) as { observations: unknown[] }).observations.length;
    url = r.headers.get('next_page');
  }
  return n;
}
