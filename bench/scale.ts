// npm run bench:scale: how reads and ingest change as the SQLite store grows.
// Every point is measured through a real `reef serve` child process over HTTP; each curve's first
// point (for ingest: the empty store) is the same-run baseline its ratios are taken to.
//   1. latest of all devices (GET /api/solutions/{s}/observations) at 1,000 / 10,000 / 100,000
//      devices (each device holding 10 observations), and at each size one more device made
//      (POST /api/solutions/{s}/devices: decided against the account's device quota, whose count
//      the store keeps, so it should not grow with the devices stored);
//   2. one device's newest 1,000 and a 24 h bucketed read (bucket=5m) with 1M / 10M / 100M rows
//      stored: every device holds the same history (--per-device, 1 s apart, 100,000 ≈ 27.8 h), so
//      the queries read the same rows at every point and only the file around them grows
//      (10 / 100 / 1,000 devices);
//   3. HTTP ingest (batches of 1,000, 4 in flight, bodies built before the clock) into a store with
//      the same devices and no rows against the largest store of curve 2 (same file, reused),
//      alternated empty, full, empty, full, ... (--rounds); each empty store is new.
// Rows are loaded in this process straight into the file as the store's blocks (blocks.ts: one
// block of 1,000 readings per device per round, time-major as uploads arrive), the newest row of each
// device through the store so its latest row is the store's own. Files live under /tmp and are
// deleted at the end. The server's observation and device quotas are raised for the run (100M
// rows is the default observation quota).
//   --max-rows N (100,000,000)  --max-devices N (100,000)  --per-device N (100,000)
//   --ingest N (1,000,000)  --rounds N (3)  --samples N (200; fewer for slow points, ≥ 30)
//   --watch-upkeep M (0): afterwards serve the largest store M minutes and report /healthz waits
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { createAccount, type NewCredentials } from '../src/auth/accounts.ts';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.ts';
import { batchOf } from '../src/core/observation-batch.ts';
import { blockStatements, insertBlocks } from '../src/store/sqlite/blocks.ts';
import { arg, cpuSeconds, fmt, ingestPlan, machine, percentile, request, serve, type IngestBatch, type Served } from './lib.ts';

const MAX_ROWS = Number(arg('max-rows', '100000000'));
const MAX_DEVICES = Number(arg('max-devices', '100000'));
const PER_DEVICE = Number(arg('per-device', '100000'));
const INGEST = Number(arg('ingest', '1000000'));
const SAMPLES = Number(arg('samples', '200'));
const ROUNDS = Number(arg('rounds', '3'));
const WATCH_MINUTES = Number(arg('watch-upkeep', '0'));
const BATCH = 1000;
const CONCURRENCY = 4;
const SOLUTION = 'StudioSimulation';
const T0 = Date.UTC(2026, 0, 1);
const DAY = 86_400_000;
const NEW_DEVICE = JSON.stringify({ deviceType: 'VirtualDevice', domainInfo: { location: { latitude: 45, longitude: 7 } } });
const SERVER_ENV = { REEF_QUOTA_OBSERVATIONS: '1000000000000000', REEF_QUOTA_DEVICES: '1000000000' };

const started = performance.now();
const loadavg = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(', ');
const dirs: string[] = [];
const tmpDir = (name: string) => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), `reef-bench-scale-${name}-`));
  dirs.push(d);
  return d;
};
const dbFile = (dir: string) => path.join(dir, 'reef.db');
const fileBytes = (dir: string) => ['', '-wal'].reduce((n, s) => n + (fs.existsSync(dbFile(dir) + s) ? fs.statSync(dbFile(dir) + s).size : 0), 0);
const mib = (b: number) => (b < 2 ** 24 ? `${fmt(b / 2 ** 10)} KiB` : `${fmt(b / 2 ** 20)} MiB`);
const temperature = (n: number, pk: number) => Math.round((15 + 10 * Math.sin((n + pk) / 100)) * 10000) / 10000;

/** Bytes a process caused to be written to storage (/proc/PID/io write_bytes, all its threads). */
function writeBytes(pid: number): number {
  return Number(/write_bytes: (\d+)/.exec(fs.readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1] ?? NaN);
}

