// npm run bench:alarms — what alarm rules cost ingest, and how fast a broken rule reaches a webhook.
// One run, three real `reef serve` child processes (fresh SQLite store each): 0, 1,000 and 10,000
// rules on 1,000 devices (10 per device at 10,000: above, below, outside and rate of change, none of
// which the data breaks — the usual case), then the same uploads as bench:ingest (batches of 1,000
// over HTTP, 4 in flight) with recent timestamps so every reading is evaluated.
//   acknowledged: observations per second until the last upload's 201;
//   evaluated:    until the evaluator has also judged the last reading (a probe reading uploaded
//                 after the last batch reaches the local webhook receiver; evaluation is in order);
//   ratio:        each against the 0-rule run of the same process (target ≥ 0.90).
// Then, with 10,000 rules, the time from uploading a reading that breaks a rule to the webhook
// arriving at a receiver on loopback, p50/p99 over --probes samples.
//   --observations N (default 300000)  --devices N  --batch N  --concurrency N  --probes N
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { arg, fmt, machine, percentile, reefCli, request, serve } from './lib.ts';

const TOTAL = Number(arg('observations', '300000'));
const DEVICES = Number(arg('devices', '1000'));
const BATCH = Number(arg('batch', '1000'));
const CONCURRENCY = Number(arg('concurrency', '4'));
const PROBES = Number(arg('probes', '200'));
const RULE_COUNTS = arg('rules', '0,1000,10000').split(',').map(Number);

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
  await Promise.all(Array.from({ length: n }, async () => {
    while (next < items.length) await f(items[next++]!);
  }));
}

function ruleBody(i: number, deviceId: string) {
  switch (i % 4) {
    case 0: return { condition: 'above', threshold: 1000, duration: '10m', hysteresis: 1, deviceId };
    case 1: return { condition: 'below', threshold: -1000, hysteresis: 1, deviceId };
    case 2: return { condition: 'outside', low: -500, high: 500, duration: '5m', deviceId };
    default: return { condition: 'rate', ratePerMinute: 1000, deviceId };
  }
}

