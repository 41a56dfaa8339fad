// `npm run bench:mqtt`: the MQTT broker's fan-out and ingest, on loopback, in one run.
// 1. Fan-out: readings of 1,000 kits (one per kit per second, as `kit-payload` events on the event
//    bus, the path the gateway's readings take) published to 100 subscribers (10 tenants × 100 kits,
//    10 subscribers per tenant, each subscribed to `<tenant>/alert/+/+`): deliveries/s against the
//    ideal rate, and the latency from the bus to the subscriber (p50/p99). The kit → gateway leg is
//    bench:gateway's.
// 2. Ingest: the same batches of observations uploaded over MQTT (QoS 1, PUBACK after the store) and
//    over HTTP (POST, 201), the same number in flight, observations stored per second, both in this run.
// The subscribers and the ingest clients run in a child process (their own event loop, as clients
// are other machines); the service (SQLite store, HTTP, broker) runs here.
// Options: --kits N (1000), --tenants N (10), --subscribers N (100), --seconds S (15),
//          --batches N (400), --batch N (100 observations), --inflight N (8).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import mqtt, { type MqttClient } from 'mqtt';
import { createAccount } from '../src/auth/accounts.ts';
import { testConfig } from '../src/config/config.ts';
import { mqttComponent } from '../src/mqtt/component.ts';
import { startServer } from '../src/server.ts';
import { arg, machine, percentileOf } from './lib.ts';

const KITS = Number(arg('kits', '1000'));
const TENANTS = Number(arg('tenants', '10'));
const SUBSCRIBERS = Number(arg('subscribers', '100'));
const SECONDS = Number(arg('seconds', '15'));
const BATCHES = Number(arg('batches', '400'));
const BATCH = Number(arg('batch', '100'));
const INFLIGHT = Number(arg('inflight', '8'));

const now = () => performance.timeOrigin + performance.now();

interface Plan {
  broker: string;
  api: string;
  tenants: { tenantId: string; token: string; devices: string[] }[];
  subscribers: number;
  base: number;
}

type ToChild = { cmd: 'fanout-stop' } | { cmd: 'ingest'; kind: 'mqtt' | 'http'; round: number };
type FromChild = { ready: true } | { fanout: { delivered: number; latencies: number[] } } | { ingest: { kind: string; observations: number; ms: number; failures: number } };

// ---- the child: subscribers and ingest clients ---------------------------------------------------

async function child(plan: Plan): Promise<void> {
  const send = (m: FromChild) => process.send!(m);
  const subs: MqttClient[] = [];
  let delivered = 0;
  const latencies: number[] = [];
  const perTenant = Math.max(1, Math.floor(plan.subscribers / plan.tenants.length));
  for (const t of plan.tenants) {
    for (let i = 0; i < perTenant; i++) {
      const c = await mqtt.connectAsync(plan.broker, { username: 'notused', password: t.token, protocolVersion: 4, reconnectPeriod: 0 });
      c.on('message', (_topic, payload) => {
        delivered++;
        // The reading's value is the time it was put on the bus (ms since `base`): see publish below.
        const sent = Number(payload.toString('latin1').split(',')[1]);
        if (delivered % 10 === 0) latencies.push(now() - plan.base - sent);
      });
      await c.subscribeAsync(`${t.tenantId}/alert/+/+`, { qos: 0 });
      subs.push(c);
    }
  }
  send({ ready: true });
  process.on('message', (m: ToChild) => {
    if (m.cmd === 'fanout-stop') {
      send({ fanout: { delivered, latencies } });
      for (const c of subs) c.end(true);
    } else void ingest(plan, m.kind, m.round).then((r) => send({ ingest: r }));
  });
}

async function ingest(plan: Plan, kind: 'mqtt' | 'http', round: number): Promise<{ kind: string; observations: number; ms: number; failures: number }> {
  const t = plan.tenants[0]!;
  const client = kind === 'mqtt' ? await mqtt.connectAsync(plan.broker, { username: 'notused', password: t.token, protocolVersion: 4, reconnectPeriod: 0 }) : null;
  // New timestamps in every round (no round replaces another's rows): each batch is BATCH new seconds.
  const offset = round * BATCHES * BATCH;
  const body = (n: number) =>
    JSON.stringify({
      observations: Array.from({ length: BATCH }, (_, i) => ({ timestamp: new Date(Date.UTC(2026, 0, 1) + (offset + n * BATCH + i) * 1000).toISOString(), temperature: 20 + ((n + i) % 50) / 10 })),
    });
  let next = 0;
  let failures = 0;
  const t0 = performance.now();
  const worker = async () => {
    while (next < BATCHES) {
      const n = next++;
      const device = t.devices[n % t.devices.length]!;
      if (client) {
        await client.publishAsync(`${t.tenantId}/solutions/bench/devices/${device}/observations`, body(n), { qos: 1 }).catch(() => failures++);
      } else {
        const r = await fetch(`${plan.api}/api/solutions/bench/devices/${device}/observations`, {
          method: 'POST',
          headers: { authorization: t.token, 'content-type': 'application/json' },
          body: body(n),
        });
        if (r.status !== 201) failures++;
        await r.arrayBuffer();
      }
    }
  };
  await Promise.all(Array.from({ length: INFLIGHT }, worker));
  const ms = performance.now() - t0;
  await client?.endAsync();
  return { kind, observations: BATCHES * BATCH, ms, failures };
}

// ---- the parent: the service and the kit readings -----------------------------------------------

