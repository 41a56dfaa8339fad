// `npm run bench:gateway`: the CoAP gateway's cost and capacity, on loopback, in one run.
// The gateway (and its SQLite store) runs in this process; kits run in a child process (their own
// event loop, as real kits are other machines), and so does the pipelined load generator.
// 1. GET ?sens, NON as the seed recommends, straight to a software kit vs through the gateway
//    (session + Proxy-Uri): sequential latency (p50/p99, client in this process), then pipelined
//    throughput from the generator child: one client with --window requests in flight, and
//    --clients clients each with its own session, direct and through the gateway taking turns over
//    --rounds rounds. Beside each rate: CPU per request of the gateway process, of the kit and of
//    the generator (/proc/<pid>/stat), the steady figure on a shared machine, and the cores each arm
//    kept busy (rate × CPU per request); after the windows, the ratio split into its two factors:
//    CPU per request (direct arm ÷ gateway arm) times cores busy (gateway arm ÷ direct arm).
// 2. --kits kits announcing to the gateway, each observed by the readings bridge (every reading
//    stored) and by one client through the gateway: notifications/s in, relayed and stored against
//    the ideal rate, and the relay latency (p50/p99) from the kit's send to the client's receipt and
//    to the reading being stored, joined on (kit, reading second). --runs measurement windows.
// Options: --requests N (3000), --window N (16), --clients N (4), --rounds N (2), --seconds S (3 for
// each throughput window, 10 for each observation window), --kits N (1000), --period MS (1000), --runs N (3).
// --instructions: instead, the gateway's CPU instructions per proxied request, counted by valgrind's
// callgrind (this bench re-runs itself under it; the kit and the generator run at full speed): one
// warm-up window of --seconds (default 20 here), then the counters are zeroed, one more window runs,
// and the counters are dumped: stable on a shared machine where CPU times are not. --keep FILE: the dump.
// --budget F: the pipelined windows again with the generator, the gateway and the kit each on a CPU
// budget of F cores (a cgroup of its own; needs root), as they would run on machines of their own.
// --gen-dgram: the load generator on node:dgram, encoding every request (encoding costs the generator
// CPU it shares with the gateway's arm; see genChild).
// --payloads: with a kit payload sink, as when MQTT is on, so the temperature's answers are also
// handed to it (docs/mqtt.md).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { createAccount } from '../src/auth/accounts.ts';
import {
  Code,
  CoapEndpoint,
  CON,
  NON,
  Option,
  openDatagrams,
  serializeMessage,
  stringOption,
  SUGGESTED_MAX_MESSAGE_SIZE,
  uriOptions,
  type CoapMessage,
  type CoapOption,
  type Datagrams,
  type Peer,
} from '../src/coap/index.ts';
import { testConfig } from '../src/config/config.ts';
import { loadDeviceConfig } from '../src/device/config.ts';
import { Fleet } from '../src/device/fleet.ts';
import { Gateway, proxyUri } from '../src/gateway/gateway.ts';
import { openServices } from '../src/server.ts';
import { provisionKit } from '../src/service/devices.ts';
import { recordsOf, type ObservationBatch } from '../src/core/observation-batch.ts';
import { arg, callgrindTotal, cpuBudget, cpuTimes, median, percentileOf, type CpuBudget } from './lib.ts';

const INSTRUCTIONS = process.argv.includes('--instructions');
const GEN_DGRAM = process.argv.includes('--gen-dgram');
const PAYLOADS = process.argv.includes('--payloads');
/** Kit payloads handed to the sink (--payloads). */
let payloadsSeen = 0;
const REQUESTS = Number(arg('requests', '3000'));
const WINDOW = Number(arg('window', '16'));
const CLIENTS = Number(arg('clients', '4'));
const ROUNDS = Number(arg('rounds', '2'));
const TP_SECONDS = Number(arg('seconds', INSTRUCTIONS ? '20' : '3'));
const KITS = Number(arg('kits', '1000'));
const OBS_SECONDS = Number(arg('obs-seconds', '10'));
const PERIOD = Number(arg('period', '1000'));
const RUNS = Number(arg('runs', '3'));
/** --budget F: the pipelined windows again with the generator, the gateway and the kit each on a CPU budget of F cores. */
const BUDGET = Number(arg('budget', '0'));
const DOMAIN = 'mesh.reef.local';
const PATH = '/snsr/arduino/temp?sens';

