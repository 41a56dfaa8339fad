// Alarm evaluation against real uploads on a real server (SQLite): every condition with its
// duration and hysteresis, units, the lifecycle with history and paging, silence by a fake clock,
// the simulation path, backfill, SSE and MQTT, and a restart in the middle of a duration.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { storeObservationsMany } from '../../../src/service/observations.ts';
import { batchOf } from '../../../src/core/observation-batch.ts';
import { tempDir } from '../../helpers/server.ts';
import { MIN, T0, alarms, at, createRule, iso, newDevice, startAlarmServer, upload, type AlarmServer } from '../../helpers/alarms.ts';

let s: AlarmServer;
const published: { topic: string; payload: string }[] = [];
before(async () => {
  s = await startAlarmServer({}, { mqtt: { publish: (topic, payload) => void published.push({ topic, payload }) } });
});
after(() => s.close());

async function send(token: string, dev: string, ...readings: Record<string, unknown>[]): Promise<void> {
  for (const r of readings) {
    await upload(s, token, dev, [r]);
    await s.settle();
  }
}

describe('conditions', () => {
  it('above 8 °C for 10 minutes with 1 °C hysteresis: a short breach does nothing; the alarm clears only at 7 °C', async () => {
    const { token } = await s.login('above');
    const dev = await newDevice(s, token);
    await createRule(s, token, { condition: 'above', threshold: 8, duration: '10m', hysteresis: 1, deviceId: dev });
    await send(token, dev, at(s, 0, 9), at(s, 5, 8.5), at(s, 6, 7.9));
    assert.deepEqual(await alarms(s, token), [], 'back under the threshold before 10 minutes: nothing raised');
    await send(token, dev, at(s, 7, 9), at(s, 12, 9.2));
    assert.deepEqual(await alarms(s, token), [], '5 minutes over: still pending');
    await send(token, dev, at(s, 17, 9.5));
    let [a] = await alarms(s, token);
    assert.equal(a?.status, 'raised');
    assert.deepEqual(a.reading, { timestamp: iso(T0 + 17 * MIN), value: 9.5, unit: 'C' });
    await send(token, dev, at(s, 18, 7.5));
    [a] = await alarms(s, token);
    assert.equal(a?.status, 'raised', '7.5 is under 8 but not by the hysteresis');
    await send(token, dev, at(s, 19, 7));
    [a] = await alarms(s, token);
    assert.equal(a?.status, 'cleared-unacknowledged');
    assert.deepEqual(
      a.history.map((h: { event: string }) => h.event),
      ['raised', 'cleared'],
    );
    assert.equal(a.history[1].reading.value, 7);
  });

  it('below, outside and rate of change, each with its hysteresis', async () => {
    const { token } = await s.login('others');
    const [d1, d2, d3] = [await newDevice(s, token), await newDevice(s, token), await newDevice(s, token)];
    await createRule(s, token, { condition: 'below', threshold: 0, hysteresis: 2, deviceId: d1, name: 'greenhouse frost' });
    await createRule(s, token, { condition: 'outside', low: 2, high: 8, hysteresis: 0.5, deviceId: d2 });
    await createRule(s, token, { condition: 'rate', ratePerMinute: 1, direction: 'rise', hysteresis: 0.5, deviceId: d3 });
    const of = async (dev: string) => (await alarms(s, token, `?deviceId=${dev}`)).map((a) => a.status);

    await send(token, d1, at(s, 0, 1), at(s, 1, -0.5));
    assert.deepEqual(await of(d1), ['raised']);
    await send(token, d1, at(s, 2, 1.5));
    assert.deepEqual(await of(d1), ['raised']);
    await send(token, d1, at(s, 3, 2));
    assert.deepEqual(await of(d1), ['cleared-unacknowledged']);

    await send(token, d2, at(s, 0, 5), at(s, 1, 1.9));
    assert.deepEqual(await of(d2), ['raised']);
    await send(token, d2, at(s, 2, 2.4));
    assert.deepEqual(await of(d2), ['raised'], 'inside by less than the hysteresis');
    await send(token, d2, at(s, 3, 5), at(s, 4, 8.1));
    assert.deepEqual(await of(d2), ['raised', 'cleared-unacknowledged'], 'cleared, then a new alarm above the range');

    // 20 → 20.5 in a minute is 0.5/min; 20.5 → 22 in a minute is 1.5/min (a door left open).
    await send(token, d3, at(s, 0, 20), at(s, 1, 20.5));
    assert.deepEqual(await of(d3), []);
    await send(token, d3, at(s, 2, 22));
    assert.deepEqual(await of(d3), ['raised']);
    await send(token, d3, at(s, 3, 22.8));
    assert.deepEqual(await of(d3), ['raised'], '0.8/min is under 1 but not by the hysteresis');
    await send(token, d3, at(s, 4, 23.2));
    assert.deepEqual(await of(d3), ['cleared-unacknowledged']);
    // Falling fast does not count for a "rise" rule.
    await send(token, d3, at(s, 5, 15));
    assert.deepEqual(await of(d3), ['cleared-unacknowledged']);
  });

  it('a rule in °F compares readings in °C correctly, and a °C rule readings that say they are °F', async () => {
    const { token } = await s.login('units');
    const [d1, d2] = [await newDevice(s, token), await newDevice(s, token)];
    await createRule(s, token, { condition: 'above', threshold: 46.4, unit: 'F', deviceId: d1 }); // 8 °C
    await createRule(s, token, { condition: 'above', threshold: 8, unit: 'C', deviceId: d2 });
    await send(token, d1, at(s, 0, 7.9));
    assert.deepEqual(await alarms(s, token, `?deviceId=${d1}`), []);
    await send(token, d1, at(s, 1, 8.1));
    assert.equal((await alarms(s, token, `?deviceId=${d1}`)).length, 1);
    await send(token, d2, at(s, 0, 46, { unit: 'F' }));
    assert.deepEqual(await alarms(s, token, `?deviceId=${d2}`), [], '46 °F is 7.8 °C');
    await send(token, d2, at(s, 1, 47, { unit: '°F' }));
    const [a] = await alarms(s, token, `?deviceId=${d2}`);
    assert.deepEqual(a?.reading, { timestamp: iso(T0 + MIN), value: 47, unit: 'F' });
  });

  it('a numeric field by path (accelerometer.z); readings without it are ignored', async () => {
    const { token } = await s.login('path');
    const dev = await newDevice(s, token);
    await createRule(s, token, { condition: 'below', threshold: -0.5, field: 'accelerometer.z', deviceId: dev, name: 'tipped over' });
    await send(token, dev, at(s, 0, 20), at(s, 1, 20, { accelerometer: { z: 0.98 } }));
    assert.deepEqual(await alarms(s, token), []);
    await send(token, dev, at(s, 2, 20, { accelerometer: { z: -0.97 } }));
    const [a] = await alarms(s, token);
    assert.equal(a?.rule.name, 'tipped over');
    assert.deepEqual(a?.reading, { timestamp: iso(T0 + 2 * MIN), value: -0.97, unit: null });
  });
});

