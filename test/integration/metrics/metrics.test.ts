// /metrics as an operator's Prometheus sees it (docs/operations.md "Metrics and logs"): refused
// without the token, on the HTTP port and on the scrape listener; after real traffic (a login, an
// upload, an event stream, MQTT clients, a gateway session, kit readings) the counters moved by
// the right amounts under the right labels; and nothing of the tenant shows.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Code, stringOption, Option } from '../../../src/coap/index.ts';
import { proxyUri } from '../../../src/gateway/gateway.ts';
import { parseMetrics, scrapeMetrics, type Scrape } from '../../helpers/metrics.ts';
import { connect, startMqtt, type MqttHarness } from '../../helpers/mqtt.ts';
import { DOMAIN, nodeClient } from '../../helpers/gateway.ts';
import { readSse } from '../../helpers/sse.ts';
import { startTestServer } from '../../helpers/server.ts';
import { waitFor } from '../../helpers/wait.ts';

const TOKEN = 'scrape-token-4f1c9a7e2b';
const SOLUTION = 'lab7-metrics';
const MAC = '00000000000007e1';
const CLIENT_ID = 'metrics-client-5d2e';
const UPLOAD = '/api/solutions/:solution/devices/:id/observations';

describe('/metrics with a token and a scrape listener', () => {
  let h: MqttHarness;
  let alice: { tenantId: string; clientId: string; token: string };
  /** Every identifier of the tenant the traffic below uses: none may appear in /metrics. */
  const secrets: string[] = [];
  const scrape = () => scrapeMetrics(`${h.t.url}/metrics`, TOKEN);

  before(async () => {
    h = await startMqtt({ gateway: true, config: { metrics: { token: TOKEN, listen: { host: '127.0.0.1', port: 0 } } } });
    alice = await h.t.login('alice-metrics');
    secrets.push(alice.tenantId, alice.clientId, alice.token, SOLUTION, MAC, CLIENT_ID);
  });
  after(() => h.close());

  it('is refused without the token or with another, on the HTTP port and on the scrape listener', async () => {
    for (const url of [`${h.t.url}/metrics`, h.t.metricsUrl!]) {
      for (const headers of [{}, { authorization: 'Bearer not-the-token-at-all' }, { authorization: TOKEN }] as Record<string, string>[]) {
        const r = await fetch(url, { headers });
        assert.equal(r.status, 401, url);
        assert.equal(r.headers.get('www-authenticate'), 'Bearer');
        assert.equal(((await r.json()) as { code: string }).code, 'METRICS_TOKEN_REQUIRED');
      }
    }
    const ok = await fetch(h.t.metricsUrl!, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(ok.status, 200);
    assert.match(ok.headers.get('content-type')!, /^text\/plain; version=0\.0\.4/);
    const s = parseMetrics(await ok.text());
    assert.equal(s.types.get('reef_http_request_duration_seconds'), 'histogram');
    assert.ok(s.value('process_cpu_user_seconds_total') > 0, 'process metrics are there');
    assert.equal(s.value('reef_leader'), 1, 'a node alone leads');
  });

  it('counts requests by route pattern and status, uploads by path, write groups and event streams', async () => {
    const before = await scrape();
    const r = await h.t.request('POST', `/api/solutions/${SOLUTION}/devices`, { token: alice.token, body: { deviceType: 'VirtualDevice', domainInfo: {} } });
    assert.equal(r.status, 201);
    const id = ((await r.json()) as { id: string }).id;
    secrets.push(id);
    const now = Date.now();
    const observations = [0, 1, 2].map((i) => ({ timestamp: new Date(now - i * 1000).toISOString(), temperature: 20 + i }));
    assert.equal((await h.t.request('POST', `/api/solutions/${SOLUTION}/devices/${id}/observations`, { token: alice.token, body: { observations } })).status, 201);
    assert.equal((await h.t.request('POST', `/api/solutions/${SOLUTION}/devices/${id}/observations`, { token: alice.token, body: { observations: [{ temperature: 1 }] } })).status, 400);
    assert.equal((await h.t.request('GET', `/api/nothing-here/${id}`, { token: alice.token })).status, 404);
    const ac = new AbortController();
    const res = await fetch(`${h.t.url}/api/solutions/${SOLUTION}/events`, { headers: { authorization: alice.token }, signal: ac.signal });
    assert.equal(res.status, 200);
    await readSse(res, { subscribed: true });

    const after = await scrape();
    const delta = (name: string, labels: Record<string, string> = {}) => after.value(name, labels) - before.value(name, labels);
    const count = 'reef_http_request_duration_seconds_count';
    assert.equal(delta(count, { method: 'POST', route: '/api/solutions/:solution/devices', status: '201' }), 1);
    assert.equal(delta(count, { method: 'POST', route: UPLOAD, status: '201' }), 1);
    assert.equal(delta(count, { method: 'POST', route: UPLOAD, status: '400' }), 1);
    assert.equal(delta(count, { method: 'GET', route: 'unmatched', status: '404' }), 1);
    assert.equal(delta(count, { method: 'GET', route: '/metrics', status: '200' }), 1, 'the scrape before this one');
    // The histogram's buckets hold every request: +Inf equals the count.
    assert.equal(delta('reef_http_request_duration_seconds_bucket', { route: UPLOAD, status: '201', le: '+Inf' }), 1);
    assert.equal(delta('reef_observations_stored_total', { path: 'http' }), 3);
    assert.ok(delta('reef_store_write_seconds_count', { store: 'sqlite' }) >= 1, 'the upload was committed in a write group');
    assert.ok(delta('reef_store_write_group_batches_sum', { store: 'sqlite' }) >= delta('reef_store_write_group_batches_count', { store: 'sqlite' }));
    assert.equal(delta('reef_sse_streams'), 1);

    ac.abort();
    await waitFor('the stream gone from the gauge', async () => (await scrape()).value('reef_sse_streams') === before.value('reef_sse_streams'));
  });

  it('a login counts under its route, whatever the outcome', async () => {
    const before = await scrape();
    const c = await h.t.account('bob-metrics');
    secrets.push(c.tenantId, c.clientId);
    await h.t.token(c);
    const bad = await h.t.request('POST', '/api/tokens', { body: { clientId: c.clientId, clientSecret: 'wrong-secret-wrong-secret' } });
    assert.equal(bad.status, 401);
    const after = await scrape();
    const count = (s: Scrape, status: string) => s.value('reef_http_request_duration_seconds_count', { method: 'POST', route: '/api/tokens', status });
    assert.equal(count(after, '201') - count(before, '201'), 1);
    assert.equal(count(after, '401') - count(before, '401'), 1);
  });

  it('counts MQTT connections, CONNECTs by result and MQTT ingest', async () => {
    const before = await scrape();
    const client = await connect(h, alice.token, { clientId: CLIENT_ID });
    await assert.rejects(connect(h, 'not-a-token-nor-a-secret', { clientId: `${CLIENT_ID}-x` }));
    const r = await h.t.request('POST', `/api/solutions/${SOLUTION}/devices`, { token: alice.token, body: { deviceType: 'VirtualDevice', domainInfo: {} } });
    const id = ((await r.json()) as { id: string }).id;
    secrets.push(id);
    const topic = `${alice.tenantId}/solutions/${SOLUTION}/devices/${id}/observations`;
    const now = Date.now();
    await client.publishAsync(
      topic,
      JSON.stringify({
        observations: [
          { timestamp: new Date(now).toISOString(), temperature: 5 },
          { timestamp: new Date(now - 1000).toISOString(), temperature: 6 },
        ],
      }),
      {
        qos: 1,
      },
    );
    const mid = await scrape();
    assert.equal(mid.value('reef_mqtt_connections') - before.value('reef_mqtt_connections'), 1);
    assert.equal(mid.value('reef_mqtt_connects_total', { result: 'accepted' }) - before.value('reef_mqtt_connects_total', { result: 'accepted' }), 1);
    assert.equal(mid.value('reef_mqtt_connects_total', { result: 'refused' }) - before.value('reef_mqtt_connects_total', { result: 'refused' }), 1);
    assert.equal(mid.value('reef_observations_stored_total', { path: 'mqtt' }) - before.value('reef_observations_stored_total', { path: 'mqtt' }), 2);
    assert.equal(mid.types.get('reef_mqtt_connects_total'), 'counter');
    await client.endAsync();
    await waitFor('the MQTT connection gone from the gauge', async () => (await scrape()).value('reef_mqtt_connections') === before.value('reef_mqtt_connections'));
  });

  it('counts gateway sessions, kits, requests by CoAP code and kit readings', async () => {
    const before = await scrape();
    const { device } = await h.gw!.kit(alice.tenantId, MAC);
    secrets.push(device.id);
    const c = await nodeClient();
    try {
      const target = [stringOption(Option.PROXY_URI, proxyUri(MAC, DOMAIN, '/snsr/arduino/temp?sens'))];
      assert.equal((await c.request(h.gw!.addr, { method: Code.GET, options: target, timeoutMs: 5000 })).code, Code.UNAUTHORIZED);
      assert.equal((await c.request(h.gw!.addr, { method: Code.POST, uri: '/sessions', payload: Buffer.from(alice.token), timeoutMs: 5000 })).code, Code.CREATED);
      assert.equal((await c.request(h.gw!.addr, { method: Code.GET, options: target, timeoutMs: 5000 })).code, Code.CONTENT);
      const after = await waitFor('a kit reading stored', async () => {
        const s = await scrape();
        return s.value('reef_observations_stored_total', { path: 'gateway' }) > before.value('reef_observations_stored_total', { path: 'gateway' }) ? s : null;
      });
      const delta = (name: string, labels: Record<string, string> = {}) => after.value(name, labels) - before.value(name, labels);
      assert.equal(delta('reef_gateway_sessions'), 1);
      assert.equal(delta('reef_gateway_kits'), 1);
      assert.equal(delta('reef_gateway_requests_total', { code: '4.01' }), 1);
      assert.equal(delta('reef_gateway_requests_total', { code: '2.01' }), 1);
      assert.equal(delta('reef_gateway_requests_total', { code: '2.05' }), 1);
    } finally {
      await c.close();
    }
  });

  it("shows none of a tenant's identifiers after its traffic", async () => {
    const s = await scrape();
    assert.ok(secrets.length >= 10);
    for (const x of secrets) assert.ok(!s.text.includes(x), `${x} appears in /metrics`);
    // Labels are bounded: route patterns (never a URL), methods, statuses, fixed names.
    for (const sample of s.samples) {
      if (sample.labels.route !== undefined) assert.ok(sample.labels.route === 'unmatched' || sample.labels.route.startsWith('/'), sample.labels.route);
      assert.ok(!Object.values(sample.labels).some((v) => /[0-9a-f]{8}-[0-9a-f]{4}-/.test(v)), `an id in the labels of ${sample.name}`);
    }
  });
});

describe('/metrics without the settings', () => {
  it('the HTTP port has no /metrics unless a token is set', async () => {
    const t = await startTestServer();
    try {
      const r = await fetch(`${t.url}/metrics`);
      assert.equal(r.status, 404);
      assert.equal(((await r.json()) as { code: string }).code, 'ROUTE_NOT_FOUND');
      assert.equal(t.metricsUrl, null);
    } finally {
      await t.close();
    }
  });

  it('a scrape listener without a token serves /metrics to whoever reaches it, and nothing else', async () => {
    const t = await startTestServer({ metrics: { token: null, listen: { host: '127.0.0.1', port: 0 } } });
    try {
      const s = await scrapeMetrics(t.metricsUrl!);
      assert.ok(s.value('reef_leader') === 1);
      const other = await fetch(t.metricsUrl!.replace(/\/metrics$/, '/api/tokens'));
      assert.equal(other.status, 404);
      assert.equal(((await other.json()) as { code: string }).code, 'ROUTE_NOT_FOUND');
      const post = await fetch(t.metricsUrl!, { method: 'POST' });
      assert.equal(post.status, 405);
      assert.equal(post.headers.get('allow'), 'GET, HEAD');
      assert.equal((await fetch(`${t.url}/metrics`)).status, 404, 'and the HTTP port still has none');
    } finally {
      await t.close();
    }
  });
});
