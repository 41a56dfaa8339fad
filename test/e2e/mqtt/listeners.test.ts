// Where the broker listens: MQTT over TLS with a certificate (mqtt.js and mosquitto_sub verifying
// it), the default port moving on when another broker holds it (and an explicitly chosen port not),
// and `reef serve` printing where MQTT listens with a mosquitto_sub line that works as printed.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import mqtt from 'mqtt';
import { MqttBroker } from '../../../src/mqtt/broker.ts';
import { serveReef, type ServingReef } from '../../helpers/reef.ts';
import { tempDir } from '../../helpers/server.ts';
import { mosquittoSub, startMqtt, type MqttHarness } from '../../helpers/mqtt.ts';

/** A self-signed certificate for 127.0.0.1 (key mode 0600, as a key file should be). */
function selfSigned(dir: string): { cert: string; key: string } {
  const cert = path.join(dir, 'cert.pem');
  const key = path.join(dir, 'key.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '2',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  fs.chmodSync(key, 0o600);
  return { cert, key };
}

describe('MQTT listeners', () => {
  let dir: string;
  let pem: { cert: string; key: string };
  let h: MqttHarness;

  before(async () => {
    dir = tempDir('reef-mqtt-tls-');
    pem = selfSigned(dir);
    h = await startMqtt({ mqtt: { tlsCert: pem.cert, tlsKey: pem.key, tlsPort: 0 } });
  });
  after(async () => {
    await h.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('serves MQTT over TLS: mqtt.js and mosquitto_sub verify the certificate, log in with a token and subscribe', async () => {
    const a = await h.t.login('alice');
    const port = h.mq.broker.tlsAddress()!.port;
    const c = await mqtt.connectAsync(`mqtts://127.0.0.1:${port}`, { ca: fs.readFileSync(pem.cert), username: 'notused', password: a.token, protocolVersion: 4, reconnectPeriod: 0 });
    assert.deepEqual(
      (await c.subscribeAsync(`${a.tenantId}/alert/+/+`)).map((g) => g.qos),
      [0],
    );
    await c.endAsync();
    const sub = mosquittoSub(port, ['--cafile', pem.cert, '-u', 'notused', '-P', a.token, '-t', `${a.tenantId}/alert/+/+`, '-E']);
    assert.equal(await sub.exit, 0, sub.stderr());
    assert.deepEqual(sub.granted, [0]);
  });

  it('tells an authenticated caller how to connect: GET /api/mqtt', async () => {
    const a = await h.t.login('dora');
    assert.equal((await h.t.request('GET', '/api/mqtt')).status, 401);
    const r = await h.t.request('GET', '/api/mqtt', { token: a.token });
    assert.equal(r.status, 200);
    const info = (await r.json()) as { url: string; tlsUrl: string; tenantId: string; topics: { alerts: string; ingest: string; errors: string }; example: string };
    assert.equal(info.url, `mqtt://127.0.0.1:${h.port}`);
    assert.equal(info.tlsUrl, `mqtts://127.0.0.1:${h.mq.broker.tlsAddress()!.port}`);
    assert.equal(info.tenantId, a.tenantId);
    assert.equal(info.topics.alerts, `${a.tenantId}/alert/+/+`);
    assert.equal(info.topics.ingest, `${a.tenantId}/solutions/{solution}/devices/{deviceId}/observations`);
    // The example works as given, with TOKEN set.
    const sub = mosquittoSub(h.port, ['-u', 'notused', '-P', a.token, '-t', info.topics.alerts, '-E']);
    assert.equal(await sub.exit, 0);
    assert.deepEqual(sub.granted, [0]);
    assert.match(info.example, new RegExp(`^mosquitto_sub -h 127\\.0\\.0\\.1 -p ${h.port} -u notused -P "\\$TOKEN" -t '${a.tenantId}/alert/\\+/\\+' -v$`));
  });

  it('refuses a TLS client that does not trust the certificate, and keeps serving', async () => {
    const a = await h.t.login('bob');
    const port = h.mq.broker.tlsAddress()!.port;
    await assert.rejects(mqtt.connectAsync(`mqtts://127.0.0.1:${port}`, { username: 'notused', password: a.token, protocolVersion: 4, reconnectPeriod: 0 }));
    const c = await mqtt.connectAsync(`mqtts://127.0.0.1:${port}`, { ca: fs.readFileSync(pem.cert), username: 'notused', password: a.token, protocolVersion: 4, reconnectPeriod: 0 });
    await c.endAsync();
  });

  it('moves off a default port another broker holds, and fails clearly on a taken port the operator chose', async () => {
    const holder = net.createServer();
    await new Promise<void>((r) => holder.listen(0, '127.0.0.1', () => r()));
    const taken = (holder.address() as net.AddressInfo).port;
    const deps = { store: h.t.services.store, events: null, auth: h.t.services.auth, quotas: h.t.services.quotas, log: h.t.services.log };
    const opts = {
      host: '127.0.0.1',
      port: taken,
      tlsPort: 0,
      tlsPortFallback: false,
      tls: null,
      retain: true,
      recheckMs: 60_000,
      maxPayloadBytes: 1024,
      maxObservations: 10,
      maxObservationExtraBytes: 1024,
      limits: h.t.services.config.mqtt.limits,
    };
    const moved = new MqttBroker(deps, { ...opts, portFallback: true });
    try {
      await moved.start();
      const a = moved.address();
      assert.notEqual(a.port, taken);
      assert.equal(a.wanted, taken);
      const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${a.port}`, { username: 'notused', password: (await h.t.login('carol')).token, protocolVersion: 4, reconnectPeriod: 0 });
      await c.endAsync();
    } finally {
      await moved.stop();
    }
    const strict = new MqttBroker(deps, { ...opts, portFallback: false });
    await assert.rejects(strict.start(), new RegExp(`MQTT port ${taken} on 127.0.0.1 is taken .*REEF_MQTT_PORT`));
    await strict.stop();
    await new Promise((r) => holder.close(r));
  });
});

describe('MQTT over TLS with the HTTPS certificate', () => {
  it('listens with the certificate of REEF_TLS_CERT/KEY when the broker has none of its own', async () => {
    const dir = tempDir('reef-mqtt-https-');
    const pem = selfSigned(dir);
    const h = await startMqtt({ config: { tls: { cert: pem.cert, key: pem.key, selfSigned: false } }, mqtt: { tlsCert: null, tlsKey: null, tlsPort: 0 } });
    try {
      const port = h.mq.broker.tlsAddress()?.port;
      assert.ok(port, 'a TLS listener');
      const a = await h.t.account('https');
      const { accessToken } = await h.t.services.auth.login(a.clientId, a.clientSecret);
      const c = await mqtt.connectAsync(`mqtts://127.0.0.1:${port}`, { ca: fs.readFileSync(pem.cert), username: 'notused', password: accessToken, protocolVersion: 4, reconnectPeriod: 0 });
      assert.deepEqual(
        (await c.subscribeAsync(`${a.tenantId}/alert/+/+`)).map((g) => g.qos),
        [0],
      );
      await c.endAsync();
    } finally {
      await h.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('has no TLS listener without any certificate', async () => {
    const h = await startMqtt();
    try {
      assert.equal(h.mq.broker.tlsAddress(), null);
    } finally {
      await h.close();
    }
  });
});

describe('`reef serve` and MQTT', () => {
  let dataDir: string;
  let reef: ServingReef;
  let out = '';

  before(async () => {
    dataDir = tempDir('reef-mqtt-serve-');
    reef = await serveReef(['--port', '0', '--gateway-port', '0', '--mqtt-port', '0', '--data-dir', dataDir], { until: /mosquitto_sub .*\n/ });
    out = reef.output();
  });
  after(async () => {
    await reef?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it("prints where MQTT listens and a mosquitto_sub line that receives the demo kit's readings as printed", async () => {
    assert.match(out, /MQTT broker: mqtt:\/\/127\.0\.0\.1:\d+/);
    const url = /Reef is running at (http:\/\/\S+)/.exec(out)![1]!;
    const clientId = /client id:\s+(\S+)/.exec(out)![1]!;
    const clientSecret = /client secret:\s+(\S+)/.exec(out)![1]!;
    const r = await fetch(`${url}/api/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ clientId, clientSecret }) });
    const { accessToken } = (await r.json()) as { accessToken: string };
    // The printed command, word for word, with $TOKEN set as the banner says.
    const line = /^\s*(mosquitto_sub .*)$/m.exec(out)![1]!;
    const printed = execFileSync('bash', ['-c', `${line} -C 1 -W 60`], { env: { ...process.env, TOKEN: accessToken }, encoding: 'utf8' });
    const [topic, payload] = printed.trim().split(' ');
    assert.match(topic!, /^TN[0-9A-F]{20}\/alert\/de[0-9a-f]{14}\/temp$/);
    assert.match(payload!, /^\d+,-?\d+\.\d\d,[CF]$/);
  });
});