async function main(): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-bench-mqtt-'));
  const factory = mqttComponent({ retain: false });
  const base = testConfig({ dataDir });
  const server = await startServer({ ...base, mqtt: { ...base.mqtt, port: 0 } }, { components: [factory] });
  const broker = factory.last!.broker;
  const s = server.services;
  const tenants: Plan['tenants'] = [];
  for (let i = 0; i < TENANTS; i++) {
    const c = await createAccount(s.store, { name: `bench-${i}` });
    const { accessToken } = await s.auth.login(c.clientId, c.clientSecret);
    const devices: string[] = [];
    if (i === 0) {
      for (let d = 0; d < 10; d++) {
        const r = await fetch(`${server.url}/api/solutions/bench/devices`, {
          method: 'POST',
          headers: { authorization: accessToken, 'content-type': 'application/json' },
          body: '{"deviceType":"Bench"}',
        });
        devices.push(((await r.json()) as { id: string }).id);
      }
    }
    tenants.push({ tenantId: c.tenantId, token: accessToken, devices });
  }
  const plan: Plan = { broker: `mqtt://127.0.0.1:${broker.address().port}`, api: server.url, tenants, subscribers: SUBSCRIBERS, base: now() };
  const kid = spawn(process.execPath, [...process.execArgv, process.argv[1]!, ...process.argv.slice(2), '--child'], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, REEF_BENCH_PLAN: JSON.stringify(plan) },
  });
  const messages: FromChild[] = [];
  const waiters: (() => void)[] = [];
  kid.on('message', (m: FromChild) => {
    messages.push(m);
    for (const w of waiters.splice(0)) w();
  });
  const next = async <K extends string>(key: K): Promise<Extract<FromChild, Record<K, unknown>>> => {
    for (;;) {
      const i = messages.findIndex((m) => key in m);
      if (i >= 0) return messages.splice(i, 1)[0] as Extract<FromChild, Record<K, unknown>>;
      await new Promise<void>((r) => waiters.push(r));
    }
  };
  await next('ready');

  // 1. Fan-out: KITS readings per second, spread over 10 ms ticks, for SECONDS.
  const perTenant = Math.max(1, Math.floor(SUBSCRIBERS / TENANTS));
  const kits = Array.from({ length: KITS }, (_, k) => ({ t: tenants[k % TENANTS]!, mac: (0x00135000_00000000n + BigInt(k)).toString(16).padStart(16, '0') }));
  const rssBefore = process.memoryUsage().rss;
  const t0 = performance.now();
  let published = 0;
  for (let tick = 0; tick < SECONDS * 100; tick++) {
    const due = Math.floor(((tick + 1) * KITS) / 100) - Math.floor((tick * KITS) / 100);
    for (let j = 0; j < due; j++) {
      const k = kits[published % KITS]!;
      const payload = Buffer.from(`${Math.floor(Date.now() / 1000)},${(now() - plan.base).toFixed(2)},C`);
      s.events.publish({ kind: 'kit-payload', groupId: k.t.tenantId, tenantId: k.t.tenantId, mac: k.mac, sensorType: 'temp', payload: payload.toString('base64') });
      published++;
    }
    const wait = t0 + (tick + 1) * 10 - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  const elapsed = (performance.now() - t0) / 1000;
  await new Promise((r) => setTimeout(r, 2000)); // what is in flight arrives
  kid.send({ cmd: 'fanout-stop' } satisfies ToChild);
  const { fanout } = await next('fanout');
  const ideal = published * perTenant;
  const rssAfter = process.memoryUsage().rss;

  // 2. Ingest, MQTT then HTTP then MQTT again (the first round warms the store).
  const rounds: { kind: string; observations: number; ms: number; failures: number }[] = [];
  for (const [round, kind] of (['mqtt', 'http', 'mqtt', 'http'] as const).entries()) {
    kid.send({ cmd: 'ingest', kind, round } satisfies ToChild);
    rounds.push((await next('ingest')).ingest);
  }
  kid.kill();
  await server.close();
  fs.rmSync(dataDir, { recursive: true, force: true });

  const rate = (r: { observations: number; ms: number }) => (r.observations / r.ms) * 1000;
  const best = (kind: string) => Math.max(...rounds.filter((r) => r.kind === kind).map(rate));
  console.log(`machine: ${machine()}`);
  console.log(`fan-out: ${KITS} kits × 1/s for ${elapsed.toFixed(1)} s, ${TENANTS} tenants, ${perTenant * TENANTS} subscribers (${perTenant} per tenant)`);
  console.log(`  published ${published} (${(published / elapsed).toFixed(0)}/s), ideal deliveries ${ideal} (${(ideal / elapsed).toFixed(0)}/s)`);
  console.log(`  delivered ${fanout.delivered} (${(fanout.delivered / elapsed).toFixed(0)}/s, ${((fanout.delivered / ideal) * 100).toFixed(1)} % of ideal)`);
  console.log(`  latency bus → subscriber: p50 ${percentileOf(fanout.latencies, 50).toFixed(2)} ms, p99 ${percentileOf(fanout.latencies, 99).toFixed(2)} ms (every 10th delivery)`);
  console.log(`  broker process RSS ${(rssBefore / 2 ** 20).toFixed(0)} → ${(rssAfter / 2 ** 20).toFixed(0)} MB; stats ${JSON.stringify(broker.stats)}`);
  console.log(`ingest: ${BATCHES} batches × ${BATCH} observations, ${INFLIGHT} in flight`);
  for (const r of rounds) console.log(`  ${r.kind.padEnd(4)} ${rate(r).toFixed(0)} obs/s (${r.ms.toFixed(0)} ms, ${r.failures} failures)`);
  console.log(`  best: MQTT ${best('mqtt').toFixed(0)} obs/s, HTTP ${best('http').toFixed(0)} obs/s, MQTT/HTTP ${(best('mqtt') / best('http')).toFixed(2)}×`);
}

if (process.argv.includes('--child')) void child(JSON.parse(process.env.REEF_BENCH_PLAN!) as Plan);
else
  main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
