// npm run bench:peers — Reef against the time-series database its users would pick instead
// (InfluxDB 1.6, Debian's `influxdb` package, default settings), on the same machine in one run.
// The same observations (default 1,000,000 of 1,000 devices) go through both:
//   InfluxDB: line protocol, --batch points per POST /write (precision ms), --concurrency in flight;
//   Reef:     JSON with ISO timestamps (written by the SDK's uploadBody), --batch per POST
//             .../observations, --concurrency in flight;
// alternated, once with every body built before the clock starts (the servers alone) and once with
// each client encoding its own wire format inside the timed window (what a user comparing the two
// sees: the client's CPU is taken from the same two cores). Then one device's newest 1,000 and the
// latest of every device on each, interleaved request by request. Prints each figure, the ratio
// Reef / InfluxDB, and each server's CPU time per observation (/proc/PID/stat: user and kernel).
// InfluxDB runs as a private process: its own config, a temporary data directory, HTTP and RPC on
// free loopback ports — never the system service. `--influx URL` uses one already running instead.
// With --rounds N (default 3) the four ingest runs are repeated N times, each round alternated the
// same way; each round's ratio is printed and the target is judged on the median ratio (one window
// of a shared machine moves by a quarter from one to the next, mostly on InfluxDB's side).
// Before any timed window, --warm N (default 5) untimed passes of one batch per device go through
// each server, each pass followed by a few reads: a Node server fresh from start-up runs its code in
// V8's baseline tiers and compiles it meanwhile (Reef's CPU per observation fell for four to five
// passes, and its first read responses deoptimized the upload path), and a server in use runs warm.
//   --observations N  --devices N  --batch N  --concurrency N  --queries N  --rounds N  --warm N  --influx URL
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { uploadBody } from '../src/sdk/index.ts';
import { agent, arg, fmt, freePort, ingestPlan, latency, machine, median, reefCli, request, serve, threadCpu, threadSplit, type IngestBatch, type Served } from './lib.ts';

const TOTAL = Number(arg('observations', '1000000'));
const DEVICES = Number(arg('devices', '1000'));
const BATCH = Number(arg('batch', '1000'));
const CONCURRENCY = Number(arg('concurrency', '4'));
const QUERIES = Number(arg('queries', '300'));
const ROUNDS = Number(arg('rounds', '3'));
const WARM = Number(arg('warm', '5'));
const DAY = 86_400_000;

/** CPU seconds (user + system) a process has used so far. */
function cpuSeconds(pid: number): number {
  const [user, system] = cpuSplit(pid);
  return user + system;
}
/** CPU seconds a process has used so far: [user, system (the kernel on its behalf)]. */
function cpuSplit(pid: number): [number, number] {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return [Number(f[11]) / 100, Number(f[12]) / 100]; // utime, stime in clock ticks (USER_HZ = 100)
}

interface Influx {
  url: string;
  pid: number | null;
  stop(): Promise<void>;
}