async function run(rules: number, rx: Awaited<ReturnType<typeof receiver>>, measureLatency: boolean) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-bench-alarms-'));
  const creds = JSON.parse(reefCli(['account', 'create', '--name', 'bench', '--json', '--data-dir', dir]));
  const server = await serve({ REEF_DATA_DIR: dir });
  try {
    const tok = JSON.parse((await request(`${server.url}/api/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(creds) })).body).accessToken as string;
    const h = { authorization: tok, 'content-type': 'application/json' };
    const base = `${server.url}/api/solutions/StudioSimulation`;
    const ids: string[] = [];
    for (let i = 0; i <= DEVICES; i++) {
      const r = await request(`${base}/devices`, { method: 'POST', headers: h, body: JSON.stringify({ deviceType: 'VirtualDevice', domainInfo: {} }) });
      ids.push(JSON.parse(r.body).id);
    }
    const probe = ids.pop()!;
    await parallel(Array.from({ length: rules }, (_, i) => i), 8, async (i) => {
      const r = await request(`${base}/alarm-rules`, { method: 'POST', headers: h, body: JSON.stringify(ruleBody(i, ids[i % DEVICES]!)) });
      if (r.status !== 201) throw new Error(`rule: ${r.status} ${r.body}`);
    });
    // The probe rule (its webhook marks "evaluated") exists only in runs with rules: with none, the
    // evaluator does not even listen, which is the baseline.
    if (rules > 0) {
      const r = await request(`${base}/alarm-rules`, { method: 'POST', headers: h, body: JSON.stringify({ condition: 'above', threshold: 50, hysteresis: 1, deviceId: probe, webhook: { url: rx.url } }) });
      if (r.status !== 201) throw new Error(`probe rule: ${r.status} ${r.body}`);
    }

    // Recent timestamps (evaluated, not backfill): each device's readings 1 s apart, ending now.
    const perDevice = Math.ceil(TOTAL / DEVICES);
    const start = Date.now() - perDevice * 1000;
    const next = new Array(DEVICES).fill(0);
    const bodies: { path: string; body: Buffer }[] = [];
    for (let k = 0; k * BATCH < TOTAL; k++) {
      const d = k % DEVICES;
      const n = Math.min(BATCH, TOTAL - k * BATCH);
      const obs = Array.from({ length: n }, (_, i) => ({ timestamp: new Date(start + (next[d] + i) * 1000).toISOString(), temperature: Math.round((20 + 5 * Math.sin((next[d] + i) / 500)) * 100) / 100 }));
      next[d] += n;
      bodies.push({ path: `${base}/devices/${ids[d]}/observations`, body: Buffer.from(JSON.stringify({ observations: obs })) });
    }
    const t = performance.now();
    await parallel(bodies, CONCURRENCY, async (b) => {
      const r = await request(b.path, { method: 'POST', headers: h, body: b.body });
      if (r.status !== 201) throw new Error(`upload: ${r.status} ${r.body}`);
    });
    const acked = (performance.now() - t) / 1000;
    let evaluated = NaN;
    if (rules > 0) {
      const got = rx.next();
      await request(`${base}/devices/${probe}/observations`, { method: 'POST', headers: h, body: JSON.stringify({ observations: [{ timestamp: new Date().toISOString(), temperature: 60 }] }) });
      await got;
      evaluated = (performance.now() - t) / 1000;
      const cleared = rx.next();
      await request(`${base}/devices/${probe}/observations`, { method: 'POST', headers: h, body: JSON.stringify({ observations: [{ timestamp: new Date(Date.now() + 1).toISOString(), temperature: 20 }] }) });
      await cleared;
    }

    const lat: number[] = [];
    if (measureLatency) {
      let ts = Date.now() + 10;
      for (let i = 0; i < PROBES; i++) {
        const raised = rx.next();
        const t0 = performance.now();
        await request(`${base}/devices/${probe}/observations`, { method: 'POST', headers: h, body: JSON.stringify({ observations: [{ timestamp: new Date(ts++).toISOString(), temperature: 60 }] }) });
        await raised;
        lat.push(performance.now() - t0);
        const cleared = rx.next();
        await request(`${base}/devices/${probe}/observations`, { method: 'POST', headers: h, body: JSON.stringify({ observations: [{ timestamp: new Date(ts++).toISOString(), temperature: 20 }] }) });
        await cleared;
      }
      lat.sort((a, b) => a - b);
    }
    return { acked: TOTAL / acked, evaluated: TOTAL / evaluated, rss: server.peakRss(), lat };
  } finally {
    await server.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

console.log(`bench:alarms — ${fmt(TOTAL)} observations, ${fmt(DEVICES)} devices, batches of ${fmt(BATCH)}, ${CONCURRENCY} uploads in flight, SQLite`);
console.log(`machine: ${machine()}`);
const rx = await receiver();
const results: { rules: number; r: Awaited<ReturnType<typeof run>> }[] = [];
for (const n of RULE_COUNTS) {
  const r = await run(n, rx, n === Math.max(...RULE_COUNTS));
  results.push({ rules: n, r });
  const base = results[0]!.r.acked;
  console.log(
    `${fmt(n).padStart(6)} rules: acknowledged ${fmt(r.acked).padStart(8)} obs/s (×${fmt(r.acked / base, 2)})` +
      (Number.isNaN(r.evaluated) ? '' : `   evaluated ${fmt(r.evaluated).padStart(8)} obs/s (×${fmt(r.evaluated / base, 2)})`) +
      `   peak RSS ${fmt(r.rss / 2 ** 20)} MiB`,
  );
}
const last = results[results.length - 1]!;
if (last.r.lat.length) {
  console.log(`reading → webhook with ${fmt(last.rules)} rules: p50 ${fmt(percentile(last.r.lat, 50), 1)} ms, p99 ${fmt(percentile(last.r.lat, 99), 1)} ms (${last.r.lat.length} samples)`);
}
const worst = Math.min(...results.slice(1).map((x) => Math.min(x.r.acked, Number.isNaN(x.r.evaluated) ? Infinity : x.r.evaluated)));
if (results.length > 1) console.log(`worst ratio to 0 rules: ${fmt(worst / results[0]!.r.acked, 2)} (target ≥ 0.90: ${worst / results[0]!.r.acked >= 0.9 ? 'met' : 'NOT met'})`);
await rx.close();
process.exit(0);
