// npm run bench:alarms — what alarm rules cost ingest, and how fast a broken rule reaches a webhook.
// One run, three real `reef serve` child processes (fresh SQLite store each): 0, 1,000 and 10,000
// rules on 1,000 devices (10 per device at 10,000: above, below, outside and rate of change, none of
// which the data breaks — the usual case), then the same uploads as bench:ingest (batches of 1,000
// over HTTP, 4 in flight) with recent timestamps so every reading is evaluated.
// The three servers run side by side and ingest in interleaved rounds (--rounds), so load from
// elsewhere on the machine weighs on each alike.
//   acknowledged: observations per second until each upload's 201, summed over the rounds;
//   ratio:        against the 0-rule server (target ≥ 0.90);
//   server CPU:   what each server process spent per 1,000 observations (/proc schedstat, every thread), the
//                 cost measure least disturbed by other load on a shared machine: the median over the
//                 rounds, and the median of each round's ratio to the 0-rule server measured in the
//                 same round (rounds are paired, so a busy minute weighs on both sides of a ratio);
//   caught up:    after the last upload, the time until a probe reading's webhook arrives
//                 (evaluation is in order, so everything before it has been judged).
// Then, with 10,000 rules, the time from uploading a reading that breaks a rule to the webhook
// arriving at a receiver on loopback, p50/p99 over --probes samples.
// With --instructions N (e.g. 20000): afterwards the 0-rule and the most-rules server are restarted
// one at a time under valgrind's callgrind on their own data (rules, devices, tokens kept), warmed up
// with N observations, and the instructions of N more observations counted (bench/instructions.ts
// explains the method): a figure other load on the machine does not move.
//   --observations N (default 300000)  --devices N  --batch N  --concurrency N  --probes N  --rounds N  --rules 0,1000,10000
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { arg, callgrindTotal, fmt, machine, median, percentile, quantile, reefCli, request, serve, threadCpuSeconds } from './lib.ts';

const TOTAL = Number(arg('observations', '300000'));
const DEVICES = Number(arg('devices', '1000'));
const BATCH = Number(arg('batch', '1000'));
const CONCURRENCY = Number(arg('concurrency', '4'));
const PROBES = Number(arg('probes', '200'));
const RULE_COUNTS = arg('rules', '0,1000,10000').split(',').map(Number);
const ROUNDS = Number(arg('rounds', '16'));
const INSTRUCTIONS = Number(arg('instructions', '0'));

/** A local webhook receiver: resolves the waiter of each alarm event as it arrives. */
async function receiver() {
  const waiters: ((event: string) => void)[] = [];
  const srv = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.writeHead(204).end();
      const event = (JSON.parse(Buffer.concat(chunks).toString()) as { event: string }).event;
      waiters.shift()?.(event);
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}/hook`,
    next: () => new Promise<string>((r) => waiters.push(r)),
    close: () => new Promise((r) => srv.close(r)),
  };
}

async function parallel<T>(items: T[], n: number, f: (x: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) await f(items[next++]!);
    }),
  );
}

function ruleBody(i: number, deviceId: string) {
  switch (i % 4) {
    case 0:
      return { condition: 'above', threshold: 1000, duration: '10m', hysteresis: 1, deviceId };
    case 1:
      return { condition: 'below', threshold: -1000, hysteresis: 1, deviceId };
    case 2:
      return { condition: 'outside', low: -500, high: 500, duration: '5m', deviceId };
    default:
      return { condition: 'rate', ratePerMinute: 1000, deviceId };
  }
}

interface Node {
  rules: number;
  server: Awaited<ReturnType<typeof serve>>;
  dir: string;
  base: string;
  h: Record<string, string>;
  ids: string[];
  probe: string;
  next: number[];
  secs: number;
  /** Server CPU seconds (user + system) spent during this node's ingest slices. */
  cpu: number;
  /** Per round: server CPU seconds per observation. */
  perRound: number[];
}

/** A server with its devices and rules, ready to ingest. */
async function setup(rules: number, rx: Awaited<ReturnType<typeof receiver>>): Promise<Node> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-bench-alarms-'));
  const creds = JSON.parse(reefCli(['account', 'create', '--name', 'bench', '--json', '--data-dir', dir]));
  // The webhook receiver listens on loopback, which webhooks reach only when allowed (docs/security.md).
  const server = await serve({ REEF_DATA_DIR: dir, REEF_ALARM_WEBHOOK_ALLOW_PRIVATE: 'true' });
  const tok = JSON.parse((await request(`${server.url}/api/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(creds) })).body).accessToken as string;
  const h = { authorization: tok, 'content-type': 'application/json' };
  const base = `${server.url}/api/solutions/StudioSimulation`;
  const ids: string[] = [];
  for (let i = 0; i <= DEVICES; i++) {
    const r = await request(`${base}/devices`, { method: 'POST', headers: h, body: JSON.stringify({ deviceType: 'VirtualDevice', domainInfo: {} }) });
    ids.push(JSON.parse(r.body).id);
  }
  const probe = ids.pop()!;
  await parallel(
    Array.from({ length: rules }, (_, i) => i),
    8,
    async (i) => {
      const r = await request(`${base}/alarm-rules`, { method: 'POST', headers: h, body: JSON.stringify(ruleBody(i, ids[i % DEVICES]!)) });
      if (r.status !== 201) throw new Error(`rule: ${r.status} ${r.body}`);
    },
  );
  // The probe rule (its webhook tells when evaluation has caught up) exists only with rules: with
  // none, the evaluator does not even listen, which is the baseline.
  if (rules > 0) {
    const r = await request(`${base}/alarm-rules`, {
      method: 'POST',
      headers: h,
      body: JSON.stringify({ condition: 'above', threshold: 50, hysteresis: 1, deviceId: probe, webhook: { url: rx.url } }),
    });
    if (r.status !== 201) throw new Error(`probe rule: ${r.status} ${r.body}`);
  }
  return { rules, server, dir, base, h, ids, probe, next: new Array(DEVICES).fill(0), secs: 0, cpu: 0, perRound: [] };
}