/** Wall-clock milliseconds with sub-millisecond resolution, comparable across processes. */
const wallMs = (): number => performance.timeOrigin + performance.now();

const ms = (x: number) => `${x.toFixed(3)} ms`;
const cpuOf = (pid: number): number => {
  const c = cpuTimes(pid);
  return c.user + c.sys;
};

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

/** Node options for the children: this process's, without profiling ones (BENCH: --cpu-prof on the gateway only). */
const childArgs = (): string[] => process.execArgv.filter((x) => !x.startsWith('--cpu-prof'));

/** Lines of a child's stdout, one callback each. */
function lines(child: ChildProcess, on: (line: string) => void): void {
  let buf = '';
  child.stdout!.on('data', (b: Buffer) => {
    buf += b.toString();
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      on(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
    }
  });
}

interface GenConfig {
  host: string;
  port: number;
  proxy: string | null;
  token: string;
  clients: number;
  window: number;
  seconds: number;
  /** --gen-dgram: the generator on node:dgram, encoding each request. */
  dgram: boolean;
}
interface GenResult {
  rps: number;
  errors: number;
  /** The generator's own CPU per request, µs. */
  genUs: number;
}

/** Runs the generator child once; CPU of this process and the kit's is taken over its counting window. */
async function generate(cfg: GenConfig, kitPid: number, budget?: CpuBudget): Promise<GenResult & { gatewayUs: number; gatewaySysUs: number; kitUs: number }> {
  const child = spawn(process.execPath, [...childArgs(), process.argv[1]!, '--gen', JSON.stringify(cfg)], { stdio: ['ignore', 'pipe', 'inherit'] });
  // In its budget before it loads anything (it warms up for 500 ms before counting).
  budget?.add(child.pid!);
  let c0 = { self: 0, selfSys: 0, kit: 0 };
  return await new Promise((resolve, reject) => {
    lines(child, (l) => {
      if (l === 'counting') {
        const u = process.cpuUsage();
        c0 = { self: (u.user + u.system) / 1e6, selfSys: u.system / 1e6, kit: cpuOf(kitPid) };
      } else if (l.startsWith('{')) {
        const u = process.cpuUsage();
        const r = JSON.parse(l) as GenResult & { done: number };
        const self = (u.user + u.system) / 1e6 - c0.self;
        const selfSys = u.system / 1e6 - c0.selfSys;
        const kit = cpuOf(kitPid) - c0.kit;
        resolve({ ...r, gatewayUs: cfg.proxy ? (self * 1e6) / r.done : 0, gatewaySysUs: cfg.proxy ? (selfSys * 1e6) / r.done : 0, kitUs: (kit * 1e6) / r.done });
      }
    });
    child.once('exit', (code) => (code === 0 ? undefined : reject(new Error(`generator exited ${code}`))));
  });
}

