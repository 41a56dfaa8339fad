// npm run bench:instructions — CPU instructions the server spends per uploaded observation, counted
// by valgrind's callgrind (this machine's perf has no hardware counters): stable on a noisy shared
// machine where times are not. A real `reef serve` runs under callgrind; after the
// devices exist and a warm-up upload, the counters are zeroed (callgrind_control -z), the measured
// uploads run (bench:ingest's plan, bodies built beforehand, --concurrency in flight), and the
// counters are dumped: the total counts every thread of the server process (main, libuv, V8).
// Then, counted the same way, --reads one-device pages (the newest --read-limit, one request at a
// time, devices in turn, after as many to warm up): instructions per read request.
//   --keep FILE (the callgrind dump)  --observations N (default 20,000)  --warmup N (default: as many)  --devices N  --batch N  --concurrency N
//   --reads N (default 200; 0: none)  --read-limit N (default 1,000)
//   --store postgres: the server on a throw-away PostgreSQL database (test/helpers/pg.ts) instead
//   of SQLite; only the server's instructions are counted, not PostgreSQL's.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase } from '../test/helpers/pg.ts';
import { arg, callgrindTotal, fmt, ingestPlan, reefCli, request, serve } from './lib.ts';

const TOTAL = Number(arg('observations', '20000'));
const DEVICES = Number(arg('devices', '100'));
const BATCH = Number(arg('batch', '1000'));
const CONCURRENCY = Number(arg('concurrency', '4'));
const WARMUP = Number(arg('warmup', String(TOTAL)));
const READS = Number(arg('reads', '200'));
const READ_LIMIT = Number(arg('read-limit', '1000'));
const STORE = arg('store', 'sqlite');
if (STORE !== 'sqlite' && STORE !== 'postgres') {
  console.error(`--store ${STORE}: sqlite or postgres`);
  process.exit(2);
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-bench-instr-'));
const out = path.join(dir, 'callgrind.out');
const db = STORE === 'postgres' ? await createTestDatabase('reef_bench') : null;
const env: Record<string, string> = db ? { REEF_DATABASE_URL: db.url } : { REEF_DATA_DIR: dir };
const creds = JSON.parse(reefCli(['account', 'create', '--name', 'bench', '--json'], env));
const server = await serve(env, [], ['valgrind', '--tool=callgrind', '--smc-check=all-non-file', `--callgrind-out-file=${out}`, '--dump-instr=no']);
try {
  const pid = server.child.pid!;
  const tok = JSON.parse((await request(`${server.url}/api/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(creds) })).body).accessToken as string;
  const h = { authorization: tok, 'content-type': 'application/json' };
  const ids: string[] = [];
  for (let i = 0; i < DEVICES; i++) {
    const r = await request(`${server.url}/api/solutions/StudioSimulation/devices`, { method: 'POST', headers: h, body: JSON.stringify({ deviceType: 'VirtualDevice', domainInfo: {} }) });
    ids.push(JSON.parse(r.body).id);
  }
  const body = (b: { device: number; rows: { ts: number; temperature: number }[] }) => ({
    path: `${server.url}/api/solutions/StudioSimulation/devices/${ids[b.device]}/observations`,
    body: Buffer.from(JSON.stringify({ observations: b.rows.map((r) => ({ timestamp: new Date(r.ts).toISOString(), temperature: r.temperature })) })),
  });
  const post = async (bodies: { path: string; body: Buffer }[]) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < bodies.length) {
          const b = bodies[next++]!;
          const r = await request(b.path, { method: 'POST', headers: h, body: b.body });
          if (r.status !== 201) throw new Error(`upload failed: ${r.status} ${r.body}`);
        }
      }),
    );
  };
  // Warm-up in an earlier time range: the JIT has compiled the upload path before counting.
  await post(ingestPlan(WARMUP, DEVICES, BATCH, Date.UTC(2025, 0, 1)).map(body));
  const measured = ingestPlan(TOTAL, DEVICES, BATCH, Date.UTC(2026, 0, 1)).map(body);
  /** The server's instructions while `work` runs: counters zeroed before, dumped after. */
  const counted = async (work: () => Promise<void>, keep = '') => {
    execFileSync('callgrind_control', ['-z', String(pid)]);
    await work();
    execFileSync('callgrind_control', ['-d', String(pid)]);
    // --keep FILE: the dump, for callgrind_annotate.
    return callgrindTotal(dir, keep);
  };
  const ir = await counted(() => post(measured), arg('keep', ''));
  console.log(`bench:instructions — ${fmt(TOTAL)} observations after ${fmt(WARMUP)} to warm up, ${fmt(BATCH)} per request, ${CONCURRENCY} in flight, store ${STORE}, server under callgrind`);
  console.log(`server instructions: ${fmt(ir)} → ${fmt(ir / TOTAL)} per observation`);
  if (READS > 0) {
    // The devices the measured upload wrote to (batch k goes to device k % devices).
    const written = ids.slice(0, Math.min(DEVICES, measured.length));
    const rows = new Set<number>();
    const read = async (i: number) => {
      const r = await request(`${server.url}/api/solutions/StudioSimulation/devices/${written[i % written.length]}/observations?limit=${READ_LIMIT}`, { headers: { authorization: tok } });
      if (r.status !== 200) throw new Error(`read failed: ${r.status} ${r.body}`);
      rows.add((JSON.parse(r.body) as { observations: unknown[] }).observations.length);
    };
    for (let i = 0; i < READS; i++) await read(i);
    const reads = await counted(async () => {
      for (let i = 0; i < READS; i++) await read(i);
    });
    console.log(
      `one device's newest ${fmt(READ_LIMIT)} (${[...rows].map((n) => fmt(n)).join(' or ')} rows per page), ${fmt(READS)} requests after as many: ${fmt(reads / READS)} instructions per request`,
    );
  }
} finally {
  await server.stop();
  await db?.drop();
  fs.rmSync(dir, { recursive: true, force: true });
}
