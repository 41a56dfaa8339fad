// npm run bench:upload — a 1,000,000-line CSV uploaded with the CLI (`reef observations upload`, a
// child process: both passes, the check and the batched upload) to a real `reef serve` child
// process on loopback; in the same run, the baseline of bench:ingest: the same number of
// observations posted straight over HTTP with fetch in batches of 1,000, 4 in flight, bodies made
// before the clock starts. Prints both rates, their ratio, and the CLI's peak memory.
//   --observations N   (default 1000000)
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, arg, fmt, machine, peakRss, reefCli, serve } from './lib.ts';

const TOTAL = Number(arg('observations', '1000000'));
const BASE_BATCH = 1000;
const BASE_CONCURRENCY = 4;
const T0 = Date.UTC(2026, 0, 1);

const temp = (i: number) => Math.round((20 + 5 * Math.sin(i / 500)) * 10000) / 10000;

/** The CSV, written in chunks so the generator's memory stays small too. */
function writeCsv(file: string): number {
  const fd = fs.openSync(file, 'w');
  fs.writeSync(fd, 'timestamp,temperature\n');
  for (let i = 0; i < TOTAL; ) {
    let chunk = '';
    for (const end = Math.min(TOTAL, i + 50_000); i < end; i++) chunk += `${new Date(T0 + i * 1000).toISOString()},${temp(i)}\n`;
    fs.writeSync(fd, chunk);
  }
  fs.closeSync(fd);
  return fs.statSync(file).size;
}

async function json(url: string, init: RequestInit): Promise<any> {
  const r = await fetch(url, init);
  const text = await r.text();
  if (!r.ok) throw new Error(`${init.method ?? 'GET'} ${url}: ${r.status} ${text}`);
  return JSON.parse(text);
}

/** Runs the CLI, sampling its peak RSS (VmHWM) while it runs. */
function runCli(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string; secs: number; rss: number }> {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let rss = 0;
    const sample = setInterval(() => {
      try {
        rss = Math.max(rss, peakRss(child.pid!));
      } catch {
        // exited between samples
      }
    }, 100);
    child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      clearInterval(sample);
      resolve({ code, stdout, stderr, secs: (performance.now() - t) / 1000, rss });
    });
  });
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-bench-upload-'));
const dataDir = path.join(dir, 'data');
const file = path.join(dir, 'observations.csv');
console.log(`bench:upload — ${fmt(TOTAL)} observations: a CSV through \`reef observations upload\` vs. fetch in batches of ${fmt(BASE_BATCH)}, ${BASE_CONCURRENCY} in flight`);
console.log(`machine: ${machine()}`);
const bytes = writeCsv(file);
const creds = JSON.parse(reefCli(['account', 'create', '--name', 'bench', '--json', '--data-dir', dataDir]));
const server = await serve({ REEF_DATA_DIR: dataDir });
try {
  const { accessToken } = await json(`${server.url}/api/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(creds) });
  const h = { authorization: accessToken, 'content-type': 'application/json' };
  const device = async () => (await json(`${server.url}/api/solutions/sandbox/devices`, { method: 'POST', headers: h, body: JSON.stringify({ deviceType: 'Thermo' }) })).id as string;
  const baseDevice = await device();
  const cliDevice = await device();

  // Baseline: the same observations, bodies ready, posted with fetch.
  const bodies: string[] = [];
  for (let k = 0; k < TOTAL; k += BASE_BATCH) {
    const obs = [];
    for (let i = k; i < Math.min(TOTAL, k + BASE_BATCH); i++) obs.push({ timestamp: new Date(T0 + i * 1000).toISOString(), temperature: temp(i) });
    bodies.push(JSON.stringify({ observations: obs }));
  }
  const url = `${server.url}/api/solutions/sandbox/devices/${baseDevice}/observations`;
  let next = 0;
  const t = performance.now();
  await Promise.all(
    Array.from({ length: BASE_CONCURRENCY }, async () => {
      while (next < bodies.length) {
        const r = await fetch(url, { method: 'POST', headers: h, body: bodies[next++]! });
        const text = await r.text();
        if (r.status !== 201) throw new Error(`baseline upload failed: ${r.status} ${text}`);
      }
    }),
  );
  const baseSecs = (performance.now() - t) / 1000;
  bodies.length = 0;

  // The CLI, as a user runs it: a fresh process, credentials from the environment.
  const env = { REEF_CONFIG_DIR: path.join(dir, 'config'), REEF_ENDPOINT: server.url, REEF_CLIENT_ID: creds.clientId, REEF_CLIENT_SECRET: creds.clientSecret };
  const cli = await runCli(['observations', 'upload', file, '--device', cliDevice, '--json'], env);
  if (cli.code !== 0) throw new Error(`reef observations upload failed: ${cli.stderr}`);
  const summary = JSON.parse(cli.stdout);
  if (summary.stored !== TOTAL) throw new Error(`the CLI stored ${summary.stored} of ${TOTAL}`);
  const check = await json(`${server.url}/api/solutions/sandbox/devices/${cliDevice}/observations?bucket=1d&from=2025-12-31T00:00:00Z&to=2027-01-01T00:00:00Z`, {
    headers: { authorization: accessToken },
  });
  const counted = (check.buckets as { count: number }[]).reduce((a, b) => a + b.count, 0);
  if (counted !== TOTAL) throw new Error(`the service holds ${counted} of the CLI's ${TOTAL} observations`);

  const baseRate = TOTAL / baseSecs;
  const cliRate = TOTAL / cli.secs;
  const uploadRate = summary.observationsPerSecond as number;
  console.log(`file: ${fmt(bytes / 2 ** 20, 1)} MiB CSV`);
  console.log(`fetch baseline (bench:ingest's HTTP path): ${fmt(baseRate)} obs/s  (${fmt(baseSecs, 2)} s)`);
  console.log(
    `reef observations upload, end to end:      ${fmt(cliRate)} obs/s  (${fmt(cli.secs, 2)} s: start ${fmt(cli.secs - summary.checkSeconds - summary.uploadSeconds, 2)} s, check ${fmt(summary.checkSeconds, 2)} s, upload ${fmt(summary.uploadSeconds, 2)} s in ${summary.batches} batches)`,
  );
  console.log(`reef observations upload, upload pass:     ${fmt(uploadRate)} obs/s`);
  console.log(`ratio CLI end to end / baseline:           ${fmt(cliRate / baseRate, 2)}`);
  console.log(`ratio CLI upload pass / baseline:          ${fmt(uploadRate / baseRate, 2)}`);
  console.log(`CLI peak RSS:                              ${fmt(cli.rss / 2 ** 20)} MiB (the file is ${fmt(bytes / 2 ** 20)} MiB: streamed, not loaded)`);
} finally {
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}