describe('batches', () => {
  it('a whole upload is judged reading by reading, oldest first: a breach inside a batch raises and clears at the right readings', async () => {
    const { token } = await s.login('batch');
    const [d1, d2] = [await newDevice(s, token), await newDevice(s, token)];
    await createRule(s, token, { condition: 'above', threshold: 8, duration: '10m', hysteresis: 1, deviceId: d1 });
    await createRule(s, token, { condition: 'rate', ratePerMinute: 2, deviceId: d2 });
    // 60 readings a minute apart, sent newest first: 5 °C, then 9 °C from minute 20 to 39, then 6 °C.
    const readings = Array.from({ length: 60 }, (_, m) => ({ timestamp: iso(T0 + m * MIN), temperature: m >= 20 && m < 40 ? 9 : m >= 40 ? 6 : 5 }));
    s.clock.now = T0 + 60 * MIN;
    await upload(s, token, d1, [...readings].reverse());
    await s.settle();
    const [a] = await alarms(s, token, `?deviceId=${d1}`);
    assert.equal(a?.status, 'cleared-unacknowledged');
    assert.equal(a?.reading.timestamp, iso(T0 + 30 * MIN), 'raised by the reading 10 minutes into the breach');
    assert.equal(a?.history[1].reading.timestamp, iso(T0 + 40 * MIN), 'cleared by the first reading at or under 7 °C');
    // Rate across two uploads: a calm batch, then a jump from its last reading.
    const calm = Array.from({ length: 30 }, (_, m) => ({ timestamp: iso(T0 + m * MIN), temperature: 20 + m * 0.1 }));
    await upload(s, token, d2, calm);
    await s.settle();
    assert.deepEqual(await alarms(s, token, `?deviceId=${d2}`), []);
    await upload(s, token, d2, [{ timestamp: iso(T0 + 30 * MIN), temperature: 25 }]);
    await s.settle();
    assert.equal((await alarms(s, token, `?deviceId=${d2}`))[0]?.reading.value, 25);
  });
});

