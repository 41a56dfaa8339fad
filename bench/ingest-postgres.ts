// The PostgreSQL half of `npm run bench:ingest -- --store postgres [--nodes N]`: the same plan of
// batches uploaded over HTTP to N `reef serve` nodes on one throw-away database (each node with
// its own uploads in flight, as clients each connected to one node), then, in the same run, the same rows COPYed into the same table of a second
// throw-away database: PostgreSQL's own bulk-load rate, the storage limit. Also the store's own
// batch path without HTTP, to show where the time goes. Beside each rate: the CPU time per
// observation of the Reef node(s), of the PostgreSQL backends and of the load generator
// (/proc/PID/stat), steady on a shared machine where rates are not, and from it, on paper, what
// nodes on cores of their own would store.
import pg from 'pg';
import { PostgresStore } from '../src/store/postgres/postgres-store.ts';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { from as copyFrom } from 'pg-copy-streams';
import { periodEnd, periodStart, widthOf } from '../src/store/postgres/partitions.ts';
import { createTestDatabase, PG_ADMIN_URL, type TestDatabase } from '../test/helpers/pg.ts';
import { cpuBudget, cpuSeconds, median, reefCli, request, serve, threadCpu, threadSplit, type CpuBudget, type Served } from './lib.ts';
import { batchOf } from '../src/core/observation-batch.ts';

export interface PgBatch {
  device: number;
  rows: { ts: number; temperature: number }[];
}

/**
 * How much earlier each warm-up pass's rows are than the last's: 31 days, another month's partition
 * each time (a pass's rows span 17 minutes), and a dozen passes still within the five years that
 * partitions are made for on demand (ON_DEMAND_PAST_MS). With a year per pass, passes 5 and later
 * went to the default partition, and each partition made in the timed window then scanned it
 * (moving its rows of the new range, then attaching): two nodes, warmed by twice the passes, paid
 * for that in their window and one node did not.
 */
const WARM_SHIFT_MS = 31 * 86_400_000;

async function dbSize(url: string): Promise<number> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return Number((await c.query('SELECT pg_database_size(current_database()) AS n')).rows[0].n);
  } finally {
    await c.end();
  }
}

/** CPU seconds spent in a timed window: the Reef node(s), the PostgreSQL backends serving the database, this process (the load generator). */
export interface Cpu {
  nodes: number;
  postgres: number;
  client: number;
}

/**
 * Starts a timed window: a CHECKPOINT first (below), then reads /proc/PID/stat of the server
 * processes, of every backend connected to the database (pg_stat_activity) and of this process, at
 * start and stop. PostgreSQL's shared helpers (WAL writer, checkpointer) serve every database on the
 * machine and are not counted.
 */
async function cpuMeter(dbName: string, nodePids: number[]): Promise<{ stop(): Promise<Cpu> }> {
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  // Every timed window (COPY, the store path, HTTP on any number of nodes) starts just after a
  // checkpoint, untimed. PostgreSQL starts one whenever WAL has grown by about half of max_wal_size
  // (1 GB here; the machine's pg_stat_bgwriter counted 193 such against 11 by the clock), and after
  // it the first change to each page logs the whole page: a window that a checkpoint fell into paid
  // for it and the one beside it did not. The warm-up writes a node's 3M rows just before its
  // window, so which windows paid depended on the node count and on what ran before.
  await admin.query('CHECKPOINT');
  const backends = async () => (await admin.query('SELECT pid FROM pg_stat_activity WHERE datname = $1', [dbName])).rows.map((r) => r.pid as number);
  const before = new Map<number, number>();
  for (const pid of await backends()) before.set(pid, cpuSeconds(pid));
  const nodes0 = nodePids.reduce((a, p) => a + cpuSeconds(p), 0);
  const client0 = process.cpuUsage();
  return {
    async stop() {
      const c = process.cpuUsage(client0);
      const nodes = nodePids.reduce((a, p) => a + cpuSeconds(p), 0) - nodes0;
      let postgres = 0;
      try {
        for (const pid of await backends()) postgres += cpuSeconds(pid) - (before.get(pid) ?? 0);
      } finally {
        await admin.end();
      }
      return { nodes, postgres, client: (c.user + c.system) / 1e6 };
    },
  };
}