/** Fields of /proc/PID/stat after the command name: f[N - 3] is the man page's field N. */
const procStat = (pid: number) => {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
};
/** Minor page faults of a process so far (memory it touched for the first time). */
const minorFaults = (pid: number) => Number(procStat(pid)[7]);

/** Levels of a table's B-tree, read from the file: the root's rightmost child pointers down to a leaf. */
function btreeLevels(file: string, table: string): number {
  const db = new Database(file);
  db.pragma('wal_checkpoint(TRUNCATE)');
  const root = db.prepare('SELECT rootpage FROM sqlite_schema WHERE name = ?').pluck().get(table) as number;
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  db.close();
  const fd = fs.openSync(file, 'r');
  const page = Buffer.alloc(pageSize);
  try {
    let no = root;
    for (let levels = 1; levels < 64; levels++) {
      fs.readSync(fd, page, 0, pageSize, (no - 1) * pageSize);
      const at = no === 1 ? 100 : 0; // page 1 starts with the file header
      const type = page[at]; // file format §1.6: 2 and 5 interior, 10 and 13 leaf
      if (type === 10 || type === 13) return levels;
      if (type !== 2 && type !== 5) throw new Error(`page ${no} of ${table}: type ${type}`);
      no = page.readUInt32BE(at + 8);
    }
    throw new Error(`${table}: no leaf found`);
  } finally {
    fs.closeSync(fd);
  }
}

interface Fleet {
  dir: string;
  creds: NewCredentials;
  /** A second account with no devices of its own: a small tenant beside the fleet's. */
  neighbour: NewCredentials;
  ids: string[];
}

async function newFleet(name: string): Promise<Fleet> {
  const dir = tmpDir(name);
  const store = new SqliteStore({ file: dbFile(dir), synchronous: 'NORMAL' });
  await store.migrate();
  const creds = await createAccount(store, { name: 'bench' });
  const neighbour = await createAccount(store, { name: 'neighbour' });
  await store.close();
  return { dir, creds, neighbour, ids: [] };
}

/**
 * Adds devices until the fleet has `devices`, each with `rows` observations 1 s apart from T0: all
 * but the newest straight into the file (prepared statement, journal off while loading), the newest
 * through the store (its latest row); `rows` 0: devices only. Returns the seconds taken.
 */
async function grow(f: Fleet, devices: number, rows: number, label: string): Promise<number> {
  const t = performance.now();
  const store = new SqliteStore({ file: dbFile(f.dir), synchronous: 'NORMAL' });
  await store.migrate();
  const account = (await store.getAccountByClientId(f.creds.clientId))!;
  const fresh: string[] = [];
  while (f.ids.length < devices) {
    const id = randomUUID();
    await store.createDevice({ id, tenantId: account.tenantId, groupId: account.groupId, solution: SOLUTION, deviceType: 'VirtualDevice', domainInfo: { location: { latitude: 45, longitude: 7 } } });
    f.ids.push(id);
    fresh.push(id);
  }
  await store.close();
  if (!fresh.length || rows === 0) return (performance.now() - t) / 1000;

  const db = new Database(dbFile(f.dir));
  db.unsafeMode(true); // better-sqlite3's defensive mode refuses journal_mode = OFF
  db.pragma('journal_mode = DELETE'); // out of WAL first: SQLite does not go from WAL to OFF directly
  const mode = db.pragma('journal_mode = OFF', { simple: true });
  if (mode !== 'off') throw new Error(`journal_mode stayed ${mode}`);
  db.pragma('synchronous = OFF');
  db.pragma('cache_size = -1000000');
  const pkOf = db.prepare('SELECT pk FROM devices WHERE id = ?').pluck();
  const pks = fresh.map((id) => pkOf.get(id) as number);
  // Straight into the store's blocks (blocks.ts): each round is one block of BATCH readings per device.
  const blocks = blockStatements(db);
  const history = rows - 1;
  const ts = new Float64Array(BATCH);
  const temps = new Float64Array(BATCH);
  const round = db.transaction((start: number, end: number) => {
    for (const pk of pks) {
      for (let n = start; n < end; n++) {
        ts[n - start] = T0 + n * 1000;
        temps[n - start] = temperature(n, pk);
      }
      insertBlocks(blocks, pk, { n: end - start, ts: ts.subarray(0, end - start), t: temps.subarray(0, end - start), extra: null });
    }
  });
  let shown = 0;
  for (let start = 0; start < history; start += BATCH) {
    round(start, Math.min(history, start + BATCH));
    const done = Math.min(history, start + BATCH) / history;
    if (done - shown >= 0.1) {
      shown = done;
      console.log(`  ${label}: loading ${fmt(done * 100)} % (${fmt((pks.length * history * done) / ((performance.now() - t) / 1000))} rows/s, load ${loadavg()})`);
    }
  }
  db.pragma('journal_mode = WAL');
  db.unsafeMode(false);
  db.close();

  const s2 = new SqliteStore({ file: dbFile(f.dir), synchronous: 'NORMAL' });
  await s2.migrate();
  for (let i = 0; i < fresh.length; i += 1000) {
    await s2.insertObservationsMany(
      fresh.slice(i, i + 1000).map((deviceId, k) => ({ deviceId, batch: batchOf([{ ts: T0 + history * 1000, temperature: temperature(history, pks[i + k]!), extra: null }]) })),
    );
  }
  await s2.close();
  return (performance.now() - t) / 1000;
}

