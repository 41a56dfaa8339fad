// Request bodies and their content types (docs/api.md "Request bodies and content
// types"): the Windows client posts its credentials with no Content-Type, others with text/plain or
// a charset parameter; every JSON route reads a body without Content-Type as JSON; a declared
// non-JSON type is 415 and a body that is not JSON is 400, both in the uniform error body, and
// nothing is stored.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

let server: TestServer;
const ADMIN = { 'x-reef-admin-key': 'an-operator-key-for-content-types' };
before(async () => {
  server = await startTestServer({ adminKey: ADMIN['x-reef-admin-key'] });
});
after(() => server.close());

/** A POST whose headers are exactly `headers` (a byte body: fetch adds no Content-Type of its own). */
function post(path: string, body: string, headers: Record<string, string> = {}) {
  return fetch(`${server.url}${path}`, { method: 'POST', headers, body: new TextEncoder().encode(body) });
}

/**
 * A POST through node:http, which sends a header exactly as given: `Content-Type:` with an empty
 * value, which fetch's header normalising would not be trusted to keep.
 */
function rawPost(path: string, body: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${server.url}${path}`, { method: 'POST', headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        text += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function expectError(r: Response, status: number, code: string) {
  assert.equal(r.status, status);
  assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
  const body = (await r.json()) as Record<string, unknown>;
  assert.equal(body.statusCode, status);
  assert.equal(body.code, code);
  assert.equal(typeof body.message, 'string');
  assert.equal(body.requestId, r.headers.get('x-request-id'));
  return body;
}

describe('token calls (both paths)', () => {
  it('accept the JSON body with no Content-Type, text/plain, and application/json; charset=utf-8', async () => {
    const c = await server.account('ct');
    const creds = JSON.stringify({ clientId: c.clientId, clientSecret: c.clientSecret });
    for (const path of ['/api/tokens', '/tokens']) {
      for (const headers of <Record<string, string>[]>[
        {},
        { 'content-type': 'text/plain' },
        { 'content-type': 'text/plain; charset=utf-8' },
        { 'content-type': 'application/json; charset=utf-8' },
        { 'Content-Type': 'application/json' },
      ]) {
        const r = await post(path, creds, headers);
        assert.equal(r.status, 201, `${path} ${JSON.stringify(headers)}: ${await r.clone().text()}`);
        assert.equal(typeof ((await r.json()) as { accessToken: unknown }).accessToken, 'string');
      }
    }
  });

  it('read an empty Content-Type header (`Content-Type:` with no value) as no header', async () => {
    const c = await server.account('ct-empty');
    const creds = JSON.stringify({ clientId: c.clientId, clientSecret: c.clientSecret });
    for (const path of ['/api/tokens', '/tokens']) {
      for (const value of ['', ' ']) {
        const r = await rawPost(path, creds, { 'content-type': value });
        assert.equal(r.status, 201, `${path} Content-Type ${JSON.stringify(value)}: ${r.body}`);
        assert.equal(typeof (JSON.parse(r.body) as { accessToken: unknown }).accessToken, 'string');
      }
      const bad = await rawPost(path, 'clientId=a', { 'content-type': '' });
      assert.equal(bad.status, 400);
      assert.equal((JSON.parse(bad.body) as { code: string }).code, 'MALFORMED_JSON');
    }
  });

  it('a body that is not JSON is a clear 400 whatever the content type; another declared type is 415', async () => {
    for (const path of ['/api/tokens', '/tokens']) {
      for (const headers of <Record<string, string>[]>[{}, { 'content-type': 'text/plain' }, { 'content-type': 'application/json' }]) {
        const e = await expectError(await post(path, 'clientId=a&clientSecret=b', headers), 400, 'MALFORMED_JSON');
        assert.match(String(e.message), /not valid JSON/);
      }
      await expectError(await post(path, '{"clientId":"a","clientSecret":"b"}', { 'content-type': 'application/x-www-form-urlencoded' }), 415, 'UNSUPPORTED_MEDIA_TYPE');
      await expectError(await post(path, '', {}), 400, 'VALIDATION_FAILED');
    }
  });
});

describe('the other JSON routes', () => {
  it('read a body without Content-Type as JSON: create a device and upload observations', async () => {
    const { token } = await server.login('noct');
    const made = await post('/api/solutions/sandbox/devices/', JSON.stringify({ deviceType: 'Thermo', domainInfo: {} }), { authorization: token });
    assert.equal(made.status, 201);
    const { id } = (await made.json()) as { id: string };
    const up = await post(`/api/solutions/sandbox/devices/${id}/observations`, JSON.stringify({ observations: [{ timestamp: '2026-11-22T10:00:00.000Z', temperature: '72.50' }] }), {
      authorization: token,
    });
    assert.equal(up.status, 201);
    assert.deepEqual(await up.json(), { stored: 1 });
  });

  it('refuse text/plain and other types with 415 and a non-JSON body with 400, storing nothing', async () => {
    const { token } = await server.login('badct');
    const { id } = (await (await server.request('POST', '/api/solutions/sandbox/devices', { token, body: { deviceType: 'Thermo' } })).json()) as { id: string };
    const batch = JSON.stringify({ observations: [{ timestamp: '2026-11-22T10:00:00.000Z', temperature: 1 }] });
    const path = `/api/solutions/sandbox/devices/${id}/observations`;
    await expectError(await post(path, batch, { authorization: token, 'content-type': 'text/plain' }), 415, 'UNSUPPORTED_MEDIA_TYPE');
    await expectError(await post(path, batch, { authorization: token, 'content-type': 'application/xml' }), 415, 'UNSUPPORTED_MEDIA_TYPE');
    await expectError(await post(path, '{"observations": [', { authorization: token }), 400, 'MALFORMED_JSON');
    await expectError(await post('/api/solutions/sandbox/devices', 'deviceType=Thermo', { authorization: token, 'content-type': 'text/plain' }), 415, 'UNSUPPORTED_MEDIA_TYPE');
    const list = (await (await server.request('GET', '/api/solutions/sandbox/devices', { token })).json()) as { devices: unknown[] };
    assert.equal(list.devices.length, 1);
    const obs = (await (await server.request('GET', `${path}`, { token })).json()) as { observations: unknown[] };
    assert.deepEqual(obs.observations, []);
  });

  it('every route that takes a JSON body: no Content-Type is JSON (2xx), text/plain is 415, nothing changes on a refusal', async () => {
    const c = await server.login('every-route');
    const auth = { authorization: c.token };
    const { id } = (await (await server.request('POST', '/api/solutions/sandbox/devices', { token: c.token, body: { deviceType: 'Thermo' } })).json()) as { id: string };
    const tpl = (await (await server.request('POST', '/api/solutions/sandbox/devicetemplates', { token: c.token, body: { name: 'T', sensors: [] } })).json()) as { deviceTemplates: { id: string } };
    const routes: [string, string, unknown, Record<string, string>][] = [
      ['POST', '/api/solutions/sandbox/devices', { deviceType: 'Thermo' }, auth],
      ['POST', `/api/solutions/sandbox/devices/${id}/observations`, { observations: [{ timestamp: '2026-11-22T10:00:00.000Z', temperature: 1 }] }, auth],
      ['PUT', '/api/solutions/sandbox/retention', { retentionDays: 30 }, auth],
      ['POST', '/api/solutions/sandbox/devicetemplates', { name: 'U', sensors: ['temperature'] }, auth],
      ['PUT', `/api/solutions/sandbox/devicetemplates/${tpl.deviceTemplates.id}`, { name: 'V', sensors: [] }, auth],
      ['POST', '/api/admin/accounts', { name: 'made-without-content-type' }, ADMIN],
    ];
    for (const [method, path, body, headers] of routes) {
      const refused = await fetch(`${server.url}${path}`, { method, headers: { ...headers, 'content-type': 'text/plain' }, body: new TextEncoder().encode(JSON.stringify(body)) });
      await expectError(refused, 415, 'UNSUPPORTED_MEDIA_TYPE');
      const r = await fetch(`${server.url}${path}`, { method, headers, body: new TextEncoder().encode(JSON.stringify(body)) });
      assert.ok(r.status >= 200 && r.status < 300, `${method} ${path} without Content-Type: ${r.status} ${await r.clone().text()}`);
    }
    // The refused creates stored nothing: one device from before, one from the accepted create.
    const list = (await (await server.request('GET', '/api/solutions/sandbox/devices', { token: c.token })).json()) as { devices: unknown[] };
    assert.equal(list.devices.length, 2);
    const tpls = (await (await server.request('GET', '/api/solutions/sandbox/devicetemplates', { token: c.token })).json()) as { deviceTemplates: { name: string }[] };
    assert.deepEqual(
      tpls.deviceTemplates.map((t) => t.name),
      ['V', 'U'],
    );
  });

  it('a GET or DELETE with Content-Type: application/json and no body is fine (the JavaScript SDK)', async () => {
    const { token } = await server.login('sdkget');
    const r = await fetch(`${server.url}/api/solutions/sandbox/devices`, { headers: { authorization: token, 'content-type': 'application/json', accept: 'application/json' } });
    assert.equal(r.status, 200);
  });
});
