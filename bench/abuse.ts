// `npm run bench:abuse`: a victim tenant keeps working on a real `reef serve` (child process,
// loopback) while a hostile tenant or a stranger runs one flood after another (docs/security.md
// "Limits"). Each flood is bounded in time (--seconds, default 10) and in count. The victim runs in
// its own process (its own event loop, as a client is another machine): every 50 ms an HTTP read
// or a one-observation upload, and every 100 ms an MQTT publish (QoS 1) to its ingest topic, which
// its own subscriber receives once stored. Per flood, printed against the same run's quiet baseline:
//   victim HTTP p99 (goal ≤ 50 ms), MQTT delivery p99 (goal ≤ 250 ms), node RSS growth
//   (goal ≤ 200 MB), acknowledged-lost (must be 0; checked at the end, every acknowledged
//   observation looked up), and for the webhook flood the victim's webhook latency.
// Floods: a stalled MQTT subscriber fed 1 MB messages; a few thousand silent TCP connections to
// HTTP; many MQTT connections from one token; QoS 2 publishes never released (no PUBREL); `tags=`
// reads matching nothing, looped, with parallel huge-bucket reads; webhooks to a receiver that never
// answers; many silence rules; bogus logins from many loopback addresses (127.0.0.x).
// Options: --seconds S (10), --store sqlite|postgres, --database-url URL
// (postgres://postgres@127.0.0.1:5432/reef_abuse), --only NAME[,NAME] (floods to run).
import { fork, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import mqtt from 'mqtt';
import mqttPacket from 'mqtt-packet';
import { arg, fmt, machine, percentileOf, request, serve } from './lib.ts';

const SECONDS = Number(arg('seconds', '10'));
const STORE = arg('store', 'sqlite');
const DB_URL = arg('database-url', 'postgres://postgres@127.0.0.1:5432/reef_abuse');
const ONLY = arg('only', '');
const ADMIN = 'abuse-bench-admin-key-0123456789';
const SOL = 'StudioSimulation';
const T0 = Date.UTC(2026, 0, 1);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.timeOrigin + performance.now();

interface Tenant {
  tenantId: string;
  clientId: string;
  clientSecret: string;
  token: string;
  devices: string[];
}

type ToVictim = { cmd: 'phase'; name: string } | { cmd: 'end' };
type FromVictim = { ready: true } | { phase: string; http: number[]; mqtt: number[]; webhook: number[]; httpErrors: number; mqttErrors: number } | { acked: { http: number[]; mqtt: number[] } };

// ---- the victim (child process) -----------------------------------------------------------------

async function victim(plan: { api: string; broker: string; v: Tenant; hookPort: number }): Promise<void> {
  const send = (m: FromVictim) => process.send!(m);
  const { api, v } = plan;
  const auth = { authorization: v.token, 'content-type': 'application/json' };
  const dev = v.devices[0]!;
  const alarmDev = v.devices[1]!;
  let seq = 0;
  const acked = { http: [] as number[], mqtt: [] as number[] };
  let cur = { http: [] as number[], mqtt: [] as number[], webhook: [] as number[], httpErrors: 0, mqttErrors: 0 };
  // Webhook receipts: the alarm upload's time travels in the reading.
  const hookSent = new Map<string, number>();
  http
    .createServer((req, res) => {
      let b = '';
      req.on('data', (c) => (b += c));
      req.on('end', () => {
        res.writeHead(200).end();
        try {
          const d = JSON.parse(b) as { event: string; alarm: { reading?: { timestamp?: string } } };
          const ts = d.event === 'raised' ? d.alarm.reading?.timestamp : undefined;
          const sent = ts ? hookSent.get(ts) : undefined;
          if (sent !== undefined) cur.webhook.push(now() - sent);
        } catch {}
      });
    })
    .listen(plan.hookPort, '127.0.0.1');
  const sub = await mqtt.connectAsync(plan.broker, { username: 'x', password: v.token, protocolVersion: 4, reconnectPeriod: 0 });
  const topic = `${v.tenantId}/solutions/${SOL}/devices/${dev}/observations`;
  await sub.subscribeAsync(topic, { qos: 0 });
  sub.on('message', (_t, p) => {
    try {
      const o = (JSON.parse(p.toString()) as { observations: { sent: number }[] }).observations[0]!;
      cur.mqtt.push(now() - o.sent);
    } catch {}
  });
  const pub = await mqtt.connectAsync(plan.broker, { username: 'x', password: v.token, protocolVersion: 4, reconnectPeriod: 0 });
  let running = true;
  let alarmHigh = false;
  const httpLoop = async () => {
    for (let i = 0; running; i++) {
      const t = now();
      try {
        if (i % 2 === 0) {
          const r = await request(`${api}/api/solutions/${SOL}/devices/${dev}/observations?limit=100`, { headers: auth });
          if (r.status !== 200) cur.httpErrors++;
        } else {
          const ts = T0 + ++seq * 1000;
          const r = await request(`${api}/api/solutions/${SOL}/devices/${dev}/observations`, {
            method: 'POST',
            headers: auth,
            body: JSON.stringify({ observations: [{ timestamp: new Date(ts).toISOString(), temperature: 20 }] }),
          });
          if (r.status === 201) acked.http.push(ts);
          else cur.httpErrors++;
        }
        cur.http.push(now() - t);
      } catch {
        cur.httpErrors++;
      }
      // Every second: a reading that raises or clears the victim's alarm (a webhook each time).
      if (i % 20 === 10) {
        alarmHigh = !alarmHigh;
        const at = new Date(Date.now()).toISOString();
        hookSent.set(at, now());
        await request(`${api}/api/solutions/${SOL}/devices/${alarmDev}/observations`, {
          method: 'POST',
          headers: auth,
          body: JSON.stringify({ observations: [{ timestamp: at, temperature: alarmHigh ? 90 : 10 }] }),
        }).catch(() => undefined);
      }
      await sleep(Math.max(0, 50 - (now() - t)));
    }
  };
  const mqttLoop = async () => {
    while (running) {
      const t = now();
      const ts = T0 + 1e9 + ++seq * 1000;
      try {
        // Bounded: a PUBACK that never comes is an error, not a stuck victim.
        const puback = pub.publishAsync(topic, JSON.stringify({ observations: [{ timestamp: new Date(ts).toISOString(), temperature: 21, sent: now() }] }), { qos: 1 });
        const late = sleep(5000).then(() => 'late' as const);
        if ((await Promise.race([puback, late])) === 'late') throw new Error('no PUBACK within 5 s');
        acked.mqtt.push(ts);
      } catch {
        cur.mqttErrors++;
      }
      await sleep(Math.max(0, 100 - (now() - t)));
    }
  };
  const loops = Promise.all([httpLoop(), mqttLoop()]);
  send({ ready: true });
  process.on('message', async (m: ToVictim) => {
    if (m.cmd === 'phase') {
      send({ phase: m.name, ...cur });
      cur = { http: [], mqtt: [], webhook: [], httpErrors: 0, mqttErrors: 0 };
    } else {
      running = false;
      await loops;
      send({ acked });
      sub.end(true);
      pub.end(true);
      process.exit(0);
    }
  });
}

if (process.argv[2] === '--victim') {
  await victim(JSON.parse(process.argv[3]!));
} else {
  await main();
}

// ---- the bench ----------------------------------------------------------------------------------

async function main(): Promise<void> {
  if (STORE === 'postgres') {
    const name = new URL(DB_URL).pathname.slice(1);
    spawnSync('psql', ['-h', '127.0.0.1', '-U', 'postgres', '-c', `DROP DATABASE IF EXISTS ${name}`, '-c', `CREATE DATABASE ${name}`], { stdio: 'ignore' });
  }
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-abuse-'));
  const server = await serve(
    {
      REEF_DATA_DIR: dataDir,
      REEF_ADMIN_KEY: ADMIN,
      REEF_MQTT_PORT: '0',
      REEF_MQTT_TLS_PORT: '0',
      REEF_ALARM_WEBHOOK_ALLOW_PRIVATE: 'true',
      ...(STORE === 'postgres' ? { REEF_DATABASE_URL: DB_URL } : {}),
    },
    ['--mqtt', 'true'],
  );
  const api = server.url.replace(/\/$/, '');
  const pid = server.child.pid!;
  const rss = () => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;

  const tenant = async (name: string, devices: number): Promise<Tenant> => {
    const a = JSON.parse(
      (await request(`${api}/api/admin/accounts`, { method: 'POST', headers: { 'x-reef-admin-key': ADMIN, 'content-type': 'application/json' }, body: JSON.stringify({ name }) })).body,
    ) as Tenant;
    const tok = JSON.parse(
      (await request(`${api}/api/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ clientId: a.clientId, clientSecret: a.clientSecret }) })).body,
    ) as {
      accessToken: string;
    };
    const t: Tenant = { ...a, token: tok.accessToken, devices: [] };
    for (let i = 0; i < devices; i++) {
      const r = await request(`${api}/api/solutions/${SOL}/devices`, {
        method: 'POST',
        headers: { authorization: t.token, 'content-type': 'application/json' },
        body: JSON.stringify({ deviceType: 'VirtualDevice' }),
      });
      t.devices.push((JSON.parse(r.body) as { id: string }).id);
    }
    return t;
  };
  const h = (t: Tenant) => ({ authorization: t.token, 'content-type': 'application/json' });
  const info = JSON.parse((await request(`${api}/api/mqtt`, { headers: { authorization: (await tenant('probe', 0)).token } })).body) as { url: string };
  const broker = info.url;
  const v = await tenant('victim', 2);
  const x = await tenant('hostile', 200);
  // The victim's alarm: raised above 50, cleared below, a webhook each time.
  const hookPort = await new Promise<number>((r) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => r(p));
    });
  });
  await request(`${api}/api/solutions/${SOL}/alarm-rules`, {
    method: 'POST',
    headers: h(v),
    body: JSON.stringify({ condition: 'above', threshold: 50, deviceId: v.devices[1], webhook: `http://127.0.0.1:${hookPort}/hook` }),
  });
  // The hostile tenant's history for the read floods: 200,000 observations on 20 devices.
  for (let d = 0; d < 20; d++) {
    for (let b = 0; b < 10; b++) {
      const obs = Array.from({ length: 1000 }, (_, i) => ({ timestamp: new Date(T0 + (b * 1000 + i) * 60_000).toISOString(), temperature: 15 + (i % 10) }));
      await request(`${api}/api/solutions/${SOL}/devices/${x.devices[d]}/observations`, { method: 'POST', headers: h(x), body: JSON.stringify({ observations: obs }) });
    }
  }

  const child = fork(new URL(import.meta.url).pathname, ['--victim', JSON.stringify({ api, broker, v, hookPort })], { execArgv: process.execArgv });
  const fromChild = <T extends FromVictim>(pred: (m: FromVictim) => boolean) =>
    new Promise<T>((r) => {
      const on = (m: FromVictim) => {
        if (!pred(m)) return;
        child.off('message', on);
        r(m as T);
      };
      child.on('message', on);
    });
  await fromChild((m) => 'ready' in m);

  const rows: { name: string; http: number; mqtt: number; webhook: number; rssGrowth: number; errors: string }[] = [];
  const phase = async (name: string, flood: (until: number) => Promise<void>) => {
    if (ONLY && name !== 'baseline' && !ONLY.split(',').some((o) => name.includes(o))) return;
    const r0 = rss();
    let peak = r0;
    const sampler = setInterval(() => (peak = Math.max(peak, rss())), 250);
    child.send({ cmd: 'phase', name: 'reset' } satisfies ToVictim);
    await fromChild((m) => 'phase' in m && m.phase === 'reset');
    const until = Date.now() + SECONDS * 1000;
    await Promise.race([flood(until).catch((e: Error) => console.error(`${name}: ${e.message}`)), sleep(SECONDS * 1000 + 20_000)]);
    await sleep(Math.max(0, until - Date.now()));
    clearInterval(sampler);
    child.send({ cmd: 'phase', name } satisfies ToVictim);
    const m = await fromChild<Extract<FromVictim, { phase: string }>>((m) => 'phase' in m && m.phase === name);
    const row = {
      name,
      http: percentileOf(m.http, 99),
      mqtt: percentileOf(m.mqtt, 99),
      webhook: percentileOf(m.webhook, 99),
      rssGrowth: (peak - r0) / 1e6,
      errors: `${m.httpErrors}/${m.http.length + m.httpErrors} http, ${m.mqttErrors} mqtt, ${m.webhook.length} hooks`,
    };
    rows.push(row);
    console.log(`${name.padEnd(26)} http p99 ${fmt(row.http, 1)} ms, mqtt p99 ${fmt(row.mqtt, 1)} ms, webhook p99 ${fmt(row.webhook, 0)} ms, rss +${fmt(row.rssGrowth)} MB (${row.errors})`);
    // Let the node settle before the next flood.
    await sleep(2000);
  };

  console.log(`bench:abuse on ${machine()}, store ${STORE}, ${SECONDS} s per flood`);
  // A quiet warm-up (not reported: JIT, caches, the setup's writes settling), then the baseline.
  await sleep(SECONDS * 1000);
  await phase('baseline', async () => {});

  await phase('stalled MQTT subscriber', async (until) => {
    // A subscriber that connects, subscribes, and never reads again; its publisher sends 1 MB messages.
    const sock = net.connect(Number(new URL(broker).port), '127.0.0.1');
    sock.on('error', () => undefined);
    sock.write(mqttPacket.generate({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: true, keepalive: 0, clientId: 'stalled', username: 'x', password: Buffer.from(x.token) }));
    const topic = `${x.tenantId}/solutions/${SOL}/devices/${x.devices[199]}/observations`;
    await sleep(200);
    sock.write(mqttPacket.generate({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic, qos: 0 }] }));
    await sleep(200);
    sock.pause();
    const pub = await mqtt.connectAsync(broker, { username: 'x', password: x.token, protocolVersion: 4, reconnectPeriod: 0 });
    const pad = 'x'.repeat(1_000_000);
    for (let i = 0; i < 60 && Date.now() < until; i++) {
      await pub.publishAsync(topic, JSON.stringify({ observations: [{ timestamp: new Date(T0 + 5e9 + i * 1000).toISOString(), temperature: 1, pad }] }), { qos: 1 }).catch(() => undefined);
    }
    await sleep(Math.max(0, until - Date.now()));
    pub.end(true);
    sock.destroy();
  });

  await phase('silent HTTP connections', async (until) => {
    const port = Number(new URL(api).port);
    const socks: net.Socket[] = [];
    for (let i = 0; i < 3000 && Date.now() < until; i++) {
      const s = net.connect(port, '127.0.0.1');
      s.on('error', () => undefined);
      socks.push(s);
      if (i % 100 === 99) await sleep(10);
    }
    await sleep(Math.max(0, until - Date.now()));
    for (const s of socks) s.destroy();
  });

  await phase('MQTT connections, one token', async (until) => {
    const clients: mqtt.MqttClient[] = [];
    for (let i = 0; i < 1000 && Date.now() < until; i++) {
      clients.push(mqtt.connect(broker, { username: 'x', password: x.token, protocolVersion: 4, reconnectPeriod: 0, connectTimeout: 5000 }).on('error', () => undefined));
      if (i % 50 === 49) await sleep(20);
    }
    await sleep(Math.max(0, until - Date.now()));
    for (const c of clients) c.end(true);
  });

  await phase('QoS 2 without PUBREL', async (until) => {
    const sock = net.connect(Number(new URL(broker).port), '127.0.0.1');
    sock.on('error', () => undefined);
    sock.on('data', () => undefined);
    sock.write(mqttPacket.generate({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: true, keepalive: 0, clientId: 'norel', username: 'x', password: Buffer.from(x.token) }));
    await sleep(200);
    const topic = `${x.tenantId}/solutions/${SOL}/devices/${x.devices[198]}/observations`;
    for (let i = 1; i <= 20_000 && Date.now() < until; i++) {
      const body = JSON.stringify({ observations: [{ timestamp: new Date(T0 + 6e9 + i * 1000).toISOString(), temperature: 1 }] });
      sock.write(mqttPacket.generate({ cmd: 'publish', topic, payload: body, qos: 2, messageId: i, retain: false, dup: false }));
      if (i % 500 === 0) await sleep(20);
    }
    await sleep(Math.max(0, until - Date.now()));
    sock.destroy();
  });

  await phase('tags= misses, huge buckets', async (until) => {
    const worker = async (i: number) => {
      while (Date.now() < until) {
        const url =
          i % 2
            ? `${api}/api/solutions/${SOL}/observations?from=2025-01-01T00:00:00Z&to=2027-01-01T00:00:00Z&tags=nothing-${i}&limit=10000`
            : `${api}/api/solutions/${SOL}/devices/${x.devices[i % 20]}/observations?from=2026-01-01T00:00:00Z&to=2026-01-01T20:00:00Z&bucket=1s`;
        await request(url, { headers: h(x) }).catch(() => undefined);
      }
    };
    await Promise.all(Array.from({ length: 16 }, (_, i) => worker(i)));
  });

  await phase('webhooks, silent receiver', async (until) => {
    const hung: http.ServerResponse[] = [];
    const rx = http.createServer((_q, res) => hung.push(res)).listen(0, '127.0.0.1');
    await new Promise((r) => rx.once('listening', r));
    const url = `http://127.0.0.1:${(rx.address() as net.AddressInfo).port}/hook`;
    const rule = JSON.parse(
      (await request(`${api}/api/solutions/${SOL}/alarm-rules`, { method: 'POST', headers: h(x), body: JSON.stringify({ condition: 'above', threshold: -1000, webhook: url }) })).body,
    ) as { id: string };
    // One alarm per device: 200 deliveries to the silent receiver.
    await Promise.all(
      x.devices.map((d) =>
        request(`${api}/api/solutions/${SOL}/devices/${d}/observations`, {
          method: 'POST',
          headers: h(x),
          body: JSON.stringify({ observations: [{ timestamp: new Date().toISOString(), temperature: 1 }] }),
        }),
      ),
    );
    await sleep(Math.max(0, until - Date.now()));
    await request(`${api}/api/solutions/${SOL}/alarm-rules/${rule.id}`, { method: 'DELETE', headers: { authorization: x.token } });
    for (const r of hung) r.destroy();
    rx.closeAllConnections();
    rx.close();
  });

  await phase('silence rules', async (until) => {
    const ids: string[] = [];
    for (let i = 0; i < 200 && Date.now() < until; i++) {
      const r = await request(`${api}/api/solutions/${SOL}/alarm-rules`, { method: 'POST', headers: h(x), body: JSON.stringify({ condition: 'silence', silence: '10s' }) });
      if (r.status === 201) ids.push((JSON.parse(r.body) as { id: string }).id);
    }
    await sleep(Math.max(0, until - Date.now()));
    for (const id of ids) await request(`${api}/api/solutions/${SOL}/alarm-rules/${id}`, { method: 'DELETE', headers: { authorization: x.token } });
  });

  await phase('bogus logins, 127.0.0.x', async (until) => {
    const port = Number(new URL(api).port);
    const body = JSON.stringify({ clientId: x.clientId, clientSecret: 'wrong-secret-wrong-secret' });
    const worker = async (i: number) => {
      for (let n = 0; n < 300 && Date.now() < until; n++) {
        const from = `127.0.0.${2 + ((i * 300 + n) % 250)}`;
        await new Promise<void>((resolve) => {
          const req = http.request(
            { host: '127.0.0.1', port, path: '/api/tokens', method: 'POST', localAddress: from, headers: { 'content-type': 'application/json', connection: 'close' } },
            (res) => {
              res.resume();
              res.on('end', resolve);
            },
          );
          req.on('error', () => resolve());
          req.end(body);
        });
      }
    };
    await Promise.all(Array.from({ length: 16 }, (_, i) => worker(i)));
  });

  // Acknowledged-lost: every observation the victim was told was stored, looked up.
  child.send({ cmd: 'end' } satisfies ToVictim);
  const { acked } = await fromChild<Extract<FromVictim, { acked: unknown }>>((m) => 'acked' in m);
  const have = new Set<number>();
  let next: string | null = `${api}/api/solutions/${SOL}/devices/${v.devices[0]}/observations?limit=10000`;
  while (next) {
    const r = await request(next, { headers: { authorization: v.token } });
    for (const o of JSON.parse(r.body).observations as { timestamp: string }[]) have.add(Date.parse(o.timestamp));
    const link = r.headers.next_page;
    next = typeof link === 'string' && link ? new URL(link, api).toString() : null;
  }
  const lost = [...acked.http, ...acked.mqtt].filter((t) => !have.has(t)).length;
  const base = rows[0]!;
  console.log('');
  console.log('| flood | victim HTTP p99 ms (goal ≤ 50) | ×baseline | MQTT delivery p99 ms (goal ≤ 250) | ×baseline | webhook p99 ms | node RSS growth MB (goal ≤ 200) | victim errors |');
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const r of rows) {
    console.log(
      `| ${r.name} | ${fmt(r.http, 1)} | ${fmt(r.http / base.http, 1)} | ${fmt(r.mqtt, 1)} | ${fmt(r.mqtt / base.mqtt, 1)} | ${Number.isNaN(r.webhook) ? '—' : fmt(r.webhook, 0)} | ${fmt(r.rssGrowth)} | ${r.errors} |`,
    );
  }
  console.log(`\nacknowledged: ${acked.http.length} HTTP uploads, ${acked.mqtt.length} MQTT publishes; acknowledged-lost: ${lost} (must be 0)`);
  await server.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
  process.exit(0);
}
