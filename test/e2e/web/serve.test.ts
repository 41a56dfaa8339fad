// The web component's static serving: the built app at /, the right content types, hashed assets
// cached for good and index.html revalidated, nothing outside web/dist, the API untouched. (The web
// app's own sources are type-checked by `npm run typecheck`, with web/tsconfig.json.)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { webPlugin } from '../../../src/web/component.ts';
import { startTestServer, tempDir, type TestServer } from '../../helpers/server.ts';
import { startWebServer } from './harness.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

describe('web component', () => {
  let server: TestServer;
  before(async () => {
    server = await startWebServer();
  });
  after(() => server?.close());

  test('serves index.html at / with no-cache, and hashed assets as immutable with their types', async () => {
    const r = await fetch(server.url + '/');
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /^text\/html/);
    assert.equal(r.headers.get('cache-control'), 'no-cache');
    assert.match(r.headers.get('content-security-policy') ?? '', /script-src 'self'/);
    const html = await r.text();
    assert.match(html, /<title>Reef/);
    const js = /src="(\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    const css = /href="(\/assets\/[^"]+\.css)"/.exec(html)?.[1];
    assert.ok(js && css, 'index.html links its hashed script and stylesheet');
    const a = await fetch(server.url + js);
    assert.equal(a.status, 200);
    assert.match(a.headers.get('content-type') ?? '', /^text\/javascript/);
    assert.equal(a.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    const s = await fetch(server.url + css);
    assert.match(s.headers.get('content-type') ?? '', /^text\/css/);
    // Revalidation answers 304. (A browser revalidating sends max-age=0; fetch would otherwise add
    // "Cache-Control: no-cache" to a conditional request, which asks for a full end-to-end reload.)
    const again = await fetch(server.url + '/', { headers: { 'if-none-match': r.headers.get('etag')!, 'cache-control': 'max-age=0' } });
    assert.equal(again.status, 304);
  });

  test('text assets go gzipped to clients that accept it, as is to those that do not; the map data too', async () => {
    const html = await (await fetch(server.url + '/')).text();
    const js = /src="(\/assets\/[^"]+\.js)"/.exec(html)![1]!;
    const plain = await fetch(server.url + js, { headers: { 'accept-encoding': 'identity' } });
    assert.equal(plain.headers.get('content-encoding'), null);
    const body = Buffer.from(await plain.arrayBuffer());
    // node's fetch would decode gzip itself: ask with a raw request to see the bytes on the wire.
    const { request } = await import('node:http');
    const { gunzipSync } = await import('node:zlib');
    const raw = await new Promise<{ headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
      const req = request(server.url + js, { headers: { 'accept-encoding': 'gzip, deflate, br' } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
      });
      req.on('error', reject);
      req.end();
    });
    assert.equal(raw.headers['content-encoding'], 'gzip');
    assert.match(String(raw.headers.vary), /accept-encoding/i);
    assert.ok(raw.body.length < body.length / 2, `${raw.body.length} gzipped vs ${body.length}`);
    assert.deepEqual(gunzipSync(raw.body), body);
    const refused = await fetch(server.url + js, { headers: { 'accept-encoding': 'gzip;q=0' } });
    assert.equal(refused.headers.get('content-encoding'), null);
    // The Natural Earth borders the map fetches are a hashed asset of their own, compressed the same way.
    const mapChunk = fs.readdirSync(path.join(ROOT, 'web', 'dist', 'assets')).find((f) => f.startsWith('countries-50m') && f.endsWith('.json'));
    assert.ok(mapChunk, 'the borders are built as an asset');
    const data = await fetch(`${server.url}/assets/${mapChunk}`);
    assert.equal(data.status, 200);
    assert.match(data.headers.get('content-type') ?? '', /^application\/json/);
    assert.equal(((await data.json()) as { type: string }).type, 'Topology');
  });

  test('nothing outside web/dist; unknown assets and API routes keep the JSON 404', async () => {
    for (const p of ['/assets/../../package.json', '/assets/%2e%2e/%2e%2e/package.json', '/assets/.hidden', '/assets/nope.js']) {
      const r = await fetch(server.url + p);
      assert.equal(r.status, 404, p);
      assert.match(r.headers.get('content-type') ?? '', /application\/json/);
    }
    const api = await fetch(server.url + '/api/nope');
    assert.equal(api.status, 404);
    assert.equal(((await api.json()) as { code: string }).code, 'ROUTE_NOT_FOUND');
  });

  test('before a build, / says how to make one (503); a build is served at once, without a restart', async () => {
    const dist = tempDir('reef-web-dist-');
    const t = await startTestServer({}, [async () => ({ name: 'web', plugin: webPlugin(dist) })]);
    try {
      const before = await fetch(t.url + '/');
      assert.equal(before.status, 503);
      assert.match(await before.text(), /npm run build:web/);
      fs.mkdirSync(path.join(dist, 'assets'));
      fs.writeFileSync(path.join(dist, 'index.html'), '<!doctype html><title>Reef built</title>');
      fs.writeFileSync(path.join(dist, 'assets', 'app-1a2b3c.js'), 'export {};');
      const after = await fetch(t.url + '/');
      assert.equal(after.status, 200);
      assert.match(await after.text(), /Reef built/);
      const js = await fetch(t.url + '/assets/app-1a2b3c.js');
      assert.equal(js.headers.get('cache-control'), 'public, max-age=31536000, immutable');
      assert.equal(js.headers.get('x-content-type-options'), 'nosniff');
    } finally {
      await t.close();
      fs.rmSync(dist, { recursive: true, force: true });
    }
  });
});
