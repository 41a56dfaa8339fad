// Every call the original platform's clients make, replayed as they send it (method, path, headers,
// body) against Reef over real sockets — the table in docs/api.md "The original clients, call by
// call". Each answer has the status the client accepts, and every answer a client parses is JSON
// (the original SDK parses every body, a delete included).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { provisionKit } from '../../../src/service/devices.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

let server: TestServer;
let creds: { clientId: string; clientSecret: string };
before(async () => {
  server = await startTestServer();
  creds = await server.account('original');
});
after(() => server.close());

/** A raw request: exactly these headers (a byte body keeps fetch from adding a Content-Type). */
async function call(method: string, path: string, headers: Record<string, string>, body?: string) {
  const url = path.startsWith('http') ? path : `${server.url}${path}`;
  const r = await fetch(url, { method, headers, ...(body === undefined ? {} : { body: new TextEncoder().encode(body) }) });
  const text = await r.text();
  let json: unknown;
  assert.doesNotThrow(() => (json = JSON.parse(text)), `${method} ${path} answers JSON, got ${JSON.stringify(text.slice(0, 80))}`);
  // biome-ignore lint/suspicious/noExplicitAny: an answer is read field by field, as the original clients read it
  return { status: r.status, json: json as any, headers: r.headers };
}

describe('the original JavaScript SDK (Content-Type: application/json on every request, raw token)', () => {
  const h = (token?: string) => ({ 'content-type': 'application/json', accept: 'application/json', ...(token ? { authorization: token } : {}) });
  let token: string;

  it('token at {endpoint}/tokens, then every SDK method, each answer JSON with the status the SDK expects', async () => {
    const t = await call('POST', '/tokens', h(), JSON.stringify(creds));
    assert.equal(t.status, 201);
    token = t.json.accessToken;
    assert.equal(typeof token, 'string');

    const list = await call('GET', '/api/solutions/sandbox/devices', h(token));
    assert.equal(list.status, 200);
    assert.deepEqual(list.json, { devices: [] });
    const filtered = await call('GET', '/api/solutions/sandbox/devices?deviceType=MILLI', h(token));
    assert.equal(filtered.status, 200);

    const made = await call('POST', '/api/solutions/sandbox/devices/', h(token), JSON.stringify({ deviceType: 'MILLI', domainInfo: { nic_macID: '00135005ff00ee01' } }));
    assert.equal(made.status, 201);
    const id = made.json.id as string;

    const up = await call(
      'POST',
      `/api/solutions/sandbox/devices/${id}/observations`,
      h(token),
      JSON.stringify({
        observations: [
          { timestamp: '2026-11-20T10:00:00.000Z', temperature: '72.50', humidity: 40 },
          { timestamp: '2026-11-20T10:01:00.000Z', temperature: 21.5, accelerometer: { x: 0, y: 0, z: 1 }, tags: ['t'] },
        ],
      }),
    );
    assert.equal(up.status, 201);

    const latest = await call('GET', '/api/solutions/sandbox/observations', h(token));
    assert.equal(latest.status, 200);
    assert.equal(latest.json[0].deviceId, id);

    const q = await call('GET', '/api/solutions/sandbox/observations?from=2026-11-20T00:00:00.000Z&to=2026-11-21T00:00:00.000Z&limit=1', h(token));
    assert.equal(q.status, 200);
    assert.equal(q.json[0].observations.length, 1);
    const next = q.headers.get('next_page');
    assert.ok(next);
    const q2 = await call('GET', next, h(token));
    assert.equal(q2.status, 200);
    assert.equal(q2.json[0].observations[0].timestamp, '2026-11-20T10:00:00.000Z');

    const dev = await call('GET', `/api/solutions/sandbox/devices/${id}/observations?limit=10&tags=t`, h(token));
    assert.equal(dev.status, 200);
    assert.equal(dev.json.observations.length, 1);

    const tpl = await call('POST', '/api/solutions/sandbox/devicetemplates', h(token), JSON.stringify({ deviceTemplate: { name: 'T', sensors: ['temperature'] } }));
    assert.equal(tpl.status, 201);
    assert.equal((await call('GET', '/api/solutions/sandbox/devicetemplates', h(token))).status, 200);
    assert.equal((await call('PUT', `/api/solutions/sandbox/devicetemplates/${tpl.json.deviceTemplates.id}`, h(token), JSON.stringify({ deviceTemplate: { name: 'T2', sensors: [] } }))).status, 200);
    assert.equal((await call('GET', '/api/tenants/systemTenant/devicetemplates', h(token))).status, 200);

    const del = await call('DELETE', `/api/solutions/sandbox/devices/${id}`, h(token));
    assert.equal(del.status, 200, 'the SDK reads the delete as failed unless it parses');
    assert.equal(del.json.id, id);
    const again = await call('DELETE', `/api/solutions/sandbox/devices/${id}`, h(token));
    assert.equal(again.status, 404);
    assert.equal(again.json.code, 'DEVICE_NOT_FOUND');
  });
});

