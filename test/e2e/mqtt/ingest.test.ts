// MQTT ingest: `{"observations":[...]}` published to
// `<tenantId>/solutions/<solution>/devices/<deviceId>/observations` is validated and stored exactly
// as an HTTP upload of the same body: stored before the PUBACK, all or nothing, same limits,
// de-duplicated, and sent to live subscribers (SSE). A refused message stores nothing and the reason
// arrives on `<tenantId>/errors/<clientId>`, with the HTTP error body. Real clients: mqtt.js and
// mosquitto_pub.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { MqttClient } from 'mqtt';
import { connect, grants, inbox, mosquittoPub, startMqtt, until, type MqttHarness } from '../../helpers/mqtt.ts';

const MAX_OBS = 5;
const BODY_LIMIT = 4096;

describe('MQTT ingest', () => {
  let h: MqttHarness;
  let alice: { tenantId: string; token: string };
  let bob: { tenantId: string; token: string };
  let deviceId: string;
  let bobDevice: string;
  const clients: MqttClient[] = [];

  const topic = (tenant: string, id: string, solution = 'plant') => `${tenant}/solutions/${solution}/devices/${id}/observations`;
  const body = (...temps: number[]) => JSON.stringify({ observations: temps.map((t, i) => ({ timestamp: new Date(Date.UTC(2026, 0, 1, 0, 0, i) + t * 1000).toISOString(), temperature: t })) });
  const stored = async (id = deviceId) => (await h.t.services.store.queryObservations(id, { limit: 10_000 })).observations;

  async function client(token = alice.token, clientId?: string): Promise<MqttClient> {
    const c = await connect(h, token, clientId ? { clientId } : {});
    clients.push(c);
    return c;
  }

  async function device(token: string): Promise<string> {
    const r = await h.t.request('POST', '/api/solutions/plant/devices', { token, body: { deviceType: 'Thermo', domainInfo: {} } });
    assert.equal(r.status, 201);
    return ((await r.json()) as { id: string }).id;
  }

  before(async () => {
    h = await startMqtt({
      config: { maxObservationsPerRequest: MAX_OBS, http: { ...(await import('../../../src/config/config.ts')).testConfig({ dataDir: '/x' }).http, bodyLimitBytes: BODY_LIMIT } },
    });
    alice = await h.t.login('alice');
    bob = await h.t.login('bob');
    deviceId = await device(alice.token);
    bobDevice = await device(bob.token);
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    await h.close();
  });

  it('stores a QoS 1 message before the PUBACK, as the HTTP upload would, and de-duplicates a re-send', async () => {
    const c = await client();
    await c.publishAsync(
      topic(alice.tenantId, deviceId),
      `{"observations":[{"timestamp":"2026-02-01T10:00:00.000Z","temperature":"21.50","macId":"x1"},{"timestamp":"2026-02-01T10:00:01Z","temperature":22}]}`,
      { qos: 1 },
    );
    // The PUBACK came back: the batch is in the store now, not eventually.
    const after1 = await stored();
    assert.deepEqual(
      after1.map((o) => [o.ts, o.temperature, o.extra]).sort(),
      [
        [Date.parse('2026-02-01T10:00:00.000Z'), 21.5, { macId: 'x1' }],
        [Date.parse('2026-02-01T10:00:01.000Z'), 22, null],
      ].sort(),
    );
    await c.publishAsync(topic(alice.tenantId, deviceId), `{"observations":[{"timestamp":"2026-02-01T10:00:00.000Z","temperature":21.5}]}`, { qos: 1 });
    assert.equal((await stored()).length, 2, 'the same timestamp is stored once');
    // The HTTP read shows the same thing.
    const r = await h.t.request('GET', `/api/solutions/plant/devices/${deviceId}/observations`, { token: alice.token });
    assert.equal(((await r.json()) as { observations: unknown[] }).observations.length, 2);
  });

  it('mosquitto_pub at QoS 0 and 1 stores; the stored batch reaches live subscribers (SSE)', async () => {
    const ctl = new AbortController();
    const sse = await fetch(`${h.t.url}/api/solutions/plant/events?deviceId=${deviceId}`, { headers: { authorization: alice.token }, signal: ctl.signal });
    const reader = sse.body!.getReader();
    let text = '';
    const seen = (async () => {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        text += Buffer.from(value).toString('utf8');
        if (text.includes('"temperature":31.25')) return;
      }
    })();
    await until(() => text.includes(': connected'), 'the SSE stream is open');
    const before = (await stored()).length;
    const q1 = await mosquittoPub(h.port, [
      '-u',
      'notused',
      '-P',
      alice.token,
      '-q',
      '1',
      '-t',
      topic(alice.tenantId, deviceId),
      '-m',
      '{"observations":[{"timestamp":"2026-03-01T00:00:00Z","temperature":31.25}]}',
    ]);
    assert.equal(q1.code, 0, q1.out);
    assert.equal((await stored()).length, before + 1);
    await seen;
    ctl.abort();
    assert.match(text, /event: observations\ndata: \{"deviceId":"[^"]+","observations":\[\{"timestamp":"2026-03-01T00:00:00.000Z","temperature":31.25\}\]\}/);

    const q0 = await mosquittoPub(h.port, [
      '-u',
      'notused',
      '-P',
      alice.token,
      '-q',
      '0',
      '-t',
      topic(alice.tenantId, deviceId),
      '-m',
      '{"observations":[{"timestamp":"2026-03-01T00:00:01Z","temperature":1}]}',
    ]);
    assert.equal(q0.code, 0, q0.out);
    await until(async () => (await stored()).length === before + 2, 'the QoS 0 message is stored');
  });

  it('stores nothing of a bad message, acknowledges it, and says why on <tenant>/errors/<clientId>', async () => {
    const c = await client(alice.token, 'ingest-bad-1');
    const errors = inbox(c);
    await c.subscribeAsync(`${alice.tenantId}/errors/ingest-bad-1`, { qos: 1 });
    const count = (await stored()).length;
    const cases: [string, string, string, string?][] = [
      // [topic, payload, code, field]
      [
        topic(alice.tenantId, deviceId),
        `{"observations":[{"timestamp":"2026-04-01T00:00:00Z","temperature":1},{"timestamp":"2026-04-01T00:00:01Z","temperature":2},{"timestamp":"yesterday","temperature":3}]}`,
        'VALIDATION_FAILED',
        'observations[2].timestamp',
      ],
      [topic(alice.tenantId, deviceId), `{"observations":[{"timestamp":"2026-04-01T00:00:00Z","temperature":"warm"}]}`, 'VALIDATION_FAILED'],
      [topic(alice.tenantId, deviceId), `{"observations":[`, 'MALFORMED_JSON'],
      [topic(alice.tenantId, deviceId), body(1, 2, 3, 4, 5, 6), 'TOO_MANY_OBSERVATIONS', 'observations'],
      [topic(alice.tenantId, deviceId), JSON.stringify({ observations: [{ timestamp: '2026-04-01T00:00:00Z', temperature: 1, pad: 'x'.repeat(BODY_LIMIT) }] }), 'PAYLOAD_TOO_LARGE'],
      [topic(alice.tenantId, deviceId), `{"observations":[{"timestamp":"2026-04-01T00:00:00Z","__proto__":{"polluted":1}}]}`, 'VALIDATION_FAILED'],
      [topic(alice.tenantId, '6f1c1d3e-0000-4000-8000-000000000000'), body(1), 'DEVICE_NOT_FOUND'],
      [topic(alice.tenantId, bobDevice), body(1), 'DEVICE_NOT_FOUND'],
      [topic(bob.tenantId, bobDevice), body(1), 'FORBIDDEN', 'topic'],
      [`${alice.tenantId}/alert/0000000000000001/temp`, '1700000000,99.00,F', 'FORBIDDEN', 'topic'],
      [`${alice.tenantId}/anything`, body(1), 'FORBIDDEN', 'topic'],
    ];
    for (const [i, [t, payload]] of cases.entries()) {
      await c.publishAsync(t, payload, { qos: 1 }); // acknowledged...
      assert.equal(errors.length, i + 1, `...after its reason arrived (case ${i})`);
    }
    for (let i = 0; i < cases.length; i++) {
      const [t, , code, field] = cases[i]!;
      const e = JSON.parse(errors[i]!.payload.toString('utf8')) as { code: string; statusCode: number; message: string; topic: string; field?: string; requestId: string };
      assert.equal(e.code, code, `case ${i}: ${e.message}`);
      assert.equal(e.topic, t);
      assert.ok(e.statusCode >= 400 && e.statusCode < 500 && e.message && e.requestId);
      if (field) assert.equal(e.field, field);
    }
    assert.equal(c.connected, true, 'the connection stays up');
    assert.equal((await stored()).length, count, 'nothing of any refused message was stored');
    assert.equal((await stored(bobDevice)).length, 0, "nothing reached the other tenant's device");
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
  });

  it('passes a stored message on to subscribers of the ingest topic, and never a refused or forged one', async () => {
    const watcher = await client();
    const got = inbox(watcher);
    assert.deepEqual(await grants(watcher, [`${alice.tenantId}/solutions/+/devices/+/observations`, `${alice.tenantId}/alert/#`]), [0, 0]);
    const c = await client();
    await c.publishAsync(topic(alice.tenantId, deviceId), '{"observations":[{"timestamp":"bad"}]}', { qos: 1 });
    await c.publishAsync(`${alice.tenantId}/alert/0000000000000001/temp`, '1700000000,99.00,F', { qos: 1 });
    await c.publishAsync(topic(alice.tenantId, deviceId), body(7), { qos: 1 });
    await until(() => got.length >= 1, 'the stored message is passed on');
    assert.deepEqual(
      got.map((m) => [m.topic, m.payload.toString()]),
      [[topic(alice.tenantId, deviceId), body(7)]],
    );
  });

  it('does not let a client publish retained messages into the tree', async () => {
    const c = await client();
    await c.publishAsync(topic(alice.tenantId, deviceId), body(8), { qos: 1, retain: true });
    const late = await client();
    const got = inbox(late);
    await late.subscribeAsync(`${alice.tenantId}/solutions/+/devices/+/observations`);
    // Aedes sends retained messages right after the SUBACK, before this later message comes round.
    await late.publishAsync(topic(alice.tenantId, deviceId), body(9), { qos: 1 });
    await until(() => got.length >= 1, 'the live message');
    assert.deepEqual(
      got.map((m) => m.payload.toString()),
      [body(9)],
    );
  });
});

