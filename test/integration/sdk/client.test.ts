// The SDK against a real running service: tokens and their renewal, devices, paging, batched
// uploads, typed errors (400/401/404/429/503) and retries, the live stream. Where a failure the
// service cannot be made to produce is needed (503 with Retry-After on a given call), a small real
// HTTP proxy in front of the real service injects it.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { testClock } from '../../helpers/clock.ts';
import { startTestServer, tempDir, type TestServer } from '../../helpers/server.ts';
import { ApiError, NetworkError, ReefClient, decodeJwtClaims, type Observation } from '../../../src/sdk/index.ts';

/** The global fetch, counting calls by "METHOD path" (the real requests still go out). */
function countingFetch() {
  const calls: string[] = [];
  const f: typeof fetch = (input, init) => {
    const u = new URL(String(input));
    calls.push(`${init?.method ?? 'GET'} ${u.pathname}`);
    return fetch(input, init);
  };
  return { fetch: f, calls, count: (prefix: string) => calls.filter((c) => c.startsWith(prefix)).length };
}

function series(n: number, start = Date.UTC(2026, 0, 1), stepMs = 1000): Observation[] {
  return Array.from({ length: n }, (_, i) => ({ timestamp: new Date(start + i * stepMs).toISOString(), temperature: Math.round((20 + Math.sin(i / 50) * 5) * 1000) / 1000 }));
}

/**
 * A real HTTP proxy in front of the service. `inject` makes the next matching requests fail with
 * the given status (and the uniform error body) instead of being forwarded.
 */
