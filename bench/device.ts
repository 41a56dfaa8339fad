// npm run bench:device — GET ?sens requests/s one kit answers over loopback, the same load against
// libcoap's coap-server (coap-server-notls, GET /time) in the same run, their ratio, and the RSS of
// 1,000 kits in one process (target <= 200 MB). Each server runs in its own process; the load
// generator here keeps a fixed window of CON requests outstanding on one socket.
import { spawn, ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { Code, CON, parseMessage, serializeMessage, uriOptions } from '../src/coap/index.ts';
import { freePort } from './lib.ts';

const WINDOW = Number(process.env.BENCH_WINDOW ?? 16);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const FLEET = Number(process.env.BENCH_FLEET ?? 1000);

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

async function load(port: number, uri: string, seconds: number): Promise<number> {
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
  const t0 = process.hrtime.bigint();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  counting = false;
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  clearInterval(sweeper);
  sock.close();
  return done / secs;
}

async function firstLine(child: ChildProcess): Promise<string> {
  let buf = '';
  for await (const chunk of child.stdout!) {
    buf += String(chunk);
    const nl = buf.indexOf('\n');
    if (nl >= 0) return buf.slice(0, nl);
  }
  throw new Error('child ended without output');
}

async function main(): Promise<void> {
  const tsx = fileURLToPath(new URL('../node_modules/.bin/tsx', import.meta.url));
  const self = fileURLToPath(import.meta.url);
  const cli = fileURLToPath(new URL('../src/cli/device.ts', import.meta.url));

  // 1. One kit, its own process.
  const kitProc = spawn(tsx, [cli, '--port', '0', '--log-level', '0', '--no-monitor', '--monitor-window', '0', '--allow-direct'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await firstLine(kitProc);
  const kitPort = Number(/:(\d+)\//.exec(line)![1]);
  const kitRps = await load(kitPort, '/snsr/arduino/temp?sens', SECONDS);
  kitProc.kill('SIGTERM');
  await once(kitProc, 'exit');

  // 2. libcoap's coap-server on this machine, same load.
  const port = await freePort('udp');
  const lib = spawn('coap-server-notls', ['-A', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
  await new Promise((r) => setTimeout(r, 500));
  const libRps = await load(port, '/time', SECONDS);
  lib.kill('SIGTERM');
  await once(lib, 'exit');

  // 3. Memory of a fleet in one process.
  const fleetProc = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', self, '--fleet-child', String(FLEET)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const mem = JSON.parse(await firstLine(fleetProc)) as { kits: number; rss: number; before: number };
  await once(fleetProc, 'exit');

  const mb = (b: number): string => (b / 1024 / 1024).toFixed(1);
  console.log(`window ${WINDOW} CON requests, ${SECONDS} s per target, loopback`);
  console.log(`kit  GET /snsr/arduino/temp?sens : ${kitRps.toFixed(0)} req/s (UDP -> module -> HDLC -> sensor -> back)`);
  console.log(`libcoap coap-server GET /time    : ${libRps.toFixed(0)} req/s`);
  console.log(`ratio kit / libcoap              : ${(kitRps / libRps).toFixed(2)}`);
  console.log(`${mem.kits} kits in one process       : RSS ${mb(mem.rss)} MB (process before kits ${mb(mem.before)} MB; target <= 200 MB) ${mem.rss <= 200 * 1024 * 1024 ? 'OK' : 'OVER'}`);
}

const i = process.argv.indexOf('--fleet-child');
if (i >= 0) await fleetChild(Number(process.argv[i + 1]));
else await main();