const PER_DEVICE = Math.ceil(TOTAL / DEVICES);
const START = Date.now() - PER_DEVICE * 1000;

/** Uploads `count` observations (batches round-robin over devices, timestamps continuing); returns seconds. */
async function ingest(n: Node, count: number): Promise<number> {
  const bodies: { path: string; body: Buffer }[] = [];
  for (let k = 0; k * BATCH < count; k++) {
    const d = k % DEVICES;
    const m = Math.min(BATCH, count - k * BATCH);
    const obs = Array.from({ length: m }, (_, i) => ({
      timestamp: new Date(START + (n.next[d]! + i) * 1000).toISOString(),
      temperature: Math.round((20 + 5 * Math.sin((n.next[d]! + i) / 500)) * 100) / 100,
    }));
    n.next[d]! += m;
    bodies.push({ path: `${n.base}/devices/${n.ids[d]}/observations`, body: Buffer.from(JSON.stringify({ observations: obs })) });
  }
  const t = performance.now();
  await parallel(bodies, CONCURRENCY, async (b) => {
    const r = await request(b.path, { method: 'POST', headers: n.h, body: b.body });
    if (r.status !== 201) throw new Error(`upload: ${r.status} ${r.body}`);
  });
  return (performance.now() - t) / 1000;
}

/**
 * Restarts the node's server under callgrind on the same data directory, uploads INSTRUCTIONS
 * observations to warm up, then counts the instructions (every thread) of INSTRUCTIONS more.
 */
async function instructions(n: Node): Promise<number> {
  await n.server.stop();
  const out = path.join(n.dir, 'callgrind.out');
  n.server = await serve(
    { REEF_DATA_DIR: n.dir, REEF_ALARM_WEBHOOK_ALLOW_PRIVATE: 'true' },
    [],
    ['valgrind', '--tool=callgrind', '--smc-check=all-non-file', `--callgrind-out-file=${out}`, '--dump-instr=no'],
  );
  n.base = `${n.server.url}/api/solutions/StudioSimulation`;
  await ingest(n, INSTRUCTIONS);
  const pid = String(n.server.child.pid!);
  execFileSync('callgrind_control', ['-z', pid]);
  await ingest(n, INSTRUCTIONS);
  // Evaluation of the last batch runs just after its answer: give it time (both servers alike).
  await new Promise((r) => setTimeout(r, 3000));
  execFileSync('callgrind_control', ['-d', pid]);
  return callgrindTotal(n.dir);
}

/** Uploads a reading that breaks the probe rule; resolves when its webhook has arrived (ms). */
async function probe(n: Node, rx: Awaited<ReturnType<typeof receiver>>, ts: number, temperature: number): Promise<number> {
  const got = rx.next();
  const t = performance.now();
  await request(`${n.base}/devices/${n.probe}/observations`, { method: 'POST', headers: n.h, body: JSON.stringify({ observations: [{ timestamp: new Date(ts).toISOString(), temperature }] }) });
  await got;
  return performance.now() - t;
}

