// `npm run bench:sim`: the simulation scheduler and backfill on the embedded SQLite store, in one
// process, as `reef serve` runs them.
//  1. Live: 10,000 virtual devices at a 10 s interval (1,000 readings/s) for 60 s: CPU used (target
//     under half a core), the lag from a reading's timestamp to its event on the bus, the event
//     loop's delay.
//  2. Backfill of 10,000,000 readings: readings/s (target ≥ 100,000), next to the store's own
//     batch-insert rate (insertObservations with ready-made batches) measured in the same run.
// Options: --seconds N (60), --devices N (10000), --backfill N (10000000), --baseline N (1000000).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import pino from 'pino';
import { createAccount } from '../src/auth/accounts.ts';
import type { Account, ObservationRecord } from '../src/core/types.ts';
import { LocalEventBus } from '../src/events/bus.ts';
import { SimulationManager } from '../src/sim/simulations.ts';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.ts';
import { percentile } from './lib.ts';
import { batchOf } from '../src/core/observation-batch.ts';

const args = process.argv.slice(2);
const opt = (name: string, def: number) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : def;
};
const SECONDS = opt('seconds', 60);
const DEVICES = opt('devices', 10_000);
const BACKFILL = opt('backfill', 10_000_000);
const BASELINE = opt('baseline', 1_000_000);
const INTERVAL_MS = 10_000;

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = pino({ level: 'warn' });

async function openStore(dir: string) {
  const store = new SqliteStore({ file: path.join(dir, 'reef.db') });
  await store.migrate();
  const c = await createAccount(store, { name: 'bench' });
  const account = (await store.getAccountByClientId(c.clientId)) as Account;
  return { store, account };
}

