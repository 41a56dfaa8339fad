// `npm run bench:soak`: sustained mixed load on real `reef serve` nodes (child processes, loopback)
// with crash rounds, to show nothing grows without bound and nothing acknowledged is lost.
//   clients (default 1,000): 60 % upload 10 observations per request for their own device, 30 % read
//   (a device's newest 100, the solution's latest), 8 % hold a live event stream, 2 % read the demo
//   kit through the CoAP gateway (session + Proxy-Uri over UDP). Each client waits ~1 s between
//   requests (jittered), as devices and dashboards do; this is a soak, not a throughput bench.
//   With several nodes, client i talks to node i mod N only (CoAP clients to the first node, whose
//   process runs the demo kit).
// Every minute: requests, error rate (connection failures during a deliberate fault are counted
// apart), p99 latency, stream events, CoAP answers, each node's RSS.
// --kill-every M: kill -9 a node every M minutes (in turn) and start it again on the same ports.
// --store postgres [--pg-restart-every M]: PostgreSQL instead of SQLite, restarted every M minutes.
// --nodes N: N nodes on one PostgreSQL database.
// --failover: a primary and synchronous standby of the bench's own (bench/soak-failover.ts); every
//   --fault-every S seconds a fault, in turn: SIGKILL of the primary and promotion of the standby
//   (the dead one rebuilt as the new primary's synchronous standby), then SIGKILL of a node and its
//   restart. Per fault: seconds until every node answers uploads 201 again.
// At the end every acknowledged observation is looked up: "lost" must be 0.
// Options: --minutes N (10), --clients N (1000), --kill-every M (0 = never), --store sqlite|postgres,
// --pg-restart-every M (0), --database-url URL (postgres://postgres@127.0.0.1:5432/reef_soak),
// --nodes N (1), --failover, --fault-every S (40).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { Code, CoapEndpoint, Option, stringOption } from '../src/coap/index.ts';
import { proxyUri } from '../src/gateway/gateway.ts';
import { arg, fmt, machine, percentile, request } from './lib.ts';
import { Failover, Recovery } from './soak-failover.ts';
import { SoakNodes } from './soak-nodes.ts';

const MINUTES = Number(arg('minutes', '10'));
const CLIENTS = Number(arg('clients', '1000'));
const KILL_EVERY = Number(arg('kill-every', '0'));
const FAILOVER = process.argv.includes('--failover');
const STORE = FAILOVER ? 'postgres' : arg('store', 'sqlite');
const PG_RESTART_EVERY = Number(arg('pg-restart-every', '0'));
const NODES = Number(arg('nodes', '1'));
const FAULT_EVERY = Number(arg('fault-every', '40'));
const ADMIN = 'soak-admin-key-0123456789';
const ACCOUNTS = 40;
if (NODES > 1 && STORE !== 'postgres') throw new Error('--nodes needs --store postgres (or --failover): nodes share one database');

const failover = FAILOVER ? await Failover.start() : null;
const DB_URL = failover ? failover.url() : arg('database-url', 'postgres://postgres@127.0.0.1:5432/reef_soak');
if (STORE === 'postgres' && !failover) {
  const name = new URL(DB_URL).pathname.slice(1);
  spawnSync('psql', ['-h', '127.0.0.1', '-U', 'postgres', '-c', `DROP DATABASE IF EXISTS ${name}`, '-c', `CREATE DATABASE ${name}`], { stdio: 'ignore' });
}
const nodes = await SoakNodes.make(NODES, {
  REEF_ADMIN_KEY: ADMIN,
  REEF_DEMO: 'true',
  REEF_GATEWAY_MAX_SESSIONS: '1000',
  REEF_SSE_MAX_PER_ACCOUNT: '64',
  ...(STORE === 'postgres' ? { REEF_DATABASE_URL: DB_URL } : {}),
});
const recovery = new Recovery(NODES);
// The nodes go with the bench, however it ends.
process.once('exit', () => nodes.stop());