console.log(`bench:alarms — ${fmt(TOTAL)} observations per server, ${fmt(DEVICES)} devices, batches of ${fmt(BATCH)}, ${CONCURRENCY} uploads in flight, SQLite, ${ROUNDS} interleaved rounds`);
console.log(`machine: ${machine()}`);
const rx = await receiver();
const nodes: Node[] = [];
for (const n of RULE_COUNTS) nodes.push(await setup(n, rx));
try {
  // Rounds rotate the order, so a machine that gets busier or quieter during the run weighs on
  // every rule count alike (the machine is shared; separate runs drift by tens of percent).
  const per = Math.ceil(TOTAL / ROUNDS / BATCH) * BATCH;
  for (let r = 0; r < ROUNDS; r++) {
    for (let j = 0; j < nodes.length; j++) {
      const n = nodes[(j + r) % nodes.length]!;
      const count = Math.min(per, TOTAL - r * per);
      const c0 = threadCpuSeconds(n.server.child.pid!);
      n.secs += await ingest(n, count);
      // (Evaluation of the last batch may run just after this read: it counts in the next slice.)
      const c = threadCpuSeconds(n.server.child.pid!) - c0;
      n.cpu += c;
      n.perRound.push(c / count);
    }
  }
  // After the last upload: how long until the evaluator has caught up (the probe's webhook).
  const lag = new Map<Node, number>();
  for (const n of nodes)
    if (n.rules > 0) {
      lag.set(n, await probe(n, rx, Date.now(), 60));
      await probe(n, rx, Date.now() + 1, 20); // cleared
    }
  const base = TOTAL / nodes[0]!.secs;
  const b0 = nodes[0]!;
  for (const n of nodes) {
    const rate = TOTAL / n.secs;
    // Each round's ratio to the baseline's slice of the same round, then the median of those.
    const ratios = n.perRound.map((c, r) => c / b0.perRound[r]!);
    console.log(
      `${fmt(n.rules).padStart(6)} rules: ${fmt(rate).padStart(8)} obs/s acknowledged (×${fmt(rate / base, 2)}); server CPU per 1,000 observations: median ${fmt(median(n.perRound) * 1e6, 2)} ms (paired ratio median ×${fmt(median(ratios), 3)}, middle half ×${fmt(quantile(ratios, 0.25), 3)}–${fmt(quantile(ratios, 0.75), 3)}), all rounds ${fmt((n.cpu * 1e6) / TOTAL, 2)} ms (×${fmt(n.cpu / b0.cpu, 3)})` +
        (lag.has(n) ? `; evaluation caught up ${fmt(lag.get(n)!, 0)} ms after the last upload` : '') +
        `; peak RSS ${fmt(n.server.peakRss() / 2 ** 20)} MiB`,
    );
  }
  const most = nodes[nodes.length - 1]!;
  if (most.rules > 0) {
    const lat: number[] = [];
    let ts = Date.now() + 10;
    for (let i = 0; i < PROBES; i++) {
      lat.push(await probe(most, rx, ts++, 60));
      await probe(most, rx, ts++, 20);
    }
    lat.sort((a, b) => a - b);
    console.log(`reading → webhook with ${fmt(most.rules)} rules: p50 ${fmt(percentile(lat, 50), 1)} ms, p99 ${fmt(percentile(lat, 99), 1)} ms (${lat.length} samples)`);
  }
  if (INSTRUCTIONS > 0) {
    const counted = new Map<Node, number>();
    for (const n of [nodes[0]!, nodes[nodes.length - 1]!]) counted.set(n, await instructions(n));
    const base0 = counted.get(nodes[0]!)!;
    for (const [n, ir] of counted) console.log(`${fmt(n.rules).padStart(6)} rules under callgrind: ${fmt(ir / INSTRUCTIONS)} instructions per observation (×${fmt(ir / base0, 3)})`);
  }
  const worst = Math.min(...nodes.slice(1).map((n) => TOTAL / n.secs));
  if (nodes.length > 1) console.log(`worst ratio to ${nodes[0]!.rules} rules: ${fmt(worst / base, 2)} (target ≥ 0.90: ${worst / base >= 0.9 ? 'met' : 'NOT met'})`);
} finally {
  for (const n of nodes) {
    await n.server.stop();
    fs.rmSync(n.dir, { recursive: true, force: true });
  }
  await rx.close();
}
process.exit(0);
