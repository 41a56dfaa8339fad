// Shared by the alarm tests: a real server with the alarms component on a clock the test moves,
// devices, uploads and a local webhook receiver that checks signatures.
import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAlarmComponent, type AlarmComponentOptions, type AlarmParts } from '../../src/alarms/component.ts';
import type { ReefEvent } from '../../src/events/bus.ts';
import { startTestServer, type TestOverrides, type TestServer } from './server.ts';

// The fake clock starts at the real time: devices are stamped with their real creation time, and a
// device made "after" the fake now would never count as silent.
export const T0 = Date.now();
export const MIN = 60_000;
export const iso = (ms: number) => new Date(ms).toISOString();

export interface AlarmServer extends TestServer {
  parts: AlarmParts;
  clock: { now: number };
  /** Waits until every observation and change published so far has been evaluated. */
  settle(): Promise<void>;
}

/**
 * The receivers of these tests listen on loopback, which webhooks may reach only when the operator
 * allows it (REEF_ALARM_WEBHOOK_ALLOW_PRIVATE): allowed here unless `overrides.alarms` says otherwise.
 */
export async function startAlarmServer(overrides: TestOverrides = {}, opts: AlarmComponentOptions = {}, clock = { now: T0 }): Promise<AlarmServer> {
  let parts: AlarmParts | undefined;
  const server = await startTestServer({ alarms: { webhookAllowPrivate: true, webhookAllowCidrs: [] }, ...overrides }, [
    createAlarmComponent({ now: () => clock.now, silenceCheckMs: 0, deliveryPollMs: 0, ...opts, onReady: (p) => (parts = p) }),
  ]);
  return Object.assign(server, {
    parts: parts!,
    clock,
    async settle() {
      await parts!.engine.flush();
      await parts!.sender.deliverDue();
    },
  });
}

export async function newDevice(s: TestServer, token: string, solution = 'StudioSimulation'): Promise<string> {
  const r = await s.request('POST', `/api/solutions/${solution}/devices`, { token, body: { deviceType: 'VirtualDevice', domainInfo: { location: { latitude: 1, longitude: 2 } } } });
  if (r.status !== 201) throw new Error(`device: ${r.status} ${await r.text()}`);
  return ((await r.json()) as { id: string }).id;
}

export async function upload(s: TestServer, token: string, id: string, observations: Record<string, unknown>[], solution = 'StudioSimulation'): Promise<void> {
  const r = await s.request('POST', `/api/solutions/${solution}/devices/${id}/observations`, { token, body: { observations } });
  if (r.status !== 201) throw new Error(`upload: ${r.status} ${await r.text()}`);
}

/** One reading at T0 + minutes; the clock moves to just after it (it arrives as it is taken). */
export function at(s: AlarmServer, minutes: number, temperature: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const ts = T0 + minutes * MIN;
  s.clock.now = ts + 1000;
  return { timestamp: iso(ts), temperature, ...extra };
}

export async function createRule(s: TestServer, token: string, body: Record<string, unknown>, solution = 'StudioSimulation'): Promise<Record<string, any>> {
  const r = await s.request('POST', `/api/solutions/${solution}/alarm-rules`, { token, body });
  if (r.status !== 201) throw new Error(`rule: ${r.status} ${await r.text()}`);
  return (await r.json()) as Record<string, any>;
}

export async function alarms(s: TestServer, token: string, query = '', solution = 'StudioSimulation'): Promise<Record<string, any>[]> {
  const r = await s.request('GET', `/api/solutions/${solution}/alarms${query}`, { token });
  if (r.status !== 200) throw new Error(`alarms: ${r.status} ${await r.text()}`);
  return ((await r.json()) as { alarms: Record<string, any>[] }).alarms;
}

/** The next event of a kind on a node's bus. */
export function nextEvent(s: TestServer, pred: (e: ReefEvent) => boolean): Promise<ReefEvent> {
  return new Promise((resolve) => {
    const off = s.services.events.subscribe((e) => {
      if (pred(e)) {
        off();
        resolve(e);
      }
    });
  });
}

export interface Receipt {
  body: string;
  headers: http.IncomingHttpHeaders;
  /** The signature checked with the secret the rule's creation answered. */
  validSignature: (secret: string) => boolean;
}

/** A local webhook receiver: answers each request with the next status of `statuses` (the last one repeats). */
export async function receiver(statuses: number[] | 'hang'): Promise<{ url: string; received: Receipt[]; next(): Promise<Receipt>; close(): Promise<void> }> {
  const received: Receipt[] = [];
  const waiters: ((r: Receipt) => void)[] = [];
  const hung: http.ServerResponse[] = [];
  const srv = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const receipt: Receipt = {
        body,
        headers: req.headers,
        validSignature(secret) {
          const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(req.headers['x-reef-signature']));
          return !!m && createHmac('sha256', secret).update(`${m[1]}.${body}`).digest('hex') === m[2];
        },
      };
      received.push(receipt);
      waiters.shift()?.(receipt);
      if (statuses === 'hang') return void hung.push(res);
      const status = statuses[Math.min(received.length - 1, statuses.length - 1)]!;
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    next: () => new Promise((r) => waiters.push(r)),
    async close() {
      for (const res of hung) res.destroy();
      srv.closeAllConnections();
      await new Promise((r) => srv.close(r));
    },
  };
}