describe('the reference plot page', () => {
  it('connect, device table with MAC, observations of the row; a bad solution shows the 400 message', async () => {
    const t = await call('POST', '/api/tokens', { 'content-type': 'application/json' }, JSON.stringify(creds));
    const token = t.json.accessToken as string;
    const list = await call('GET', '/api/solutions/sandbox/devices', { accept: 'application/json', authorization: token });
    assert.equal(list.status, 200);
    const bad = await call('GET', '/api/solutions/no%20such/devices', { accept: 'application/json', authorization: token });
    assert.equal(bad.status, 400);
    assert.equal(typeof bad.json.message, 'string', 'the page shows error.message of a 400');
  });
});

describe('the Windows CoAP client', () => {
  it('logs in with no Content-Type at all, lists devices, and finds the kit among those of type MILLI by domainInfo.nic_macID', async () => {
    const owner = await server.account('windows');
    const account = (await server.services.store.getAccountByClientId(owner.clientId))!;
    await provisionKit(server.services.store, server.services.events, account, '001350050047DC1F');
    const t = await call('POST', '/api/tokens', {}, JSON.stringify({ clientId: owner.clientId, clientSecret: owner.clientSecret }));
    assert.equal(t.status, 201);
    const list = await call('GET', '/api/solutions/sandbox/devices', { authorization: t.json.accessToken });
    assert.equal(list.status, 200);
    // CoApDeviceFinderGateway.cs: `if (dev.deviceType == "MILLI") { string mac = dev.domainInfo.nic_macID; ... }`
    const macs = (list.json.devices as { deviceType: string; domainInfo: { nic_macID?: string } }[]).filter((d) => d.deviceType === 'MILLI').map((d) => d.domainInfo.nic_macID);
    assert.deepEqual(macs, ['001350050047dc1f']);
  });
});

describe('the Java clients and the Node edge-router samples', () => {
  it('token (200 or 201 accepted), find the device by MAC, create it if missing, upload a kit reading as the kit sent it', async () => {
    const t = await call('POST', '/api/tokens', { 'content-type': 'application/json; charset=utf-8' }, JSON.stringify(creds));
    assert.ok(t.status === 200 || t.status === 201);
    const auth = { authorization: t.json.accessToken as string, 'content-type': 'application/json; charset=utf-8' };
    const list = await call('GET', '/api/solutions/sandbox/devices', auth);
    assert.equal(
      list.json.devices.find((d: { domainInfo?: { nic_macID?: string } }) => d.domainInfo?.nic_macID === '00135005ff00ee02'),
      undefined,
    );
    const made = await call('POST', '/api/solutions/sandbox/devices/', auth, JSON.stringify({ deviceType: 'MILLI', domainInfo: { nic_macID: '00135005FF00EE02' } }));
    assert.equal(made.status, 201);
    assert.equal(made.json.domainInfo.nic_macID, '00135005ff00ee02', 'found by the next run under the same lower-case MAC');
    const up = await call(
      'POST',
      `/api/solutions/sandbox/devices/${made.json.id}/observations`,
      auth,
      JSON.stringify({ observations: [{ timestamp: '2026-11-20T10:00:00.000Z', temperature: '72.50' }] }),
    );
    assert.equal(up.status, 201);
    assert.deepEqual(up.json, { stored: 1 });
  });
});
