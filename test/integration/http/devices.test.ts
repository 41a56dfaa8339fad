// Devices of a solution (seed §2, §4.1; wire §1): the exact Device resource, create with and
// without the trailing slash, get, delete, type filter, validation, and tenant-group isolation.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import http from 'node:http';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

function rawGet(base: string, path: string, token: string): Promise<{ status: number; body: string }> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path, method: 'GET', headers: { authorization: token } }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

let server: TestServer;
before(async () => {
  server = await startTestServer({ adminKey: 'an-operator-key-for-tests' });
});
after(() => server.close());

const virtual = { deviceType: 'VirtualDevice', domainInfo: { location: { latitude: 59.3293, longitude: 18.0686 } } };

describe('devices', () => {
  it('creates a device (with and without the trailing slash) and lists it', async () => {
    const { token } = await server.login('dev');
    for (const p of ['/api/solutions/StudioSimulation/devices', '/api/solutions/StudioSimulation/devices/']) {
      const r = await server.request('POST', p, { token, body: virtual });
      assert.equal(r.status, 201);
      const d = (await r.json()) as Record<string, unknown>;
      assert.match(String(d.id), /^[0-9a-f-]{36}$/);
      assert.deepEqual(d, { id: d.id, ...virtual });
      assert.equal(r.headers.get('location'), `/api/solutions/StudioSimulation/devices/${d.id}`);
    }
    const r = await server.request('GET', '/api/solutions/StudioSimulation/devices', { token, headers: { accept: 'application/json', 'content-type': 'application/json' } });
    assert.equal(r.status, 200);
    const body = (await r.json()) as { devices: Record<string, unknown>[] };
    assert.deepEqual(Object.keys(body), ['devices']);
    assert.equal(body.devices.length, 2);
    assert.deepEqual(body.devices[0]!.domainInfo, virtual.domainInfo);
  });

  it('GET and DELETE one device; deleting twice is 404', async () => {
    const { token } = await server.login('getdel');
    const d = (await (await server.request('POST', '/api/solutions/mine/devices', { token, body: { deviceType: 'Thermo', domainInfo: {} } })).json()) as { id: string };
    const got = await server.request('GET', `/api/solutions/mine/devices/${d.id}`, { token });
    assert.deepEqual(await got.json(), { id: d.id, deviceType: 'Thermo', domainInfo: {} });
    // An upper-case UUID names the same device.
    assert.equal((await server.request('GET', `/api/solutions/mine/devices/${d.id.toUpperCase()}`, { token })).status, 200);
    const del = await server.request('DELETE', `/api/solutions/mine/devices/${d.id}`, { token, headers: { 'content-type': 'application/json' } });
    // 200 with the deleted device as JSON: the original SDK parses every answer.
    assert.equal(del.status, 200);
    assert.deepEqual(await del.json(), { id: d.id, deviceType: 'Thermo', domainInfo: {} });
    assert.equal((await server.request('GET', `/api/solutions/mine/devices/${d.id}`, { token })).status, 404);
    const again = await server.request('DELETE', `/api/solutions/mine/devices/${d.id}`, { token });
    assert.equal(again.status, 404);
    assert.equal(((await again.json()) as { code: string }).code, 'DEVICE_NOT_FOUND');
  });

  it('a device created or deleted behind the service (another process, another node) shows at once', async () => {
    const c = await server.login('behind');
    const list = async (q = '') => ((await (await server.request('GET', `/api/solutions/sandbox/devices${q}`, { token: c.token })).json()) as { devices: { id: string }[] }).devices.map((d) => d.id);
    assert.deepEqual(await list(), []);
    const first = (await (await server.request('POST', '/api/solutions/sandbox/devices', { token: c.token, body: { deviceType: 'A' } })).json()) as { id: string };
    assert.deepEqual(await list(), [first.id]);
    assert.deepEqual(await list('?deviceType=A'), [first.id]);
    // Straight into the store, as `reef provision` in another process does.
    const other = crypto.randomUUID();
    await server.services.store.createDevice({ id: other, tenantId: c.tenantId, groupId: c.groupId, solution: 'sandbox', deviceType: 'A', domainInfo: {} });
    assert.deepEqual(await list(), [first.id, other]);
    assert.deepEqual(await list('?deviceType=A'), [first.id, other]);
    await server.services.store.deleteDevice(c.groupId, 'sandbox', first.id);
    assert.deepEqual(await list(), [other]);
    assert.deepEqual(await list('?deviceType=A'), [other]);
  });

  it('filters by deviceType', async () => {
    const { token } = await server.login('filter');
    await server.request('POST', '/api/solutions/sandbox/devices', { token, body: { deviceType: 'A' } });
    await server.request('POST', '/api/solutions/sandbox/devices', { token, body: { deviceType: 'B' } });
    const r = (await (await server.request('GET', '/api/solutions/sandbox/devices?deviceType=B', { token })).json()) as { devices: { deviceType: string }[] };
    assert.deepEqual(
      r.devices.map((d) => d.deviceType),
      ['B'],
    );
  });

  it('solutions are case sensitive; an unknown one is 404, the built-in ones list empty', async () => {
    const { token } = await server.login('case');
    await server.request('POST', '/api/solutions/Mixed/devices', { token, body: { deviceType: 'X' } });
    assert.equal((await server.request('GET', '/api/solutions/Mixed/devices', { token })).status, 200);
    const r = await server.request('GET', '/api/solutions/mixed/devices', { token });
    assert.equal(r.status, 404);
    assert.equal(((await r.json()) as { code: string }).code, 'SOLUTION_NOT_FOUND');
    assert.deepEqual(await (await server.request('GET', '/api/solutions/sandbox/devices', { token })).json(), { devices: [] });
    assert.deepEqual(await (await server.request('GET', '/api/solutions/StudioSimulation/devices', { token })).json(), { devices: [] });
    assert.equal((await server.request('GET', '/api/solutions/studiosimulation/devices', { token })).status, 404);
  });

  it('validates coordinates, types and names, naming the field', async () => {
    const { token } = await server.login('validate');
    const cases: [unknown, string][] = [
      [{ deviceType: 'V', domainInfo: { location: { latitude: 91, longitude: 0 } } }, 'domainInfo.location.latitude'],
      [{ deviceType: 'V', domainInfo: { location: { latitude: -90.5, longitude: 0 } } }, 'domainInfo.location.latitude'],
      [{ deviceType: 'V', domainInfo: { location: { latitude: 0, longitude: 180.01 } } }, 'domainInfo.location.longitude'],
      [{ deviceType: 'V', domainInfo: { location: { latitude: '1', longitude: 0 } } }, 'domainInfo.location.latitude'],
      [{ deviceType: 'V', domainInfo: { location: 'here' } }, 'domainInfo.location'],
      [{ deviceType: 'V', domainInfo: [] }, 'domainInfo'],
      [{ deviceType: '' }, 'deviceType'],
      [{ deviceType: 'has space' }, 'deviceType'],
      [{ deviceType: 7 }, 'deviceType'],
      [{}, 'deviceType'],
      [{ deviceType: 'NICDevKit', provisioningInfo: { status: 'provisioned' } }, 'provisioningInfo'],
      [{ deviceType: 'V', domainInfo: { big: 'x'.repeat(20000) } }, 'domainInfo'],
    ];
    for (const [body, field] of cases) {
      const r = await server.request('POST', '/api/solutions/v/devices', { token, body });
      assert.equal(r.status, 400, JSON.stringify(body).slice(0, 100));
      const e = (await r.json()) as { code: string; field: string };
      assert.equal(e.code, 'VALIDATION_FAILED');
      assert.equal(e.field, field, JSON.stringify(body).slice(0, 100));
    }
    // Nothing of the refused requests was created.
    assert.equal((await server.request('GET', '/api/solutions/v/devices', { token })).status, 404);
  });

  it('keeps unicode in domainInfo and refuses unicode and path tricks in solution names', async () => {
    const { token } = await server.login('unicode');
    const r = await server.request('POST', '/api/solutions/sandbox/devices', { token, body: { deviceType: 'V', domainInfo: { name: 'Göteborg ☃ 東京' } } });
    assert.equal(r.status, 201);
    assert.equal(((await r.json()) as { domainInfo: { name: string } }).domainInfo.name, 'Göteborg ☃ 東京');
    // Sent byte for byte (fetch would resolve dot segments before sending).
    for (const bad of ['s%C3%A4ndbox', '..', '..%2F..%2Fetc', '%2e%2e', 'a%00b', 'x'.repeat(65), '-lead', 'sp%20ace', '.hidden']) {
      const g = await rawGet(server.url, `/api/solutions/${bad}/devices`, token);
      assert.equal(g.status, 400, bad);
      assert.equal((JSON.parse(g.body) as { code: string }).code, 'INVALID_SOLUTION_NAME', bad);
    }
    const bad = await server.request('GET', '/api/solutions/sandbox/devices/not-a-uuid', { token });
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { code: string }).code, 'INVALID_DEVICE_ID');
  });

  it("another tenant group's device answers exactly like a device that does not exist", async () => {
    const a = await server.login('owner');
    const b = await server.login('stranger');
    const d = (await (await server.request('POST', '/api/solutions/sandbox/devices', { token: a.token, body: virtual })).json()) as { id: string };
    const missing = crypto.randomUUID();
    for (const [method, suffix, body] of [
      ['GET', '', undefined],
      ['DELETE', '', undefined],
      ['GET', '/observations', undefined],
      ['POST', '/observations', { observations: [{ timestamp: '2026-01-01T00:00:00.000Z', temperature: 1 }] }],
    ] as const) {
      const theirs = await server.request(method, `/api/solutions/sandbox/devices/${d.id}${suffix}`, { token: b.token, ...(body ? { body } : {}) });
      const none = await server.request(method, `/api/solutions/sandbox/devices/${missing}${suffix}`, { token: b.token, ...(body ? { body } : {}) });
      assert.equal(theirs.status, 404);
      assert.equal(none.status, 404);
      const [t, n] = [(await theirs.json()) as Record<string, string>, (await none.json()) as Record<string, string>];
      assert.equal(t.code, n.code);
      assert.equal(t.message?.replace(d.id, 'ID'), n.message?.replace(missing, 'ID'));
    }
    assert.deepEqual(await (await server.request('GET', '/api/solutions/sandbox/devices', { token: b.token })).json(), { devices: [] });
    // The owner still has it, with no observation from the stranger.
    assert.equal((await server.request('GET', `/api/solutions/sandbox/devices/${d.id}`, { token: a.token })).status, 200);
    assert.deepEqual(await (await server.request('GET', `/api/solutions/sandbox/devices/${d.id}/observations`, { token: a.token })).json(), { observations: [] });
  });

  it('accounts of one tenant group see each other’s devices (seed §5)', async () => {
    const a = await server.login('team-a', 'team');
    const b = await server.login('team-b', 'team');
    const d = (await (await server.request('POST', '/api/solutions/shared/devices', { token: a.token, body: virtual })).json()) as { id: string };
    const list = (await (await server.request('GET', '/api/solutions/shared/devices', { token: b.token })).json()) as { devices: { id: string }[] };
    assert.deepEqual(
      list.devices.map((x) => x.id),
      [d.id],
    );
  });
});