/** Makes the month partitions the plan needs (the HTTP path makes them on demand, as here). */
async function preparePartitions(store: PostgresStore, plan: PgBatch[]): Promise<void> {
  const starts = new Set<number>();
  for (const b of plan) for (const r of [b.rows[0]!, b.rows[b.rows.length - 1]!]) starts.add(periodStart(widthOf(0), r.ts));
  for (const s of starts) await store.pool.query('SELECT reef_ensure_partition(0, $1, $2)', [s, periodEnd(widthOf(0), s)]);
}

/** `nodeCpu`: each node on a CPU budget of that many cores of its own (bench/lib.ts cpuBudget). */
export async function overHttpPostgres(plan: PgBatch[], o: { devices: number; concurrency: number; nodes: number; warm: number; nodeCpu?: number }) {
  const db = await createTestDatabase('reef_bench');
  const env = { REEF_DATABASE_URL: db.url };
  const servers: Served[] = [];
  const budgets: CpuBudget[] = [];
  try {
    const creds = JSON.parse(reefCli(['account', 'create', '--name', 'bench', '--json'], env));
    for (let i = 0; i < o.nodes; i++) {
      const server = await serve(env);
      servers.push(server);
      if (o.nodeCpu) {
        const budget = cpuBudget(`node${i}`, o.nodeCpu);
        budgets.push(budget);
        budget.add(server.child.pid!);
      }
    }
    const tok = JSON.parse((await request(`${servers[0]!.url}/api/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(creds) })).body)
      .accessToken as string;
    const h = { authorization: tok, 'content-type': 'application/json' };
    const ids: string[] = [];
    for (let i = 0; i < o.devices; i++) {
      const r = await request(`${servers[i % servers.length]!.url}/api/solutions/StudioSimulation/devices`, {
        method: 'POST',
        headers: h,
        body: JSON.stringify({ deviceType: 'VirtualDevice', domainInfo: { location: { latitude: 45, longitude: 7 } } }),
      });
      ids.push(JSON.parse(r.body).id);
    }
    const bodiesOf = (batches: PgBatch[], shiftMs = 0) =>
      batches.map((b) => ({
        path: `/api/solutions/StudioSimulation/devices/${ids[b.device]}/observations`,
        body: Buffer.from(JSON.stringify({ observations: b.rows.map((r) => ({ timestamp: new Date(r.ts - shiftMs).toISOString(), temperature: r.temperature })) })),
      }));
    // Each node has `concurrency` uploads in flight of its own (worker w always posts to node
    // w mod n, as clients holding connections to one node each): with batches dealt to the nodes in
    // turn instead, a node slower for a moment held every worker waiting on it while the other idled.
    const upload = async (bodies: { path: string; body: Buffer }[]): Promise<void> => {
      let next = 0;
      await Promise.all(
        Array.from({ length: o.concurrency * o.nodes }, async (_, w) => {
          const node = servers[w % servers.length]!.url;
          while (next < bodies.length) {
            const b = bodies[next++]!;
            const r = await request(node + b.path, { method: 'POST', headers: h, body: b.body });
            if (r.status !== 201) throw new Error(`upload failed: ${r.status} ${r.body}`);
          }
        }),
      );
    };
    // Warm-up, not timed: every node takes `warm` passes' worth of one batch per device, each pass
    // 31 days earlier than the last (WARM_SHIFT_MS: other partitions, so the timed rows start on
    // empty ones as COPY's do). A node fresh from start-up runs its upload path in V8's baseline
    // tiers and compiles it meanwhile; a server runs warm. One pass was not enough: perf of the timed window
    // after it still found 22 % of the node's samples in V8's compiler threads, after three passes
    // 4 %, and the node's CPU per observation 24 % lower.
    // A pass is shared among the nodes, so n nodes take n times the passes: with `warm` passes in
    // all, each of two nodes had half a lone node's warm-up, and in the timed window its V8 helper
    // threads were still compiling (0.13–0.23 µs/obs against 0.03–0.04) and its main thread ran
    // slower code: two nodes spent 0.87–0.89 µs/obs together against one node's 0.38–0.46
    // (the event bus's sends switched off in both).
    for (let k = 1; k <= o.warm * o.nodes; k++) await upload(bodiesOf(plan.slice(0, o.devices), k * WARM_SHIFT_MS));
    const bodies = bodiesOf(plan);
    const meter = await cpuMeter(
      db.name,
      servers.map((s) => s.child.pid!),
    );
    const th0 = servers.map((s) => threadCpu(s.child.pid!));
    const t = performance.now();
    await upload(bodies);
    const secs = (performance.now() - t) / 1000;
    const cpu = await meter.stop();
    const nObs = plan.reduce((a, b) => a + b.rows.length, 0);
    // Each node's threads (/proc/PID/task), per observation of the whole plan: with n nodes each
    // handles 1/n of it, so a node as cheap per observation it handles shows 1/n of one node's figure.
    for (const [i, s] of servers.entries()) console.log(`    node ${i + 1} of ${servers.length}, threads µs/obs: ${threadSplit(th0[i]!, threadCpu(s.child.pid!), nObs)}`);
    return { secs, cpu, rss: Math.max(...servers.map((s) => s.peakRss())), bytes: await dbSize(db.url) };
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    for (const b of budgets) await b.remove();
    await db.drop();
  }
}

/** The same rows through PostgresStore.insertObservations (unnest upsert + latest), no HTTP. */
export async function throughStore(plan: PgBatch[], o: { devices: number; concurrency: number }) {
  const db = await createTestDatabase('reef_bench');
  const store = new PostgresStore({ connectionString: db.url });
  try {
    await store.migrate();
    for (let i = 0; i < o.devices; i++) await store.createDevice({ id: `d${i}`, tenantId: 'T', groupId: 'G', solution: 'S', deviceType: 'VirtualDevice', domainInfo: {} });
    const batches = plan.map((b) => ({ id: `d${b.device}`, rows: b.rows.map((r) => ({ ts: r.ts, temperature: r.temperature, extra: null })) }));
    let next = 0;
    const meter = await cpuMeter(db.name, []);
    const t = performance.now();
    await Promise.all(
      Array.from({ length: o.concurrency }, async () => {
        while (next < batches.length) {
          const b = batches[next++]!;
          await store.insertObservations(b.id, batchOf(b.rows));
        }
      }),
    );
    const secs = (performance.now() - t) / 1000;
    return { secs, cpu: await meter.stop() };
  } finally {
    await store.close();
    await db.drop();
  }
}

/** COPY of the same rows into the same (migrated, partitioned, indexed) table: the storage limit. */
export async function copyIntoPostgres(plan: PgBatch[], o: { devices: number }) {
  const db: TestDatabase = await createTestDatabase('reef_bench');
  const store = new PostgresStore({ connectionString: db.url });
  try {
    await store.migrate();
    for (let i = 0; i < o.devices; i++) await store.createDevice({ id: `d${i}`, tenantId: 'T', groupId: 'G', solution: 'S', deviceType: 'VirtualDevice', domainInfo: {} });
    await preparePartitions(store, plan);
    const chunks = plan.map((b) => {
      let s = '';
      for (const r of b.rows) s += `${b.device + 1}\t${r.ts}\t${r.temperature}\n`;
      return Buffer.from(s);
    });
    const c = await store.pool.connect();
    try {
      const meter = await cpuMeter(db.name, []);
      const t = performance.now();
      // COPY … FROM STDIN through pg-copy-streams (the documented way to stream COPY data on pg).
      const copy = c.query(copyFrom('COPY observations (device_pk, ts, temperature) FROM STDIN'));
      await pipeline(Readable.from(chunks), copy);
      const n = copy.rowCount;
      const secs = (performance.now() - t) / 1000;
      const cpu = await meter.stop();
      if (n !== plan.reduce((a, b) => a + b.rows.length, 0)) throw new Error(`COPY stored ${n} rows`);
      return { secs, cpu };
    } finally {
      c.release();
    }
  } finally {
    await store.close();
    await db.drop();
  }
}

const fmt = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });

/** CPU microseconds per observation, by party. */
function perObs(c: Cpu, total: number): string {
  const us = (x: number) => fmt((x * 1e6) / total, 2);
  return `CPU µs/obs: node ${us(c.nodes)}, postgres ${us(c.postgres)}, load generator ${us(c.client)}`;
}

/**
 * Prints the PostgreSQL figures of bench:ingest: COPY (storage limit), the store path, HTTP on 1..N
 * nodes. One node's uploads and COPY take turns for `rounds` rounds, COPY first and last, and each
 * round's ratio is taken against the faster of the COPY just before and just after it: on this
 * shared machine the same work's PostgreSQL cost moved from 2.2 to 3.6 µs per row within minutes,
 * so a single pair could land on either side of a slow
 * spell; the target is judged on the median round. The first COPY on a fresh server can be slowed
 * by cold caches (seen at 0.73 of the next), which the faster-of-two keeps out of the limit.
 */
export async function runPostgres(plan: PgBatch[], o: { total: number; devices: number; concurrency: number; nodes: number[]; rounds: number; warm: number; nodeCpu: number }): Promise<void> {
  const copyLine = (label: string, c: { secs: number; cpu: Cpu }) => {
    console.log(`${label}${fmt(o.total / c.secs)} obs/s  (${fmt(c.secs, 2)} s) — the storage limit (same partitioned, indexed table)`);
    console.log(`    ${perObs(c.cpu, o.total)}`);
  };
  const httpLine = (label: string, n: number, http: Awaited<ReturnType<typeof overHttpPostgres>>, limit: number, extra = '') => {
    const rate = o.total / http.secs;
    console.log(
      `${label}${fmt(rate)} obs/s  (${fmt(http.secs, 2)} s; ${o.concurrency * n} in flight; peak RSS per node ${fmt(http.rss / 2 ** 20)} MiB; db ${fmt(http.bytes / 2 ** 20)} MiB)  ratio to COPY ${fmt(rate / limit, 2)}${extra}`,
    );
    console.log(`    ${perObs(http.cpu, o.total)}${n > 1 ? ` (all ${n} nodes together)` : ''}`);
  };
  const nodes = (n: number) => `${n} node${n > 1 ? 's' : ''}`;
  const first = o.nodes[0]!;
  console.log(
    `${nodes(first)} and COPY taking turns, ${o.rounds} round${o.rounds > 1 ? 's' : ''}, each node warmed by ${o.warm} untimed pass${o.warm === 1 ? '' : 'es'}' worth of one batch per device; each ratio against the faster COPY beside it:`,
  );
  const copies = [await copyIntoPostgres(plan, o)];
  copyLine('  COPY into PostgreSQL:   ', copies[0]!);
  const ratios: number[] = [];
  const firstRuns: Awaited<ReturnType<typeof overHttpPostgres>>[] = [];
  for (let r = 0; r < o.rounds; r++) {
    const http = await overHttpPostgres(plan, { ...o, nodes: first, nodeCpu: 0 });
    const after = await copyIntoPostgres(plan, o);
    const limit = o.total / Math.min(copies[r]!.secs, after.secs);
    copies.push(after);
    ratios.push(o.total / http.secs / limit);
    firstRuns.push(http);
    httpLine(`  HTTP upload, ${nodes(first).padEnd(7)}:   `, first, http, limit);
    copyLine('  COPY into PostgreSQL:   ', after);
  }
  const copyRate = o.total / Math.min(...copies.map((c) => c.secs));
  const ratio = median(ratios);
  console.log(`  ratio HTTP / COPY by round: ${ratios.map((x) => fmt(x, 2)).join(', ')}; median ${fmt(ratio, 2)}`);
  if (first === 1) console.log(`  target HTTP ≥ 0.7 × COPY with one node (median round): ${ratio >= 0.7 ? 'met' : 'NOT met'}`);
  const direct = await throughStore(plan, o);
  console.log(`store batch path:       ${fmt(o.total / direct.secs)} obs/s  (${o.concurrency} in flight, no HTTP; ratio to the fastest COPY ${fmt(o.total / direct.secs / copyRate, 2)})`);
  console.log(`    ${perObs(direct.cpu, o.total)} (the store runs in the load generator here)`);
  // On paper, the first node count's CPU per observation is the mean over its rounds.
  const mean = (f: (c: Cpu) => number) => firstRuns.reduce((a, h) => a + f(h.cpu), 0) / firstRuns.length;
  const uploads: { n: number; cpu: Cpu }[] = [{ n: first, cpu: { nodes: mean((c) => c.nodes), postgres: mean((c) => c.postgres), client: mean((c) => c.client) } }];
  const one = median(firstRuns.map((h) => o.total / h.secs));
  for (const n of o.nodes.slice(1)) {
    const http = await overHttpPostgres(plan, { ...o, nodes: n, nodeCpu: 0 });
    uploads.push({ n, cpu: http.cpu });
    httpLine(`HTTP upload, ${nodes(n).padEnd(7)}:   `, n, http, copyRate, `, ×${fmt(o.total / http.secs / one, 2)} of ${nodes(first)} (median round)`);
  }
  const paper: string[] = [];
  for (const { n, cpu } of uploads) {
    // On paper, from this run's CPU cost per observation: with each node on a core of its own and
    // PostgreSQL on as many, the nodes (which share nothing but the database, each writing on
    // connections of its own) store min(n cores / node cost, n cores / PostgreSQL cost).
    const byNodes = n / (cpu.nodes / o.total);
    const byPostgres = n / (cpu.postgres / o.total);
    paper.push(
      `  ${nodes(n)}, each on a core of its own, PostgreSQL on ${n} core${n > 1 ? 's' : ''}: ${fmt(Math.min(byNodes, byPostgres))} obs/s (nodes could take ${fmt(byNodes)}, PostgreSQL store ${fmt(byPostgres)})`,
    );
  }
  console.log('on paper, from the measured CPU µs per observation (the cores here are shared by all parties):');
  for (const line of paper) console.log(line);
  if (!o.nodeCpu) return;
  // Measured rather than on paper: each node on a CPU budget of its own, small enough that one node
  // is the limit and PostgreSQL has the cores' rest. Node counts take turns, twice, so that a slow
  // spell of the shared machine does not fall on one count only.
  console.log(`each node on a CPU budget of ${o.nodeCpu} cores of its own (cgroup CPU bandwidth), node counts taking turns:`);
  const budgeted = new Map<number, number[]>(o.nodes.map((n) => [n, []]));
  for (let r = 0; r < 2; r++) {
    for (const n of o.nodes) {
      const http = await overHttpPostgres(plan, { ...o, nodes: n });
      budgeted.get(n)!.push(o.total / http.secs);
      console.log(`  ${nodes(n).padEnd(7)}: ${fmt(o.total / http.secs)} obs/s  (${fmt(http.secs, 2)} s)   ${perObs(http.cpu, o.total)}`);
    }
  }
  const base = median(budgeted.get(first)!);
  for (const n of o.nodes.slice(1)) console.log(`  ${nodes(n)} on ${o.nodeCpu} cores each: ×${fmt(median(budgeted.get(n)!) / base, 2)} of ${nodes(first)} (medians of two)`);
}