interface Running {
  server: Served;
  h: Record<string, string>;
  /** The neighbour account's headers. */
  h2: Record<string, string>;
  /** Seconds from the spawn until "Reef is running" was printed. */
  listenSecs: number;
  /** Seconds from the spawn until the leader's first upkeep (which counts all observations) finished. */
  upkeepSecs: number;
  /** Longest /healthz answer while that upkeep ran: how long the event loop was held. */
  stallMs: number;
}

/** Starts `reef serve` on the fleet's file and waits until its start-up upkeep is over. */
async function start(f: Fleet): Promise<Running> {
  const db = new Database(dbFile(f.dir));
  db.prepare("DELETE FROM state WHERE key = 'job:upkeep'").run();
  db.close();
  const t = performance.now();
  const server = await serve({ REEF_DATA_DIR: f.dir, ...SERVER_ENV });
  const listenSecs = (performance.now() - t) / 1000;
  const ro = new Database(dbFile(f.dir), { readonly: true });
  const done = ro.prepare("SELECT 1 FROM state WHERE key = 'job:upkeep'").pluck();
  let stallMs = 0;
  while (!done.get()) {
    const t1 = performance.now();
    await request(`${server.url}/healthz`);
    stallMs = Math.max(stallMs, performance.now() - t1);
    await new Promise((r) => setTimeout(r, 20));
  }
  ro.close();
  const upkeepSecs = (performance.now() - t) / 1000;
  const token = async (c: NewCredentials) => {
    const tok = await request(`${server.url}/api/tokens`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ clientId: c.clientId, clientSecret: c.clientSecret }),
    });
    return { authorization: JSON.parse(tok.body).accessToken as string };
  };
  return { server, h: await token(f.creds), h2: await token(f.neighbour), listenSecs, upkeepSecs, stallMs };
}

/** A GET of the path `nextPath` gives, expected 200. */
const getOk = (r: Running, nextPath: () => string) => async (): Promise<void> => {
  const p = nextPath();
  const res = await request(`${r.server.url}${p}`, { headers: r.h });
  if (res.status !== 200) throw new Error(`${p}: ${res.status} ${res.body.slice(0, 200)}`);
};

/** Sequential requests: at least 30 and at most SAMPLES, stopping after 15 s; warm-up: 20 calls and at least 2 s (V8 optimizes the route's code). */
async function sample(r: Running, once: () => Promise<void>) {
  const warm = performance.now();
  for (let i = 0; i < 20 || performance.now() - warm < 2000; i++) await once();
  const cpu0 = cpuSeconds(r.server.child.pid!);
  const faults0 = minorFaults(r.server.child.pid!);
  const xs: number[] = [];
  const t = performance.now();
  while (xs.length < 30 || (xs.length < SAMPLES && performance.now() - t < 15_000)) {
    const t1 = performance.now();
    await once();
    xs.push(performance.now() - t1);
  }
  const cpuMs = ((cpuSeconds(r.server.child.pid!) - cpu0) * 1000) / xs.length;
  const faults = (minorFaults(r.server.child.pid!) - faults0) / xs.length;
  xs.sort((a, b) => a - b);
  return { p50: percentile(xs, 50), p99: percentile(xs, 99), n: xs.length, cpuMs, faults };
}

