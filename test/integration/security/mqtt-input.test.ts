// MQTT input held to the HTTP rules (docs/security.md "HTTP input", "MQTT"): an ingest message
// nested deeper than 64 levels is refused as the HTTP upload of the same body is, same code, message
// and field, and nothing is stored; so is an observation whose own fields pass
// REEF_MAX_OBSERVATION_EXTRA; the broker's own TLS key file readable by every user stops the
// start, as the HTTPS one does.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { MqttClient } from 'mqtt';
import { ConfigError, loadConfig } from '../../../src/config/config.ts';
import { tempDir } from '../../helpers/server.ts';
import { opensslCertificate } from '../../helpers/tls.ts';
import { waitFor } from '../../helpers/wait.ts';
import { connect, inbox, startMqtt, type MqttHarness } from '../../helpers/mqtt.ts';

describe('MQTT ingest: JSON depth', () => {
  let h: MqttHarness;
  let c: MqttClient;

  before(async () => {
    h = await startMqtt();
  });
  after(async () => {
    await c?.endAsync(true).catch(() => undefined);
    await h.close();
  });

  it("refuses a message nested deeper than 64 levels with the HTTP upload's error, storing nothing", async () => {
    const a = await h.t.login('deep');
    const r = await h.t.request('POST', '/api/solutions/plant/devices', { token: a.token, body: { deviceType: 'Thermo', domainInfo: {} } });
    const id = ((await r.json()) as { id: string }).id;
    const path = `/api/solutions/plant/devices/${id}/observations`;
    // A valid observation whose extra field nests 100 arrays deep.
    const deep = `{"observations":[{"timestamp":"2026-02-01T10:00:00Z","temperature":20,"x":${'['.repeat(100)}${']'.repeat(100)}}]}`;
    const http = await h.t.request('POST', path, { token: a.token, body: deep });
    const httpError = (await http.json()) as { code: string; message: string; field: string };
    assert.equal(http.status, 400);

    c = await connect(h, a.token, { clientId: 'deep-publisher' });
    await c.subscribeAsync(`${a.tenantId}/errors/#`, { qos: 1 });
    const reasons = inbox(c);
    await c.publishAsync(`${a.tenantId}/solutions/plant/devices/${id}/observations`, deep, { qos: 1 });
    await waitFor('the reason', () => reasons.length === 1);
    const mqttError = JSON.parse(reasons[0]!.payload.toString()) as { code: string; message: string; field: string };
    assert.deepEqual({ code: mqttError.code, message: mqttError.message, field: mqttError.field }, { code: httpError.code, message: httpError.message, field: httpError.field });
    assert.equal(mqttError.code, 'VALIDATION_FAILED');
    assert.match(mqttError.message, /nested deeper than 64 levels/);
    assert.equal((await h.t.services.store.queryObservations(id, { limit: 10 })).observations.length, 0);
  });
});

describe('MQTT ingest: size of one observation', () => {
  let h: MqttHarness;
  let c: MqttClient;

  before(async () => {
    h = await startMqtt();
  });
  after(async () => {
    await c?.endAsync(true).catch(() => undefined);
    await h.close();
  });

  it('refuses an observation whose other fields pass REEF_MAX_OBSERVATION_EXTRA on both paths, with one error, storing nothing', async () => {
    const limit = h.t.services.config.maxObservationExtraBytes;
    const a = await h.t.login('padded');
    const r = await h.t.request('POST', '/api/solutions/plant/devices', { token: a.token, body: { deviceType: 'Thermo', domainInfo: {} } });
    const id = ((await r.json()) as { id: string }).id;
    const path = `/api/solutions/plant/devices/${id}/observations`;
    const body = (ts: string, pad: number) =>
      JSON.stringify({
        observations: [
          { timestamp: ts, temperature: 20 },
          { timestamp: ts.replace('10:00', '10:01'), temperature: 21, pad: 'x'.repeat(pad) },
        ],
      });
    const big = body('2026-02-01T10:00:00Z', limit + 1);
    const http = await h.t.request('POST', path, { token: a.token, body: big });
    const httpError = (await http.json()) as { code: string; message: string; field: string };
    assert.equal(http.status, 400);
    assert.deepEqual({ code: httpError.code, field: httpError.field }, { code: 'VALIDATION_FAILED', field: 'observations/1' });

    c = await connect(h, a.token, { clientId: 'padded-publisher' });
    await c.subscribeAsync(`${a.tenantId}/errors/#`, { qos: 1 });
    const reasons = inbox(c);
    await c.publishAsync(`${a.tenantId}/solutions/plant/devices/${id}/observations`, big, { qos: 1 });
    await waitFor('the reason', () => reasons.length === 1);
    const mqttError = JSON.parse(reasons[0]!.payload.toString()) as { code: string; message: string; field: string };
    assert.deepEqual({ code: mqttError.code, message: mqttError.message, field: mqttError.field }, { code: httpError.code, message: httpError.message, field: httpError.field });
    assert.equal((await h.t.services.store.queryObservations(id, { limit: 10 })).observations.length, 0);

    // Just under the limit is an ordinary upload, on either path.
    const fits = await h.t.request('POST', path, { token: a.token, body: body('2026-02-02T10:00:00Z', limit - 100) });
    assert.equal(fits.status, 201);
    await c.publishAsync(`${a.tenantId}/solutions/plant/devices/${id}/observations`, body('2026-02-03T10:00:00Z', limit - 100), { qos: 1 });
    assert.equal((await h.t.services.store.queryObservations(id, { limit: 10 })).observations.length, 4);
    assert.equal(reasons.length, 1);
  });
});

describe('MQTT TLS key file', () => {
  let dir: string;
  let pem: { cert: string; key: string };

  before(() => {
    dir = tempDir('reef-mqtt-key-');
    pem = opensslCertificate(dir, '127.0.0.1');
    fs.chmodSync(pem.key, 0o644);
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('refuses a key readable by every user in the configuration, with every other problem', () => {
    assert.throws(
      () => loadConfig({ REEF_MQTT_TLS_CERT: pem.cert, REEF_MQTT_TLS_KEY: pem.key, REEF_MQTT_PORT: 'x' }, {}),
      (e: unknown) => e instanceof ConfigError && e.problems.length === 2 && /REEF_MQTT_TLS_KEY.*readable by every user/.test(e.message) && /REEF_MQTT_PORT/.test(e.message),
    );
  });

  it('refuses to start the broker with it', async () => {
    await assert.rejects(startMqtt({ mqtt: { tlsCert: pem.cert, tlsKey: pem.key, tlsPort: 0 } }), (e: unknown) => e instanceof ConfigError && /readable by every user/.test(e.message));
  });
});
