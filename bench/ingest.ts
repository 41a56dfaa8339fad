// npm run bench:ingest — 1,000,000 observations for 1,000 devices, in batches of 1,000, uploaded
// over HTTP on loopback to a real `reef serve` child process; in the same run, the same rows
// inserted straight into SQLite with better-sqlite3 (same schema, same per-batch transaction and
// durability): the storage limit. Prints both rates and their ratio.
//   --observations N  --devices N  --batch N  --concurrency N  --store sqlite|postgres  [--nodes 1,2]
//   [--rounds N: PostgreSQL, one node's uploads and COPY taking turns, default 3]
//   [--warm N: PostgreSQL, every node first takes N untimed passes' worth of one batch per device, default 3]
//   [--node-cpu F: PostgreSQL, then each node count again with every node on a CPU budget of F cores
//    of its own (cgroup; needs root): two nodes on separate CPU budgets, measured]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { observationJson } from '../src/core/observation-json.ts';
import { MIGRATIONS } from '../src/store/sqlite/migrations.ts';
import { blockStatements, storeBatch } from '../src/store/sqlite/blocks.ts';
import { arg, fmt, ingestPlan, machine, reefCli, request, serve, threadCpu, threadSplit, type IngestBatch } from './lib.ts';

const TOTAL = Number(arg('observations', '1000000'));
const DEVICES = Number(arg('devices', '1000'));
const BATCH = Number(arg('batch', '1000'));
const CONCURRENCY = Number(arg('concurrency', '4'));
const STORE = arg('store', 'sqlite');
const T0 = Date.UTC(2026, 0, 1);

if (STORE !== 'sqlite' && STORE !== 'postgres') {
  console.error(`--store ${STORE}: sqlite or postgres`);
  process.exit(2);
}

type Batch = IngestBatch;
const batches = () => ingestPlan(TOTAL, DEVICES, BATCH, T0);

