// npm run bench:device — GET ?sens requests/s one kit answers over loopback, the same load against
// libcoap's coap-server (coap-server-notls, GET /time) in the same run, their ratio, and the RSS of
// 1,000 kits in one process (target <= 200 MB). Each server runs in its own process; the load
// generator here keeps a fixed window of CON requests outstanding on one socket. The two servers
// take turns (BENCH_ROUNDS rounds), and beside each rate the server's CPU time per request (user +
// system, from /proc/<pid>/stat) is printed: on a shared machine the rates move with the load, the
// CPU per request much less.
import { spawn, ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import { once } from 'node:events';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { Code, CON, parseMessage, serializeMessage, uriOptions } from '../src/coap/index.ts';
import { cpuTimes, freePort, median, NODE_FLAGS } from './lib.ts';

const WINDOW = Number(process.env.BENCH_WINDOW ?? 16);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const FLEET = Number(process.env.BENCH_FLEET ?? 1000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

interface Measured {
  rps: number;
  /** Server CPU per request, µs (user, system). */
  user: number;
  sys: number;
  /** The load generator's own CPU per request, µs. */
  gen: number;
}

async function fleetChild(n: number): Promise<void> {
  const { loadDeviceConfig } = await import('../src/device/config.ts');
  const { Fleet } = await import('../src/device/fleet.ts');
  const before = process.memoryUsage().rss;
  const fleet = new Fleet(loadDeviceConfig({ count: n, port: 0, monitorWindowMs: 0, logLevel: 0 }));
  await fleet.start();
  await new Promise((r) => setTimeout(r, 1000));
  (globalThis as { gc?: () => void }).gc?.();
  const rss = process.memoryUsage().rss;
  process.stdout.write(JSON.stringify({ kits: fleet.kits.length, rss, before, heap: process.memoryUsage().heapUsed }) + '\n');
  await fleet.stop();
  process.exit(0);
}

async function load(port: number, uri: string, seconds: number, serverPid: number): Promise<Measured> {
  const sock = dgram.createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
  const options = uriOptions(uri);
  let mid = 0;
  let done = 0;
  let counting = false;
  const outstanding = new Map<number, number>();
  const send = (): void => {
    mid = (mid + 1) & 0xffff;
    outstanding.set(mid, Date.now());
    const token = Buffer.alloc(4);
    token.writeUInt32BE(mid);
    sock.send(serializeMessage({ type: CON, code: Code.GET, mid, token, options, payload: Buffer.alloc(0) }), port, '127.0.0.1');
  };
  sock.on('message', (b) => {
    const m = parseMessage(b);
    if (!outstanding.delete(m.mid)) return;
    if (counting) done++;
    send();
  });
  // Requests lost on a full buffer are re-issued so the window stays full.
  const sweeper = setInterval(() => {
    const now = Date.now();
    for (const [k, t] of outstanding) if (now - t > 500) outstanding.delete(k), send();
  }, 100);
  for (let i = 0; i < WINDOW; i++) send();
  await new Promise((r) => setTimeout(r, 500));
  counting = true;
  const c0 = cpuTimes(serverPid);
  const g0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  counting = false;
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  const c1 = cpuTimes(serverPid);
  const g = process.cpuUsage(g0);
  clearInterval(sweeper);
  sock.close();
  return { rps: done / secs, user: ((c1.user - c0.user) * 1e6) / done, sys: ((c1.sys - c0.sys) * 1e6) / done, gen: (g.user + g.system) / done };
}

/** The child's first output line; the rest of its output is read and dropped (closing the pipe would kill it with EPIPE). */
function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let buf = '';
    let done = false;
    child.stdout!.on('data', (chunk) => {
      if (done) return;
      buf += String(chunk);
      const nl = buf.indexOf('\n');
      if (nl >= 0) {
        done = true;
        resolve(buf.slice(0, nl));
      }
    });
    child.once('exit', () => (done ? undefined : reject(new Error('child ended without output'))));
  });
}

