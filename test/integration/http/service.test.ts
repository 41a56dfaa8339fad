// Service-wide HTTP behaviour: unknown routes, 405 with Allow, request ids, OpenAPI, health and
// readiness, and a store that is gone answering 503 (never a stack trace).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.close());

describe('service', () => {
  it('an unknown route is 404 ROUTE_NOT_FOUND in the uniform body', async () => {
    const r = await server.request('GET', '/api/nothing/here');
    assert.equal(r.status, 404);
    const b = (await r.json()) as Record<string, unknown>;
    assert.deepEqual(Object.keys(b).sort(), ['code', 'error', 'message', 'requestId', 'statusCode']);
    assert.equal(b.code, 'ROUTE_NOT_FOUND');
  });

  it('a known path with another method is 405 with Allow', async () => {
    const { token } = await server.login('m');
    for (const [method, path, allow] of [
      ['PUT', '/api/solutions/sandbox/devices', /GET.*POST/],
      ['PUT', `/api/solutions/sandbox/devices/${crypto.randomUUID()}`, /DELETE.*GET.*PATCH/],
      ['GET', '/api/tokens', /POST/],
      ['DELETE', '/api/solutions/sandbox/observations', /GET/],
    ] as const) {
      const r = await server.request(method, path, { token });
      assert.equal(r.status, 405, `${method} ${path}`);
      assert.match(r.headers.get('allow')!, allow);
      assert.equal(((await r.json()) as { code: string }).code, 'METHOD_NOT_ALLOWED');
    }
  });

  it('keeps a sane caller request id and makes one otherwise', async () => {
    const mine = await server.request('GET', '/healthz', { headers: { 'x-request-id': 'trace-abc_123' } });
    assert.equal(mine.headers.get('x-request-id'), 'trace-abc_123');
    const hostile = await server.request('GET', '/healthz', { headers: { 'x-request-id': 'a b<script>' } });
    assert.match(hostile.headers.get('x-request-id')!, /^[0-9a-f]{16}$/);
  });

  it('serves an OpenAPI 3 document generated from the routes, and a readable page', async () => {
    const doc = (await (await server.request('GET', '/api/openapi.json')).json()) as { openapi: string; paths: Record<string, Record<string, unknown>> };
    assert.match(doc.openapi, /^3\./);
    for (const p of [
      '/api/tokens',
      '/api/solutions/{solution}/devices',
      '/api/solutions/{solution}/devices/{id}',
      '/api/solutions/{solution}/observations',
      '/api/solutions/{solution}/devices/{id}/observations',
    ]) {
      assert.ok(doc.paths[p], `${p} documented`);
    }
    assert.ok(doc.paths['/api/solutions/{solution}/devices/{id}/observations']!.post);
    const page = await server.request('GET', '/api/docs/');
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<html/i);
  });

  it('healthz and readyz answer; readyz and requests say 503 with Retry-After when the store is gone', async () => {
    const s = await startTestServer();
    try {
      assert.deepEqual(await (await s.request('GET', '/healthz')).json(), { status: 'ok' });
      assert.deepEqual(await (await s.request('GET', '/readyz')).json(), { status: 'ready', store: 'sqlite' });
      const { token } = await s.login('gone');
      await s.services.store.close();
      const ready = await s.request('GET', '/readyz');
      assert.equal(ready.status, 503);
      assert.equal(ready.headers.get('retry-after'), '1');
      const r = await s.request('POST', '/api/solutions/sandbox/devices', { token, body: { deviceType: 'X' } });
      assert.equal(r.status, 503);
      const text = await r.text();
      assert.match(text, /STORE_UNAVAILABLE/);
      assert.ok(!text.includes('sqlite-store.ts'), 'no stack trace');
    } finally {
      await s.close();
    }
  });
});
