// Hostile HTTP input: bodies and broken requests get the uniform error body with the
// right status, slow senders are reaped, next_page never echoes the client's Host header, the
// bridge's payload limit holds for every content type, and the data directory is private.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { provisionKit } from '../../../src/service/devices.ts';
import { startTestServer, tempDir, type TestServer } from '../../helpers/server.ts';
import { startGateway, type GatewayHarness } from '../../helpers/gateway.ts';
import { assertClean, tally } from './tally.ts';

/** Sends raw bytes; resolves with what came back when the server closes (or after `capMs`). */
function raw(server: TestServer, bytes: string, opts: { capMs?: number; keepOpen?: boolean } = {}): Promise<string> {
  const u = new URL(server.url);
  return new Promise((resolve) => {
    let out = '';
    const c = net.connect(Number(u.port), u.hostname, () => c.write(bytes));
    c.setEncoding('utf8');
    c.on('data', (d: string) => (out += d));
    c.on('close', () => resolve(out));
    c.on('error', () => undefined);
    setTimeout(() => c.destroy(), opts.capMs ?? 10_000).unref();
  });
}

function uniform(answer: string): { status: number; body: Record<string, unknown> } {
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
  const text = answer.slice(answer.indexOf('\r\n\r\n') + 4);
  const body = JSON.parse(text) as Record<string, unknown>;
  for (const k of ['statusCode', 'code', 'error', 'message', 'requestId']) assert.ok(k in body, `uniform body lacks ${k}: ${text}`);
  assert.equal(body.statusCode, status);
  return { status, body };
}

describe('hostile HTTP', () => {
  let s: TestServer;
  let token: string;
  before(async () => {
    s = await startTestServer({ http: { requestTimeoutMs: 1000 } });
    token = (await s.login('hostile')).token;
  });
  after(() => s.close());

  it('JSON nested thousands deep is 400 with the uniform body on every JSON route, never 500', async () => {
    const probe = tally('deep JSON');
    const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
    const dev = ((await (await s.request('POST', '/api/solutions/StudioSimulation/devices', { token, body: { deviceType: 'VirtualDevice' } })).json()) as { id: string }).id;
    const routes: [string, string, string][] = [
      ['POST', '/api/tokens', `{"clientId":${deep(4100)},"clientSecret":"x"}`],
      ['POST', '/api/solutions/StudioSimulation/devices', `{"deviceType":"x","domainInfo":{"a":${deep(4100)}}}`],
      ['POST', `/api/solutions/StudioSimulation/devices/${dev}/observations`, `{"observations":[{"timestamp":"2026-01-01T00:00:00Z","x":${deep(4100)}}]}`],
      ['POST', `/api/solutions/StudioSimulation/devices/${dev}/observations`, `{"observations":[{"timestamp":"2026-01-01T00:00:00Z","x":${deep(100_000)}}]}`],
      // A string ending in an escaped backslash ends there: the brackets after it count.
      ['POST', `/api/solutions/StudioSimulation/devices/${dev}/observations`, `{"observations":[{"timestamp":"2026-01-01T00:00:00Z","n":"a\\\\","x":${deep(100)}}]}`],
    ];
    for (const [method, url, body] of routes) {
      const r = await s.request(method, url, { token, body, headers: { 'content-type': 'application/json' } });
      probe.status(r.status, 400, `${method} ${url}`);
      const b = (await r.json()) as { code: string; requestId: string };
      assert.equal(b.code, 'VALIDATION_FAILED');
    }
    // Nesting within reason still works, brackets inside strings do not count.
    const ok = await s.request('POST', `/api/solutions/StudioSimulation/devices/${dev}/observations`, {
      token,
      body: `{"observations":[{"timestamp":"2026-01-01T00:00:00Z","note":"\\"${'['.repeat(500)}\\\\","x":${deep(20)}}]}`,
    });
    probe.status(ok.status, 201, 'moderate nesting');
    assertClean(probe);
  });

  it('414, 431, 400 and 408 carry the uniform body', async () => {
    const probe = tally('broken requests');
    const longSeg = uniform(await raw(s, `GET /api/solutions/${'a'.repeat(500)}/devices HTTP/1.1\r\nHost: x\r\nAuthorization: ${token}\r\n\r\n`, { capMs: 2000 }));
    probe.status(longSeg.status, 414, 'a path segment too long');
    assert.equal(longSeg.body.code, 'URI_TOO_LONG');
    const big = uniform(await raw(s, `GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`));
    probe.status(big.status, 431, 'headers too large');
    assert.equal(big.body.code, 'HEADERS_TOO_LARGE');
    const longUrl = uniform(await raw(s, `GET /api/${'a'.repeat(70_000)} HTTP/1.1\r\nHost: x\r\n\r\n`));
    probe.status(longUrl.status, 431, 'a URL past the header limit');
    const garbage = uniform(await raw(s, 'GET / HTTP/1.1\r\nHost x\r\n\r\n'));
    probe.status(garbage.status, 400, 'a broken header line');
    assert.equal(garbage.body.code, 'BAD_REQUEST');
    // A body promised and never finished: reaped with 408 (REEF_HTTP_REQUEST_TIMEOUT, 1 s here).
    const slow = uniform(await raw(s, `POST /api/tokens HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"clientId":`));
    probe.status(slow.status, 408, 'a body that never ends');
    assert.equal(slow.body.code, 'REQUEST_TIMEOUT');
    assertClean(probe);
  });

  it("next_page is built from the server's own address, not the client's Host header", async () => {
    const dev = ((await (await s.request('POST', '/api/solutions/StudioSimulation/devices', { token, body: { deviceType: 'VirtualDevice' } })).json()) as { id: string }).id;
    const obs = Array.from({ length: 5 }, (_, i) => ({ timestamp: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString(), temperature: i }));
    assert.equal((await s.request('POST', `/api/solutions/StudioSimulation/devices/${dev}/observations`, { token, body: { observations: obs } })).status, 201);
    const answer = await raw(s, `GET /api/solutions/StudioSimulation/devices/${dev}/observations?limit=2 HTTP/1.1\r\nHost: evil.example\r\nAuthorization: ${token}\r\nConnection: close\r\n\r\n`);
    const next = /\r\nnext_page: (\S+)/i.exec(answer)?.[1];
    assert.ok(next, 'a next_page header');
    assert.ok(next.startsWith(s.url + '/'), `next_page ${next} starts with ${s.url}`);
    assert.ok(!next.includes('evil.example'));
  });
});