const json = (body: unknown) => ({ 'content-type': 'application/json', body: JSON.stringify(body) });
async function call(method: string, urlPath: string, token: string | null, body?: unknown, node = 0) {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = token;
  let payload: string | undefined;
  if (body !== undefined) {
    const j = json(body);
    headers['content-type'] = j['content-type'];
    payload = j.body;
  }
  return request(nodes.nodes[node]!.base + urlPath, { method, headers, ...(payload === undefined ? {} : { body: payload }) });
}

// The first node makes the demo account in the empty store; the others find the store made.
await nodes.start(0);
const demoId = /client id:\s+(\S+)/.exec(nodes.nodes[0]!.out)![1]!;
const demoSecret = /client secret:\s+(\S+)/.exec(nodes.nodes[0]!.out)![1]!;
for (let i = 1; i < NODES; i++) await nodes.start(i);

// Accounts, tokens and one device per uploading/reading client.
interface Acct {
  clientId: string;
  clientSecret: string;
  token: string;
}
const accounts: Acct[] = [];
for (let i = 0; i < ACCOUNTS; i++) {
  const r = await request(`${nodes.nodes[0]!.base}/api/admin/accounts`, {
    method: 'POST',
    headers: { 'x-reef-admin-key': ADMIN, 'content-type': 'application/json' },
    body: JSON.stringify({ name: `soak-${i}` }),
  });
  const c = JSON.parse(r.body) as { clientId: string; clientSecret: string };
  accounts.push({ ...c, token: '' });
}
async function tokenFor(a: { clientId: string; clientSecret: string }, node = 0): Promise<string> {
  for (;;) {
    try {
      const r = await call('POST', '/api/tokens', null, { clientId: a.clientId, clientSecret: a.clientSecret }, node);
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
const acked = new Map<string, { n: number; acct: Acct }>(); // device → observations acknowledged (timestamps unique)
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

async function uploader(a: Acct, n: number, node: number): Promise<void> {
  let id: string | undefined;
  while (!id) {
    const r = await call('POST', '/api/solutions/StudioSimulation/devices', a.token, { deviceType: 'VirtualDevice' }, node).catch(() => null);
    if (r?.status === 201) id = (JSON.parse(r.body) as { id: string }).id;
    else await sleep(1000);
  }
  const mine = { n: 0, acct: a };
  acked.set(id, mine);
  // Each device has its own, ever later timestamps, so acknowledged = stored, exactly.
  let t = Date.UTC(2026, 0, 1) + n;
  while (running) {
    const observations = Array.from({ length: 10 }, (_, i) => ({ timestamp: new Date(t + i * 1000).toISOString(), temperature: 20 + (i % 5) }));
    const startedAt = Date.now();
    const res = await timed(() => call('POST', `/api/solutions/StudioSimulation/devices/${id}/observations`, a.token, { observations }, node));
    if (res?.status === 201) {
      mine.n += 10;
      t += 10_000;
      recovery.ok(node, startedAt);
    } else if (res?.status === 401) a.token = await tokenFor(a, node);
    await sleep(1000);
  }
}

async function reader(a: Acct, node: number): Promise<void> {
  while (running) {
    const r = await timed(() => call('GET', '/api/solutions/StudioSimulation/observations', a.token, undefined, node));
    if (r?.status === 401) a.token = await tokenFor(a, node);
    await sleep(1000);
  }
}

async function streamer(a: Acct, node: number): Promise<void> {
  while (running) {
    try {
      const ctrl = new AbortController();
      const stop = setInterval(() => !running && ctrl.abort(), 500);
      const res = await fetch(`${nodes.nodes[node]!.base}/api/solutions/StudioSimulation/events`, { headers: { authorization: a.token }, signal: ctrl.signal });
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

async function coapClient(node: number): Promise<void> {
  if (!kitMac) return;
  const ep = await CoapEndpoint.create({ port: 0, host: '127.0.0.1' });
  const gw = { address: '127.0.0.1', port: nodes.nodes[node]!.coapPort };
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

const mb = (b: number) => (b / 2 ** 20).toFixed(0);
console.log(
  `soak: ${CLIENTS} clients, ${MINUTES} min, ${NODES} node${NODES > 1 ? 's' : ''}, store ${STORE}, kill -9 every ${KILL_EVERY || '—'} min${STORE === 'postgres' && !failover ? `, PostgreSQL restart every ${PG_RESTART_EVERY || '—'} min` : ''}${failover ? `, a fault every ${FAULT_EVERY} s (primary, node, in turn)` : ''}`,
);
console.log(`machine: ${machine()}`);
const workers: Promise<void>[] = [];
for (let i = 0; i < CLIENTS; i++) {
  const a = accounts[i % ACCOUNTS]!;
  const r = i % 100;
  // The demo kit runs in the first node's process, behind its gateway only: CoAP clients go there.
  const node = i % NODES;
  workers.push(r < 60 ? uploader(a, i, node) : r < 90 ? reader(a, node) : r < 98 ? streamer(a, node) : coapClient(0));
}

const startedAt = Date.now();
const firstRss: number[] = [];

// --failover: faults in turn, each measured until every node answers uploads 201 again.
interface FaultRow {
  what: string;
  at: number;
  recovered: number | null;
  /** The database's own part (kill to promoted), for the primary. */
  db?: number;
  detail: string;
}
const faults: FaultRow[] = [];
async function faultLoop(): Promise<void> {
  for (let k = 0; running; k++) {
    await new Promise((r) => setTimeout(r, FAULT_EVERY * 1000));
    // A fault needs time to recover before the end.
    if (!running || end - Date.now() < 30_000) break;
    if (k % 2 === 0) {
      const before = await failover!.ready();
      if (!running || end - Date.now() < 30_000) break;
      const at = Date.now();
      restarting = true;
      const rec = recovery.since(at);
      const f = await failover!.killPrimary();
      const recovered = await rec;
      faults.push({
        what: `primary killed, standby promoted (${faults.filter((x) => x.what.startsWith('primary')).length + 1})`,
        at,
        recovered,
        db: (f.promotedAt - f.killedAt) / 1000,
        detail: `before: ${before}`,
      });
    } else {
      const i = Math.floor(k / 2) % NODES;
      const at = Date.now();
      restarting = true;
      const rec = recovery.since(at);
      await nodes.restart(i);
      const recovered = await rec;
      faults.push({ what: `node ${i} killed, started again`, at, recovered, detail: '' });
    }
    restarting = false;
    const f = faults.at(-1)!;
    console.log(
      `     ${((f.at - startedAt) / 1000).toFixed(0)} s: ${f.what}: every node 201 again after ${f.recovered === null ? '>120' : f.recovered.toFixed(1)} s${f.db !== undefined ? ` (database ${f.db.toFixed(1)} s)` : ''}`,
    );
  }
}
const faulting = failover
  ? faultLoop().catch((e: Error) => {
      restarting = false;
      console.log(`     faults stopped: ${e.message}`);
    })
  : Promise.resolve();

let minute = 0;
console.log('min  requests  errors  err%    p99 ms  fault-fails  stream-events  coap ok/fail  RSS MB per node');
while (Date.now() < end) {
  await new Promise((r) => setTimeout(r, Math.min(60_000, end - Date.now())));
  minute++;
  lat.sort((a, b) => a - b);
  const rss = nodes.nodes.map((_, i) => nodes.rss(i));
  if (minute === 1) firstRss.push(...rss);
  console.log(
    `${String(minute).padStart(3)}  ${fmt(requests).padStart(8)}  ${String(errors).padStart(6)}  ${((100 * errors) / Math.max(1, requests)).toFixed(2).padStart(5)}  ${percentile(lat, 99).toFixed(1).padStart(8)}  ${String(duringRestart).padStart(11)}  ${fmt(events).padStart(13)}  ${`${coapOk}/${coapFail}`.padStart(12)}  ${rss.map(mb).join('/')}`,
  );
  lat = [];
  requests = errors = duringRestart = events = coapOk = coapFail = 0;
  if (KILL_EVERY && minute % KILL_EVERY === 0 && Date.now() < end) {
    restarting = true;
    const i = (minute / KILL_EVERY - 1) % NODES;
    await nodes.restart(i);
    restarting = false;
    console.log(`     kill -9 and restart of node ${i} after minute ${minute}`);
  }
  if (STORE === 'postgres' && !failover && PG_RESTART_EVERY && minute % PG_RESTART_EVERY === 0 && Date.now() < end) {
    restarting = true;
    const cluster = fs.readdirSync('/etc/postgresql').sort().pop()!;
    spawnSync('pg_ctlcluster', ['--skip-systemctl-redirect', cluster, 'main', 'restart'], { stdio: 'ignore' });
    await new Promise((r) => setTimeout(r, 3000));
    restarting = false;
    console.log(`     PostgreSQL restarted after minute ${minute}`);
  }
}
running = false;
await faulting;
await Promise.race([Promise.all(workers), new Promise((r) => setTimeout(r, 15_000))]);

// Every acknowledged observation must be there: looked up through the first node, with the token of the device's account.
let lost = 0;
let checked = 0;
const tokens = new Map<Acct, string>();
for (const a of accounts) tokens.set(a, await tokenFor(a));
for (const [id, { n, acct }] of acked) {
  let found = -1;
  for (let tries = 0; found < 0 && tries < 10; tries++) {
    // One bucket over all time counts the device's stored observations.
    const r = await call('GET', `/api/solutions/StudioSimulation/devices/${id}/observations?from=2025-01-01T00:00:00Z&to=2030-01-01T00:00:00Z&bucket=1825d`, tokens.get(acct)!).catch(() => null);
    if (r?.status === 200) found = (JSON.parse(r.body) as { buckets: { count: number }[] }).buckets.reduce((x, b) => x + b.count, 0);
    else await new Promise((res) => setTimeout(res, 1000));
  }
  checked += n;
  lost += Math.max(0, n - Math.max(0, found));
}
console.log(`acknowledged observations: ${fmt(checked)}, lost: ${lost}`);
if (failover) {
  console.log('faults (seconds from the fault until every node answered an upload sent since with 201):');
  for (const f of faults)
    console.log(
      `  ${((f.at - startedAt) / 1000).toFixed(0).padStart(4)} s  ${f.what}: ${f.recovered === null ? '>120' : f.recovered.toFixed(1)} s${f.db !== undefined ? `; database alone (kill to promoted) ${f.db.toFixed(1)} s, ratio ${f.recovered === null ? '—' : (f.recovered / f.db).toFixed(2)}; ${f.detail}` : ''}`,
    );
  console.log(`rebuilds of a dead primary as synchronous standby: ${failover.rejoinSeconds.map((x) => `${x.toFixed(1)} s`).join(', ') || 'none'}; the primary now: ${await failover.describe()}`);
}
for (let i = 0; i < NODES; i++) {
  const endRss = nodes.rss(i);
  console.log(
    `node ${i}: RSS after minute 1 ${mb(firstRss[i] ?? 0)} MB, at the end ${mb(endRss)} MB (ratio ${(endRss / Math.max(1, firstRss[i] ?? 0)).toFixed(2)}), restarted ${nodes.nodes[i]!.restarts}×`,
  );
}
console.log(`elapsed ${((Date.now() - startedAt) / 60_000).toFixed(1)} min`);
nodes.stop();
await failover?.stop();
process.exit(lost === 0 ? 0 : 1);