async function waitFor(what: string, f: () => boolean, timeoutMs = 600_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!f()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

async function live(dir: string) {
  const { store, account } = await openStore(dir);
  const events = new LocalEventBus();
  const manager = new SimulationManager({ store, events, log });
  await manager.start();
  const t0 = Date.now();
  const sim = await manager.create(account, { devices: DEVICES, interval: `${INTERVAL_MS}ms`, seed: 'bench', area: { center: { latitude: 48.85, longitude: 2.35 }, radiusKm: 30 } });
  const run = manager.runOf(sim.id)!;
  await waitFor('provisioning', () => run.progress.provisioned === DEVICES);
  const provisionS = (Date.now() - t0) / 1000;
  // Let the first full interval pass so every slot is in its steady state.
  await sleep(INTERVAL_MS);

  const lags: number[] = [];
  let readings = 0;
  const unsubscribe = events.subscribe((e) => {
    if (e.kind !== 'observations') return;
    const now = Date.now();
    for (const o of e.observations) {
      lags.push(now - Date.parse(o.timestamp));
      readings++;
    }
  });
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const before = (await manager.get(account, sim.id)).observationsProduced;
  const cpu0 = process.cpuUsage();
  const w0 = performance.now();
  await sleep(SECONDS * 1000);
  const wall = (performance.now() - w0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  loop.disable();
  unsubscribe();
  const after = (await manager.get(account, sim.id)).observationsProduced;
  await manager.stop(account, sim.id);
  await manager.close();
  await store.close();
  lags.sort((a, b) => a - b);
  return {
    provisionS,
    wall,
    cores: (cpu.user + cpu.system) / 1e6 / wall,
    written: after - before,
    rate: (after - before) / wall,
    events: readings,
    lagP50: percentile(lags, 50),
    lagP99: percentile(lags, 99),
    lagMax: lags[lags.length - 1] ?? NaN,
    loopP99: loop.percentile(99) / 1e6,
    loopMax: loop.max / 1e6,
  };
}

async function backfill(dir: string) {
  const { store, account } = await openStore(dir);
  const events = new LocalEventBus();
  // The live clock is pinned at the start, so the live part writes nothing and the backfill is
  // measured alone (it runs beside live readings in service).
  const pinned = Date.now();
  const manager = new SimulationManager({ store, events, log, now: () => pinned });
  await manager.start();
  const perDevice = Math.ceil(BACKFILL / DEVICES);
  const t0 = performance.now();
  const sim = await manager.create(account, {
    devices: DEVICES,
    interval: `${INTERVAL_MS}ms`,
    backfill: perDevice * INTERVAL_MS,
    seed: 'bench-backfill',
  });
  const run = manager.runOf(sim.id)!;
  await waitFor('provisioning', () => run.progress.provisioned === DEVICES);
  const t1 = performance.now();
  const cpu0 = process.cpuUsage();
  let lastShown = 0;
  await waitFor(
    'backfill',
    () => {
      if (process.stderr.isTTY && performance.now() - lastShown > 1000) {
        lastShown = performance.now();
        const done = run.progress.backfillCursor - (Date.parse(sim.startedAt) - perDevice * INTERVAL_MS);
        process.stderr.write(`\r  backfill ${((done / (perDevice * INTERVAL_MS)) * 100).toFixed(0)}%`);
      }
      return !run.backfilling;
    },
    3_600_000,
  );
  const t2 = performance.now();
  const cpu = process.cpuUsage(cpu0);
  if (process.stderr.isTTY) process.stderr.write('\r\x1b[K');
  const total = sim.backfill!.total;
  const seconds = (t2 - t1) / 1000;
  await manager.stop(account, sim.id);
  await manager.close();

  // The store alone: the same shape of batches (1,000 readings per call), built beforehand.
  const ids: string[] = [];
  const baseDevices = Math.max(1, Math.ceil(BASELINE / perDevice));
  for (let i = 0; i < baseDevices; i++) {
    const id = crypto.randomUUID();
    ids.push(id);
    await store.createDevice({ id, tenantId: account.tenantId, groupId: account.groupId, solution: 'StudioSimulation', deviceType: 'VirtualDevice', domainInfo: {} });
  }
  const batches: ObservationRecord[][] = [];
  for (let i = 0; i < baseDevices; i++) {
    const b: ObservationRecord[] = new Array(perDevice);
    for (let k = 0; k < perDevice; k++) b[k] = { ts: 1_700_000_000_000 + k * INTERVAL_MS, temperature: 15 + ((i * 7 + k) % 1000) / 100, extra: null };
    batches.push(b);
  }
  const b0 = performance.now();
  let stored = 0;
  for (let i = 0; i < baseDevices; i++) stored += (await store.insertObservations(ids[i]!, batchOf(batches[i]!))).written;
  const baseSeconds = (performance.now() - b0) / 1000;
  const dbBytes = fs.statSync(path.join(dir, 'reef.db')).size;
  await store.close();
  return {
    provisionS: (t1 - t0) / 1000,
    total,
    seconds,
    rate: total / seconds,
    cores: (cpu.user + cpu.system) / 1e6 / seconds,
    baseline: stored / baseSeconds,
    baselineN: stored,
    perDevice,
    dbBytes,
  };
}

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-bench-sim-'));
try {
  console.log(`bench:sim — SQLite (synchronous=FULL, WAL) in ${os.tmpdir()}, Node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'})`);
  console.log(`\n1. Live: ${fmt(DEVICES)} devices every ${INTERVAL_MS / 1000} s (${fmt((DEVICES * 1000) / INTERVAL_MS)} readings/s) for ${SECONDS} s`);
  const l = await live(path.join(root, 'live'));
  console.log(`   provisioning ${fmt(DEVICES)} devices: ${l.provisionS.toFixed(1)} s`);
  console.log(`   readings written: ${fmt(l.written)} in ${l.wall.toFixed(1)} s = ${fmt(l.rate)}/s (events received: ${fmt(l.events)})`);
  console.log(`   CPU: ${l.cores.toFixed(3)} cores (target < 0.5)  ${l.cores < 0.5 ? 'OK' : 'OVER'}`);
  console.log(`   lag, reading timestamp → event: p50 ${l.lagP50} ms, p99 ${l.lagP99} ms, max ${l.lagMax} ms`);
  console.log(`   event-loop delay: p99 ${l.loopP99.toFixed(1)} ms, max ${l.loopMax.toFixed(1)} ms`);

  console.log(`\n2. Backfill: ${fmt(DEVICES)} devices × ${fmt(Math.ceil(BACKFILL / DEVICES))} readings`);
  const b = await backfill(path.join(root, 'backfill'));
  console.log(`   provisioning: ${b.provisionS.toFixed(1)} s`);
  console.log(
    `   backfill: ${fmt(b.total)} readings in ${b.seconds.toFixed(1)} s = ${fmt(b.rate)} readings/s (target ≥ 100,000)  ${b.rate >= 100_000 ? 'OK' : 'UNDER'}; CPU ${b.cores.toFixed(2)} cores`,
  );
  console.log(`   store alone (insertObservations, ${fmt(b.perDevice)} per call, ready-made): ${fmt(b.baselineN)} in ${(b.baselineN / b.baseline).toFixed(1)} s = ${fmt(b.baseline)} readings/s`);
  console.log(`   ratio backfill / store alone: ${(b.rate / b.baseline).toFixed(2)}`);
  console.log(`   database file: ${(b.dbBytes / 1e9).toFixed(2)} GB`);
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