describe('lifecycle', () => {
  it('acknowledge records who and when; acknowledging again changes nothing; a clear after it is "cleared"; filters and keyset paging', async () => {
    const { token, tenantId } = await s.login('oncall');
    const dev = await newDevice(s, token);
    await createRule(s, token, { condition: 'above', threshold: 8, deviceId: dev });
    // Five alarms: raise and clear in turn.
    for (let i = 0; i < 5; i++) await send(token, dev, at(s, i * 2, 9), at(s, i * 2 + 1, 5));
    await send(token, dev, at(s, 20, 9));
    const all = await alarms(s, token);
    assert.equal(all.length, 6);
    assert.deepEqual(
      all.map((a) => a.status),
      ['raised', ...Array(5).fill('cleared-unacknowledged')],
    );
    const active = await alarms(s, token, '?status=active');
    assert.deepEqual(
      active.map((a) => a.id),
      [all[0]!.id],
    );

    s.clock.now += 30_000;
    const ack = await s.request('POST', `/api/solutions/StudioSimulation/alarms/${all[0]!.id}/acknowledge`, { token });
    assert.equal(ack.status, 200);
    const acked = (await ack.json()) as Record<string, any>;
    assert.equal(acked.status, 'acknowledged');
    assert.equal(acked.acknowledgedAt, iso(s.clock.now));
    assert.deepEqual(acked.acknowledgedBy, { tenantId, name: 'oncall' });
    const again = (await (await s.request('POST', `/api/solutions/StudioSimulation/alarms/${all[0]!.id}/acknowledge`, { token })).json()) as Record<string, any>;
    assert.deepEqual(again, acked);
    await send(token, dev, at(s, 21, 4));
    const [cleared] = await alarms(s, token);
    assert.equal(cleared?.status, 'cleared');
    assert.deepEqual(
      cleared?.history.map((h: { event: string }) => h.event),
      ['raised', 'acknowledged', 'cleared'],
    );
    // A cleared-unacknowledged alarm acknowledged later is cleared too.
    const late = (await (await s.request('POST', `/api/solutions/StudioSimulation/alarms/${all[1]!.id}/acknowledge`, { token })).json()) as Record<string, any>;
    assert.equal(late.status, 'cleared');

    // Paging: two at a time, newest first, no gap, no repeat.
    const seen: string[] = [];
    let after: string | null = null;
    do {
      const r = await s.request('GET', `/api/solutions/StudioSimulation/alarms?limit=2${after ? `&after=${after}` : ''}`, { token });
      const page = (await r.json()) as { alarms: { id: string }[]; nextAfter: string | null };
      seen.push(...page.alarms.map((a) => a.id));
      after = page.nextAfter;
    } while (after);
    assert.deepEqual(
      seen,
      all.map((a) => a.id),
    );
    const badCursor = await s.request('GET', '/api/solutions/StudioSimulation/alarms?after=yesterday', { token });
    assert.equal(((await badCursor.json()) as { code: string }).code, 'INVALID_CURSOR');
    const badStatus = await s.request('GET', '/api/solutions/StudioSimulation/alarms?status=burning', { token });
    assert.equal(badStatus.status, 400);
    assert.deepEqual(
      await alarms(s, token, '?status=cleared-unacknowledged'),
      (await alarms(s, token)).filter((a) => a.status === 'cleared-unacknowledged'),
    );
  });

  it('clearing by hand starts the evaluation afresh: a condition that still holds raises a new alarm; badges count active alarms', async () => {
    const { token } = await s.login('manual');
    const dev = await newDevice(s, token);
    await createRule(s, token, { condition: 'above', threshold: 8, deviceId: dev });
    await send(token, dev, at(s, 0, 9));
    const [a] = await alarms(s, token);
    assert.deepEqual(await (await s.request('GET', '/api/solutions/StudioSimulation/alarm-counts', { token })).json(), { devices: [{ deviceId: dev, active: 1 }] });
    const r = await s.request('POST', `/api/solutions/StudioSimulation/alarms/${a!.id}/clear`, { token });
    assert.equal(((await r.json()) as { status: string }).status, 'cleared-unacknowledged');
    await s.settle();
    assert.deepEqual(await (await s.request('GET', '/api/solutions/StudioSimulation/alarm-counts', { token })).json(), { devices: [] });
    await send(token, dev, at(s, 1, 9.5));
    assert.deepEqual(
      (await alarms(s, token)).map((x) => x.status),
      ['raised', 'cleared-unacknowledged'],
    );
  });
});

