// npm run bench:query — reads against 10,000,000 stored observations (10,000 devices × 1,000) on a
// real `reef serve` child process:
//   latest of all 10,000 devices (target p50 ≤ 10 ms), one device's
//   newest 1,000 (target p50 ≤ 5 ms),
//   GET devices requests/s against a bare Fastify route serving the same JSON in the same run
//   (target ratio ≥ 0.5), the solution-wide query (a page of 1,000 at the start and
//   one reached through many next_page links, which keyset paging keeps at the same cost), and the
//   server's peak RSS.
//   --devices N  --per-device N  --seconds S  --concurrency N  --store sqlite|postgres
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createAccount } from '../src/auth/accounts.ts';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.ts';
import type { Store } from '../src/store/store.ts';
import { ROOT, arg, fmt, latency, load, machine, request, serve } from './lib.ts';
import { batchOf } from '../src/core/observation-batch.ts';

const DEVICES = Number(arg('devices', '10000'));
const PER_DEVICE = Number(arg('per-device', '1000'));
const SECONDS = Number(arg('seconds', '5'));
const CONCURRENCY = Number(arg('concurrency', '16'));
const SANDBOX_KITS = 10;
const T0 = Date.UTC(2026, 0, 1);
const STORE = arg('store', 'sqlite');

console.log(`bench:query — ${fmt(DEVICES * PER_DEVICE)} observations (${fmt(DEVICES)} devices × ${fmt(PER_DEVICE)}), store ${STORE}`);
console.log(`machine: ${machine()}`);

// Load straight through the store (the load is not what is measured).
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-bench-query-'));
// --store postgres: a throw-away database on the local PostgreSQL (bench/ingest-postgres.ts).
const pgDb = STORE === 'postgres' ? await (await import('../test/helpers/pg.ts')).createTestDatabase('reef_bench') : null;
const store: Store = pgDb
  ? new (await import('../src/store/postgres/postgres-store.ts')).PostgresStore({ connectionString: pgDb.url })
  : new SqliteStore({ file: path.join(dir, 'reef.db'), synchronous: 'NORMAL' });
await store.migrate();
const creds = await createAccount(store, { name: 'bench' });
const account = (await store.getAccountByClientId(creds.clientId))!;
let t = performance.now();
const ids: string[] = [];
for (let d = 0; d < DEVICES; d++) {
  const id = randomUUID();
  ids.push(id);
  await store.createDevice({
    id,
    tenantId: account.tenantId,
    groupId: account.groupId,
    solution: 'StudioSimulation',
    deviceType: 'VirtualDevice',
    domainInfo: { location: { latitude: 40 + (d % 100) / 10, longitude: (d % 360) - 180 } },
  });
  const rows = Array.from({ length: PER_DEVICE }, (_, i) => ({ ts: T0 + i * 10_000, temperature: Math.round((15 + 10 * Math.sin((i + d) / 100)) * 10000) / 10000, extra: null }));
  await store.insertObservations(id, batchOf(rows));
}
for (let k = 0; k < SANDBOX_KITS; k++) {
  await store.createDevice({
    id: randomUUID(),
    tenantId: account.tenantId,
    groupId: account.groupId,
    solution: 'sandbox',
    deviceType: 'NICDevKit',
    domainInfo: {},
    provisioningInfo: { status: 'provisioned', timestamp: new Date(T0).toISOString(), ssniMacAddress: (0x1000000000000 + k).toString(16).padStart(16, '0'), ssniNetworkDeviceType: 'MILLI' },
    mac: (0x1000000000000 + k).toString(16).padStart(16, '0'),
  });
}
const bytes = pgDb
  ? Number((await (store as import('../src/store/postgres/postgres-store.ts').PostgresStore).pool.query('SELECT pg_database_size(current_database()) AS n')).rows[0].n)
  : fs.statSync(path.join(dir, 'reef.db')).size;
await store.close();
console.log(`loaded in ${fmt((performance.now() - t) / 1000, 1)} s; ${pgDb ? 'database' : 'file'} ${fmt(bytes / 2 ** 20)} MiB`);