async function main(): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-bench-gw-'));
  const config = testConfig({ dataDir });
  const services = await openServices(config, pino({ level: 'silent' }));
  const creds = await createAccount(services.store, { name: 'bench' });
  const account = (await services.store.getAccountByTenantId(creds.tenantId))!;
  const token = (await services.tokens.issue(creds.tenantId)).accessToken;
  const deps = { store: services.store, events: services.events, auth: services.auth, log: services.log, ...(PAYLOADS ? { payloads: () => void payloadsSeen++ } : {}) };
  const gateway = new Gateway(deps, { host: '127.0.0.1', port: 0, meshDomain: DOMAIN, deadlineMs: 10_000, sessionTtlMs: 3_600_000, maxSessionsPerAccount: 100, readings: false });
  await gateway.start();
  const gw = gateway.address();
  console.log(
    `Reef gateway bench — node ${process.version}, ${os.cpus().length} CPUs, ${os.cpus()[0]?.model ?? ''}; load average ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}; UDP ${gateway.front.socket.kind}${PAYLOADS ? ', kit payload sink on (--payloads)' : ''}`,
  );

  // ---- 1. one kit (its own process): direct vs through the gateway ----
  const mac = 'be00000000000001';
  const keyFile1 = path.join(dataDir, 'kit-key.txt');
  fs.writeFileSync(keyFile1, `${mac} ${(await provisionKit(services.store, null, account, mac)).kitKey}\n`, { mode: 0o600 });
  const kitChild = await startFleet(mac, 1, gw.port, 60_000, keyFile1, true);
  while (!gateway.kits.get(mac)) await new Promise((r) => setTimeout(r, 10));
  const kitPeer = gateway.kits.get(mac)!.peer;
  const client = await CoapEndpoint.create({ host: '127.0.0.1', port: 0 });
  const open = await client.request(gw, { method: Code.POST, uri: '/sessions', payload: Buffer.from(token), timeoutMs: 5000 });
  if (open.code !== Code.CREATED) throw new Error('no session');
  const direct = uriOptions(PATH);
  const proxied = [stringOption(Option.PROXY_URI, proxyUri(mac, DOMAIN, PATH))];
  // The kit answers the gateway only once it knows the port the gateway asks from (its signed ack).
  for (;;) {
    const r = await client.request(gw, { method: Code.GET, options: proxied, confirmable: false, timeoutMs: 5000 }).catch(() => undefined);
    if (r?.code === Code.CONTENT) break;
    await new Promise((res) => setTimeout(res, 50));
  }
  if (INSTRUCTIONS) {
    await countInstructions(
      gateway,
      { host: '127.0.0.1', port: gw.port, proxy: proxyUri(mac, DOMAIN, PATH), token, clients: CLIENTS, window: WINDOW, seconds: TP_SECONDS, dgram: GEN_DGRAM },
      kitChild.pid!,
    );
    await client.close();
    kitChild.kill('SIGTERM');
    await gateway.stop();
    await services.store.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    return;
  }
  // Warm-up, then interleave the two in rounds so drift hits both alike.
  await latency(client, kitPeer, direct, 300);
  await latency(client, gw, proxied, 300);
  const dLat: number[] = [];
  const gLat: number[] = [];
  for (let round = 0; round < 5; round++) {
    dLat.push(...(await latency(client, kitPeer, direct, REQUESTS / 5)));
    gLat.push(...(await latency(client, gw, proxied, REQUESTS / 5)));
  }
  console.log(`\n1. GET ?sens, NON, kit in its own process; ${REQUESTS} sequential each way (client in the gateway's process)`);
  console.log(`   straight to the kit : p50 ${ms(percentileOf(dLat, 50))}  p99 ${ms(percentileOf(dLat, 99))}`);
  console.log(`   through the gateway : p50 ${ms(percentileOf(gLat, 50))}  p99 ${ms(percentileOf(gLat, 99))}`);
  console.log(`   gateway adds        : p50 +${ms(percentileOf(gLat, 50) - percentileOf(dLat, 50))}  p99 +${ms(percentileOf(gLat, 99) - percentileOf(dLat, 99))} (target: ≤ +1 ms at p50)`);
  await client.close();

  // On the two shared cores, then (--budget F) with the generator, the gateway and the kit each on
  // a CPU budget of its own, as they run in a deployment (the kits and their clients are other
  // machines than the gateway's): there the gateway's ratio is whether it keeps up with the kit,
  // where on shared cores it also pays for the third process the direct arm does not run.
  const pipelined = async (budgets?: { gen: CpuBudget; gateway: CpuBudget; kit: CpuBudget }): Promise<void> => {
    if (budgets)
      console.log(`\n   pipelined, as above, with the generator, the gateway and the kit each on a CPU budget of ${budgets.gen.cores} cores (cgroup CPU bandwidth, bench/lib.ts cpuBudget):`);
    else console.log(`\n   pipelined, generator in its own process, ${TP_SECONDS} s per window, direct and through the gateway taking turns:`);
    /** Each window's ratio, by load shape: one client's windows are latency-bound where four clients' are CPU-bound. */
    const byShape = new Map<number, number[]>();
    const capacity: number[] = [];
    /** Each window's ratio as two factors (rate = cores busy ÷ CPU per request, in each arm): CPU per request, direct ÷ gateway arm; cores busy, gateway ÷ direct arm. */
    const costFactor: number[] = [];
    const busyFactor: number[] = [];
    for (const clients of [1, CLIENTS]) {
      const shape: number[] = [];
      byShape.set(clients, shape);
      const base: GenConfig = { host: '127.0.0.1', port: 0, proxy: null, token, clients, window: WINDOW, seconds: TP_SECONDS, dgram: GEN_DGRAM };
      for (let round = 0; round < ROUNDS; round++) {
        const d = await generate({ ...base, port: kitPeer.port }, kitChild.pid!, budgets?.gen);
        const st0 = { ...gateway.stats };
        const g = await generate({ ...base, port: gw.port, proxy: proxyUri(mac, DOMAIN, PATH) }, kitChild.pid!, budgets?.gen);
        const st1 = gateway.stats;
        if (process.env.BENCH_DEBUG)
          console.log(
            `   (gateway: requests ${st1.requests - st0.requests}, forwarded ${st1.forwarded - st0.forwarded}, timeouts ${st1.timeouts - st0.timeouts}, no session ${st1.refusedNoSession - st0.refusedNoSession}; front ${JSON.stringify(gateway.front.stats)}; back ${JSON.stringify(gateway.back.stats)})`,
          );
        shape.push(g.rps / d.rps);
        capacity.push(d.kitUs / g.gatewayUs);
        const dCost = d.genUs + d.kitUs;
        const gCost = g.genUs + g.gatewayUs + g.kitUs;
        const dBusy = (d.rps * dCost) / 1e6;
        const gBusy = (g.rps * gCost) / 1e6;
        costFactor.push(dCost / gCost);
        busyFactor.push(gBusy / dBusy);
        const label = `${clients} client${clients > 1 ? 's' : ''} × ${WINDOW} in flight`;
        console.log(
          `   ${label.padEnd(22)} direct ${d.rps.toFixed(0).padStart(6)} req/s (kit ${d.kitUs.toFixed(1)} µs/req)  gateway ${g.rps.toFixed(0).padStart(6)} req/s (gateway ${g.gatewayUs.toFixed(1)} µs/req, ${g.gatewaySysUs.toFixed(1)} of it system; kit ${g.kitUs.toFixed(1)})  ratio ${(g.rps / d.rps).toFixed(2)}×  generator ${d.genUs.toFixed(1)}/${g.genUs.toFixed(1)} µs/req  cores busy ${dBusy.toFixed(2)}/${gBusy.toFixed(2)}${d.errors + g.errors ? `  errors ${d.errors + g.errors}` : ''}`,
        );
      }
    }
    const ratios = [...byShape.values()].flat();
    const where = budgets ? `, on budgets of ${budgets.gen.cores} cores` : '';
    console.log(`   throughput ratio gateway / direct${where}: median ${median(ratios).toFixed(2)}×, min ${Math.min(...ratios).toFixed(2)}× (target ≥ 0.9×)`);
    const shapes = [...byShape].map(([n, r]) => `${n} client${n > 1 ? 's' : ''} median ${median(r).toFixed(2)}×`);
    console.log(`   by load shape: ${shapes.join(', ')}`);
    // The steady figure on shared cores: requests/s one core gives the gateway against what it gives the kit.
    console.log(`   capacity per core, gateway / kit (kit CPU per direct request ÷ gateway CPU per proxied one): median ${median(capacity).toFixed(2)}×`);
    // Each window's ratio is exactly the product of the two (an arm's rate is its cores busy ÷ its
    // CPU per request): they say how much of the shortfall is CPU the gateway adds and how much is
    // idle time.
    console.log(
      `   each window's ratio = CPU per request, direct ÷ gateway arm (generator + kit ÷ generator + gateway + kit) × cores busy, gateway ÷ direct arm; medians ${median(costFactor).toFixed(2)}× and ${median(busyFactor).toFixed(2)}×`,
    );
    if (PAYLOADS) console.log(`   ${payloadsSeen} payloads to the sink of ${gateway.stats.forwarded} forwards so far`);
  };
  await pipelined();
  if (BUDGET > 0) {
    const budgets = { gen: cpuBudget('generator', BUDGET), gateway: cpuBudget('gateway', BUDGET), kit: cpuBudget('kit', BUDGET) };
    try {
      budgets.gateway.add(process.pid);
      budgets.kit.add(kitChild.pid!);
      await pipelined(budgets);
    } finally {
      for (const b of Object.values(budgets)) await b.remove();
    }
  }
  kitChild.kill('SIGTERM');
  await gateway.stop();
  if (KITS === 0) {
    await services.store.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    return;
  }

  // ---- 2. 1,000 kits observed at once ----
  const g2 = new Gateway(deps, { host: '127.0.0.1', port: 0, meshDomain: DOMAIN, deadlineMs: 30_000, sessionTtlMs: 3_600_000, maxSessionsPerAccount: 10, readings: true });
  await g2.start();
  const gw2 = g2.address();
  const base = 'be10000000000000';
  const macs = Array.from({ length: KITS }, (_, i) => (BigInt('0x' + base) + BigInt(i)).toString(16).padStart(16, '0'));
  // The fleet's kit keys, one "<mac> <key>" line each (reef device --key-file).
  const keyFile = path.join(dataDir, 'kit-keys.txt');
  const keyLines: string[] = [];
  for (const m of macs) keyLines.push(`${m} ${(await provisionKit(services.store, null, account, m)).kitKey}`);
  fs.writeFileSync(keyFile, keyLines.join('\n') + '\n', { mode: 0o600 });
  // When each reading was stored: (mac, reading second) → wall ms, taken as the store's write returns.
  const stored = new Map<string, number>();
  const store = services.store as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
  for (const name of ['insertObservations', 'insertObservationsMany'] as const) {
    const orig = store[name]!.bind(services.store);
    store[name] = async (...a: unknown[]) => {
      const r = await orig(...a);
      const t = wallMs();
      const batches = name === 'insertObservations' ? [a[1] as ObservationBatch] : (a[0] as { batch: ObservationBatch }[]).map((x) => x.batch);
      for (const b of batches) for (const o of recordsOf(b)) if (typeof o.extra?.mac === 'string') stored.set(`${o.extra.mac}|${Math.floor(o.ts / 1000)}`, t);
      return r;
    };
  }
  const tStart = performance.now();
  const fleet = await startFleet(base, KITS, gw2.port, PERIOD, keyFile, false);
  while (g2.observations().filter((o) => o.state === 'active').length < KITS && performance.now() - tStart < 120_000) await new Promise((r) => setTimeout(r, 50));
  const active = g2.observations().filter((o) => o.state === 'active').length;
  console.log(`\n2. ${KITS} kits (notification period ${PERIOD} ms, their own process): ${active} observed by the readings bridge after ${((performance.now() - tStart) / 1000).toFixed(1)} s`);
  // One client observes every kit through the gateway, sharing the bridge's upstream observations.
  const watcher = await CoapEndpoint.create({ host: '127.0.0.1', port: 0 });
  watcher.socket.setRecvBufferSize(4 << 20);
  await watcher.request(gw2, { method: Code.POST, uri: '/sessions', payload: Buffer.from(token), timeoutMs: 5000 });
  let received = 0;
  let watching = 0;
  // When the client received each notification: (mac, reading second) → wall ms.
  const relayed = new Map<string, number>();
  // Registrations go out 100 at a time: a client's own socket buffer holds only so many answers.
  for (let i = 0; i < macs.length; i += 100) {
    const regs = await Promise.all(
      macs.slice(i, i + 100).map((m) =>
        watcher
          .observe(gw2, { options: [stringOption(Option.PROXY_URI, proxyUri(m, DOMAIN, PATH))], confirmable: false, timeoutMs: 30_000 }, (n: CoapMessage) => {
            received++;
            relayed.set(`${m}|${n.payload.toString('latin1').split(',')[0]}`, wallMs());
          })
          .first.then(
            () => 1,
            () => 0,
          ),
      ),
    );
    watching += regs.reduce((a: number, b: number) => a + b, 0);
  }
  console.log(`   one client observing all ${watching} through the gateway; ${RUNS} windows of ${OBS_SECONDS} s:`);
  const ideal = (KITS * 1000) / PERIOD;
  const fractions: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const s0 = { ...g2.stats };
    const r0 = received;
    const w0 = wallMs();
    const c0 = process.cpuUsage();
    const k0 = cpuOf(fleet.pid!);
    await new Promise((r) => setTimeout(r, OBS_SECONDS * 1000));
    const w1 = wallMs();
    const dt = (w1 - w0) / 1000;
    const cpu = process.cpuUsage(c0);
    const kitCpu = cpuOf(fleet.pid!) - k0;
    const s1 = { ...g2.stats };
    const r1 = received;
    // Latencies of the readings the kits sent inside this window (a second's grace for the last ones).
    await new Promise((r) => setTimeout(r, 1000));
    const sent = await fleetLog(fleet, w0, w1);
    const toClient: number[] = [];
    const toStore: number[] = [];
    for (const [key, t] of sent) {
      const c = relayed.get(key);
      if (c !== undefined) toClient.push(c - t);
      const s = stored.get(key);
      if (s !== undefined) toStore.push(s - t);
    }
    const rate = (a: number, b: number) => (b - a) / dt;
    const storedRate = rate(s0.readingsStored, s1.readingsStored);
    fractions.push(storedRate / ideal);
    console.log(
      `   run ${run + 1} (${dt.toFixed(1)} s): in from kits ${rate(s0.notificationsIn, s1.notificationsIn).toFixed(0)}/s, kits sent ${(sent.size / dt).toFixed(0)}/s (ideal ${ideal.toFixed(0)}/s)`,
    );
    console.log(
      `      relayed ${rate(s0.notificationsRelayed, s1.notificationsRelayed).toFixed(0)}/s, client received ${((r1 - r0) / dt).toFixed(0)}/s; stored ${storedRate.toFixed(0)}/s = ${(storedRate / ideal).toFixed(3)} of ideal (store errors ${s1.storeErrors - s0.storeErrors}, ${services.store.kind})`,
    );
    console.log(
      `      relay latency, kit send → client: p50 ${ms(percentileOf(toClient, 50))} p99 ${ms(percentileOf(toClient, 99))} (${toClient.length} of ${sent.size} matched); → stored: p50 ${ms(percentileOf(toStore, 50))} p99 ${ms(percentileOf(toStore, 99))} (${toStore.length} matched)`,
    );
    console.log(
      `      CPU: gateway process ${((cpu.user + cpu.system) / 1e4 / dt).toFixed(1)} % of a core (${((cpu.user + cpu.system) / Math.max(1, s1.notificationsIn - s0.notificationsIn)).toFixed(1)} µs per notification in), kits' process ${((kitCpu * 100) / dt).toFixed(1)} %`,
    );
  }
  console.log(`   stored / ideal: min ${Math.min(...fractions).toFixed(3)}, median ${median(fractions).toFixed(3)} (target ≥ 0.98)`);
  const mem = process.memoryUsage();
  console.log(`   gateway process RSS ${(mem.rss / 2 ** 20).toFixed(0)} MiB, heap ${(mem.heapUsed / 2 ** 20).toFixed(0)} MiB (gateway, store and client; the kits in a second process)`);

  await watcher.close();
  fleet.kill('SIGTERM');
  await g2.stop();
  await services.store.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
}

