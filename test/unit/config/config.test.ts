// Configuration: defaults, flags over variables, and every problem reported at once.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ConfigError, loadConfig } from '../../../src/config/config.ts';

it('defaults match the documentation', () => {
  const c = loadConfig({}, {});
  assert.equal(c.http.port, 8080);
  assert.equal(c.http.host, '127.0.0.1');
  assert.match(c.dataDir, /\/data$/);
  assert.equal(c.databaseUrl, null);
  assert.equal(c.tokens.ttlSeconds, 3600);
  assert.equal(c.gateway.port, 5683);
  assert.equal(c.gateway.deadlineMs, 30000);
  assert.equal(c.gateway.sessionTtlSeconds, 14400);
  assert.equal(c.gateway.maxSessionsPerAccount, 10);
  assert.deepEqual(c.gateway.kits, []);
});

it('flags win over variables', () => {
  const c = loadConfig({ REEF_HTTP_PORT: '9000', REEF_LOG_LEVEL: 'warn' }, { port: '9100', 'log-level': 'error' });
  assert.equal(c.http.port, 9100);
  assert.equal(c.logLevel, 'error');
});

it('reads fixed kit addresses', () => {
  const c = loadConfig({ REEF_GATEWAY_KITS: '00:13:50:05:FF:12:34:AB=127.0.0.1:4849, 00135005ff1234ac=[::1]:5000' }, {});
  assert.deepEqual(c.gateway.kits, [
    { mac: '00135005ff1234ab', host: '127.0.0.1', port: 4849 },
    { mac: '00135005ff1234ac', host: '::1', port: 5000 },
  ]);
});