describe('silence', () => {
  it('no observation for 15 minutes raises (moved by a fake clock, never a sleep); the next observation clears', async () => {
    const { token } = await s.login('quiet');
    const [dev, other] = [await newDevice(s, token), await newDevice(s, token)];
    await createRule(s, token, { condition: 'silence', silence: '15m', deviceId: dev });
    await send(token, dev, at(s, 0, 4));
    // The reading arrived at T0 + 1 s (helpers' at()).
    s.clock.now = T0 + 15 * MIN;
    await s.parts.engine.checkSilence();
    assert.deepEqual(await alarms(s, token), []);
    s.clock.now = T0 + 15 * MIN + 1000;
    await s.parts.engine.checkSilence();
    const [a] = await alarms(s, token);
    assert.equal(a?.status, 'raised');
    assert.equal(a?.deviceId, dev);
    assert.match(a?.history[0].note, /no observation since/);
    await s.parts.engine.checkSilence();
    assert.equal((await alarms(s, token)).length, 1, 'raised once, not at every check');
    await send(token, other, at(s, 16, 4));
    assert.equal((await alarms(s, token))[0]?.status, 'raised', "another device's observation does not clear it");
    await send(token, dev, at(s, 17, 4));
    assert.equal((await alarms(s, token))[0]?.status, 'cleared-unacknowledged');
  });

  it('a solution-wide silence rule watches every device, also one that never reported', async () => {
    const { token, tenantId } = await s.login('quietall');
    // Devices are stamped with the real time (not the test's clock): this test starts its clock at
    // the real now, not at T0, which earlier tests may have left minutes behind.
    const start = Date.now();
    s.clock.now = start;
    const dev = await newDevice(s, token);
    await createRule(s, token, { condition: 'silence', silence: '10m' });
    const late = await newDevice(s, token);
    s.clock.now = start + 2 * MIN + 1000;
    await upload(s, token, dev, [{ timestamp: iso(start + 2 * MIN), temperature: 4 }]);
    await s.settle();
    // Ten minutes after late was made (it never reported); dev reported less than ten minutes before.
    const store = s.services.store;
    const groupId = (await store.getAccountByTenantId(tenantId))!.groupId;
    const created = (await store.getDevice(groupId, 'StudioSimulation', late))!.createdAt;
    s.clock.now = created + 10 * MIN + 1000;
    await s.parts.engine.checkSilence();
    assert.deepEqual(
      (await alarms(s, token)).map((a) => a.deviceId),
      [late],
    );
  });
});