type Sampled = Awaited<ReturnType<typeof sample>>;
const line = (s: Sampled, base: Sampled) =>
  `p50 ${fmt(s.p50, 2).padStart(8)} ms  p99 ${fmt(s.p99, 2).padStart(8)} ms  server CPU ${fmt(s.cpuMs, 2).padStart(7)} ms/req, ${fmt(s.faults)} minor faults/req  (n ${s.n}; p50 ×${fmt(s.p50 / base.p50, 2)} of the first point)`;
const startLine = (r: Running, rows: number) =>
  `start: listening after ${fmt(r.listenSecs, 2)} s, first upkeep (counts ${fmt(rows)} rows) done after ${fmt(r.upkeepSecs, 2)} s, longest /healthz after listening ${fmt(r.stallMs)} ms`;

// ---------------------------------------------------------------------------------------------

const need = MAX_ROWS * 30 * 1.3 + 2 ** 30;
const free = fs.statfsSync(os.tmpdir()).bavail * fs.statfsSync(os.tmpdir()).bsize;
console.log(
  `bench:scale — ${process.argv.slice(2).join(' ') || '(defaults)'}: rows up to ${fmt(MAX_ROWS)}, devices up to ${fmt(MAX_DEVICES)}, ${fmt(PER_DEVICE)} rows per device, ingest ${fmt(INGEST)}`,
);
console.log(`machine: ${machine()}; load average ${loadavg()}; ${mib(free)} free under ${os.tmpdir()}`);
if (free < need) throw new Error(`about ${mib(need)} needed under ${os.tmpdir()}; lower --max-rows`);
if (PER_DEVICE < 2 || PER_DEVICE > 1_000_000) throw new Error('--per-device: 2 to 1,000,000');