/** A fleet child: N kits announcing to the gateway. */
/** callgrind_control on this process (asynchronously: the event loop keeps serving meanwhile). */
function callgrindControl(flag: string): Promise<void> {
  return new Promise((resolve, reject) => execFile('callgrind_control', [flag, String(process.pid)], (e) => (e ? reject(e) : resolve())));
}

/** --instructions, under callgrind: instructions per proxied request over a window after a warm-up one. */
async function countInstructions(gateway: Gateway, cfg: GenConfig, kitPid: number): Promise<void> {
  await generate(cfg, kitPid);
  await callgrindControl('-z');
  const f0 = gateway.stats.forwarded;
  await generate(cfg, kitPid);
  const f1 = gateway.stats.forwarded;
  await callgrindControl('-d');
  const total = callgrindTotal(process.env.REEF_BENCH_CALLGRIND_DIR!, arg('keep', ''));
  const n = f1 - f0;
  console.log(
    `\n   gateway under callgrind: ${n} proxied requests (${cfg.clients} clients × ${cfg.window} in flight) after a warm-up window: ${Math.round(total / n).toLocaleString('en-US')} instructions per proxied request (the whole process: every thread, the store included)`,
  );
}

/** --instructions: this bench again, under callgrind (children at full speed); resolves with its exit code. */
function underCallgrind(): Promise<number> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-bench-gw-cg-'));
  const child = spawn(
    'valgrind',
    ['--tool=callgrind', '--smc-check=all-non-file', `--callgrind-out-file=${path.join(dir, 'callgrind.out')}`, '--dump-instr=no', process.execPath, ...process.execArgv, ...process.argv.slice(1)],
    {
      stdio: ['ignore', 'inherit', 'ignore'],
      env: { ...process.env, REEF_BENCH_CALLGRIND_DIR: dir },
    },
  );
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      fs.rmSync(dir, { recursive: true, force: true });
      resolve(code ?? 1);
    }),
  );
}

