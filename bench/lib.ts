// Shared pieces of the benchmark scripts: start a real `reef serve` child process, drive HTTP load
// from this process over keep-alive connections, percentiles, peak RSS, and the machine line.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';

export const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
export const BIN = path.join(ROOT, 'bin', 'reef.js');
/** The node options in bin/reef.js's #! line (`#!/usr/bin/env -S node <options>`). */
export const NODE_FLAGS = (/^#!.*\bnode\b(.*)$/m.exec(fs.readFileSync(BIN, 'utf8').split('\n')[0]!)?.[1] ?? '').trim().split(/\s+/).filter(Boolean);

export function machine(): string {
  const cpu = os.cpus()[0]?.model ?? 'unknown cpu';
  return `${os.cpus().length} × ${cpu}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, ${os.platform()} ${os.release()}`;
}

export function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  if (i >= 0 && i + 1 < process.argv.length) return process.argv[i + 1]!;
  const eq = process.argv.find((a) => a.startsWith(`--${name}=`));
  return eq ? eq.slice(name.length + 3) : def;
}

export function reefCli(args: string[], env: Record<string, string> = {}): string {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, REEF_LOG_LEVEL: 'silent', ...env } });
  if (r.status !== 0) throw new Error(`reef ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

export interface Served {
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
  /** Peak resident set size of the server process, bytes (VmHWM). */
  peakRss(): number;
}

/** `wrap`: a command line the server runs under, e.g. valgrind (bench/instructions.ts). */
export async function serve(env: Record<string, string>, args: string[] = [], wrap: string[] = []): Promise<Served> {
  // BENCH_NODE_ARGS: options for the server's node, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
  // The node options the installed command runs with (bin/reef.js's #! line), then the bench's own.
  const cmd = [...wrap, process.execPath, ...NODE_FLAGS, ...(process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean)];
  const child = spawn(cmd[0]!, [...cmd.slice(1), BIN, 'serve', '--port', '0', '--demo', 'false', '--gateway', 'false', ...args], {
    env: { ...process.env, REEF_LOG_LEVEL: 'error', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (c) => (out += c));
  // BENCH_SERVER_LOG: a file that gets the server's standard output too (e.g. with --trace-gc).
  if (process.env.BENCH_SERVER_LOG) child.stdout!.pipe(fs.createWriteStream(process.env.BENCH_SERVER_LOG));
  while (!/Reef is running at (\S+)/.test(out)) {
    if (child.exitCode !== null) throw new Error('reef serve exited early');
    await new Promise((r) => setTimeout(r, 50));
  }
  const url = /Reef is running at (\S+)/.exec(out)![1]!;
  // BENCH_PID_FILE: where to write the server's process id, e.g. for `perf record -p`.
  if (process.env.BENCH_PID_FILE) fs.writeFileSync(process.env.BENCH_PID_FILE, String(child.pid));
  return {
    url,
    child,
    peakRss: () => peakRss(child.pid!),
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/**
 * The instruction total of the newest callgrind dump in `dir` (after `callgrind_control -d`);
 * `keep`: a copy of that dump, for callgrind_annotate (which functions the instructions went to).
 */
export function callgrindTotal(dir: string, keep = ''): number {
  const dumps = fs
    .readdirSync(dir)
    .filter((f) => f.startsWith('callgrind.out'))
    .map((f) => path.join(dir, f))
    .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
  const m = /^(?:summary|totals): (\d+)/m.exec(fs.readFileSync(dumps[0]!, 'utf8'));
  if (!m) throw new Error(`no totals in ${dumps[0]}`);
  if (keep) fs.copyFileSync(dumps[0]!, keep);
  return Number(m[1]);
}

/** CPU seconds a process has used so far, user and system apart (/proc/<pid>/stat utime, stime; USER_HZ = 100). */
export function cpuTimes(pid: number): { user: number; sys: number } {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: Number(f[11]) / 100, sys: Number(f[12]) / 100 };
}

export function peakRss(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /VmHWM:\s+(\d+) kB/.exec(status);
  return m ? Number(m[1]) * 1024 : 0;
}

/** CPU time (user + system) a process has used so far, seconds (/proc/PID/stat; 0 once it is gone). */
export function cpuSeconds(pid: number): number {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return 0;
  }
  // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / CLOCK_TICKS;
}

/**
 * CPU seconds of each thread of a process (/proc/PID/task/TID/stat), keyed "main" for the thread
 * whose id is the process's, else "<name>/<tid>" (Node names all its threads "node"; a worker
 * thread started on first use, like SQLite's writer, has the highest id): where a server's time
 * goes, e.g. the main thread against the writer thread against V8's compiler and GC threads.
 */
export function threadCpu(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  let tids: string[];
  try {
    tids = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue;
    }
    const name = Number(tid) === pid ? 'main' : `${stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))}/${tid}`;
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    out.set(name, (out.get(name) ?? 0) + (Number(f[11]) + Number(f[12])) / CLOCK_TICKS);
  }
  return out;
}

/** threadCpu(pid) now minus `before`, as "thread µs/obs" text: the four busiest, then the rest summed. */
export function threadSplit(before: Map<string, number>, after: Map<string, number>, n: number): string {
  const used = [...after].map(([k, v]) => [k, v - (before.get(k) ?? 0)] as const).sort((a, b) => b[1] - a[1]);
  const us = (v: number) => fmt((v * 1e6) / n, 2);
  const rest = used.slice(4).reduce((s, [, v]) => s + v, 0);
  return [...used.slice(0, 4).map(([k, v]) => `${k} ${us(v)}`), `others ${us(rest)}`].join(', ');
}
const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/**
 * CPU seconds a process has used, summed over its threads from /proc/<pid>/task/<tid>/schedstat
 * (nanoseconds): for slices of a few tens of milliseconds, where cpuSeconds' 10 ms ticks are too coarse.
 */
export function threadCpuSeconds(pid: number): number {
  let ns = 0;
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // a thread that ended meanwhile
    }
  }
  return ns / 1e9;
}

/**
 * A CPU budget of its own for some processes: a cgroup whose CPU bandwidth (CFS quota) is `cores`
 * of a core, as a process on a machine or a container of its own would have, so that parts sharing
 * this machine's two cores can be measured as they would run apart ("two nodes on separate
 * CPU budgets ... show it with taskset/cgroups"). cgroup v2 (`cpu.max`) where its cpu controller is
 * on, else v1 (`cpu.cfs_quota_us`); needs root. The 10 ms period (the kernel's default is 100) keeps
 * a budget's pauses shorter than a request's round trip under load. remove() moves the processes
 * still there back to the root group and deletes the group (once the kernel has let go of the
 * processes that ended in it).
 */
export interface CpuBudget {
  readonly cores: number;
  add(pid: number): void;
  remove(): Promise<void>;
}

export function cpuBudget(name: string, cores: number): CpuBudget {
  const PERIOD = 10_000;
  const quota = Math.max(1000, Math.round(cores * PERIOD));
  const v2 = '/sys/fs/cgroup';
  const v1 = '/sys/fs/cgroup/cpu';
  const readable = (f: string): string => {
    try {
      return fs.readFileSync(f, 'utf8');
    } catch {
      return '';
    }
  };
  // Groups a killed bench left behind (its process gone, nothing in them) are removed first.
  const sweep = (at: string): void => {
    for (const d of fs.readdirSync(at).filter((f) => /^reef-bench-.+-\d+$/.test(f))) {
      const pid = Number(/-(\d+)$/.exec(d)![1]);
      if (fs.existsSync(`/proc/${pid}`) || readable(path.join(at, d, 'cgroup.procs')).trim()) continue;
      try {
        fs.rmdirSync(path.join(at, d));
      } catch {
        // still being released: the next bench tries again
      }
    }
  };
  // The hierarchy with a cpu controller, and how a group's quota is written there.
  const v2on = /\bcpu\b/.test(readable(path.join(v2, 'cgroup.subtree_control')));
  if (!v2on && !fs.existsSync(path.join(v1, 'cpu.cfs_quota_us'))) throw new Error('no cgroup cpu controller to budget CPU with (cgroup v2 cpu.max or v1 cpu.cfs_quota_us)');
  const root = v2on ? v2 : v1;
  sweep(root);
  const dir = path.join(root, `reef-bench-${name}-${process.pid}`);
  fs.mkdirSync(dir);
  if (v2on) fs.writeFileSync(path.join(dir, 'cpu.max'), `${quota} ${PERIOD}`);
  else {
    fs.writeFileSync(path.join(dir, 'cpu.cfs_period_us'), String(PERIOD));
    fs.writeFileSync(path.join(dir, 'cpu.cfs_quota_us'), String(quota));
  }
  return {
    cores,
    add(pid) {
      fs.writeFileSync(path.join(dir, 'cgroup.procs'), String(pid));
    },
    async remove() {
      for (const pid of readable(path.join(dir, 'cgroup.procs')).split('\n').filter(Boolean)) {
        try {
          fs.writeFileSync(path.join(root, 'cgroup.procs'), pid);
        } catch {
          // ended meanwhile
        }
      }
      for (let tries = 0; ; tries++) {
        try {
          fs.rmdirSync(dir);
          return;
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'EBUSY' || tries === 100) throw e;
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    },
  };
}

export const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export function request(url: string, opts: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {}): Promise<Reply> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method: opts.method ?? 'GET', headers: opts.headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    if (opts.body !== undefined) req.end(opts.body);
    else req.end();
  });
}

/**
 * The q-quantile (0–1) of a few values in any order, interpolated between the two nearest (so the
 * median of an even count is the mean of the middle two): for comparing a handful of rounds or
 * windows, where percentile()'s nearest rank would report the upper middle one.
 */
export function quantile(xs: readonly number[], q: number): number {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const i = (s.length - 1) * q;
  const lo = Math.floor(i);
  return s[lo]! + (s[Math.min(lo + 1, s.length - 1)]! - s[lo]!) * (i - lo);
}

export const median = (xs: readonly number[]): number => quantile(xs, 0.5);

/** Nearest-rank percentile of many samples (latencies), sorted ascending. */
export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** percentile() of samples in any order (sorts a copy). */
export function percentileOf(xs: readonly number[], p: number): number {
  return percentile(
    [...xs].sort((a, b) => a - b),
    p,
  );
}

/** Closed-loop load: `concurrency` workers repeat `once` until `durationMs` has passed. */
export async function load(once: () => Promise<void>, concurrency: number, durationMs: number) {
  const latencies: number[] = [];
  const end = performance.now() + durationMs;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        await once();
        latencies.push(performance.now() - t);
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  return { requests: latencies.length, rps: latencies.length / elapsed, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

/** Sequential latency of one request kind: `n` samples after `warm` warm-up calls. */
export async function latency(once: () => Promise<void>, n: number, warm = 20) {
  for (let i = 0; i < warm; i++) await once();
  const xs: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await once();
    xs.push(performance.now() - t);
  }
  xs.sort((a, b) => a - b);
  return { p50: percentile(xs, 50), p99: percentile(xs, 99), n };
}

export const fmt = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });

/** The ingest plan of bench:ingest and bench:peers: `total` observations over `devices`, `batch` per upload. */
export interface IngestBatch {
  device: number;
  rows: { ts: number; temperature: number }[];
}

/** Batch k goes to device k % devices; each device's timestamps continue where its last batch ended. */
export function ingestPlan(total: number, devices: number, batch: number, t0 = Date.UTC(2026, 0, 1)): IngestBatch[] {
  const out: IngestBatch[] = [];
  const next = new Array(devices).fill(0);
  for (let k = 0; k * batch < total; k++) {
    const device = k % devices;
    const n = Math.min(batch, total - k * batch);
    const rows = Array.from({ length: n }, (_, i) => ({ ts: t0 + (next[device] + i) * 1000, temperature: Math.round((20 + 5 * Math.sin((next[device] + i) / 500)) * 10000) / 10000 }));
    next[device] += n;
    out.push({ device, rows });
  }
  return out;
}

// A free loopback port, TCP or UDP: the tests' helper (benches already use test/helpers).
export { freePort } from '../test/helpers/ports.ts';