describe('REEF_PUBLIC_URL sets the origin of next_page links', () => {
  it('uses the configured public URL', async () => {
    const s = await startTestServer({ http: { publicUrl: 'https://reef.example.org/base' } });
    try {
      const { token } = await s.login('pub');
      const dev = ((await (await s.request('POST', '/api/solutions/StudioSimulation/devices', { token, body: { deviceType: 'VirtualDevice' } })).json()) as { id: string }).id;
      const obs = Array.from({ length: 3 }, (_, i) => ({ timestamp: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString(), temperature: i }));
      await s.request('POST', `/api/solutions/StudioSimulation/devices/${dev}/observations`, { token, body: { observations: obs } });
      const r = await s.request('GET', `/api/solutions/StudioSimulation/devices/${dev}/observations?limit=1`, { token });
      assert.match(r.headers.get('next_page') ?? '', /^https:\/\/reef\.example\.org\/base\/api\/solutions\/StudioSimulation\/devices\/[0-9a-f-]+\/observations\?limit=1&after=/);
    } finally {
      await s.close();
    }
  });
});

describe('the HTTP bridge payload limit', () => {
  let h: GatewayHarness;
  before(async () => {
    h = await startGateway();
  });
  after(() => h.close());

  it('a text/plain body past 1,024 bytes is 413 at once, as JSON is; nothing reaches the kit', async () => {
    const owner = await h.t.login('bridge-limit');
    const { device } = await h.kit(owner.tenantId, '00000000000033c1');
    const url = `${h.t.url}/api/solutions/sandbox/devices/${device.id}/coap/snsr/arduino/temp?cfg=C`;
    const probe = tally('bridge payload limit');
    for (const size of [1025, 60_000, 70_000, 1_000_000]) {
      const r = await fetch(url, { method: 'PUT', headers: { authorization: owner.token, 'content-type': 'text/plain' }, body: 'x'.repeat(size) });
      probe.status(r.status, 413, `text/plain ${size} bytes`);
      assert.equal(((await r.json()) as { code: string }).code, 'PAYLOAD_TOO_LARGE');
    }
    const json = await fetch(url, { method: 'PUT', headers: { authorization: owner.token, 'content-type': 'application/json' }, body: JSON.stringify({ payload: 'x'.repeat(2000) }) });
    probe.status(json.status, 413, 'JSON payload 2000 bytes');
    assertClean(probe);
  });
});

describe('expected kit failures are not logged as errors', () => {
  it('an offline kit and a kit that answers nothing: one info line each, no error, no stack', async () => {
    const lines: { level: number; msg: string; err?: unknown }[] = [];
    const log = pino({ level: 'debug' }, { write: (l: string) => lines.push(JSON.parse(l)) });
    const h = await startGateway({ log });
    try {
      const owner = await h.t.login('quiet');
      const { device, kit } = await h.kit(owner.tenantId, '00000000000044d1');
      await kit.stop(); // known to the gateway, no longer answering: 504 after the deadline
      const offline = await provisionKit(h.t.services.store, null, (await h.t.services.store.getAccountByTenantId(owner.tenantId))!, '00000000000044d2');
      const read = (id: string) => fetch(`${h.t.url}/api/solutions/sandbox/devices/${id}/coap/snsr/arduino/temp?sens`, { headers: { authorization: owner.token } });
      assert.equal((await read(offline.device.id)).status, 503);
      assert.equal((await read(device.id)).status, 504);
      const errors = lines.filter((l) => l.level >= 50);
      assert.deepEqual(errors, [], 'nothing at error level');
      const upstream = lines.filter((l) => l.msg === 'request failed upstream');
      assert.equal(upstream.length, 2);
      assert.ok(
        upstream.every((l) => l.err === undefined),
        'no stack traces',
      );
    } finally {
      await h.close();
    }
  });
});

describe('the data directory is private', () => {
  it('reef.db (signing keys) and the demo credentials are readable by their owner only', async () => {
    const parent = tempDir();
    const dataDir = path.join(parent, 'data');
    const s = await startTestServer({ dataDir, demo: true });
    try {
      const mode = (p: string) => fs.statSync(p).mode & 0o777;
      assert.equal(mode(dataDir), 0o700);
      assert.equal(mode(path.join(dataDir, 'reef.db')), 0o600);
      assert.equal(mode(path.join(dataDir, 'demo-account.json')), 0o600);
      for (const f of ['reef.db-wal', 'reef.db-shm']) if (fs.existsSync(path.join(dataDir, f))) assert.equal(mode(path.join(dataDir, f)), 0o600, f);
    } finally {
      await s.close();
      fs.rmSync(parent, { recursive: true, force: true });
    }
  });
});
