// Fuzzing over HTTP: seeded random and mutated bodies, content types and query strings at
// every route that takes a body or a query (enumerated from the OpenAPI document). Every answer is
// a 2xx or a 4xx with the uniform body; no 5xx, no crash; a batch either stores whole or not at all.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { mulberry32 } from '../../../src/core/random.ts';
import { gatewayComponent } from '../../../src/gateway/component.ts';
import { createSimulationComponent } from '../../../src/sim/component.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { assertClean, tally } from './tally.ts';

const SEED = 0x5eef;

describe('HTTP fuzz', () => {
  let s: TestServer;
  let token: string;
  let device: string;
  before(async () => {
    s = await startTestServer({ gateway: { enabled: true, port: 0 }, quotas: { devices: 1_000_000 } }, [createSimulationComponent(), gatewayComponent()]);
    token = (await s.login('fuzzer')).token;
    device = ((await (await s.request('POST', '/api/solutions/fuzz/devices', { token, body: { deviceType: 'VirtualDevice' } })).json()) as { id: string }).id;
  });
  after(() => s.close());

  it(`seeded (${SEED}) random bodies and queries on every route: no 5xx, uniform errors, batches whole or nothing`, async () => {
    const probe = tally('HTTP fuzz');
    const rnd = mulberry32(SEED);
    const pick = <T>(a: readonly T[]): T => a[Math.floor(rnd() * a.length)]!;
    const valid = [
      { deviceType: 'VirtualDevice', domainInfo: { location: { latitude: 1, longitude: 2 } } },
      {
        observations: [
          { timestamp: '2026-01-01T00:00:00Z', temperature: 20 },
          { timestamp: '2026-01-01T00:00:10Z', temperature: 21 },
        ],
      },
      { days: 3 },
      { devices: 1, interval: '1h' },
      { clientId: 'x', clientSecret: 'y' },
    ];
    const atoms = [null, true, 0, -1, 1e308, -0, 'x', '', '\u0000', '\ud800', 'NaN', '2026-13-45T99:99:99Z', [], {}, '𝄞'.repeat(50), 'a'.repeat(5000)];
    const mutate = (v: unknown, depth = 0): unknown => {
      if (depth > 4 || rnd() < 0.3) return pick(atoms);
      if (Array.isArray(v)) return rnd() < 0.5 ? v.map((x) => mutate(x, depth + 1)) : [...v, mutate(v[0], depth + 1)];
      if (v && typeof v === 'object') {
        const o: Record<string, unknown> = {};
        for (const [k, x] of Object.entries(v)) if (rnd() > 0.15) o[rnd() < 0.1 ? k.toUpperCase() : k] = rnd() < 0.5 ? mutate(x, depth + 1) : x;
        if (rnd() < 0.2) o[pick(['__proto__', 'constructor', 'prototype', 'extra', ''])] = pick(atoms);
        return o;
      }
      return pick(atoms);
    };
    const textual = (v: unknown): string => {
      const j = JSON.stringify(v) ?? 'null';
      const r = rnd();
      if (r < 0.1) return j.slice(0, Math.floor(rnd() * j.length));
      if (r < 0.15) return j.replace(/"/g, "'");
      if (r < 0.2) return Buffer.from(Array.from({ length: 64 }, () => Math.floor(rnd() * 256))).toString('latin1');
      return j;
    };
    const doc = s.app.swagger() as { paths: Record<string, Record<string, unknown>> };
    const routes = Object.entries(doc.paths)
      .filter(([p]) => !p.startsWith('/api/admin') && !p.endsWith('/events'))
      .flatMap(([p, m]) => Object.keys(m).map((method) => [method.toUpperCase(), p] as const))
      // Deleting the device under test would end the all-or-nothing check below.
      .filter(([method]) => method !== 'DELETE');
    const before = await s.request('GET', `/api/solutions/fuzz/devices/${device}/observations?limit=10000`, { token });
    const countBefore = ((await before.json()) as { observations: unknown[] }).observations.length;
    let storedByUs = 0;
    for (let i = 0; i < 1500; i++) {
      const [method, template] = pick(routes);
      const url = template
        .replace('{solution}', pick(['fuzz', 'sandbox', 'StudioSimulation', '%00', 'a'.repeat(65), '..', 'fUZZ']))
        .replace('{id}', pick([device, device.toUpperCase(), 'not-a-uuid', '00000000-0000-0000-0000-000000000000', '%2e%2e']))
        .replace('{*}', pick(['snsr/arduino/temp', '', '%ff', 'a/'.repeat(40)]));
      const query =
        rnd() < 0.4
          ? '?' + pick(['limit=-1', 'limit=abc', 'from=yesterday', 'to=9999-99-99', 'after=!!!', 'bucket=0s', 'deviceId=%00', 'limit=1e9', 'from=2026-01-01T00:00:00Z&to=2025-01-01T00:00:00Z'])
          : '';
      const hasBody = method === 'POST' || method === 'PUT';
      const body = hasBody ? textual(mutate(pick(valid))) : undefined;
      const ctype = pick(['application/json', 'application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1', '']);
      const r = await s.request(method, url + query, { token, ...(body === undefined ? {} : { body }), headers: ctype ? { 'content-type': ctype } : {} });
      const text = await r.text();
      if (r.status >= 500) {
        probe.record('5xx', `${method} ${url}${query} ${ctype} ${body?.slice(0, 120)} → ${r.status} ${text.slice(0, 200)}`);
        continue;
      }
      if (r.status >= 400) {
        let ok = false;
        try {
          const b = JSON.parse(text) as { statusCode?: number; code?: string; requestId?: string };
          ok = b.statusCode === r.status && typeof b.code === 'string' && typeof b.requestId === 'string';
        } catch {
          ok = false;
        }
        probe.record(ok ? 'correct' : 'wrong', `${method} ${url} → ${r.status} without the uniform body: ${text.slice(0, 120)}`);
        continue;
      }
      if (method === 'POST' && template.endsWith('/observations') && url.includes(`/fuzz/devices/${device}`)) storedByUs += (JSON.parse(text) as { stored: number }).stored;
      probe.record('correct');
    }
    // All or nothing: what was acknowledged is there, nothing else (the valid batches carry two
    // readings at fixed timestamps, so repeats replace).
    const after = await s.request('GET', `/api/solutions/fuzz/devices/${device}/observations?limit=10000`, { token });
    const rows = ((await after.json()) as { observations: unknown[] }).observations.length;
    assert.ok(rows >= countBefore && (storedByUs === 0 ? rows === countBefore : rows > 0), `${rows} rows after ${storedByUs} acknowledged`);
    assert.equal((await s.request('GET', '/api/health')).status < 500, true, 'still serving');
    assertClean(probe);
  });
});
