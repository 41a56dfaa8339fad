// npm run bench:instructions — CPU instructions the server spends per uploaded observation, counted
// by valgrind's callgrind (this machine's perf has no hardware counters): stable on a noisy shared
// machine where times are not (issue 18). A real `reef serve` runs under callgrind; after the
// devices exist and a warm-up upload, the counters are zeroed (callgrind_control -z), the measured
// uploads run (bench:ingest's plan, bodies built beforehand, --concurrency in flight), and the
// counters are dumped: the total counts every thread of the server process (main, libuv, V8).
//   --keep FILE (the callgrind dump)  --observations N (default 20,000)  --warmup N (default: as many)  --devices N  --batch N  --concurrency N
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { arg, fmt, ingestPlan, reefCli, request, serve } from './lib.ts';

const TOTAL = Number(arg('observations', '20000'));
const DEVICES = Number(arg('devices', '100'));
const BATCH = Number(arg('batch', '1000'));
const CONCURRENCY = Number(arg('concurrency', '4'));
const WARMUP = Number(arg('warmup', String(TOTAL)));

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-bench-instr-'));
const out = path.join(dir, 'callgrind.out');
const creds = JSON.parse(reefCli(['account', 'create', '--name', 'bench', '--json', '--data-dir', dir]));
const server = await serve({ REEF_DATA_DIR: dir }, [], ['valgrind', '--tool=callgrind', '--smc-check=all-non-file', `--callgrind-out-file=${out}`, '--dump-instr=no']);
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
  execFileSync('callgrind_control', ['-z', String(pid)]);
  await post(measured);
  execFileSync('callgrind_control', ['-d', String(pid)]);
  const dumps = fs
    .readdirSync(dir)
    .filter((f) => f.startsWith('callgrind.out'))
    .map((f) => path.join(dir, f))
    .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
  const text = fs.readFileSync(dumps[0]!, 'utf8');
  const m = /^(?:summary|totals): (\d+)/m.exec(text);
  if (!m) throw new Error(`no totals in ${dumps[0]}`);
  const ir = Number(m[1]);
  // --keep FILE: the dump, for callgrind_annotate (which functions the instructions went to).
  const keep = arg('keep', '');
  if (keep) fs.copyFileSync(dumps[0]!, keep);
  console.log(`bench:instructions — ${fmt(TOTAL)} observations after ${fmt(WARMUP)} to warm up, ${fmt(BATCH)} per request, ${CONCURRENCY} in flight, server under callgrind`);
  console.log(`server instructions: ${fmt(ir)} → ${fmt(ir / TOTAL)} per observation`);
} finally {
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}
