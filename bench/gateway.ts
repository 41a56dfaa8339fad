// `npm run bench:gateway`: the CoAP gateway's cost and capacity, on loopback, in one run.
// 1. GET ?sens straight to a software kit vs through the gateway (session + Proxy-Uri), NON as the
//    seed recommends: sequential latency (p50/p99) and pipelined throughput (requests/s), and the
//    gateway's added p50 (target: ≤ 1 ms).
// 2. 1,000 kits announcing to the gateway, each observed by the readings bridge and by one client
//    through the gateway: notifications/s in from kits, relayed to the client, stored as observations.
//    The fleet runs in a child process (its own event loop, as real kits are other machines).
// Options: --requests N (default 3000), --kits N (default 1000), --seconds S (default 15), --period MS (default 1000).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { createAccount } from '../src/auth/accounts.ts';
import { Code, CoapEndpoint, Option, stringOption, uriOptions, type CoapOption, type Peer } from '../src/coap/index.ts';
import { testConfig } from '../src/config/config.ts';
import { loadDeviceConfig } from '../src/device/config.ts';
import { Fleet } from '../src/device/fleet.ts';
import { Kit } from '../src/device/kit.ts';
import { Gateway, proxyUri } from '../src/gateway/gateway.ts';
import { openServices } from '../src/server.ts';
import { provisionKit } from '../src/service/devices.ts';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
}
const REQUESTS = arg('requests', 3000);
const KITS = arg('kits', 1000);
const SECONDS = arg('seconds', 15);
const PERIOD = arg('period', 1000);
const DOMAIN = 'mesh.reef.local';

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}
const ms = (x: number) => `${x.toFixed(3)} ms`;

async function latency(client: CoapEndpoint, peer: Peer, options: CoapOption[], n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    const r = await client.request(peer, { method: Code.GET, options, confirmable: false, timeoutMs: 5000 });
    out.push(Number(process.hrtime.bigint() - t0) / 1e6);
    if (r.code !== Code.CONTENT) throw new Error(`unexpected ${r.code}`);
  }
  return out;
}

async function throughput(client: CoapEndpoint, peer: Peer, options: CoapOption[], n: number, window = 16): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  const worker = async () => {
    while (next < n) {
      next++;
      const r = await client.request(peer, { method: Code.GET, options, confirmable: false, timeoutMs: 10_000 });
      if (r.code !== Code.CONTENT) throw new Error(`unexpected ${r.code}`);
    }
  };
  await Promise.all(Array.from({ length: window }, worker));
  return n / ((performance.now() - t0) / 1000);
}