async function overHttp(plan: Batch[]) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-bench-ingest-'));
  const creds = JSON.parse(reefCli(['account', 'create', '--name', 'bench', '--json', '--data-dir', dir]));
  const server = await serve({ REEF_DATA_DIR: dir });
  try {
    const tok = JSON.parse((await request(`${server.url}/api/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(creds) })).body).accessToken as string;
    const h = { authorization: tok, 'content-type': 'application/json' };
    const ids: string[] = [];
    for (let i = 0; i < DEVICES; i++) {
      const r = await request(`${server.url}/api/solutions/StudioSimulation/devices`, {
        method: 'POST',
        headers: h,
        body: JSON.stringify({ deviceType: 'VirtualDevice', domainInfo: { location: { latitude: 45, longitude: 7 } } }),
      });
      ids.push(JSON.parse(r.body).id);
    }
    // Bodies are made before the clock starts: the bench measures the service, not JSON.stringify here.
    const bodies = plan.map((b) => ({
      path: `${server.url}/api/solutions/StudioSimulation/devices/${ids[b.device]}/observations`,
      body: Buffer.from(JSON.stringify({ observations: b.rows.map((r) => ({ timestamp: new Date(r.ts).toISOString(), temperature: r.temperature })) })),
    }));
    let next = 0;
    const threads0 = threadCpu(server.child.pid!);
    const t = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < bodies.length) {
          const b = bodies[next++]!;
          const r = await request(b.path, { method: 'POST', headers: h, body: b.body });
          if (r.status !== 201) throw new Error(`upload failed: ${r.status} ${r.body}`);
        }
      }),
    );
    const secs = (performance.now() - t) / 1000;
    const threads = threadSplit(threads0, threadCpu(server.child.pid!), TOTAL);
    return {
      secs,
      threads,
      rss: server.peakRss(),
      bytes: fs.statSync(path.join(dir, 'reef.db')).size + (fs.existsSync(path.join(dir, 'reef.db-wal')) ? fs.statSync(path.join(dir, 'reef.db-wal')).size : 0),
    };
  } finally {
    await server.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The storage limit: the same batches written straight into SQLite in one process, no HTTP, one
 * transaction per batch: as the store writes them (`blocks`: its block statements, blocks.ts), and
 * into a plain table of one row per observation keyed (device, time) with the multi-row upsert —
 * the layout before blocks, the fastest plain better-sqlite3 way we know for it.
 */
function straightIntoSqlite(plan: Batch[], layout: 'blocks' | 'rows') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-bench-raw-'));
  const db = new Database(path.join(dir, 'raw.db'));
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.function('reef_observation_json', (ts, t, extra) => observationJson({ ts: Number(ts), temperature: t === null ? null : Number(t), extra: extra ? JSON.parse(String(extra)) : null }));
    for (const m of MIGRATIONS) {
      db.exec(m.sql);
      m.run?.(db);
    }
    db.exec('CREATE TABLE observation_rows (device_pk INTEGER NOT NULL, ts INTEGER NOT NULL, temperature REAL, extra TEXT, PRIMARY KEY (device_pk, ts)) WITHOUT ROWID');
    const blocks = blockStatements(db);
    const insDev = db.prepare("INSERT INTO devices (id, tenant_id, group_id, solution, device_type, domain_info, created_at) VALUES (?, 'T', 'G', 'S', 'VirtualDevice', '{}', 0)");
    for (let i = 0; i < DEVICES; i++) insDev.run(`d${i}`);
    const up = db.prepare(
      `INSERT INTO observation_rows (device_pk, ts, temperature, extra) VALUES ${Array(100).fill('(?, ?, ?, NULL)').join(', ')} ON CONFLICT (device_pk, ts) DO UPDATE SET temperature = excluded.temperature, extra = excluded.extra`,
    );
    const tx = db.transaction((b: Batch) => {
      const pk = b.device + 1;
      const last = b.rows[b.rows.length - 1]!;
      const wire = observationJson({ ts: last.ts, temperature: last.temperature, extra: null });
      if (layout === 'blocks') {
        const ts = Float64Array.from(b.rows, (r) => r.ts);
        const temperature = Float64Array.from(b.rows, (r) => r.temperature);
        storeBatch(blocks, pk, { ts, temperature, extra: null, newest: b.rows.length - 1, wire });
      } else {
        for (let i = 0; i < b.rows.length; i += 100) {
          const args: number[] = [];
          for (const r of b.rows.slice(i, i + 100)) args.push(pk, r.ts, r.temperature);
          up.run(args);
        }
        // The latest row as the store keeps it (the same statement).
        blocks.latest.run({ pk, ts: last.ts, t: last.temperature, extra: null, wire });
      }
    });
    const t = performance.now();
    for (const b of plan) tx(b);
    return { secs: (performance.now() - t) / 1000 };
  } finally {
    db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (BATCH % 100 !== 0) throw new Error('--batch must be a multiple of 100');
const plan = batches();
console.log(`bench:ingest — ${fmt(TOTAL)} observations, ${fmt(DEVICES)} devices, batches of ${fmt(BATCH)}, ${CONCURRENCY} uploads in flight, store ${STORE}`);
console.log(`machine: ${machine()}`);
if (STORE === 'postgres') {
  // --nodes 1,2: HTTP on one node, then on two, each with its own uploads in flight (bench/ingest-postgres.ts).
  const { runPostgres } = await import('./ingest-postgres.ts');
  await runPostgres(plan, {
    total: TOTAL,
    devices: DEVICES,
    concurrency: CONCURRENCY,
    nodes: arg('nodes', '1,2').split(',').map(Number),
    rounds: Number(arg('rounds', '3')),
    warm: Number(arg('warm', '3')),
    nodeCpu: Number(arg('node-cpu', '0')),
  });
  process.exit(0);
}
const raw = straightIntoSqlite(plan, 'blocks');
const rows = straightIntoSqlite(plan, 'rows');
const http = await overHttp(plan);
const httpRate = TOTAL / http.secs;
const rawRate = TOTAL / raw.secs;
console.log(`HTTP upload:            ${fmt(httpRate)} obs/s  (${fmt(http.secs, 2)} s; server peak RSS ${fmt(http.rss / 2 ** 20)} MiB; db ${fmt(http.bytes / 2 ** 20)} MiB)`);
console.log(`server CPU µs/obs by thread: ${http.threads}`);
console.log(`straight into SQLite:   ${fmt(rawRate)} obs/s  (${fmt(raw.secs, 2)} s) — the storage limit (the store's blocks, no HTTP)`);
console.log(`  as one row each:      ${fmt(TOTAL / rows.secs)} obs/s  (${fmt(rows.secs, 2)} s) — a plain (device, time) table, the layout before blocks`);
console.log(`ratio HTTP / storage:   ${fmt(httpRate / rawRate, 2)}   (target: HTTP ≥ 100,000 obs/s: ${httpRate >= 100_000 ? 'met' : 'NOT met'})`);