async function startFleet(base: string, count: number, gwPort: number, period: number, keyFile: string, allowDirect: boolean): Promise<ChildProcess> {
  const child = spawn(process.execPath, [...childArgs(), process.argv[1]!, '--fleet', base, String(count), String(gwPort), String(period), keyFile, String(allowDirect)], {
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  await new Promise<void>((resolve, reject) => {
    lines(child, (l) => (l === 'ready' ? resolve() : undefined));
    child.once('exit', (code) => reject(new Error(`fleet exited ${code}`)));
  });
  return child;
}

/** The fleet's record of notifications sent between two wall times: (mac, reading second) → wall ms. */
function fleetLog(child: ChildProcess, from: number, to: number): Promise<Map<string, number>> {
  return new Promise((resolve) => {
    child.once('message', (m: [string, number][]) => resolve(new Map(m)));
    child.send({ from, to });
  });
}

/** The child: a fleet of kits announcing to the gateway, noting when each sends a notification. */
async function fleetChild(base: string, count: number, gwPort: number, period: number, keyFile: string, allowDirect: boolean): Promise<void> {
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
      allowDirect,
    }),
  );
  await fleet.start();
  const sent: [string, number][] = [];
  const note = (mac: string, msg: CoapMessage): void => {
    if (msg.code === Code.CONTENT && sent.length < 2_000_000) sent.push([`${mac}|${msg.payload.toString('latin1').split(',')[0]}`, wallMs()]);
  };
  // Notifications leave a kit's module NON, or CON (every 5th, RFC 7641 §4.5).
  for (const kit of fleet.kits) {
    const ep = kit.module.endpoint;
    const non = ep.sendNon.bind(ep);
    const con = ep.sendCon.bind(ep);
    ep.sendNon = (peer, msg) => {
      note(kit.mac, msg);
      non(peer, msg);
    };
    ep.sendCon = (peer, msg, o) => {
      note(kit.mac, msg);
      return con(peer, msg, o);
    };
  }
  process.on('message', (q: { from: number; to: number }) => process.send!(sent.filter(([, t]) => t >= q.from && t < q.to)));
  process.stdout.write('ready\n');
  process.once('SIGTERM', () => void fleet.stop().then(() => process.exit(0)));
  await new Promise(() => undefined);
}