let running: Running | null = null;
try {
  // 1. Latest of all devices.
  console.log('\n1. latest of all devices (GET /api/solutions/{s}/observations), 10 observations per device');
  const latestPoints = [1000, 10_000, 100_000].filter((d) => d <= MAX_DEVICES);
  const fleet1 = await newFleet('latest');
  let base1: Sampled | null = null;
  const baseCreate: Record<string, Sampled> = {};
  for (const devices of latestPoints) {
    const secs = await grow(fleet1, devices, 10, `${fmt(devices)} devices`);
    running = await start(fleet1);
    const body = (await request(`${running.server.url}/api/solutions/${SOLUTION}/observations`, { headers: running.h })).body;
    const groups = (JSON.parse(body) as unknown[]).length;
    if (groups !== devices) throw new Error(`latest of all returned ${groups} groups, not ${devices}`);
    const s = await sample(
      running,
      getOk(running, () => `/api/solutions/${SOLUTION}/observations`),
    );
    base1 ??= s;
    console.log(`  ${fmt(devices).padStart(7)} devices: ${line(s, base1)}`);
    console.log(`           response ${mib(body.length)}; file ${mib(fileBytes(fleet1.dir))}; devices added in ${fmt(secs, 1)} s; ${startLine(running, devices * 10)}; load ${loadavg()}`);
    // One more device made at this size (POST, decided against the account's device quota with the
    // insert), by the fleet's account and by a neighbour with none of its own; the ones made are
    // removed again, so the next point starts as grown.
    for (const [who, h] of [
      ['the fleet', running.h],
      ['a neighbour', running.h2],
    ] as const) {
      const r1 = running;
      const made: string[] = [];
      const create = await sample(r1, async () => {
        const res = await request(`${r1.server.url}/api/solutions/${SOLUTION}/devices`, { method: 'POST', headers: { ...h, 'content-type': 'application/json' }, body: NEW_DEVICE });
        if (res.status !== 201) throw new Error(`device create: ${res.status} ${res.body.slice(0, 200)}`);
        made.push(JSON.parse(res.body).id as string);
      });
      for (const id of made) await request(`${r1.server.url}/api/solutions/${SOLUTION}/devices/${id}`, { method: 'DELETE', headers: h });
      baseCreate[who] ??= create;
      const base = baseCreate[who];
      console.log(`           a device made by ${who.padEnd(11)}: ${line(create, base)}`);
    }
    await running.server.stop();
    running = null;
  }
  fs.rmSync(fleet1.dir, { recursive: true, force: true });

  // 2. One device's newest 1,000 and a 24 h bucketed read as the file grows.
  console.log(`\n2. one device's newest 1,000 and a 24 h read in 5 min buckets; every device ${fmt(PER_DEVICE)} rows 1 s apart`);
  const rowPoints = [1_000_000, 10_000_000, 100_000_000].filter((n) => n <= MAX_ROWS && n >= PER_DEVICE);
  if (!rowPoints.length) throw new Error('--max-rows is below the first point (1,000,000) or --per-device');
  const fleet2 = await newFleet('rows');
  const end = T0 + PER_DEVICE * 1000;
  const dayFrom = new Date(end - DAY).toISOString();
  const dayTo = new Date(end).toISOString();
  let baseNewest: Sampled | null = null;
  let baseDay: Sampled | null = null;
  let loadSecs = 0;
  let had = 0;
  for (const rows of rowPoints) {
    const devices = rows / PER_DEVICE;
    const secs = await grow(fleet2, devices, PER_DEVICE, `${fmt(rows)} rows`);
    loadSecs += secs;
    running = await start(fleet2);
    const ids = fleet2.ids;
    const first = JSON.parse((await request(`${running.server.url}/api/solutions/${SOLUTION}/devices/${ids[0]}/observations?from=${dayFrom}&to=${dayTo}&bucket=5m`, { headers: running.h })).body) as {
      buckets: { count: number }[];
    };
    const covered = first.buckets.reduce((n, b) => n + b.count, 0);
    let i = 0;
    const newest = await sample(
      running,
      getOk(running, () => `/api/solutions/${SOLUTION}/devices/${ids[(i++ * 7919) % devices]}/observations?limit=1000`),
    );
    const day = await sample(
      running,
      getOk(running, () => `/api/solutions/${SOLUTION}/devices/${ids[(i++ * 7919) % devices]}/observations?from=${dayFrom}&to=${dayTo}&bucket=5m`),
    );
    baseNewest ??= newest;
    baseDay ??= day;
    console.log(
      `  ${fmt(rows).padStart(11)} rows (${fmt(devices)} devices), file ${mib(fileBytes(fleet2.dir))}, ${fmt(rows - had)} rows added in ${fmt(secs, 1)} s (${fmt((rows - had) / secs)} rows/s with their devices)`,
    );
    had = rows;
    console.log(`     newest 1,000: ${line(newest, baseNewest)}`);
    console.log(`     24 h, ${first.buckets.length} buckets of ${fmt(covered)} rows: ${line(day, baseDay)}`);
    console.log(`     ${startLine(running, rows)}; load ${loadavg()}`);
    await running.server.stop();
    running = null;
    console.log(`     obs_blocks_by_device index B-tree: ${btreeLevels(dbFile(fleet2.dir), 'obs_blocks_by_device')} levels`);
  }
  const fullRows = rowPoints[rowPoints.length - 1]!;
  console.log(`  rows loaded in ${fmt(loadSecs, 1)} s in all (${fmt(fullRows / loadSecs)} rows/s)`);

  // 3. HTTP ingest into an empty store and into the largest one, alternated.
  const devices3 = fleet2.ids.length;
  console.log(`\n3. HTTP ingest of ${fmt(INGEST)} observations over ${fmt(devices3)} devices, batches of ${fmt(BATCH)}, ${CONCURRENCY} in flight`);
  const perDeviceIngest = Math.ceil(INGEST / devices3 / BATCH) * BATCH;
  const plans = Array.from({ length: ROUNDS }, (_, k) => ingestPlan(INGEST, devices3, BATCH, end + k * (perDeviceIngest + 1) * 1000));
  const bodies = plans.map((plan) =>
    plan.map((b: IngestBatch) => ({
      device: b.device,
      body: Buffer.from(JSON.stringify({ observations: b.rows.map((r) => ({ timestamp: new Date(r.ts).toISOString(), temperature: r.temperature })) })),
    })),
  );
  const ingest = async (f: Fleet, k: number) => {
    running = await start(f);
    const h = { ...running.h, 'content-type': 'application/json' };
    const url = running.server.url;
    const pid = running.server.child.pid!;
    const cpu0 = cpuSeconds(pid);
    const w0 = writeBytes(pid);
    const list = bodies[k]!;
    let next = 0;
    const t = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < list.length) {
          const b = list[next++]!;
          const r = await request(`${url}/api/solutions/${SOLUTION}/devices/${f.ids[b.device]}/observations`, { method: 'POST', headers: h, body: b.body });
          if (r.status !== 201) throw new Error(`upload failed: ${r.status} ${r.body}`);
        }
      }),
    );
    const secs = (performance.now() - t) / 1000;
    const cpuUs = ((cpuSeconds(pid) - cpu0) * 1e6) / INGEST;
    const wrote = (writeBytes(pid) - w0) / INGEST;
    const r = running;
    await running.server.stop();
    running = null;
    return { rate: INGEST / secs, secs, cpuUs, wrote, r };
  };
  const rates: { empty: number[]; full: number[]; emptyCpu: number[]; fullCpu: number[] } = { empty: [], full: [], emptyCpu: [], fullCpu: [] };
  for (let round = 0; round < ROUNDS; round++) {
    const empty = await newFleet('empty');
    await grow(empty, devices3, 0, 'empty');
    const e = await ingest(empty, round);
    console.log(
      `  round ${round + 1}, empty store:         ${fmt(e.rate).padStart(9)} obs/s (${fmt(e.secs, 2)} s), server CPU ${fmt(e.cpuUs, 2)} µs/obs, wrote ${fmt(e.wrote)} B/obs; file after ${mib(fileBytes(empty.dir))}; load ${loadavg()}`,
    );
    fs.rmSync(empty.dir, { recursive: true, force: true });
    const full = await ingest(fleet2, round);
    console.log(
      `  round ${round + 1}, ${fmt(fullRows + round * INGEST)} rows stored: ${fmt(full.rate).padStart(9)} obs/s (${fmt(full.secs, 2)} s), server CPU ${fmt(full.cpuUs, 2)} µs/obs, wrote ${fmt(full.wrote)} B/obs; ×${fmt(full.rate / e.rate, 2)} of empty; ${startLine(full.r, fullRows + round * INGEST)}; load ${loadavg()}`,
    );
    rates.empty.push(e.rate);
    rates.full.push(full.rate);
    rates.emptyCpu.push(e.cpuUs);
    rates.fullCpu.push(full.cpuUs);
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  console.log(`  mean: empty ${fmt(mean(rates.empty))} obs/s, full ${fmt(mean(rates.full))} obs/s → ×${fmt(mean(rates.full) / mean(rates.empty), 2)}`);
  console.log(`  server CPU per observation: empty ${fmt(mean(rates.emptyCpu), 2)} µs, full ${fmt(mean(rates.fullCpu), 2)} µs → ×${fmt(mean(rates.fullCpu) / mean(rates.emptyCpu), 2)}`);

  // --watch-upkeep M: serve the largest store M minutes, /healthz every 100 ms, and report the
  // longest waits (the leader's upkeep recounts every observation every 10 minutes).
  if (WATCH_MINUTES > 0) {
    console.log(`\nwatch: ${fmt(fullRows + ROUNDS * INGEST)} rows served for ${WATCH_MINUTES} min, /healthz every 100 ms`);
    running = await start(fleet2);
    const w = running as Running;
    const t = performance.now();
    const waits: { atMin: number; ms: number }[] = [];
    while (performance.now() - t < WATCH_MINUTES * 60_000) {
      const t1 = performance.now();
      await request(`${w.server.url}/healthz`);
      const ms = performance.now() - t1;
      if (ms > 1000) waits.push({ atMin: (t1 - t) / 60_000, ms });
      await new Promise((res) => setTimeout(res, 100));
    }
    console.log(`  /healthz waits over 1 s: ${waits.length ? waits.map((x) => `${fmt(x.ms / 1000, 1)} s at minute ${fmt(x.atMin, 1)}`).join('; ') : 'none'}; load ${loadavg()}`);
    await w.server.stop();
    running = null;
  }
} finally {
  if (running) await (running as Running).server.stop();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  console.log(`\nrun took ${fmt((performance.now() - started) / 60_000, 1)} min; load average at the end ${loadavg()}; files removed`);
}