async function kitRound(cli: string): Promise<Measured> {
  // node itself (not the tsx launcher, which runs the kit in a child) so the PID is the kit's, with
  // the node options `reef device` runs with (bin/reef.js), then BENCH_NODE_ARGS (e.g. --cpu-prof).
  const nodeArgs = [...NODE_FLAGS, ...(process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean)];
  const kitProc = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', cli, '--port', '0', '--log-level', '0', '--no-monitor', '--monitor-window', '0', '--allow-direct'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await firstLine(kitProc);
  const kitPort = Number(/:(\d+)\//.exec(line)![1]);
  const m = await load(kitPort, '/snsr/arduino/temp?sens', SECONDS, kitProc.pid!);
  kitProc.kill('SIGTERM');
  await once(kitProc, 'exit');
  return m;
}

async function libcoapRound(): Promise<Measured> {
  const port = await freePort('udp');
  const lib = spawn('coap-server-notls', ['-A', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
  await new Promise((r) => setTimeout(r, 500));
  const m = await load(port, '/time', SECONDS, lib.pid!);
  lib.kill('SIGTERM');
  await once(lib, 'exit');
  return m;
}

async function main(): Promise<void> {
  const self = fileURLToPath(import.meta.url);
  const cli = fileURLToPath(new URL('../src/cli/device.ts', import.meta.url));

  // 1. One kit and libcoap's coap-server, each in its own process, taking turns under the same load.
  const kits: Measured[] = [];
  const libs: Measured[] = [];
  const f = (m: Measured): string =>
    `${m.rps.toFixed(0).padStart(6)} req/s, server CPU ${(m.user + m.sys).toFixed(1).padStart(5)} µs/req (user ${m.user.toFixed(1)}, sys ${m.sys.toFixed(1)}), generator ${m.gen.toFixed(1)} µs/req`;
  console.log(
    `window ${WINDOW} CON requests, ${SECONDS} s per target, ${ROUNDS} rounds, loopback, load average ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
  for (let r = 0; r < ROUNDS; r++) {
    const k = await kitRound(cli);
    const l = await libcoapRound();
    kits.push(k);
    libs.push(l);
    console.log(`round ${r + 1}: kit GET /snsr/arduino/temp?sens ${f(k)}`);
    console.log(`         libcoap GET /time          ${f(l)}   ratio ${(k.rps / l.rps).toFixed(2)}`);
  }
  const kr = median(kits.map((m) => m.rps));
  const lr = median(libs.map((m) => m.rps));
  const kc = median(kits.map((m) => m.user + m.sys));
  const lc = median(libs.map((m) => m.user + m.sys));
  console.log(`median kit  GET ?sens       : ${kr.toFixed(0)} req/s, ${kc.toFixed(1)} µs CPU/req (UDP -> module -> HDLC -> sensor -> back)`);
  console.log(`median libcoap coap-server  : ${lr.toFixed(0)} req/s, ${lc.toFixed(1)} µs CPU/req`);
  console.log(`ratio kit / libcoap         : ${(kr / lr).toFixed(2)} by rate (median), ${(lc / kc).toFixed(2)} by CPU per request (target >= 0.4)`);

  // 2. Memory of a fleet in one process.
  const fleetProc = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', self, '--fleet-child', String(FLEET)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const mem = JSON.parse(await firstLine(fleetProc)) as { kits: number; rss: number; before: number };
  await once(fleetProc, 'exit');
  const mb = (b: number): string => (b / 1024 / 1024).toFixed(1);
  console.log(`${mem.kits} kits in one process       : RSS ${mb(mem.rss)} MB (process before kits ${mb(mem.before)} MB; target <= 200 MB) ${mem.rss <= 200 * 1024 * 1024 ? 'OK' : 'OVER'}`);
}

const i = process.argv.indexOf('--fleet-child');
if (i >= 0) await fleetChild(Number(process.argv[i + 1]));
else await main();