describe('dev-kit provisioning over HTTP (operator)', () => {
  const admin = { 'x-reef-admin-key': 'an-operator-key-for-tests' };

  it('provisions a NICDevKit to the sandbox with provisioningInfo; the same MAC twice is 409', async () => {
    const c = await server.login('kit-owner');
    const mac = '00135005ff1234ab';
    const r = await server.request('POST', '/api/admin/provision', { headers: admin, body: { clientId: c.clientId, mac: mac.toUpperCase() } });
    assert.equal(r.status, 201);
    const { kitKey, ...d } = (await r.json()) as { id: string; deviceType: string; domainInfo: object; provisioningInfo: Record<string, string>; kitKey: string };
    // The kit key is in this answer only (docs/security.md "Kits"): never in a device listing.
    assert.match(kitKey, /^[0-9a-f]{64}$/);
    assert.equal(r.headers.get('cache-control'), 'no-store');
    assert.equal(d.deviceType, 'NICDevKit');
    // The original's wire names: the seed's vendor* placeholders are ssni* on the wire.
    assert.deepEqual(d.domainInfo, { nic_macID: mac });
    assert.equal(d.provisioningInfo.status, 'provisioned');
    assert.equal(d.provisioningInfo.ssniMacAddress, mac);
    assert.equal(d.provisioningInfo.ssniNetworkDeviceType, 'MILLI');
    assert.match(d.provisioningInfo.timestamp!, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    // The kit, then its network module (docs/api.md "A kit's network module").
    const list = (await (await server.request('GET', '/api/solutions/sandbox/devices', { token: c.token })).json()) as { devices: { id: string }[] };
    assert.deepEqual(list.devices, [d, { id: list.devices[1]!.id, deviceType: 'MILLI', domainInfo: { nic_macID: mac, kitId: d.id }, provisioningInfo: d.provisioningInfo }]);
    const again = await server.request('POST', '/api/admin/provision', { headers: admin, body: { clientId: c.clientId, mac } });
    assert.equal(again.status, 409);
    const e = (await again.json()) as { code: string; message: string };
    assert.equal(e.code, 'MAC_ALREADY_PROVISIONED');
    assert.match(e.message, /already provisioned/);
  });

  it('refuses without the admin key, with a wrong one, and validates the MAC', async () => {
    const c = await server.account('kit2');
    const noKey = await server.request('POST', '/api/admin/provision', { body: { clientId: c.clientId, mac: '0011223344556677' } });
    assert.equal(noKey.status, 403);
    const wrong = await server.request('POST', '/api/admin/provision', { headers: { 'x-reef-admin-key': 'guess' }, body: { clientId: c.clientId, mac: '0011223344556677' } });
    assert.equal(wrong.status, 403);
    const badMac = await server.request('POST', '/api/admin/provision', { headers: admin, body: { clientId: c.clientId, mac: '0011' } });
    assert.equal(badMac.status, 400);
    assert.equal(((await badMac.json()) as { field: string }).field, 'mac');
    const noAccount = await server.request('POST', '/api/admin/provision', { headers: admin, body: { clientId: crypto.randomUUID(), mac: '0011223344556677' } });
    assert.equal(noAccount.status, 404);
  });

  it('creates accounts over HTTP; the secret works once returned', async () => {
    const r = await server.request('POST', '/api/admin/accounts', { headers: admin, body: { name: 'via-http' } });
    assert.equal(r.status, 201);
    const c = (await r.json()) as { clientId: string; clientSecret: string };
    assert.equal(typeof (await server.token(c)), 'string');
  });

  it('operator endpoints are off when no admin key is configured', async () => {
    const s = await startTestServer();
    try {
      const r = await s.request('POST', '/api/admin/accounts', { headers: admin, body: { name: 'x' } });
      assert.equal(r.status, 403);
      assert.match(((await r.json()) as { message: string }).message, /REEF_ADMIN_KEY/);
    } finally {
      await s.close();
    }
  });
});