async function main(): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-bench-gw-'));
  const config = testConfig({ dataDir });
  const services = await openServices(config, pino({ level: 'silent' }));
  const creds = await createAccount(services.store, { name: 'bench' });
  const account = (await services.store.getAccountByTenantId(creds.tenantId))!;
  const token = (await services.tokens.issue(creds.tenantId)).accessToken;
  const gateway = new Gateway(
    { store: services.store, events: services.events, auth: services.auth, log: services.log },
    { host: '127.0.0.1', port: 0, meshDomain: DOMAIN, deadlineMs: 10_000, sessionTtlMs: 3_600_000, maxSessionsPerAccount: 10, readings: false },
  );
  await gateway.start();
  const gw = gateway.address();
  console.log(`Reef gateway bench — node ${process.version}, ${os.cpus().length} CPUs, ${os.cpus()[0]?.model ?? ''}`);

  // ---- 1. one kit: direct vs through the gateway ----
  const mac = 'be00000000000001';
  const { kitKey } = await provisionKit(services.store, null, account, mac);
  const kit = new Kit(loadDeviceConfig({ mac, port: 0, gateway: { address: gw.address, port: gw.port }, monitorWindowMs: 0, logLevel: 0, periodMs: 60_000, key: kitKey }));
  await kit.start();
  while (!gateway.kits.get(mac)) await new Promise((r) => setTimeout(r, 10));
  const client = await CoapEndpoint.create({ host: '127.0.0.1', port: 0 });
  const open = await client.request(gw, { method: Code.POST, uri: '/sessions', payload: Buffer.from(token), timeoutMs: 5000 });
  if (open.code !== Code.CREATED) throw new Error('no session');
  const direct = uriOptions('/snsr/arduino/temp?sens');
  const proxied = [stringOption(Option.PROXY_URI, proxyUri(mac, DOMAIN, '/snsr/arduino/temp?sens'))];
  // Warm-up, then interleave the two in rounds so drift hits both alike.
  await latency(client, kit.address(), direct, 300);
  await latency(client, gw, proxied, 300);
  const dLat: number[] = [];
  const gLat: number[] = [];
  for (let round = 0; round < 5; round++) {
    dLat.push(...(await latency(client, kit.address(), direct, REQUESTS / 5)));
    gLat.push(...(await latency(client, gw, proxied, REQUESTS / 5)));
  }
  const dRps = await throughput(client, kit.address(), direct, REQUESTS);
  const gRps = await throughput(client, gw, proxied, REQUESTS);
  console.log(`\n1. GET ?sens, NON, ${REQUESTS} sequential + ${REQUESTS} pipelined (16 in flight) each way`);
  console.log(`   straight to the kit : p50 ${ms(pct(dLat, 50))}  p99 ${ms(pct(dLat, 99))}  ${dRps.toFixed(0)} req/s`);
  console.log(`   through the gateway : p50 ${ms(pct(gLat, 50))}  p99 ${ms(pct(gLat, 99))}  ${gRps.toFixed(0)} req/s`);
  console.log(
    `   gateway adds        : p50 +${ms(pct(gLat, 50) - pct(dLat, 50))}  p99 +${ms(pct(gLat, 99) - pct(dLat, 99))}  ratio p50 ${(pct(gLat, 50) / pct(dLat, 50)).toFixed(2)}×, throughput ${(gRps / dRps).toFixed(2)}× (target: ≤ +1 ms at p50)`,
  );
  await kit.stop();
  await gateway.stop();

  // ---- 2. 1,000 kits observed at once ----
  const g2 = new Gateway(
    { store: services.store, events: services.events, auth: services.auth, log: services.log },
    { host: '127.0.0.1', port: 0, meshDomain: DOMAIN, deadlineMs: 30_000, sessionTtlMs: 3_600_000, maxSessionsPerAccount: 10, readings: true },
  );
  await g2.start();
  const gw2 = g2.address();
  const base = 'be10000000000000';
  const macs = Array.from({ length: KITS }, (_, i) => (BigInt('0x' + base) + BigInt(i)).toString(16).padStart(16, '0'));
  // The fleet's kit keys, one "<mac> <key>" line each (reef device --key-file).
  const keyFile = path.join(dataDir, 'kit-keys.txt');
  const lines: string[] = [];
  for (const m of macs) lines.push(`${m} ${(await provisionKit(services.store, null, account, m)).kitKey}`);
  fs.writeFileSync(keyFile, lines.join('\n') + '\n', { mode: 0o600 });
  const tStart = performance.now();
  const child = spawn(process.execPath, [...process.execArgv, process.argv[1]!, '--fleet', base, String(KITS), String(gw2.port), String(PERIOD), keyFile], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (b: Buffer) => (b.toString().includes('ready') ? resolve() : undefined));
    child.once('exit', (code) => reject(new Error(`fleet exited ${code}`)));
  });
  while (g2.observations().filter((o) => o.state === 'active').length < KITS && performance.now() - tStart < 120_000) await new Promise((r) => setTimeout(r, 50));
  const active = g2.observations().filter((o) => o.state === 'active').length;
  console.log(`\n2. ${KITS} kits (notification period ${PERIOD} ms): ${active} observed by the readings bridge after ${((performance.now() - tStart) / 1000).toFixed(1)} s`);
  // One client observes every kit through the gateway, sharing the bridge's upstream observations.
  const watcher = await CoapEndpoint.create({ host: '127.0.0.1', port: 0 });
  await watcher.request(gw2, { method: Code.POST, uri: '/sessions', payload: Buffer.from(token), timeoutMs: 5000 });
  let received = 0;
  let watching = 0;
  // Registrations go out 100 at a time: a client's own socket buffer holds only so many answers.
  for (let i = 0; i < macs.length; i += 100) {
    const regs = await Promise.all(
      macs.slice(i, i + 100).map((m) =>
        watcher
          .observe(gw2, { options: [stringOption(Option.PROXY_URI, proxyUri(m, DOMAIN, '/snsr/arduino/temp?sens'))], confirmable: false, timeoutMs: 30_000 }, () => received++)
          .first.then(
            () => 1,
            () => 0,
          ),
      ),
    );
    watching += regs.reduce((a: number, b: number) => a + b, 0);
  }
  const s0 = { ...g2.stats };
  const r0 = received;
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  const dt = (performance.now() - t0) / 1000;
  const s1 = { ...g2.stats };
  const rate = (a: number, b: number) => ((b - a) / dt).toFixed(0);
  console.log(`   one client observing all ${watching} through the gateway, measured over ${dt.toFixed(1)} s:`);
  console.log(`   notifications in from kits : ${rate(s0.notificationsIn, s1.notificationsIn)}/s (ideal ${((KITS * 1000) / PERIOD).toFixed(0)}/s)`);
  console.log(`   relayed to the client      : ${rate(s0.notificationsRelayed, s1.notificationsRelayed)}/s (client received ${((received - r0) / dt).toFixed(0)}/s)`);
  console.log(`   stored as observations     : ${rate(s0.readingsStored, s1.readingsStored)}/s (store errors ${s1.storeErrors - s0.storeErrors}, ${services.store.kind})`);
  const mem = process.memoryUsage();
  console.log(`   gateway process RSS ${(mem.rss / 2 ** 20).toFixed(0)} MiB, heap ${(mem.heapUsed / 2 ** 20).toFixed(0)} MiB (gateway, store and client; the kits in a second process)`);

  await watcher.close();
  await client.close();
  child.kill('SIGTERM');
  await g2.stop();
  await services.store.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
}

/** The child: a fleet of kits announcing to the gateway. */
async function fleetChild(base: string, count: number, gwPort: number, period: number, keyFile: string): Promise<void> {
  const fleet = new Fleet(
    loadDeviceConfig({
      mac: base,
      count,
      port: 0,
      gateway: { address: '127.0.0.1', port: gwPort },
      monitorWindowMs: 0,
      logLevel: 0,
      periodMs: period,
      announceIntervalMs: 60_000,
      timeSyncIntervalMs: 0,
      keyFile,
    }),
  );
  await fleet.start();
  process.stdout.write('ready\n');
  process.once('SIGTERM', () => void fleet.stop().then(() => process.exit(0)));
  await new Promise(() => undefined);
}

const fi = process.argv.indexOf('--fleet');
(fi > 0 ? fleetChild(process.argv[fi + 1]!, Number(process.argv[fi + 2]), Number(process.argv[fi + 3]), Number(process.argv[fi + 4]), process.argv[fi + 5]!) : main()).then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