describe('MQTT ingest when the store fails', () => {
  it('closes the connection without PUBACK, so a QoS 1 client sends the message again', async () => {
    const h = await startMqtt();
    try {
      const a = await h.t.login('alice');
      const r = await h.t.request('POST', '/api/solutions/plant/devices', { token: a.token, body: { deviceType: 'Thermo' } });
      const { id } = (await r.json()) as { id: string };
      const c = await connect(h, a.token);
      const gone = new Promise<void>((resolve) => c.once('close', () => resolve()));
      let acked = false;
      // The store goes away under the broker (a database failure): nothing can be stored.
      await h.t.services.store.close();
      c.publish(`${a.tenantId}/solutions/plant/devices/${id}/observations`, '{"observations":[{"timestamp":"2026-06-01T00:00:00Z","temperature":1}]}', { qos: 1 }, (err) => {
        if (!err) acked = true;
      });
      await gone;
      assert.equal(acked, false, 'no PUBACK for a message that was not stored');
      // mqtt.js keeps the unacknowledged message to send again when it reconnects.
      const pending = await new Promise<number>((resolve) => {
        let n = 0;
        const s = c.outgoingStore.createStream();
        s.on('data', () => n++);
        s.on('end', () => resolve(n));
      });
      assert.equal(pending, 1);
      await c.endAsync(true);
    } finally {
      await h.close().catch(() => undefined);
    }
  });
});