const server = await serve(pgDb ? { REEF_DATA_DIR: dir, REEF_DATABASE_URL: pgDb.url } : { REEF_DATA_DIR: dir });
const bare = spawn(process.execPath, [path.join(ROOT, 'node_modules/.bin/tsx'), path.join(ROOT, 'bench/bare-server.ts')], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env } });
try {
  const token = JSON.parse(
    (
      await request(`${server.url}/api/tokens`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ clientId: creds.clientId, clientSecret: creds.clientSecret }),
      })
    ).body,
  ).accessToken as string;
  const h = { authorization: token };
  const get = (p: string) => async () => {
    const r = await request(`${server.url}${p}`, { headers: h });
    if (r.status !== 200) throw new Error(`${p}: ${r.status} ${r.body.slice(0, 200)}`);
  };

  const latest = await latency(get('/api/solutions/StudioSimulation/observations'), 100, 5);
  const check = JSON.parse((await request(`${server.url}/api/solutions/StudioSimulation/observations`, { headers: h })).body) as unknown[];
  if (check.length !== DEVICES) throw new Error(`latest of all returned ${check.length} groups`);
  console.log(`latest of all ${fmt(DEVICES)} devices:  p50 ${fmt(latest.p50, 2)} ms, p99 ${fmt(latest.p99, 2)} ms  (target p50 ≤ 10 ms: ${latest.p50 <= 10 ? 'met' : 'NOT met'})`);

  let i = 0;
  const one = await latency(async () => get(`/api/solutions/StudioSimulation/devices/${ids[(i++ * 7919) % DEVICES]}/observations?limit=1000`)(), 300);
  console.log(`one device, newest 1,000:     p50 ${fmt(one.p50, 2)} ms, p99 ${fmt(one.p99, 2)} ms  (target p50 ≤ 5 ms: ${one.p50 <= 5 ? 'met' : 'NOT met'})`);

  // Solution-wide range query: the first page, then a page reached by following
  // next_page DEEP times; keyset paging (no OFFSET) should keep the deep one at the first one's cost.
  const DEEP = Math.min(200, Math.floor((DEVICES * PER_DEVICE) / 1000) - 1);
  const range = `/api/solutions/StudioSimulation/observations?from=${new Date(T0).toISOString()}&to=${new Date(T0 + PER_DEVICE * 10_000).toISOString()}&limit=1000`;
  const first = await latency(get(range), 100, 5);
  let deepUrl = `${server.url}${range}`;
  for (let k = 0; k < DEEP; k++) {
    const r = await request(deepUrl, { headers: h });
    const next = r.headers.next_page;
    if (r.status !== 200 || typeof next !== 'string') throw new Error(`paging stopped at page ${k + 1}: ${r.status}`);
    deepUrl = next;
  }
  const deep = await latency(
    async () => {
      const r = await request(deepUrl, { headers: h });
      if (r.status !== 200) throw new Error(`deep page: ${r.status}`);
    },
    100,
    5,
  );
  console.log(`solution-wide page 1 (1,000): p50 ${fmt(first.p50, 2)} ms, p99 ${fmt(first.p99, 2)} ms`);
  console.log(`solution-wide page ${DEEP + 1}:       p50 ${fmt(deep.p50, 2)} ms, p99 ${fmt(deep.p99, 2)} ms  (ratio to page 1: ${fmt(deep.p50 / first.p50, 2)})`);

  const devicesBody = (await request(`${server.url}/api/solutions/sandbox/devices`, { headers: h })).body;
  bare.kill();
  const bare2 = spawn(process.execPath, [path.join(ROOT, 'node_modules/.bin/tsx'), path.join(ROOT, 'bench/bare-server.ts')], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, BARE_PAYLOAD: devicesBody },
  });
  let out = '';
  bare2.stdout!.on('data', (c) => (out += c));
  while (!/listening (\d+)/.test(out)) await new Promise((r) => setTimeout(r, 50));
  const barePort = /listening (\d+)/.exec(out)![1];
  const reefRun = await load(get('/api/solutions/sandbox/devices'), CONCURRENCY, SECONDS * 1000);
  const bareRun = await load(
    async () => {
      const r = await request(`http://127.0.0.1:${barePort}/devices`);
      if (r.status !== 200) throw new Error('bare failed');
    },
    CONCURRENCY,
    SECONDS * 1000,
  );
  bare2.kill('SIGTERM');
  console.log(`GET devices (${SANDBOX_KITS} kits):        ${fmt(reefRun.rps)} req/s, p50 ${fmt(reefRun.p50, 2)} ms`);
  console.log(`bare Fastify, same JSON:      ${fmt(bareRun.rps)} req/s, p50 ${fmt(bareRun.p50, 2)} ms`);
  console.log(`ratio Reef / bare:            ${fmt(reefRun.rps / bareRun.rps, 2)}  (target ≥ 0.5: ${reefRun.rps / bareRun.rps >= 0.5 ? 'met' : 'NOT met'})`);
  console.log(`server peak RSS:              ${fmt(server.peakRss() / 2 ** 20)} MiB`);
} finally {
  bare.kill();
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
  await pgDb?.drop();
}