it('reads the subnets alarm webhooks may reach, and names each bad one', () => {
  assert.deepEqual(loadConfig({}, {}).alarms.webhookAllowCidrs, []);
  const c = loadConfig({ REEF_ALARM_WEBHOOK_ALLOW_CIDRS: '10.20.0.0/16, fd00:1::/64,192.168.1.7' }, {});
  assert.deepEqual(c.alarms.webhookAllowCidrs, [
    { address: '10.20.0.0', prefix: 16, family: 4 },
    { address: 'fd00:1::', prefix: 64, family: 6 },
    { address: '192.168.1.7', prefix: 32, family: 4 },
  ]);
  assert.throws(
    () => loadConfig({}, { 'alarm-webhook-allow-cidrs': '10.0.0.0/33,intranet,fd00::/129,10.0.0.0/8/8,10.1.0.0/x' }),
    (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      assert.equal(e.problems.length, 5, e.message);
      for (const bad of ['10.0.0.0/33', 'intranet', 'fd00::/129', '10.0.0.0/8/8', '10.1.0.0/x']) assert.match(e.message, new RegExp(JSON.stringify(bad).replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')));
      return true;
    },
  );
});

it('reports every problem at once', () => {
  assert.throws(
    () => loadConfig({ REEF_HTTP_PORT: '70000', REEF_TOKEN_SECRET: 'short', REEF_ADMIN_KEY: 'k', REEF_DEMO: 'maybe', REEF_GATEWAY_KITS: 'nope', REEF_GATEWAY_CLOCK_SKEW: '0' }, {}),
    (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      assert.equal(e.problems.length, 6, e.message);
      for (const v of ['REEF_HTTP_PORT', 'REEF_TOKEN_SECRET', 'REEF_ADMIN_KEY', 'REEF_DEMO', 'REEF_GATEWAY_KITS', 'REEF_GATEWAY_CLOCK_SKEW']) assert.match(e.message, new RegExp(v));
      return true;
    },
  );
});

it('MQTT: on at 127.0.0.1:1883 by default, moving off a taken default port only, TLS files both or neither', () => {
  const c = loadConfig({}, {});
  assert.deepEqual(
    { ...c.mqtt },
    {
      enabled: true,
      host: '127.0.0.1',
      port: 1883,
      portFallback: true,
      tlsPort: 8883,
      tlsPortFallback: true,
      tlsCert: null,
      tlsKey: null,
      retain: true,
      recheckSeconds: 1,
      limits: {
        maxConnections: 10_000,
        maxPerAddress: 200,
        maxPerAccount: 1000,
        connectTimeoutMs: 10_000,
        maxKeepAliveSeconds: 600,
        maxPacketBytes: 1 << 20,
        maxInflight: 32,
        maxQueuedMessages: 1000,
        maxQueuedBytes: 4 << 20,
        sessionMessages: 1000,
        sessionBytes: 8 << 20,
        sessionExpiryMs: 7_200_000,
      },
      redisUrl: null,
    },
  );
  // Every MQTT limit is checked with the rest, all problems together.
  assert.throws(
    () => loadConfig({ REEF_MQTT_MAX_PER_ADDRESS: '0', REEF_MQTT_MAX_PACKET: '100', REEF_MQTT_CONNECT_TIMEOUT: 'soon', REEF_MQTT_MAX_QUEUE_BYTES: '-5', REEF_MQTT_SESSION_EXPIRY: '0' }, {}),
    (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      assert.equal(e.problems.length, 5, e.message);
      for (const v of ['REEF_MQTT_MAX_PER_ADDRESS', 'REEF_MQTT_MAX_PACKET', 'REEF_MQTT_CONNECT_TIMEOUT', 'REEF_MQTT_MAX_QUEUE_BYTES', 'REEF_MQTT_SESSION_EXPIRY'])
        assert.match(e.message, new RegExp(v));
      return true;
    },
  );
  // The shared MQTT state: a redis:// or rediss:// URL with a host (and a database number), or unset.
  assert.equal(loadConfig({ REEF_REDIS_URL: 'redis://:pw@10.0.0.5:6380/2' }, {}).mqtt.redisUrl, 'redis://:pw@10.0.0.5:6380/2');
  assert.equal(loadConfig({}, { 'redis-url': 'rediss://cache.example.org' }).mqtt.redisUrl, 'rediss://cache.example.org');
  for (const bad of ['http://127.0.0.1:6379', '127.0.0.1:6379', 'redis://', 'redis://host/db0', 'redis://host/0?x=1']) {
    assert.throws(() => loadConfig({ REEF_REDIS_URL: bad }, {}), /REEF_REDIS_URL \(--redis-url\) must be a redis:\/\/ or rediss:\/\/ URL/, bad);
  }
  // A port the operator chose is never moved, whether by variable or flag.
  assert.equal(loadConfig({ REEF_MQTT_PORT: '1883' }, {}).mqtt.portFallback, false);
  assert.equal(loadConfig({}, { 'mqtt-port': '2883' }).mqtt.portFallback, false);
  assert.equal(loadConfig({}, { 'mqtt-tls-port': '9883' }).mqtt.tlsPortFallback, false);
  assert.throws(
    () => loadConfig({ REEF_MQTT_TLS_CERT: '/etc/hostname', REEF_MQTT_PORT: '-1', REEF_MQTT_RECHECK: '0', REEF_MQTT: 'perhaps' }, {}),
    (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      for (const v of ['REEF_MQTT_TLS_KEY', 'REEF_MQTT_PORT', 'REEF_MQTT_RECHECK', 'REEF_MQTT \\(--mqtt\\)']) assert.match(e.message, new RegExp(v));
      return true;
    },
  );
  assert.throws(() => loadConfig({ REEF_MQTT_TLS_CERT: '/nonexistent/cert.pem', REEF_MQTT_TLS_KEY: '/nonexistent/key.pem' }, {}), /no such file "\/nonexistent\/cert.pem"/);
});

it('metrics: nothing served by default; a token of 16 characters or more; a listen address as host:port', () => {
  const d = loadConfig({}, {});
  assert.deepEqual(d.metrics, { token: null, listen: null });
  assert.equal(d.logFormat, 'auto');
  const c = loadConfig({ REEF_METRICS_TOKEN: 'a-scrape-token-of-32-characters!', REEF_METRICS_LISTEN: '127.0.0.1:9464', REEF_LOG_FORMAT: 'JSON' }, { 'metrics-listen': '[::1]:0' });
  assert.deepEqual(c.metrics, { token: 'a-scrape-token-of-32-characters!', listen: { host: '::1', port: 0 } });
  assert.equal(c.logFormat, 'json');
  assert.deepEqual(loadConfig({ REEF_METRICS_LISTEN: 'localhost:9464' }, {}).metrics.listen, { host: 'localhost', port: 9464 });
  assert.throws(
    () => loadConfig({ REEF_METRICS_TOKEN: 'short', REEF_LOG_FORMAT: 'xml' }, { 'metrics-listen': '9464' }),
    (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      assert.equal(e.problems.length, 3, e.message);
      assert.match(e.message, /REEF_METRICS_TOKEN/);
      assert.match(e.message, /REEF_METRICS_LISTEN .*"9464"/);
      assert.match(e.message, /REEF_LOG_FORMAT/);
      return true;
    },
  );
  assert.throws(() => loadConfig({ REEF_METRICS_LISTEN: '127.0.0.1:70000' }, {}), /REEF_METRICS_LISTEN/);
});

it('a read standby: one postgres:// host, and only beside REEF_DATABASE_URL', () => {
  const primary = 'postgres://reef@db1:5432,db2:5432/reef';
  assert.equal(loadConfig({}, {}).databaseReadUrl, null);
  assert.equal(loadConfig({ REEF_DATABASE_URL: primary, REEF_DATABASE_READ_URL: 'postgres://reef@db2:5432/reef' }, {}).databaseReadUrl, 'postgres://reef@db2:5432/reef');
  const refused = (env: Record<string, string>, why: RegExp) =>
    assert.throws(
      () => loadConfig(env, {}),
      (e: unknown) => e instanceof ConfigError && why.test(e.message),
    );
  refused({ REEF_DATABASE_READ_URL: 'postgres://reef@db2/reef' }, /REEF_DATABASE_READ_URL \(--database-read-url\) needs REEF_DATABASE_URL/);
  refused({ REEF_DATABASE_URL: primary, REEF_DATABASE_READ_URL: 'mysql://db2/reef' }, /must start with postgres:\/\//);
  refused({ REEF_DATABASE_URL: primary, REEF_DATABASE_READ_URL: 'postgres://reef@db2:5432,db3:5432/reef' }, /must name one host/);
  refused({ REEF_DATABASE_URL: primary, REEF_DATABASE_READ_URL: 'postgres://reef@x/reef?host=db2,db3' }, /must name one host/);
});