/**
 * The child: a pipelined NON load of GET ?sens from `clients` sockets, `window` in flight each.
 * The load generator shares the two cores with what it measures, and the gateway arm runs three
 * processes where the direct one runs two, so every microsecond it spends per request is taken
 * from the gateway's arm only (the direct arm is bound by the kit's core). It is kept cheap, as
 * load generators are (wrk is written in C for this reason): the batched socket (recvmmsg and
 * sendmmsg, one JavaScript call per batch of answers), and each request copied from one encoded
 * template with its message ID and token written in, instead of encoding it again. --gen-dgram:
 * node:dgram and encoding per request, which takes a share of the two cores from the gateway's
 * arm.
 */
async function genChild(cfg: GenConfig): Promise<void> {
  const options = cfg.proxy ? [stringOption(Option.PROXY_URI, cfg.proxy)] : uriOptions(PATH);
  // The request with a 4-byte token: bytes 2–3 are the message ID, 4–7 the token (RFC 7252 §3).
  const template = serializeMessage({ type: NON, code: Code.GET, mid: 0, token: Buffer.alloc(4), options, payload: Buffer.alloc(0) });
  let done = 0;
  let errors = 0;
  let counting = false;
  let mid = 0;
  const socks: Datagrams[] = [];
  for (let c = 0; c < cfg.clients; c++) {
    const sock = await openDatagrams({ host: '127.0.0.1', port: 0, batched: !cfg.dgram, maxMessageSize: SUGGESTED_MAX_MESSAGE_SIZE });
    sock.setRecvBufferSize(1 << 20);
    if (cfg.proxy) {
      // The client's session: POST /sessions with the access token, from this very socket.
      const created = new Promise<void>((resolve) =>
        sock.listen(
          () => resolve(),
          () => undefined,
        ),
      );
      sock.send(serializeMessage({ type: CON, code: Code.POST, mid: ++mid, token: Buffer.from([c]), options: uriOptions('/sessions'), payload: Buffer.from(cfg.token) }), cfg.port, cfg.host);
      await created;
    }
    socks.push(sock);
  }
  for (const [c, sock] of socks.entries()) {
    const outstanding = new Map<number, number>();
    let tok = c << 24;
    const send = (): void => {
      tok = (c << 24) | ((tok + 1) & 0xffffff);
      mid = (mid + 1) & 0xffff;
      outstanding.set(tok, performance.now());
      let b: Buffer;
      if (cfg.dgram) {
        const token = Buffer.allocUnsafe(4);
        token.writeUInt32BE(tok >>> 0);
        b = serializeMessage({ type: NON, code: Code.GET, mid, token, options, payload: Buffer.alloc(0) });
      } else {
        b = Buffer.allocUnsafe(template.length);
        template.copy(b);
        b.writeUInt16BE(mid, 2);
        b.writeUInt32BE(tok >>> 0, 4);
      }
      sock.send(b, cfg.port, cfg.host);
    };
    sock.listen(
      (b: Buffer) => {
        if ((b[0]! & 0x0f) !== 4 || b.length < 8) return;
        const t = b.readUInt32BE(4) | 0;
        if (!outstanding.delete(t)) return;
        if (counting) {
          done++;
          if (b[1] !== Code.CONTENT) errors++;
        }
        send();
      },
      (e) => console.error(`generator socket: ${e.message}`),
    );
    // Requests lost on a full buffer are re-issued so the window stays full.
    setInterval(() => {
      const now = performance.now();
      for (const [k, t] of outstanding) {
        if (now - t <= 1000) continue;
        outstanding.delete(k);
        send();
      }
    }, 200).unref();
    for (let i = 0; i < cfg.window; i++) send();
  }
  await new Promise((r) => setTimeout(r, 500));
  counting = true;
  const u0 = process.cpuUsage();
  const t0 = performance.now();
  process.stdout.write('counting\n');
  await new Promise((r) => setTimeout(r, cfg.seconds * 1000));
  counting = false;
  const secs = (performance.now() - t0) / 1000;
  const u = process.cpuUsage(u0);
  process.stdout.write(JSON.stringify({ rps: done / secs, done, errors, genUs: (u.user + u.system) / Math.max(1, done) }) + '\n');
  await Promise.all(socks.map((s) => s.close()));
}

const fi = process.argv.indexOf('--fleet');
const gi = process.argv.indexOf('--gen');
const a = (k: number) => process.argv[fi + k]!;
const outer = INSTRUCTIONS && !process.env.REEF_BENCH_CALLGRIND_DIR;
(fi > 0
  ? fleetChild(a(1), Number(a(2)), Number(a(3)), Number(a(4)), a(5), a(6) === 'true')
  : gi > 0
    ? genChild(JSON.parse(process.argv[gi + 1]!) as GenConfig)
    : outer
      ? underCallgrind().then((code) => {
          if (code !== 0) throw new Error(`the bench under callgrind exited ${code}`);
        })
      : main()
).then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