describe('every path', () => {
  it('simulation ticks (storeObservationsMany) are evaluated; backfill older than an hour is stored but not evaluated', async () => {
    const { token, tenantId } = await s.login('paths');
    const [d1, d2] = [await newDevice(s, token), await newDevice(s, token)];
    await createRule(s, token, { condition: 'above', threshold: 30 });
    const store = s.services.store;
    const groupId = (await store.getAccountByTenantId(tenantId))!.groupId;
    const rec = async (id: string) => (await store.getDevice(groupId, 'StudioSimulation', id))!;
    s.clock.now = T0 + 3 * 3_600_000;
    await storeObservationsMany(store, s.services.events, [
      { device: await rec(d1), batch: batchOf([{ ts: T0, temperature: 35, extra: null }]) }, // three hours old: backfill
      { device: await rec(d2), batch: batchOf([{ ts: s.clock.now - 1000, temperature: 35, extra: null }]) },
    ]);
    await s.settle();
    assert.deepEqual(
      (await alarms(s, token)).map((a) => a.deviceId),
      [d2],
    );
    assert.ok(s.parts.engine.skippedLate >= 1);
  });

  it('every step goes to the SSE stream and to MQTT <tenantId>/alarms/<deviceId>', async () => {
    const { token, tenantId } = await s.login('live');
    const dev = await newDevice(s, token);
    await createRule(s, token, { condition: 'above', threshold: 8, deviceId: dev });
    const ctl = new AbortController();
    const res = await fetch(`${s.url}/api/solutions/StudioSimulation/events?deviceId=${dev}`, { headers: { authorization: token }, signal: ctl.signal });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    let text = '';
    const nextAlarm = async () => {
      for (;;) {
        const m = /event: alarm\ndata: (.*)\n\n/.exec(text);
        if (m) {
          text = text.slice(m.index + m[0].length);
          return JSON.parse(m[1]!) as { event: string; alarm: { id: string; status: string } };
        }
        const { value } = await reader.read();
        text += new TextDecoder().decode(value);
      }
    };
    published.length = 0;
    await send(token, dev, at(s, 0, 9));
    const raised = await nextAlarm();
    assert.equal(raised.event, 'raised');
    await s.request('POST', `/api/solutions/StudioSimulation/alarms/${raised.alarm.id}/acknowledge`, { token });
    assert.deepEqual((await nextAlarm()).event, 'acknowledged');
    await send(token, dev, at(s, 1, 5));
    const cleared = await nextAlarm();
    assert.deepEqual([cleared.event, cleared.alarm.status], ['cleared', 'cleared']);
    ctl.abort();
    assert.deepEqual(
      published.map((p) => [p.topic, (JSON.parse(p.payload) as { event: string }).event]),
      [
        [`${tenantId}/alarms/${dev}`, 'raised'],
        [`${tenantId}/alarms/${dev}`, 'acknowledged'],
        [`${tenantId}/alarms/${dev}`, 'cleared'],
      ],
    );
  });
});

describe('restart', () => {
  it('a restart in the middle of a duration loses neither the pending time nor a raised alarm', async () => {
    const dataDir = tempDir();
    const clock = { now: T0 };
    let a = await startAlarmServer({ dataDir }, {}, clock);
    try {
      const creds = await a.account('restart');
      let token = await a.token(creds);
      const dev = await newDevice(a, token);
      await createRule(a, token, { condition: 'above', threshold: 8, duration: '10m', hysteresis: 1, deviceId: dev });
      await upload(a, token, dev, [at(a, 0, 9)]);
      await a.settle();
      await upload(a, token, dev, [at(a, 6, 9)]);
      await a.settle();
      await a.close();

      a = await startAlarmServer({ dataDir }, {}, clock);
      token = await a.token(creds);
      await upload(a, token, dev, [at(a, 10, 9.1)]);
      await a.settle();
      const [raised] = await alarms(a, token);
      assert.equal(raised?.status, 'raised', 'pending since minute 0 survived the restart: raised at minute 10');
      await a.close();

      a = await startAlarmServer({ dataDir }, {}, clock);
      token = await a.token(creds);
      await upload(a, token, dev, [at(a, 11, 7.5)]);
      await a.settle();
      assert.equal((await alarms(a, token))[0]?.status, 'raised');
      await upload(a, token, dev, [at(a, 12, 6.9)]);
      await a.settle();
      const all = await alarms(a, token);
      assert.deepEqual(
        all.map((x) => x.status),
        ['cleared-unacknowledged'],
        'the raised alarm survived and cleared; no second alarm',
      );
    } finally {
      await a.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
