// `npm run bench:soak`: sustained mixed load on a real `reef serve` (child process, loopback) with
// crash rounds, to show nothing grows without bound and nothing acknowledged is lost.
//   clients (default 1,000): 60 % upload 10 observations per request for their own device, 30 % read
//   (a device's newest 100, the solution's latest), 8 % hold a live event stream, 2 % read the demo
//   kit through the CoAP gateway (session + Proxy-Uri over UDP). Each client waits ~1 s between
//   requests (jittered), as devices and dashboards do; this is a soak, not a throughput bench.
// Every minute: requests, error rate (connection failures during a deliberate restart are counted
// apart), p99 latency, stream events, CoAP answers, the server's RSS.
// --kill-every M: kill -9 the server every M minutes and start it again on the same ports.
// --store postgres [--pg-restart-every M]: PostgreSQL instead of SQLite, restarted every M minutes.
// At the end every acknowledged observation is looked up: "lost" must be 0.
// Options: --minutes N (10), --clients N (1000), --kill-every M (0 = never), --store sqlite|postgres,
// --pg-restart-every M (0), --database-url URL (postgres://postgres@127.0.0.1:5432/reef_soak).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Code, CoapEndpoint, Option, stringOption } from '../src/coap/index.ts';
import { proxyUri } from '../src/gateway/gateway.ts';
import { BIN, arg, fmt, freePort, machine, percentile, request } from './lib.ts';

const MINUTES = Number(arg('minutes', '10'));
const CLIENTS = Number(arg('clients', '1000'));
const KILL_EVERY = Number(arg('kill-every', '0'));
const STORE = arg('store', 'sqlite');
const PG_RESTART_EVERY = Number(arg('pg-restart-every', '0'));
const DB_URL = arg('database-url', 'postgres://postgres@127.0.0.1:5432/reef_soak');
const ADMIN = 'soak-admin-key-0123456789';
const ACCOUNTS = 40;

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-soak-'));
const httpPort = await freePort('tcp');
const coapPort = await freePort('udp');
const base = `http://127.0.0.1:${httpPort}`;
let child: ChildProcess | null = null;
let out = '';

if (STORE === 'postgres') {
  const name = new URL(DB_URL).pathname.slice(1);
  spawnSync('psql', ['-h', '127.0.0.1', '-U', 'postgres', '-c', `DROP DATABASE IF EXISTS ${name}`, '-c', `CREATE DATABASE ${name}`], { stdio: 'ignore' });
}

