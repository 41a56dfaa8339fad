// Observations (seed §4.2–4.3, wire §1): upload all-or-nothing, dedupe, latest of all, one device's
// range newest first with keyset paging through next_page, aggregates, live SSE, and bad input.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { readSse } from '../../helpers/sse.ts';

let server: TestServer;
before(async () => {
  server = await startTestServer({ http: { host: '127.0.0.1', port: 0, trustProxy: false, bodyLimitBytes: 2 * 1024 * 1024 } });
});
after(() => server.close());

const T0 = Date.UTC(2026, 5, 1);
const iso = (ms: number) => new Date(ms).toISOString();

async function newDevice(token: string, solution = 'StudioSimulation'): Promise<string> {
  const r = await server.request('POST', `/api/solutions/${solution}/devices`, { token, body: { deviceType: 'VirtualDevice', domainInfo: { location: { latitude: 1, longitude: 2 } } } });
  return ((await r.json()) as { id: string }).id;
}

function obs(n: number, start = T0, step = 10_000) {
  return Array.from({ length: n }, (_, i) => ({ timestamp: iso(start + i * step), temperature: Math.round((20 + Math.sin(i / 10)) * 10000) / 10000 }));
}

async function upload(token: string, id: string, observations: unknown[], solution = 'StudioSimulation') {
  return server.request('POST', `/api/solutions/${solution}/devices/${id}/observations`, { token, body: { observations } });
}

async function all(token: string, id: string, query = '') {
  const r = await server.request('GET', `/api/solutions/StudioSimulation/devices/${id}/observations?limit=10000${query}`, { token });
  return ((await r.json()) as { observations: Record<string, unknown>[] }).observations;
}

describe('upload', () => {
  it('stores a batch: 201, newest first on read, free fields kept, numeric strings become numbers', async () => {
    const { token } = await server.login('up');
    const id = await newDevice(token);
    const r = await upload(token, id, [
      { timestamp: '2026-06-01T00:00:00.000Z', temperature: 21.5, humidity: 40, accelerometer: { x: 1, y: 2, z: 3 } },
      { timestamp: '2026-06-01T00:00:10Z', temperature: '72.50' },
      { timestamp: '2026-06-01T02:00:20.123+02:00', batteryLevel: 90 },
    ]);
    assert.equal(r.status, 201);
    assert.deepEqual(await r.json(), { stored: 3 });
    assert.deepEqual(await all(token, id), [
      { timestamp: '2026-06-01T00:00:20.123Z', batteryLevel: 90 },
      { timestamp: '2026-06-01T00:00:10.000Z', temperature: 72.5 },
      { timestamp: '2026-06-01T00:00:00.000Z', temperature: 21.5, humidity: 40, accelerometer: { x: 1, y: 2, z: 3 } },
    ]);
  });

  it('one bad observation in 1,000 rejects the whole batch with its index, and stores none', async () => {
    const { token } = await server.login('atomic');
    const id = await newDevice(token);
    const batch: Record<string, unknown>[] = obs(1000);
    batch[637] = { timestamp: 'yesterday', temperature: 1 };
    const r = await upload(token, id, batch);
    assert.equal(r.status, 400);
    const e = (await r.json()) as { code: string; message: string; field: string };
    assert.equal(e.code, 'VALIDATION_FAILED');
    assert.match(e.message, /observations\[637\]\.timestamp/);
    assert.deepEqual(await all(token, id), []);
  });

  it('refuses wrong types, NaN and Infinity spelled as strings, dates without zone or impossible', async () => {
    const { token } = await server.login('types');
    const id = await newDevice(token);
    const bad: unknown[] = [
      { temperature: 1 },
      { timestamp: 12345, temperature: 1 },
      { timestamp: '2026-06-01T00:00:00', temperature: 1 },
      { timestamp: '2026-02-30T00:00:00Z', temperature: 1 },
      { timestamp: '2026-06-01T25:00:00Z', temperature: 1 },
      { timestamp: '2026-06-01T00:00:00Z', temperature: 'NaN' },
      { timestamp: '2026-06-01T00:00:00Z', temperature: 'Infinity' },
      { timestamp: '2026-06-01T00:00:00Z', temperature: '1e400' },
      { timestamp: '2026-06-01T00:00:00Z', temperature: 'warm' },
      { timestamp: '2026-06-01T00:00:00Z', temperature: true },
      { timestamp: '2026-06-01T00:00:00Z', temperature: [1] },
      'a string',
      null,
    ];
    for (const o of bad) {
      const r = await upload(token, id, [o]);
      assert.equal(r.status, 400, JSON.stringify(o));
      assert.equal(((await r.json()) as { code: string }).code, 'VALIDATION_FAILED', JSON.stringify(o));
    }
    for (const body of [{}, { observations: {} }, { observations: 'x' }, [], 'null']) {
      const r = await server.request('POST', `/api/solutions/StudioSimulation/devices/${id}/observations`, { token, body });
      assert.equal(r.status, 400, JSON.stringify(body));
    }
    // Bare NaN is not JSON.
    const nan = await server.request('POST', `/api/solutions/StudioSimulation/devices/${id}/observations`, {
      token,
      body: '{"observations":[{"timestamp":"2026-06-01T00:00:00Z","temperature":NaN}]}',
    });
    assert.equal(nan.status, 400);
    assert.equal(((await nan.json()) as { code: string }).code, 'MALFORMED_JSON');
    assert.deepEqual(await all(token, id), []);
  });

  it('more than 10,000 observations is 413; a body over the limit is 413; both store nothing', async () => {
    const { token } = await server.login('big');
    const id = await newDevice(token);
    const r = await upload(token, id, obs(10_001, T0, 1));
    assert.equal(r.status, 413);
    assert.equal(((await r.json()) as { code: string }).code, 'TOO_MANY_OBSERVATIONS');
    const huge = await upload(token, id, [{ timestamp: iso(T0), note: 'x'.repeat(3 * 1024 * 1024) }]);
    assert.equal(huge.status, 413);
    assert.equal(((await huge.json()) as { code: string }).code, 'PAYLOAD_TOO_LARGE');
    assert.deepEqual(await all(token, id), []);
    assert.equal((await upload(token, id, obs(10_000, T0, 1))).status, 201);
  });

  it('wrong content type is 415; a GET with Content-Type: application/json and no body works', async () => {
    const { token } = await server.login('ctype');
    const id = await newDevice(token);
    const r = await server.request('POST', `/api/solutions/StudioSimulation/devices/${id}/observations`, { token, body: 'timestamp,temperature', headers: { 'content-type': 'text/csv' } });
    assert.equal(r.status, 415);
    assert.equal(((await r.json()) as { code: string }).code, 'UNSUPPORTED_MEDIA_TYPE');
    const g = await server.request('GET', `/api/solutions/StudioSimulation/devices/${id}/observations`, { token, headers: { 'content-type': 'application/json' } });
    assert.equal(g.status, 200);
  });

  it('re-sending the same device and timestamp replaces: no duplicate (last write wins)', async () => {
    const { token } = await server.login('dedupe');
    const id = await newDevice(token);
    await upload(token, id, obs(5));
    await upload(
      token,
      id,
      obs(5).map((o) => ({ ...o, temperature: 30 })),
    );
    // Same instant in another zone spelling is the same timestamp.
    await upload(token, id, [{ timestamp: '2026-06-01T02:00:00.000+02:00', temperature: 31 }]);
    const got = await all(token, id);
    assert.equal(got.length, 5);
    assert.deepEqual(
      got.map((o) => o.temperature),
      [30, 30, 30, 30, 31],
    );
  });

  it('uploads to an unknown device, unknown solution or bad id are refused', async () => {
    const { token } = await server.login('unknown');
    assert.equal((await upload(token, crypto.randomUUID(), obs(1))).status, 404);
    assert.equal((await upload(token, 'nope', obs(1))).status, 400);
    const id = await newDevice(token);
    assert.equal((await upload(token, id, obs(1), 'sandbox')).status, 404, 'a device is addressed in its own solution');
  });
});