describe('MQTT ingest and quotas', () => {
  it("refuses a message that would pass the account's observation quota, as HTTP does, storing none of it", async () => {
    const base = (await import('../../../src/config/config.ts')).testConfig({ dataDir: '/x' });
    const h = await startMqtt({ config: { quotas: { ...base.quotas, observations: 3 } } });
    try {
      const a = await h.t.login('alice');
      const r = await h.t.request('POST', '/api/solutions/plant/devices', { token: a.token, body: { deviceType: 'Thermo' } });
      const { id } = (await r.json()) as { id: string };
      const c = await connect(h, a.token, { clientId: 'quota-1' });
      const errors = inbox(c);
      await c.subscribeAsync(`${a.tenantId}/errors/quota-1`, { qos: 1 });
      const t = `${a.tenantId}/solutions/plant/devices/${id}/observations`;
      await c.publishAsync(t, '{"observations":[{"timestamp":"2026-08-01T00:00:00Z","temperature":1},{"timestamp":"2026-08-01T00:00:01Z","temperature":2}]}', { qos: 1 });
      assert.equal(errors.length, 0);
      await c.publishAsync(t, '{"observations":[{"timestamp":"2026-08-01T00:00:02Z","temperature":3},{"timestamp":"2026-08-01T00:00:03Z","temperature":4}]}', { qos: 1 });
      assert.equal(errors.length, 1);
      const e = JSON.parse(errors[0]!.payload.toString()) as { code: string; statusCode: number };
      assert.deepEqual([e.code, e.statusCode], ['QUOTA_EXCEEDED', 403]);
      assert.equal((await h.t.services.store.queryObservations(id, { limit: 10 })).observations.length, 2);
      await c.endAsync();
    } finally {
      await h.close();
    }
  });
});