async function startInflux(): Promise<Influx> {
  const given = arg('influx', '');
  if (given) return { url: given, pid: null, stop: async () => {} };
  if (spawnSync('sh', ['-c', 'command -v influxd']).status !== 0) {
    console.log('influxd not found: apt-get install -y influxdb');
    const r = spawnSync('apt-get', ['install', '-y', 'influxdb'], { stdio: 'inherit' });
    if (r.status !== 0) throw new Error('could not install influxdb (Debian package); install it or pass --influx URL');
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-bench-influx-'));
  const [httpPort, rpcPort] = [await freePort(), await freePort()];
  // Only what must differ from the defaults: where the data goes and which loopback ports.
  fs.writeFileSync(
    path.join(dir, 'influxdb.conf'),
    `reporting-disabled = true
bind-address = "127.0.0.1:${rpcPort}"
[meta]
  dir = "${dir}/meta"
[data]
  dir = "${dir}/data"
  wal-dir = "${dir}/wal"
[http]
  bind-address = "127.0.0.1:${httpPort}"
`,
  );
  const child: ChildProcess = spawn('influxd', ['-config', path.join(dir, 'influxdb.conf')], { stdio: ['ignore', 'ignore', fs.openSync(path.join(dir, 'influxd.log'), 'a')] });
  const url = `http://127.0.0.1:${httpPort}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`influxd exited: see ${dir}/influxd.log`);
    try {
      if ((await request(`${url}/ping`)).status === 204) break;
    } catch {}
    if (i > 400) throw new Error('influxd did not answer /ping in 20 s');
    await new Promise((r) => setTimeout(r, 50));
  }
  const v = (await request(`${url}/ping`)).headers['x-influxdb-version'];
  console.log(`InfluxDB ${v} on ${url} (private, data in ${dir})`);
  return {
    url,
    pid: child.pid!,
    stop: () =>
      new Promise<void>((resolve) => {
        const done = () => {
          fs.rmSync(dir, { recursive: true, force: true });
          resolve();
        };
        if (child.exitCode !== null) return done();
        child.once('exit', done);
        child.kill('SIGTERM');
      }),
  };
}

const lineBody = (b: IngestBatch) => {
  let s = '';
  for (const r of b.rows) s += `obs,device=dev${b.device} temperature=${r.temperature} ${r.ts}\n`;
  return s;
};
// Each client encodes with what its users would: Reef's SDK writes the upload (uploadBody, what
// ReefClient.uploadBatch sends), InfluxDB's line protocol is a template string per point.
const jsonBody = (b: IngestBatch) => {
  const bytes = uploadBody(b.rows.map((r) => ({ timestamp: r.ts, temperature: r.temperature })));
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength); // a view: the same bytes, sent as they are
};

interface Target {
  name: string;
  pid: number | null;
  path(b: IngestBatch): string;
  headers: Record<string, string>;
  encode(b: IngestBatch): string | Buffer;
  ok: number;
}

/**
 * Waits until neither server uses more than 5 % of a core (InfluxDB compacts and snapshots its
 * cache after a write burst; SQLite checkpoints), at most 60 s, so that each run is measured
 * without the other's after-work. Returns the seconds waited.
 */
async function quiet(pids: number[]): Promise<number> {
  const t0 = performance.now();
  while (performance.now() - t0 < 60_000) {
    const a = pids.map(cpuSeconds);
    await new Promise((r) => setTimeout(r, 1000));
    if (pids.every((p, i) => cpuSeconds(p) - a[i]! < 0.05)) break;
  }
  return (performance.now() - t0) / 1000;
}

/** Uploads every batch with `CONCURRENCY` in flight; bodies ready-made or encoded inside the window. */
async function ingest(t: Target, plan: IngestBatch[], prebuilt: boolean) {
  const ready = prebuilt ? plan.map((b) => Buffer.from(t.encode(b))) : null;
  const cpu0 = t.pid ? cpuSplit(t.pid) : [0, 0];
  const threads0 = t.pid ? threadCpu(t.pid) : new Map<string, number>();
  const client0 = process.cpuUsage();
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < plan.length) {
        const k = next++;
        const b = plan[k]!;
        const r = await request(t.path(b), { method: 'POST', headers: t.headers, body: ready ? ready[k]! : t.encode(b) });
        if (r.status !== t.ok) throw new Error(`${t.name} write failed: ${r.status} ${r.body.slice(0, 300)}`);
      }
    }),
  );
  const secs = (performance.now() - start) / 1000;
  const c = process.cpuUsage(client0);
  const n = plan.reduce((s, b) => s + b.rows.length, 0);
  const cpu = t.pid ? cpuSplit(t.pid) : [NaN, NaN];
  const userUs = ((cpu[0]! - cpu0[0]!) * 1e6) / n;
  const kernelUs = ((cpu[1]! - cpu0[1]!) * 1e6) / n;
  const threads = t.pid ? threadSplit(threads0, threadCpu(t.pid), n) : '';
  return { rate: n / secs, secs, serverUsPerObs: userUs + kernelUs, serverUserUs: userUs, serverKernelUs: kernelUs, clientUsPerObs: (c.user + c.system) / n, threads };
}

console.log(`bench:peers — ${fmt(TOTAL)} observations of ${fmt(DEVICES)} devices, ${fmt(BATCH)} per request, ${CONCURRENCY} in flight: Reef vs InfluxDB`);
console.log(
  `machine: ${machine()}; load average ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);

const influx = await startInflux();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-bench-peers-'));
let reef: Served | null = null;
try {
  const db = `reef_bench_${process.pid}`;
  const created = await request(`${influx.url}/query?q=${encodeURIComponent(`CREATE DATABASE ${db}`)}`, { method: 'POST' });
  if (created.status !== 200) throw new Error(`CREATE DATABASE: ${created.status} ${created.body}`);

  const creds = JSON.parse(reefCli(['account', 'create', '--name', 'bench', '--json', '--data-dir', dir]));
  reef = await serve({ REEF_DATA_DIR: dir });
  const reefPid = reef.child.pid ?? null;
  const tok = JSON.parse((await request(`${reef.url}/api/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(creds) })).body).accessToken as string;
  const ids: string[] = [];
  for (let i = 0; i < DEVICES; i++) {
    const r = await request(`${reef.url}/api/solutions/StudioSimulation/devices`, {
      method: 'POST',
      headers: { authorization: tok, 'content-type': 'application/json' },
      body: JSON.stringify({ deviceType: 'VirtualDevice', domainInfo: { location: { latitude: 45, longitude: 7 } } }),
    });
    ids.push(JSON.parse(r.body).id);
  }

  const reefUrl = reef.url;
  const targets: Record<'influx' | 'reef', Target> = {
    influx: { name: 'InfluxDB', pid: influx.pid, path: () => `${influx.url}/write?db=${db}&precision=ms`, headers: { 'content-type': 'text/plain' }, encode: lineBody, ok: 204 },
    reef: {
      name: 'Reef',
      pid: reef.child.pid!,
      path: (b) => `${reefUrl}/api/solutions/StudioSimulation/devices/${ids[b.device]}/observations`,
      headers: { authorization: tok, 'content-type': 'application/json' },
      encode: jsonBody,
      ok: 201,
    },
  };

  // Each run writes the same shape of data into its own time range (new points, not overwrites),
  // in the order InfluxDB, Reef, Reef, InfluxDB so that drift in the machine's load cancels out.
  const runs: { who: 'influx' | 'reef'; prebuilt: boolean }[] = [
    { who: 'influx', prebuilt: true },
    { who: 'reef', prebuilt: true },
    { who: 'reef', prebuilt: false },
    { who: 'influx', prebuilt: false },
  ];
  let k = 0;
  const pick = () => (k++ * 7919) % DEVICES;
  const influxQuery = async (q: string, rows: number | null) => {
    const r = await request(`${influx.url}/query?db=${db}&q=${encodeURIComponent(q)}`);
    if (r.status !== 200) throw new Error(`InfluxDB query: ${r.status} ${r.body.slice(0, 300)}`);
    if (rows !== null) {
      const got = JSON.parse(r.body).results[0].series?.[0]?.values?.length ?? 0;
      if (got !== rows) throw new Error(`InfluxDB returned ${got} rows, expected ${rows}`);
    }
  };
  const reefGet = async (p: string) => {
    const r = await request(`${reefUrl}${p}`, { headers: { authorization: tok } });
    if (r.status !== 200) throw new Error(`Reef ${p}: ${r.status} ${r.body.slice(0, 300)}`);
    return r.body;
  };
  // The reads timed below (and a few in each warm-up pass): one device's newest 1,000, and the
  // latest of every device. `rows`: how many InfluxDB must return (null: unchecked).
  const influxNewest = (rows: number | null = null) => influxQuery(`SELECT temperature FROM obs WHERE device='dev${pick()}' ORDER BY time DESC LIMIT 1000`, rows);
  const reefNewest = () => reefGet(`/api/solutions/StudioSimulation/devices/${ids[pick()]}/observations?limit=1000`);
  const influxLatest = () => influxQuery('SELECT last(temperature) FROM obs GROUP BY device', null);
  const reefLatest = () => reefGet('/api/solutions/StudioSimulation/observations');
  // Warm-up, not timed: WARM passes of one batch per device on each, each pass a month after the
  // last (InfluxDB creates its 1,000 series and a shard, as Reef's devices already exist; both
  // JITs and caches warm up), each pass followed by a few of the reads timed later: a server in
  // use answers both, and code that first meets a read's responses after it was compiled for
  // uploads only is thrown away and compiled again (V8's deoptimizations, "wrong map").
  for (let w = 0; w < WARM; w++) {
    const warm = ingestPlan(DEVICES * BATCH, DEVICES, BATCH, Date.UTC(2024, w, 1));
    const line: string[] = [];
    for (const who of ['influx', 'reef'] as const) {
      const r = await ingest(targets[who], warm, true);
      line.push(`${targets[who].name} ${fmt(r.rate)} /s, server CPU ${fmt(r.serverUsPerObs, 2)} µs/obs`);
    }
    for (let q = 0; q < 20; q++) {
      await influxNewest();
      await reefNewest();
    }
    await influxLatest();
    await reefLatest();
    console.log(`  warm-up pass ${w + 1} of ${WARM} (untimed for the targets): ${line.join('; ')}`);
  }
  // Reads, after the first round (the stores then hold what a single round leaves: the same data
  // for every --rounds), interleaved request by request so both see the same machine.
  const reads = async () => {
    await influxNewest(1000);
    if (JSON.parse(await reefNewest()).observations.length !== 1000) throw new Error('Reef returned a short page');
    const readPids: [number | null, number | null] = [influx.pid, reefPid];
    const newest = await interleaved(
      () => influxNewest(),
      async () => void (await reefNewest()),
      QUERIES,
      readPids,
    );
    console.log(
      `one device's newest 1,000: Reef p50 ${fmt(newest.b.p50, 2)} ms (p99 ${fmt(newest.b.p99, 2)}), InfluxDB p50 ${fmt(newest.a.p50, 2)} ms (p99 ${fmt(newest.a.p99, 2)}) → ratio ${fmt(newest.b.p50 / newest.a.p50, 2)}  (target ≤ 0.5: ${newest.b.p50 / newest.a.p50 <= 0.5 ? 'met' : 'NOT met'}); server CPU per request ${fmt(newest.b.cpuMs, 2)} vs ${fmt(newest.a.cpuMs, 2)} ms → ${fmt(newest.b.cpuMs / newest.a.cpuMs, 2)}`,
    );
    const all = await interleaved(influxLatest, async () => void (await reefLatest()), Math.max(10, Math.round(QUERIES / 10)), readPids);
    console.log(
      `latest of all ${fmt(DEVICES)} devices: Reef p50 ${fmt(all.b.p50, 2)} ms (p99 ${fmt(all.b.p99, 2)}), InfluxDB p50 ${fmt(all.a.p50, 2)} ms (p99 ${fmt(all.a.p99, 2)}) → ratio ${fmt(all.b.p50 / all.a.p50, 2)}; server CPU per request ${fmt(all.b.cpuMs, 2)} vs ${fmt(all.a.cpuMs, 2)} ms`,
    );
  };
  const results: Record<string, Awaited<ReturnType<typeof ingest>>[]> = {};
  for (let i = 0; i < ROUNDS * runs.length; i++) {
    const run = runs[i % runs.length]!;
    if (ROUNDS > 1 && i % runs.length === 0) console.log(`  round ${i / runs.length + 1} of ${ROUNDS}`);
    const plan = ingestPlan(TOTAL, DEVICES, BATCH, Date.UTC(2025, 0, 1) + i * 400 * DAY);
    const waited = await quiet([influx.pid, reef.child.pid].filter((p): p is number => p !== null && p !== undefined));
    const other = targets[run.who === 'reef' ? 'influx' : 'reef'].pid;
    const otherCpu0 = other ? cpuSeconds(other) : 0;
    const r = await ingest(targets[run.who], plan, run.prebuilt);
    const otherCpu = other ? cpuSeconds(other) - otherCpu0 : NaN;
    (results[`${run.who}/${run.prebuilt}`] ??= []).push(r);
    console.log(
      `  ${targets[run.who].name.padEnd(8)} ${run.prebuilt ? 'bodies built before the clock' : 'client encodes in the window '}: ${fmt(r.rate).padStart(9)} obs/s (${fmt(r.secs, 2)} s; server CPU ${fmt(r.serverUsPerObs, 2)} µs/obs (user ${fmt(r.serverUserUs, 2)}, kernel ${fmt(r.serverKernelUs, 2)}), client CPU ${fmt(r.clientUsPerObs, 2)} µs/obs; waited ${fmt(waited, 0)} s for quiet, the other server used ${fmt(otherCpu, 2)} CPU s meanwhile)${r.threads ? `\n           server threads, µs/obs: ${r.threads}` : ''}`,
    );
    if (i === runs.length - 1) await reads();
  }
  for (const prebuilt of [true, false]) {
    const a = results[`reef/${prebuilt}`]!,
      b = results[`influx/${prebuilt}`]!;
    // Each round's ratio is of its own two windows, alternated within the round.
    const ratios = a.map((r, i) => r.rate / b[i]!.rate);
    const ratio = median(ratios);
    const each = ROUNDS > 1 ? `median of ${ROUNDS} rounds (${ratios.map((x) => fmt(x, 2)).join(', ')})` : 'ratio';
    console.log(
      `ingest, ${prebuilt ? 'bodies built before the clock' : 'client encodes in the window '}: Reef ${fmt(median(a.map((r) => r.rate)))} obs/s, InfluxDB ${fmt(median(b.map((r) => r.rate)))} pts/s → ${each} ${fmt(ratio, 2)}  (target ≥ 2: ${ratio >= 2 ? 'met' : 'NOT met'}); server CPU per observation ${fmt(median(a.map((r) => r.serverUsPerObs)), 2)} vs ${fmt(median(b.map((r) => r.serverUsPerObs)), 2)} µs`,
    );
  }
} finally {
  await reef?.stop();
  await influx.stop();
  agent.destroy();
  fs.rmSync(dir, { recursive: true, force: true });
}

/**
 * Two request kinds sampled alternately, `n` each after a warm-up: p50/p99 of each, and the CPU
 * time each server process (pids[0] answers `a`, pids[1] `b`) used per request over the samples.
 */
async function interleaved(a: () => Promise<void>, b: () => Promise<void>, n: number, pids: [number | null, number | null]) {
  await latency(a, 0, 10);
  await latency(b, 0, 10);
  const xa: number[] = [],
    xb: number[] = [];
  // (NaN for a server not started here, e.g. --influx URL.)
  const cpu = (pid: number | null) => (pid === null ? Number.NaN : cpuSeconds(pid));
  const cpu0 = pids.map(cpu);
  for (let i = 0; i < n; i++) {
    for (const [f, xs] of [
      [a, xa],
      [b, xb],
    ] as const) {
      const t = performance.now();
      await f();
      xs.push(performance.now() - t);
    }
  }
  const cpuMs = pids.map((pid, i) => ((cpu(pid) - cpu0[i]!) / n) * 1000);
  const p = (xs: number[], q: number) => xs.sort((x, y) => x - y)[Math.min(xs.length - 1, Math.floor((q / 100) * xs.length))]!;
  return { a: { p50: p(xa, 50), p99: p(xa, 99), cpuMs: cpuMs[0]! }, b: { p50: p(xb, 50), p99: p(xb, 99), cpuMs: cpuMs[1]! } };
}