describe('reading', () => {
  it('pages through 2,500 observations with limit=1000 by following next_page: no gap, no duplicate', async () => {
    const { token } = await server.login('paging');
    const id = await newDevice(token);
    const sent = obs(2500);
    for (let i = 0; i < sent.length; i += 1000) assert.equal((await upload(token, id, sent.slice(i, i + 1000))).status, 201);
    const seen: string[] = [];
    let url: string | null = `${server.url}/api/solutions/StudioSimulation/devices/${id}/observations?limit=1000`;
    let pages = 0;
    while (url) {
      const r: Response = await fetch(url, { headers: { authorization: token } });
      assert.equal(r.status, 200);
      const body = (await r.json()) as { observations: { timestamp: string }[] };
      seen.push(...body.observations.map((o) => o.timestamp));
      url = r.headers.get('next_page');
      if (url) assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/api\/solutions\/StudioSimulation\/devices\/[0-9a-f-]+\/observations\?limit=1000&after=/);
      pages++;
    }
    assert.equal(pages, 3);
    assert.equal(seen.length, 2500);
    assert.equal(new Set(seen).size, 2500);
    assert.deepEqual(seen, sent.map((o) => o.timestamp).reverse());
  });

  it('from is inclusive, to is exclusive; without limit 1,500 come in one page (the default page is about 1 MB)', async () => {
    const { token } = await server.login('range');
    const id = await newDevice(token);
    await upload(token, id, obs(1500));
    const got = await all(token, id, `&from=${iso(T0 + 10_000)}&to=${iso(T0 + 40_000)}`);
    assert.deepEqual(
      got.map((o) => o.timestamp),
      [iso(T0 + 30_000), iso(T0 + 20_000), iso(T0 + 10_000)],
    );
    const r = await server.request('GET', `/api/solutions/StudioSimulation/devices/${id}/observations`, { token });
    assert.equal(((await r.json()) as { observations: unknown[] }).observations.length, 1500);
    assert.equal(r.headers.get('next_page'), null);
  });

  it('bad query values are 400 naming the parameter', async () => {
    const { token } = await server.login('badq');
    const id = await newDevice(token);
    for (const [q, field] of [
      ['limit=0', 'limit'],
      ['limit=abc', 'limit'],
      ['from=junk', 'from'],
      ['to=2026-13-01T00:00:00Z', 'to'],
      ['after=zzz', 'after'],
      [`from=${iso(T0 + 1)}&to=${iso(T0)}`, 'from'],
      ['bucket=1h', 'from'],
      [`bucket=fast&from=${iso(T0)}&to=${iso(T0 + 1000)}`, 'bucket'],
    ]) {
      const r = await server.request('GET', `/api/solutions/StudioSimulation/devices/${id}/observations?${q}`, { token });
      assert.equal(r.status, 400, q);
      assert.equal(((await r.json()) as { field: string }).field, field, q);
    }
  });

  it('latest of all devices: one group per device with its newest observation (seed §4.2)', async () => {
    const { token } = await server.login('latest');
    const a = await newDevice(token);
    const b = await newDevice(token);
    await newDevice(token); // no observations: not listed
    await upload(token, a, obs(10));
    await upload(token, b, [{ timestamp: iso(T0 + 5), temperature: -3.25, humidity: 80 }]);
    const r = await server.request('GET', '/api/solutions/StudioSimulation/observations', { token });
    assert.equal(r.status, 200);
    const body = (await r.json()) as { deviceId: string; observations: unknown[] }[];
    assert.ok(Array.isArray(body));
    const byId = new Map(body.map((g) => [g.deviceId, g.observations]));
    assert.equal(byId.size, 2);
    assert.deepEqual(byId.get(a), [{ timestamp: iso(T0 + 90_000), temperature: obs(10)[9]!.temperature }]);
    assert.deepEqual(byId.get(b), [{ timestamp: iso(T0 + 5), temperature: -3.25, humidity: 80 }]);
    const other = await server.login('latest-other');
    assert.deepEqual(await (await server.request('GET', '/api/solutions/StudioSimulation/observations', { token: other.token })).json(), []);
    assert.equal((await server.request('GET', '/api/solutions/nosuch/observations', { token })).status, 404);
  });

  it('buckets give min/avg/max per interval over [from, to)', async () => {
    const { token } = await server.login('bucket');
    const id = await newDevice(token);
    await upload(token, id, [
      { timestamp: iso(T0), temperature: 10 },
      { timestamp: iso(T0 + 30_000), temperature: 20 },
      { timestamp: iso(T0 + 60_000), temperature: 5 },
    ]);
    const r = await server.request('GET', `/api/solutions/StudioSimulation/devices/${id}/observations?bucket=1m&from=${iso(T0)}&to=${iso(T0 + 120_000)}`, { token });
    assert.deepEqual(await r.json(), {
      buckets: [
        { timestamp: iso(T0), count: 2, min: 10, avg: 15, max: 20 },
        { timestamp: iso(T0 + 60_000), count: 1, min: 5, avg: 5, max: 5 },
      ],
    });
  });

  it('streams new observations as Server-Sent Events, only the caller’s', async () => {
    const { token } = await server.login('sse');
    const stranger = await server.login('sse-stranger');
    const id = await newDevice(token);
    const theirs = await newDevice(stranger.token);
    const ac = new AbortController();
    const r = await fetch(`${server.url}/api/solutions/StudioSimulation/events`, { headers: { authorization: token }, signal: ac.signal });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type')!, /text\/event-stream/);
    const events = await readSse(r, { subscribed: true });
    await upload(stranger.token, theirs, obs(1));
    await upload(token, id, [{ timestamp: iso(T0), temperature: 12.5 }]);
    const got = await events.take(1, 'observations');
    ac.abort();
    const data = JSON.parse(got.find((m) => m.event === 'observations')!.data);
    assert.deepEqual(data, { deviceId: id, observations: [{ timestamp: iso(T0), temperature: 12.5 }] });
    assert.ok(!got.some((m) => m.data.includes(theirs)));
  });

  it('CORS lets a browser read next_page', async () => {
    const pre = await fetch(`${server.url}/api/solutions/sandbox/devices`, {
      method: 'OPTIONS',
      headers: { origin: 'http://example.test', 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' },
    });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get('access-control-allow-origin'), 'http://example.test');
    const { token } = await server.login('cors');
    const g = await server.request('GET', '/api/solutions/sandbox/devices', { token, headers: { origin: 'http://example.test' } });
    assert.match(g.headers.get('access-control-expose-headers')!, /next_page/);
  });
});