async function startProxy(target: string) {
  const seen: string[] = [];
  let rules: { method: string; times: number; status: number; retryAfter?: string; code: string }[] = [];
  const server = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url!.split('?')[0]}`);
    const rule = rules.find((r) => r.times > 0 && (r.method === '*' || r.method === req.method));
    if (rule) {
      rule.times--;
      req.resume();
      const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': 'proxy-' + seen.length };
      if (rule.retryAfter !== undefined) headers['retry-after'] = rule.retryAfter;
      res.writeHead(rule.status, headers);
      res.end(JSON.stringify({ statusCode: rule.status, code: rule.code, error: 'Unavailable', message: 'injected by the test proxy', requestId: 'proxy-' + seen.length }));
      return;
    }
    const t = new URL(target);
    const up = http.request({ host: t.hostname, port: t.port, method: req.method, path: req.url, headers: req.headers }, (ur) => {
      res.writeHead(ur.statusCode!, ur.headers);
      ur.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    seen,
    count: (prefix: string) => seen.filter((s) => s.startsWith(prefix)).length,
    inject(rule: { method: string; times: number; status: number; retryAfter?: string; code: string }) {
      rules.push(rule);
    },
    reset() {
      rules = [];
      seen.length = 0;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe('SDK: devices, observations and the stream', () => {
  let s: TestServer;
  let client: ReefClient;
  before(async () => {
    s = await startTestServer();
    client = new ReefClient({ endpoint: s.url, credentials: await s.account('sdk') });
  });
  after(() => s.close());

  it('creates, lists (with a type filter), gets and deletes devices', async () => {
    const a = await client.createDevice({ deviceType: 'Thermo', domainInfo: { location: { latitude: 52.5, longitude: 13.4 } } });
    const b = await client.createDevice({ deviceType: 'Hygro' });
    assert.match(a.id, /^[0-9a-f-]{36}$/);
    assert.deepEqual(a.domainInfo.location, { latitude: 52.5, longitude: 13.4 });
    const all = await client.listDevices();
    assert.deepEqual(new Set(all.map((d) => d.id)), new Set([a.id, b.id]));
    const thermo = await client.listDevices({ deviceType: 'Thermo' });
    assert.deepEqual(
      thermo.map((d) => d.id),
      [a.id],
    );
    assert.deepEqual(await client.getDevice(a.id), a);
    await client.deleteDevice(b.id);
    await assert.rejects(client.getDevice(b.id), (e: unknown) => e instanceof ApiError && e.status === 404 && e.code === 'DEVICE_NOT_FOUND');
    assert.deepEqual(
      (await client.listDevices()).map((d) => d.id),
      [a.id],
    );
  });

  it('inSolution addresses another solution with the same token', async () => {
    const sim = client.inSolution('StudioSimulation');
    const before = client.tokenRenewals;
    const d = await sim.createDevice({ deviceType: 'VirtualDevice', domainInfo: { location: { latitude: 1, longitude: 2 } } });
    assert.deepEqual(
      (await sim.listDevices()).map((x) => x.id),
      [d.id],
    );
    assert.ok(!(await client.listDevices()).some((x) => x.id === d.id), 'sandbox does not list it');
    assert.deepEqual(
      (await client.listDevices({ solution: 'StudioSimulation' })).map((x) => x.id),
      [d.id],
      'a call can name the solution too',
    );
    assert.equal(client.tokenRenewals, before, 'no new token for the sibling client');
  });

  it('pages through 5,000 observations by following next_page, newest first, none twice', async () => {
    const d = await client.createDevice({ deviceType: 'Thermo' });
    const obs = series(5000);
    for (let i = 0; i < obs.length; i += 2500) await client.uploadBatch(d.id, obs.slice(i, i + 2500));
    const counter = countingFetch();
    const c2 = new ReefClient({ endpoint: s.url, token: await client.getToken(), fetch: counter.fetch });
    const got: Observation[] = [];
    for await (const o of c2.observations(d.id, { pageSize: 1000 })) got.push(o);
    assert.equal(got.length, 5000);
    assert.equal(new Set(got.map((o) => o.timestamp)).size, 5000);
    assert.equal(got[0]!.timestamp, obs[4999]!.timestamp, 'newest first');
    assert.equal(got[4999]!.timestamp, obs[0]!.timestamp);
    for (let i = 1; i < got.length; i++) assert.ok(got[i - 1]!.timestamp > got[i]!.timestamp);
    assert.equal(got[10]!.temperature, obs[4989]!.temperature);
    assert.equal(counter.count('GET '), 5, 'five pages of 1000');

    const pages: number[] = [];
    for await (const p of c2.observationPages(d.id, { pageSize: 1500 })) pages.push(p.observations.length);
    assert.deepEqual(pages, [1500, 1500, 1500, 500]);

    // limit stops early; from (inclusive) and to (exclusive) bound the range.
    let n = 0;
    for await (const _ of c2.observations(d.id, { pageSize: 400, limit: 1000 })) n++;
    assert.equal(n, 1000);
    const ranged: Observation[] = [];
    for await (const o of c2.observations(d.id, { from: obs[100]!.timestamp, to: new Date(obs[3100]!.timestamp), pageSize: 700 })) ranged.push(o);
    assert.equal(ranged.length, 3000);
    assert.equal(ranged[0]!.timestamp, obs[3099]!.timestamp);
    assert.equal(ranged.at(-1)!.timestamp, obs[100]!.timestamp);

    const latest = await client.latestObservations();
    assert.deepEqual(latest.find((g) => g.deviceId === d.id)?.observations, [obs[4999]]);
    const buckets = await client.buckets(d.id, { from: obs[0]!.timestamp, to: new Date(Date.parse(obs[4999]!.timestamp) + 1), bucket: '1h' });
    assert.equal(
      buckets.reduce((a, b) => a + b.count, 0),
      5000,
    );
  });

  it('uploads 25,000 observations from an async iterable in batches, a few at a time', async () => {
    const d = await client.createDevice({ deviceType: 'Thermo' });
    const counter = countingFetch();
    const c2 = new ReefClient({ endpoint: s.url, token: await client.getToken(), fetch: counter.fetch });
    async function* generate() {
      for (const o of series(25_000, Date.UTC(2026, 1, 1))) yield o;
    }
    const progress: number[] = [];
    const r = await c2.uploadObservations(d.id, generate(), { batchSize: 5000, concurrency: 3, onProgress: (p) => progress.push(p.stored) });
    assert.deepEqual(r, { stored: 25_000, batches: 5 });
    assert.equal(counter.count('POST '), 5);
    assert.deepEqual(progress, [5000, 10000, 15000, 20000, 25000]);
    const b = await client.buckets(d.id, { from: '2026-02-01T00:00:00Z', to: '2026-03-01T00:00:00Z', bucket: '1d' });
    assert.equal(
      b.reduce((a, x) => a + x.count, 0),
      25_000,
    );
  });

  it('a batch the service refuses as too large (413) is split and sent again', async () => {
    const small = await startTestServer({ maxObservationsPerRequest: 3000 });
    try {
      const c = new ReefClient({ endpoint: small.url, credentials: await small.account() });
      const d = await c.createDevice({ deviceType: 'Thermo' });
      const r = await c.uploadObservations(d.id, series(10_000), { batchSize: 5000 });
      assert.equal(r.stored, 10_000);
      assert.equal(r.batches, 4, 'each refused 5000 became two of 2500');
      await assert.rejects(c.uploadBatch(d.id, series(3001)), (e: unknown) => e instanceof ApiError && e.status === 413 && e.code === 'TOO_MANY_OBSERVATIONS');
    } finally {
      await small.close();
    }
  });

  it('a failed batch stops the upload: what the service refused is reported, later batches are not sent', async () => {
    const d = await client.createDevice({ deviceType: 'Thermo' });
    const obs: Record<string, unknown>[] = series(3000, Date.UTC(2026, 2, 1));
    obs[1500] = { timestamp: 'yesterday', temperature: 1 };
    const counter = countingFetch();
    const c2 = new ReefClient({ endpoint: s.url, token: await client.getToken(), fetch: counter.fetch });
    const stored: number[] = [];
    await assert.rejects(
      c2.uploadObservations(d.id, obs as Observation[], { batchSize: 1000, concurrency: 1, onProgress: (p) => stored.push(p.stored) }),
      (e: unknown) => e instanceof ApiError && e.status === 400 && e.code === 'VALIDATION_FAILED' && /observations\[500\]\.timestamp/.test(e.message),
    );
    assert.deepEqual(stored, [1000]);
    assert.equal(counter.count('POST '), 2, 'the third batch was never sent');
    const page = await client.getObservations(d.id, { limit: 10_000 });
    assert.equal(page.observations.length, 1000, 'the failed batch stored nothing');
  });

  it('stream() yields observations as they are stored, filtered by device; breaking out ends it', async () => {
    const a = await client.createDevice({ deviceType: 'Thermo' });
    const b = await client.createDevice({ deviceType: 'Thermo' });
    const got: unknown[] = [];
    for await (const e of client.stream({
      deviceId: a.id,
      onOpen: () => {
        void (async () => {
          await client.uploadBatch(b.id, [{ timestamp: '2026-04-01T00:00:00.000Z', temperature: 9 }]);
          await client.uploadBatch(a.id, [{ timestamp: '2026-04-01T00:00:01.000Z', temperature: '21.50' }]);
        })();
      },
    })) {
      got.push(e);
      break;
    }
    assert.deepEqual(got, [{ type: 'observations', deviceId: a.id, observations: [{ timestamp: '2026-04-01T00:00:01.000Z', temperature: 21.5 }] }]);

    // The whole solution: device changes too; an abort signal ends the iteration.
    const ac = new AbortController();
    const events: unknown[] = [];
    let created: Promise<{ id: string }> | null = null;
    for await (const e of client.stream({ signal: ac.signal, onOpen: () => void (created = client.createDevice({ deviceType: 'Late' })) })) {
      events.push(e);
      if (e.type === 'device') ac.abort();
    }
    const late = await created!;
    assert.deepEqual(events, [{ type: 'device', deviceId: late.id, action: 'created' }]);
  });

  it('a stream for a device of another account fails with 404 before yielding', async () => {
    const other = new ReefClient({ endpoint: s.url, credentials: await s.account('other') });
    const d = await other.createDevice({ deviceType: 'Thermo' });
    const it = client.stream({ deviceId: d.id })[Symbol.asyncIterator]();
    await assert.rejects(it.next(), (e: unknown) => e instanceof ApiError && e.status === 404 && e.code === 'DEVICE_NOT_FOUND');
  });
});

describe('SDK: tokens', () => {
  it('fetches a token on first use, sends it raw, and reuses it', async () => {
    const s = await startTestServer();
    try {
      const counter = countingFetch();
      const c = new ReefClient({ endpoint: s.url + '/api/', credentials: await s.account(), fetch: counter.fetch });
      assert.equal(counter.calls.length, 0, 'nothing is fetched before the first call');
      await c.listDevices();
      await c.listDevices();
      assert.deepEqual(counter.calls, ['POST /api/tokens', 'GET /api/solutions/sandbox/devices', 'GET /api/solutions/sandbox/devices']);
      const claims = decodeJwtClaims(await c.getToken());
      assert.equal(typeof claims?.exp, 'number');
      assert.match(String(claims?.sub), /^TN/);
    } finally {
      await s.close();
    }
  });

  it('renews a short-lived token without the caller noticing, once for 50 concurrent calls', async () => {
    // A 3-second token: the client renews it every second or two (overrides bypass the 10 s minimum).
    // The clock stands still between advances: on a loaded machine the 50 calls can take longer
    // than a renewal margin of real time, and a second renewal would be right then.
    const clock = testClock(Date.now());
    const s = await startTestServer({ tokens: { ttlSeconds: 3, secret: null, issuer: 'reef' } }, [], { now: clock.now });
    try {
      const counter = countingFetch();
      const c = new ReefClient({ endpoint: s.url, credentials: await s.account(), fetch: counter.fetch, now: clock.now });
      await c.createDevice({ deviceType: 'Thermo' });
      assert.equal(counter.count('POST /api/tokens'), 1);
      const first = await c.getToken();

      clock.advance(3500); // the first token has expired by now
      const r = await Promise.all(Array.from({ length: 50 }, () => c.listDevices()));
      assert.ok(
        r.every((list) => list.length === 1),
        'all 50 calls succeed',
      );
      assert.equal(counter.count('POST /api/tokens'), 2, 'one renewal for the 50 waiting calls');
      assert.notEqual(await c.getToken(), first);
      assert.equal(c.tokenRenewals, 2);

      // Keep calling for longer than two lifetimes: no call ever fails.
      const endAt = clock.now() + 7000;
      let calls = 0;
      while (clock.now() < endAt) {
        await c.listDevices();
        calls++;
        clock.advance(100);
      }
      assert.ok(calls > 10);
      assert.ok(counter.count('POST /api/tokens') >= 4, 'renewed again along the way');
      assert.equal(counter.calls.filter((x) => x.startsWith('GET')).length, 50 + calls, 'no call was repeated after a 401');
    } finally {
      await s.close();
    }
  });

  it('a renewal that fails while the old token is still good does not fail the call', async () => {
    // A 12-second token is renewed from about 6 s on (5 s before it is treated as expired).
    const clock = testClock();
    const s = await startTestServer({ tokens: { ttlSeconds: 12, secret: null, issuer: 'reef' } }, [], { now: clock.now });
    const proxy = await startProxy(s.url);
    try {
      const c = new ReefClient({ endpoint: proxy.url, credentials: await s.account(), now: clock.now });
      const first = await c.getToken();
      clock.advance(6500);
      proxy.inject({ method: 'POST', times: 1, status: 503, retryAfter: '1', code: 'STORE_UNAVAILABLE' });
      assert.ok(Array.isArray(await c.listDevices()), 'the call went out with the old token');
      assert.equal(proxy.count('POST /api/tokens'), 2, 'the renewal was tried');
      assert.equal((await c.getToken()) === first ? 'old' : 'new', 'new', 'the next call renewed');
      assert.equal(proxy.count('POST /api/tokens'), 3);
    } finally {
      await proxy.close();
      await s.close();
    }
  });

  it('a token the service no longer accepts (restarted with a new key) is renewed and the call repeated', async () => {
    const dataDir = tempDir();
    const a = await startTestServer({ dataDir, tokens: { ttlSeconds: 3600, secret: 'a'.repeat(32), issuer: 'reef' } });
    const port = Number(new URL(a.url).port);
    const creds = await a.account();
    const counter = countingFetch();
    const c = new ReefClient({ endpoint: a.url, credentials: creds, fetch: counter.fetch });
    const d = await c.createDevice({ deviceType: 'Thermo' });
    const oldToken = await c.getToken();
    await a.close();
    const b = await startTestServer({ dataDir, http: { ...a.services.config.http, port }, tokens: { ttlSeconds: 3600, secret: 'b'.repeat(32), issuer: 'reef' } });
    try {
      // A POST too: the 401 comes before anything is done, so repeating it is safe.
      assert.deepEqual(await c.uploadBatch(d.id, series(3)), { stored: 3 });
      assert.deepEqual(counter.calls.slice(-3), [`POST /api/solutions/sandbox/devices/${d.id}/observations`, 'POST /api/tokens', `POST /api/solutions/sandbox/devices/${d.id}/observations`]);
      // A fixed token cannot be renewed: the 401 reaches the caller, typed.
      const fixed = new ReefClient({ endpoint: b.url, token: oldToken });
      await assert.rejects(fixed.listDevices(), (e: unknown) => e instanceof ApiError && e.status === 401 && e.code === 'TOKEN_INVALID');
    } finally {
      await b.close();
      const fs = await import('node:fs');
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('SDK: typed errors and retries', () => {
  let s: TestServer;
  let proxy: Awaited<ReturnType<typeof startProxy>>;
  let creds: { clientId: string; clientSecret: string };
  before(async () => {
    s = await startTestServer({ loginThrottle: { maxFailures: 3, windowSeconds: 60 } });
    proxy = await startProxy(s.url);
    creds = await s.account();
  });
  after(async () => {
    await proxy.close();
    await s.close();
  });

  it('400: the code, message, field and request id of the error body', async () => {
    const c = new ReefClient({ endpoint: s.url, credentials: creds });
    const e = await c.createDevice({ deviceType: 'no spaces allowed' }).catch((x: unknown) => x);
    assert.ok(e instanceof ApiError);
    assert.equal(e.status, 400);
    assert.equal(e.code, 'VALIDATION_FAILED');
    assert.equal(e.field, 'deviceType');
    assert.match(e.message, /deviceType/);
    assert.match(e.requestId!, /^[0-9a-f]{16}$/);
    assert.equal(e.method, 'POST');
    assert.equal(e.body?.statusCode, 400);
  });

  it('401: wrong credentials and a forged token', async () => {
    const wrong = new ReefClient({ endpoint: s.url, credentials: { clientId: (await s.account()).clientId, clientSecret: 'nope' } });
    await assert.rejects(wrong.listDevices(), (e: unknown) => e instanceof ApiError && e.status === 401 && e.code === 'INVALID_CREDENTIALS');
    const forged = new ReefClient({ endpoint: s.url, token: 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJUTjEifQ.c2ln' });
    await assert.rejects(forged.listDevices(), (e: unknown) => e instanceof ApiError && e.status === 401 && e.code === 'TOKEN_INVALID' && e.requestId !== null);
  });

  it('404: unknown device and unknown solution', async () => {
    const c = new ReefClient({ endpoint: s.url, credentials: creds });
    await assert.rejects(c.getDevice('00000000-0000-4000-8000-000000000000'), (e: unknown) => e instanceof ApiError && e.status === 404 && e.code === 'DEVICE_NOT_FOUND');
    await assert.rejects(c.inSolution('nothing-here').listDevices(), (e: unknown) => e instanceof ApiError && e.status === 404 && e.code === 'SOLUTION_NOT_FOUND');
  });

  it('429: repeated failed logins are throttled, with Retry-After, and the token call is not retried', async () => {
    const victim = await s.account();
    const counter = countingFetch();
    const bad = new ReefClient({ endpoint: s.url, credentials: { clientId: victim.clientId, clientSecret: 'guess' }, fetch: counter.fetch });
    for (let i = 0; i < 3; i++) await assert.rejects(bad.listDevices(), (e: unknown) => e instanceof ApiError && e.code === 'INVALID_CREDENTIALS');
    const e = await bad.listDevices().catch((x: unknown) => x);
    assert.ok(e instanceof ApiError);
    assert.equal(e.status, 429);
    assert.equal(e.code, 'RATE_LIMITED');
    assert.ok(e.retryAfter! > 0 && e.retryAfter! <= 60);
    assert.equal(counter.count('POST /api/tokens'), 4, 'one token call per attempt, no retries');
    // Even the right secret waits out the window.
    const good = new ReefClient({ endpoint: s.url, credentials: victim });
    await assert.rejects(good.listDevices(), (x: unknown) => x instanceof ApiError && x.status === 429);
  });

  it('503 and 429 on an idempotent call are retried after Retry-After; the call then succeeds', async () => {
    proxy.reset();
    const c = new ReefClient({ endpoint: proxy.url, credentials: creds });
    await c.getToken();
    proxy.inject({ method: 'GET', times: 1, status: 503, retryAfter: '1', code: 'STORE_UNAVAILABLE' });
    proxy.inject({ method: 'GET', times: 1, status: 429, retryAfter: '0', code: 'RATE_LIMITED' });
    const list = await c.listDevices();
    assert.ok(Array.isArray(list));
    assert.equal(proxy.count('GET /api/solutions/sandbox/devices'), 3);
    // DELETE is idempotent too.
    const d = await c.createDevice({ deviceType: 'Thermo' });
    proxy.inject({ method: 'DELETE', times: 2, status: 503, retryAfter: '0', code: 'STORE_UNAVAILABLE' });
    await c.deleteDevice(d.id);
    assert.equal(proxy.count('DELETE'), 3);
  });

  it('503: retries give up after `retries`, and a Retry-After beyond maxRetryDelayMs fails at once', async () => {
    proxy.reset();
    const c = new ReefClient({ endpoint: proxy.url, credentials: creds, retries: 2 });
    await c.getToken();
    proxy.inject({ method: 'GET', times: 10, status: 503, retryAfter: '0', code: 'STORE_UNAVAILABLE' });
    const e = await c.listDevices().catch((x: unknown) => x);
    assert.ok(e instanceof ApiError);
    assert.equal(e.status, 503);
    assert.equal(e.code, 'STORE_UNAVAILABLE');
    assert.equal(e.retryAfter, 0);
    assert.match(e.requestId!, /^proxy-/);
    assert.equal(proxy.count('GET'), 3, 'one try and two retries');

    proxy.reset();
    const impatient = new ReefClient({ endpoint: proxy.url, credentials: creds, maxRetryDelayMs: 1000 });
    await impatient.getToken();
    proxy.inject({ method: 'GET', times: 1, status: 503, retryAfter: '120', code: 'STORE_UNAVAILABLE' });
    await assert.rejects(impatient.listDevices(), (x: unknown) => x instanceof ApiError && x.status === 503 && x.retryAfter === 120);
    assert.equal(proxy.count('GET'), 1);
  });

  it('503 on an upload (POST) is not retried: the caller decides', async () => {
    const c = new ReefClient({ endpoint: proxy.url, credentials: creds });
    const d = await c.createDevice({ deviceType: 'Thermo' });
    proxy.reset();
    proxy.inject({ method: 'POST', times: 1, status: 503, retryAfter: '0', code: 'STORE_UNAVAILABLE' });
    await assert.rejects(c.uploadBatch(d.id, series(5)), (e: unknown) => e instanceof ApiError && e.status === 503 && e.code === 'STORE_UNAVAILABLE');
    assert.equal(proxy.count('POST'), 1);
    proxy.inject({ method: 'POST', times: 1, status: 503, retryAfter: '0', code: 'STORE_UNAVAILABLE' });
    await assert.rejects(c.uploadObservations(d.id, series(50), { batchSize: 10, concurrency: 1 }), (e: unknown) => e instanceof ApiError && e.status === 503);
    assert.equal(proxy.count('POST'), 2, 'the upload stopped at the first refused batch');
    assert.equal((await c.getObservations(d.id)).observations.length, 0);
  });

  it('a non-JSON error page still becomes an ApiError with the status', async () => {
    const page = http.createServer((_req, res) => {
      res.writeHead(502, { 'content-type': 'text/html' });
      res.end('<html><body>Bad Gateway</body></html>');
    });
    await new Promise<void>((r) => page.listen(0, '127.0.0.1', r));
    try {
      const c = new ReefClient({ endpoint: `http://127.0.0.1:${(page.address() as AddressInfo).port}`, token: 'x' });
      await assert.rejects(c.listDevices(), (e: unknown) => e instanceof ApiError && e.status === 502 && e.code === 'HTTP_502' && !e.message.includes('<html>'));
    } finally {
      page.close();
    }
  });

  it('NetworkError when nothing listens, and on timeout', async () => {
    const probe = http.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const c = new ReefClient({ endpoint: `http://127.0.0.1:${port}`, token: 'x' });
    await assert.rejects(c.listDevices(), (e: unknown) => e instanceof NetworkError && /ECONNREFUSED/.test(e.message) && e.method === 'GET');

    const silent = http.createServer(() => {});
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    try {
      const slow = new ReefClient({ endpoint: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`, token: 'x', timeoutMs: 200 });
      await assert.rejects(slow.listDevices(), (e: unknown) => e instanceof NetworkError && e.timedOut);
      // The caller's own abort passes through as an abort, not a NetworkError.
      const ac = new AbortController();
      const p = slow.listDevices({ signal: ac.signal });
      ac.abort();
      await assert.rejects(p, (e: unknown) => (e as Error).name === 'AbortError' && !(e instanceof NetworkError));
    } finally {
      silent.closeAllConnections();
      silent.close();
    }
  });
});