async function start(): Promise<void> {
  out = '';
  child = spawn(process.execPath, [BIN, 'serve', '--port', String(httpPort), '--gateway-port', String(coapPort)], {
    env: {
      ...process.env,
      REEF_LOG_LEVEL: 'error',
      REEF_DATA_DIR: dataDir,
      REEF_ADMIN_KEY: ADMIN,
      REEF_DEMO: 'true',
      REEF_GATEWAY_MAX_SESSIONS: '1000',
      REEF_SSE_MAX_PER_ACCOUNT: '64',
      ...(STORE === 'postgres' ? { REEF_DATABASE_URL: DB_URL } : {}),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  child.stdout!.on('data', (c) => (out += c));
  while (!/Reef is running at/.test(out)) {
    if (child.exitCode !== null) throw new Error('reef serve exited early');
    await new Promise((r) => setTimeout(r, 50));
  }
}

function rss(): number {
  if (!child?.pid) return 0;
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${child.pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

const json = (body: unknown) => ({ 'content-type': 'application/json', body: JSON.stringify(body) });
async function call(method: string, urlPath: string, token: string | null, body?: unknown) {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = token;
  let payload: string | undefined;
  if (body !== undefined) {
    const j = json(body);
    headers['content-type'] = j['content-type'];
    payload = j.body;
  }
  return request(base + urlPath, { method, headers, ...(payload === undefined ? {} : { body: payload }) });
}

await start();
const demoId = /client id:\s+(\S+)/.exec(out)![1]!;
const demoSecret = /client secret:\s+(\S+)/.exec(out)![1]!;

// Accounts, tokens and one device per uploading/reading client.
interface Acct {
  clientId: string;
  clientSecret: string;
  token: string;
}
const accounts: Acct[] = [];
for (let i = 0; i < ACCOUNTS; i++) {
  const r = await request(`${base}/api/admin/accounts`, { method: 'POST', headers: { 'x-reef-admin-key': ADMIN, 'content-type': 'application/json' }, body: JSON.stringify({ name: `soak-${i}` }) });
  const c = JSON.parse(r.body) as { clientId: string; clientSecret: string };
  accounts.push({ ...c, token: '' });
}
async function tokenFor(a: { clientId: string; clientSecret: string }): Promise<string> {
  for (;;) {
    try {
      const r = await call('POST', '/api/tokens', null, { clientId: a.clientId, clientSecret: a.clientSecret });
      if (r.status === 201) return (JSON.parse(r.body) as { accessToken: string }).accessToken;
    } catch {
      // the server is restarting
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}
for (const a of accounts) a.token = await tokenFor(a);
const demoToken = await tokenFor({ clientId: demoId, clientSecret: demoSecret });
// The demo kit: the demo account's dev kit in sandbox (provisioned at first start).
let kitMac: string | undefined;
for (let i = 0; i < 100 && !kitMac; i++) {
  const list = JSON.parse((await call('GET', '/api/solutions/sandbox/devices', demoToken)).body) as unknown;
  const devices = (Array.isArray(list) ? list : ((list as { devices?: unknown[] }).devices ?? [])) as { provisioningInfo?: Record<string, unknown> }[];
  kitMac = devices
    .flatMap((d) => Object.values(d.provisioningInfo ?? {}))
    .map(String)
    .find((v) => /^[0-9a-f]{16}$/.test(v));
  if (!kitMac) await new Promise((r) => setTimeout(r, 100));
}
if (!kitMac) console.log('soak: no demo kit found; the CoAP clients are idle');

// Per-minute counters.
let lat: number[] = [];
let requests = 0;
let errors = 0;
let duringRestart = 0;
let events = 0;
let coapOk = 0;
let coapFail = 0;
let restarting = false;
const acked = new Map<string, number>(); // device → observations acknowledged (timestamps unique)
let running = true;
const end = Date.now() + MINUTES * 60_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms * (0.5 + Math.random())));

async function timed(fn: () => Promise<{ status: number }>): Promise<{ status: number } | null> {
  const t = performance.now();
  try {
    const r = await fn();
    lat.push(performance.now() - t);
    requests++;
    if (r.status >= 500 || r.status === 0) {
      if (restarting) duringRestart++;
      else errors++;
    }
    return r;
  } catch {
    requests++;
    if (restarting) duringRestart++;
    else errors++;
    return null;
  }
}

async function uploader(a: Acct, n: number): Promise<void> {
  const r = await call('POST', '/api/solutions/StudioSimulation/devices', a.token, { deviceType: 'VirtualDevice' });
  const id = (JSON.parse(r.body) as { id: string }).id;
  acked.set(id, 0);
  // Each device has its own, ever later timestamps, so acknowledged = stored, exactly.
  let t = Date.UTC(2026, 0, 1) + n;
  while (running) {
    const observations = Array.from({ length: 10 }, (_, i) => ({ timestamp: new Date(t + i * 1000).toISOString(), temperature: 20 + (i % 5) }));
    const res = await timed(() => call('POST', `/api/solutions/StudioSimulation/devices/${id}/observations`, a.token, { observations }));
    if (res?.status === 201) {
      acked.set(id, acked.get(id)! + 10);
      t += 10_000;
    } else if (res?.status === 401) a.token = await tokenFor(a);
    await sleep(1000);
  }
}

async function reader(a: Acct): Promise<void> {
  while (running) {
    const r = await timed(() => call('GET', '/api/solutions/StudioSimulation/observations', a.token));
    if (r?.status === 401) a.token = await tokenFor(a);
    await sleep(1000);
  }
}

async function streamer(a: Acct): Promise<void> {
  while (running) {
    try {
      const ctrl = new AbortController();
      const stop = setInterval(() => !running && ctrl.abort(), 500);
      const res = await fetch(`${base}/api/solutions/StudioSimulation/events`, { headers: { authorization: a.token }, signal: ctrl.signal });
      if (res.status === 200 && res.body) {
        const reader = res.body.getReader();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          events += (
            Buffer.from(value)
              .toString()
              .match(/event: observations/g) ?? []
          ).length;
        }
      }
      clearInterval(stop);
    } catch {
      // restart or the end: reconnect below
    }
    if (running) await sleep(1000);
  }
}

async function coapClient(): Promise<void> {
  if (!kitMac) return;
  const ep = await CoapEndpoint.create({ port: 0, host: '127.0.0.1' });
  const gw = { address: '127.0.0.1', port: coapPort };
  let session = false;
  while (running) {
    try {
      if (!session) {
        const open = await ep.request(gw, { method: Code.POST, uri: '/sessions', payload: Buffer.from(demoToken), timeoutMs: 5000 });
        session = open.code === Code.CREATED;
      }
      const r = await ep.request(gw, {
        method: Code.GET,
        options: [stringOption(Option.PROXY_URI, proxyUri(kitMac, 'mesh.reef.local', '/snsr/arduino/temp?sens'))],
        confirmable: false,
        timeoutMs: 5000,
      });
      if (r.code === Code.CONTENT) coapOk++;
      else {
        coapFail++;
        session = false;
      }
    } catch {
      coapFail++;
      session = false;
    }
    await sleep(1000);
  }
  await ep.close();
}

console.log(
  `soak: ${CLIENTS} clients, ${MINUTES} min, store ${STORE}, kill -9 every ${KILL_EVERY || '—'} min${STORE === 'postgres' ? `, PostgreSQL restart every ${PG_RESTART_EVERY || '—'} min` : ''}`,
);
console.log(`machine: ${machine()}`);
const workers: Promise<void>[] = [];
for (let i = 0; i < CLIENTS; i++) {
  const a = accounts[i % ACCOUNTS]!;
  const r = i % 100;
  workers.push(r < 60 ? uploader(a, i) : r < 90 ? reader(a) : r < 98 ? streamer(a) : coapClient());
}

const startedAt = Date.now();
let minute = 0;
let firstRss = 0;
console.log('min  requests  errors  err%    p99 ms  restart-fails  stream-events  coap ok/fail  RSS MB');
while (Date.now() < end) {
  await new Promise((r) => setTimeout(r, Math.min(60_000, end - Date.now())));
  minute++;
  lat.sort((a, b) => a - b);
  const m = rss();
  if (minute === 1) firstRss = m;
  console.log(
    `${String(minute).padStart(3)}  ${fmt(requests).padStart(8)}  ${String(errors).padStart(6)}  ${((100 * errors) / Math.max(1, requests)).toFixed(2).padStart(5)}  ${percentile(lat, 99).toFixed(1).padStart(8)}  ${String(duringRestart).padStart(13)}  ${fmt(events).padStart(13)}  ${`${coapOk}/${coapFail}`.padStart(12)}  ${(m / 2 ** 20).toFixed(0).padStart(6)}`,
  );
  lat = [];
  requests = errors = duringRestart = events = coapOk = coapFail = 0;
  if (KILL_EVERY && minute % KILL_EVERY === 0 && Date.now() < end) {
    restarting = true;
    child!.kill('SIGKILL');
    await new Promise((r) => child!.once('exit', r));
    await start();
    restarting = false;
    console.log(`     kill -9 and restart after minute ${minute}`);
  }
  if (STORE === 'postgres' && PG_RESTART_EVERY && minute % PG_RESTART_EVERY === 0 && Date.now() < end) {
    restarting = true;
    const cluster = fs.readdirSync('/etc/postgresql').sort().pop()!;
    spawnSync('pg_ctlcluster', ['--skip-systemctl-redirect', cluster, 'main', 'restart'], { stdio: 'ignore' });
    await new Promise((r) => setTimeout(r, 3000));
    restarting = false;
    console.log(`     PostgreSQL restarted after minute ${minute}`);
  }
}
running = false;
await Promise.race([Promise.all(workers), new Promise((r) => setTimeout(r, 15_000))]);

// Every acknowledged observation must be there.
let lost = 0;
let checked = 0;
const tokens = new Map<number, string>();
for (let i = 0; i < ACCOUNTS; i++) tokens.set(i, await tokenFor(accounts[i]!));
for (const [id, n] of acked) {
  let found = 0;
  for (const t of tokens.values()) {
    // One bucket over all time counts the device's stored observations.
    const r = await call('GET', `/api/solutions/StudioSimulation/devices/${id}/observations?from=2025-01-01T00:00:00Z&to=2030-01-01T00:00:00Z&bucket=1825d`, t);
    if (r.status === 200) {
      found = (JSON.parse(r.body) as { buckets: { count: number }[] }).buckets.reduce((x, b) => x + b.count, 0);
      break;
    }
  }
  checked += n;
  lost += Math.max(0, n - found);
}
console.log(`acknowledged observations: ${fmt(checked)}, lost: ${lost}`);
console.log(`RSS after minute 1: ${(firstRss / 2 ** 20).toFixed(0)} MB, at the end: ${(rss() / 2 ** 20).toFixed(0)} MB (ratio ${(rss() / Math.max(1, firstRss)).toFixed(2)})`);
console.log(`elapsed ${((Date.now() - startedAt) / 60_000).toFixed(1)} min`);
child!.kill('SIGTERM');
fs.rmSync(dataDir, { recursive: true, force: true });
process.exit(lost === 0 ? 0 : 1);
