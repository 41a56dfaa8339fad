// The SDK's simulation and CoAP-bridge methods against a real service: the simulation component
// running virtual devices, and the gateway with a software dev kit announcing itself over real UDP.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createSimulationComponent } from '../../../src/sim/component.ts';
import { provisionKit } from '../../../src/service/devices.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { startGateway, until, type GatewayHarness } from '../../helpers/gateway.ts';
import { ApiError, ReefClient, type CoapResponse, type Simulation, type StreamEvent } from '../../../src/sdk/index.ts';

describe('SDK: simulations', () => {
  let s: TestServer;
  let client: ReefClient;
  before(async () => {
    // Tests may use intervals down to 50 ms; the service's floor is 1 s.
    s = await startTestServer({}, [createSimulationComponent({ limits: { minIntervalMs: 50 }, reconcileMs: 100, demo: null })]);
    client = new ReefClient({ endpoint: s.url, credentials: await s.account() });
  });
  after(() => s.close());

  it('starts a simulation whose devices report live, lists, gets and stops it', async () => {
    const studio = client.inSolution('StudioSimulation');
    const live: StreamEvent[] = [];
    const ac = new AbortController();
    let started: Promise<Simulation> | null = null;
    for await (const e of studio.stream({
      signal: ac.signal,
      onOpen: () => {
        started ??= client.createSimulation({ devices: 3, interval: 100, name: 'sdk test', seed: 'sdk', area: { center: { latitude: 38.72, longitude: -9.14 }, radiusKm: 5 } });
      },
    })) {
      if (e.type === 'observations') live.push(e);
      if (live.length >= 3) ac.abort();
    }
    assert.ok(started, 'the stream opened');
    const created = await (started as Promise<Simulation>);
    assert.equal(created.status, 'running');
    assert.equal(created.solution, 'StudioSimulation');
    assert.equal(created.deviceIds!.length, 3);
    for (const e of live) assert.ok(created.deviceIds!.includes((e as { deviceId: string }).deviceId), 'live readings come from its devices');

    const devices = await studio.listDevices();
    assert.deepEqual(new Set(devices.map((d) => d.id)), new Set(created.deviceIds));
    assert.ok(devices.every((d) => d.domainInfo.location && d.domainInfo.simulationId === created.id));

    const listed = await client.listSimulations();
    assert.deepEqual(
      listed.map((x) => x.id),
      [created.id],
    );
    assert.equal(listed[0]!.name, 'sdk test');
    const one = await client.getSimulation(created.id);
    assert.deepEqual(one.deviceIds, created.deviceIds);
    assert.ok(one.observationsProduced >= 3);

    const stopped = await client.stopSimulation(created.id);
    assert.equal(stopped.status, 'stopped');
    assert.equal((await client.stopSimulation(created.id)).status, 'stopped', 'stopping is idempotent');
    assert.equal((await client.getSimulation(created.id)).status, 'stopped');
  });

  it('bad parameters and unknown simulations are typed errors', async () => {
    await assert.rejects(
      client.createSimulation({ devices: 0, interval: '10s' }),
      (e: unknown) => e instanceof ApiError && e.status === 400 && e.code === 'VALIDATION_FAILED' && e.field === 'devices',
    );
    await assert.rejects(client.getSimulation('00000000-0000-4000-8000-000000000000'), (e: unknown) => e instanceof ApiError && e.status === 404);
  });
});

describe('SDK: the CoAP bridge to dev kits', () => {
  let h: GatewayHarness;
  let client: ReefClient;
  let id: string;
  let tenantId: string;
  const MAC = '00000000000005d1';
  before(async () => {
    h = await startGateway();
    const creds = await h.t.account('kit-owner');
    client = new ReefClient({ endpoint: h.t.url, credentials: creds });
    tenantId = creds.tenantId;
    id = (await h.kit(creds.tenantId, MAC)).device.id;
  });
  after(() => h.close());

  it('reads the sensor, sets and reads the unit (with or without the prefix)', async () => {
    const r = await client.coapGet(id, 'snsr/arduino/temp?sens');
    assert.equal(r.code, '2.05');
    assert.equal(r.deviceId, id);
    assert.equal(r.mac, MAC);
    assert.equal(r.contentFormat, 0);
    assert.ok(r.reading && typeof r.reading.value === 'number' && typeof r.reading.epoch === 'number');
    const put = await client.coapPut(id, 'arduino/temp?cfg=C');
    assert.equal(put.code, '2.04');
    assert.equal(put.payload, null);
    assert.match((await client.coapGet(id, '/snsr/arduino/temp?cfg')).payload!, /^\d+,C$/);
    assert.equal((await client.coapGet(id, 'snsr/arduino/temp?sens')).reading!.unit, 'C');
    assert.equal((await client.coap(id, 'PUT', 'snsr/arduino/temp?cfg=F')).code, '2.04');
    const clock = await client.coapGet(id, 'snsr/system/time');
    assert.equal(clock.payloadEncoding, 'base64');
  });

  it('observes notifications as an async iterator; breaking out releases the observation', async () => {
    const shared = () => h.gw.gateway.observations().find((o) => o.mac === MAC && o.path === '/snsr/arduino/temp?sens');
    const notes: CoapResponse[] = [];
    let opened = false;
    for await (const n of client.coapObserve(id, 'snsr/arduino/temp?sens', { onOpen: () => (opened = true) })) {
      notes.push(n);
      if (notes.length === 3) break;
    }
    assert.ok(opened);
    assert.equal(notes.length, 3);
    for (const n of notes) {
      assert.equal(n.code, '2.05');
      assert.equal(typeof n.observe, 'number');
      assert.ok(n.reading);
    }
    assert.ok(notes[2]!.observe! > notes[1]!.observe!);
    await until(() => (shared()?.subscribers ?? 0) === 0, 'the SDK observer is released');

    // A resource that cannot be observed: one notification, then the end with its reason.
    let reason = '';
    const once: CoapResponse[] = [];
    for await (const n of client.coapObserve(id, 'snsr/arduino/temp?cfg', { onEnd: (r) => (reason = r) })) once.push(n);
    assert.equal(once.length, 1);
    assert.match(once[0]!.payload!, /^\d+,[CF]$/);
    assert.match(reason, /not observable/);
  });

  it("a kit's error is 502, a device that is no kit is 404, a kit never seen is 503", async () => {
    const e = await client.coapGet(id, 'snsr/arduino/temp').catch((x: unknown) => x);
    assert.ok(e instanceof ApiError);
    assert.equal(e.status, 502);
    assert.equal(e.code, 'BAD_GATEWAY');
    assert.match(e.message, /4\.05/);
    const virtual = await client.createDevice({ deviceType: 'VirtualDevice' });
    await assert.rejects(client.coapGet(virtual.id, 'snsr/arduino/temp?sens'), (x: unknown) => x instanceof ApiError && x.status === 404 && x.code === 'DEVICE_NOT_FOUND');
    const account = (await h.t.services.store.getAccountByTenantId(tenantId))!;
    const { device: offline } = await provisionKit(h.t.services.store, null, account, '00000000000005e1');
    await assert.rejects(client.coapGet(offline.id, 'snsr/arduino/temp?sens'), (x: unknown) => x instanceof ApiError && x.status === 503 && x.code === 'KIT_OFFLINE');
  });
});
