// The upload scanner (src/core/observation-scan.ts) against the general path: for every body it
// reads, the same records as JSON.parse + parseBatch; every other body is left to the general path.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { recordsOf } from '../../../src/core/observation-batch.ts';
import { scanUpload } from '../../../src/core/observation-scan.ts';
import { parseBatch } from '../../../src/service/observations.ts';

const MAX = 10_000;
const general = (text: string) => recordsOf(parseBatch(JSON.parse(text), MAX, 65_536));

function same(text: string) {
  const p = scanUpload(text, MAX);
  assert.ok(p, `scanned: ${text.slice(0, 200)}`);
  const want = general(text);
  const got = recordsOf(p);
  assert.equal(got.length, want.length);
  for (let i = 0; i < want.length; i++) {
    assert.ok(Object.is(got[i]!.ts, want[i]!.ts), `ts ${i} of ${text.slice(0, 200)}`);
    assert.ok(Object.is(got[i]!.temperature, want[i]!.temperature), `temperature ${i}: ${got[i]!.temperature} vs ${want[i]!.temperature} in ${text.slice(0, 200)}`);
    assert.equal(got[i]!.extra, null);
  }
  // The newest: the last of the greatest timestamp, as the stores pick it.
  let newest = 0;
  for (let i = 0; i < want.length; i++) if (want[i]!.ts >= want[newest]!.ts) newest = i;
  assert.equal(p.newest, newest);
}

test('bodies of the common shape read as the general path reads them', () => {
  same('{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":21.5}]}');
  same(' \n{ "observations" : [ { "temperature" : -3 , "timestamp" : "2024-02-29T23:59:59.999Z" } ,\t{"timestamp":"1970-01-01T00:00:00.000Z"} ] }\r\n');
  same('{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":null},{"timestamp":"2026-01-31T12:00:00.000Z","temperature":-0}]}');
  same(
    '{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":1e3},{"timestamp":"2026-01-30T12:00:00.000Z","temperature":-1.5E-7},{"timestamp":"2026-01-31T11:00:00.000Z","temperature":0.1}]}',
  );
  same('{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":12345678901234567890.123},{"timestamp":"2026-01-31T12:00:00.001Z","temperature":0.30000000000000004}]}');
  same('{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":0.0000000000000000000000001}]}');
});

test('random temperatures and timestamps read exactly as JSON.parse reads them', () => {
  let seed = 7;
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  for (let k = 0; k < 200; k++) {
    const rows = Array.from({ length: 50 }, () => {
      const kind = rnd();
      const t =
        kind < 0.3
          ? Math.round((rnd() - 0.5) * 1e6) / 10 ** Math.floor(rnd() * 8)
          : kind < 0.6
            ? (rnd() - 0.5) * 10 ** Math.floor(rnd() * 40 - 20)
            : kind < 0.9
              ? Math.round(rnd() * 100000) / 1000
              : null;
      return { timestamp: new Date(Math.floor(rnd() * 253402300799999)).toISOString(), temperature: t };
    });
    same(JSON.stringify({ observations: rows }));
  }
});

test('anything unusual is left to the general path', () => {
  const ok = '{"timestamp":"2026-01-31T12:00:00.000Z","temperature":1}';
  for (const body of [
    '',
    '[]',
    '{"observations":[]}',
    `{"observations":[${ok}],"more":1}`,
    `{"observations":[${ok}]`,
    `{"observations":[${ok}]}x`,
    `{"observations":[${ok},]}`,
    `{"observations":[${ok}] , }`,
    '{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":1,"humidity":3}]}',
    '{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":"21.5"}]}',
    '{"observations":[{"timestamp":"2026-01-31T12:00:00Z","temperature":1}]}',
    '{"observations":[{"timestamp":"2026-01-31T12:00:00.000+00:00","temperature":1}]}',
    '{"observations":[{"timestamp":"2026-02-30T12:00:00.000Z","temperature":1}]}',
    '{"observations":[{"timestamp":"2026-01-31T24:00:00.000Z","temperature":1}]}',
    '{"observations":[{"temperature":1}]}',
    '{"observations":[{}]}',
    '{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","timestamp":"2026-01-31T12:00:00.000Z"}]}',
    '{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":1,"temperature":2}]}',
    '{"observations":[{"time\\u0073tamp":"2026-01-31T12:00:00.000Z"}]}',
    '{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":01}]}',
    '{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":1.}]}',
    '{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":.5}]}',
    '{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":+1}]}',
    '{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":1e}]}',
    '{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":1e999}]}',
    '{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":-}]}',
    '{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":nul}]}',
    '{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":true}]}',
    '{"observations":[[]]}',
    '{"observations":[1]}',
    '{"observations":{}}',
    '\ufeff{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":1}]}',
    `{"observations":[${ok}${ok}]}`,
    // After a good timestamp of the same day (read by comparing the day's bytes): a bad time of day.
    ...['24:00:00.000', '23:60:00.000', '23:59:60.000', '2a:00:00.000', '12:00:00.00a', '12:00:00.000+', '12-00:00.000', '12:00:00,000', '\u0031:00:00.000'].map(
      (time) => `{"observations":[${ok},{"timestamp":"2026-01-31T${time}Z","temperature":1}]}`,
    ),
    `{"observations":[${ok},{"timestamp":"2026-01-31t12:00:00.000Z","temperature":1}]}`,
    // Rows laid out as JSON.stringify writes them (read four bytes at a time) that are still not the shape.
    ...[
      '{"timestamp":"2026-01-31T12:00:00.000Z","temperature":1,"humidity":3}',
      '{"timestamp":"2026-01-31T12:00:00.000Z","temperature":1,"temperature":2}',
      '{"timestamp":"2026-01-31T12:00:00.000Z","temperature":1e}',
      '{"timestamp":"2026-01-31T12:00:00.000Z","temperature":"1"}',
      '{"timestamp":"2026-02-30T12:00:00.000Z","temperature":1}',
      '{"timestamp":"2026-01-31T12:00:00.000Z","temperaturE":1}',
      '{"timestamp":"2026-01-31T12:00:00.000Z";"temperature":1}',
      '{"timestamp": 2026-01-31T12:00:00.000Z","temperature":1}',
      '{"timestamp":"2026-01-31T12:00:00.000Z","temperature":nulL}',
    ].map((row) => `{"observations":[${ok},${row},${ok},${ok}]}`),
  ]) {
    assert.equal(scanUpload(body, MAX), null, body);
  }
  // The other layouts of a row (spaces, key order, no temperature) next to JSON.stringify's.
  const mixed = [
    ok,
    '{ "timestamp" : "2026-01-31T12:00:01.000Z" , "temperature" : 2.5 }',
    ok.replace('12:00:00', '12:00:02'),
    '{"temperature":null,"timestamp":"2026-01-31T12:00:03.000Z"}',
    '{"timestamp":"2026-01-31T12:00:04.000Z"}',
    ok.replace('12:00:00', '12:00:05').replace(':1}', ':1 }'),
  ];
  const got = scanUpload(`{"observations":[${mixed.join(',')},${ok}]}`, MAX)!;
  assert.deepEqual(
    [...got.ts],
    [0, 1, 2, 3, 4, 5, 0].map((sec) => Date.UTC(2026, 0, 31, 12, 0, sec)),
  );
  assert.deepEqual([...got.temperature], [1, 2.5, 1, Number.NaN, Number.NaN, 1, 1]);
  // The same day's last and first millisecond, and the next day, after a timestamp of that day.
  const edges = ['2026-01-31T23:59:59.999Z', '2026-01-31T00:00:00.000Z', '2026-02-01T00:00:00.000Z', '2026-01-31T09:09:09.009Z'];
  const read = scanUpload(`{"observations":[${ok},${edges.map((t) => `{"timestamp":"${t}"}`).join(',')}]}`, MAX);
  assert.deepEqual(
    [...read!.ts].slice(1),
    edges.map((t) => Date.parse(t)),
  );
  // Over the per-request limit: the general path answers TOO_MANY_OBSERVATIONS.
  assert.equal(scanUpload(`{"observations":[${ok},${ok},${ok}]}`, 2), null);
  assert.ok(scanUpload(`{"observations":[${ok},${ok}]}`, 2));
});

test('a batch larger than the scratch space grows it and keeps every row', () => {
  const rows = Array.from({ length: 5000 }, (_, i) => ({ timestamp: new Date(Date.UTC(2025, 0, 1) + i * 1000).toISOString(), temperature: i / 8 }));
  same(JSON.stringify({ observations: rows }));
});

test('the bytes of a body read as its text: a view at an offset into a larger buffer, non-ASCII bytes left alone', () => {
  const body = '{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":21.5},{"timestamp":"2026-01-31T12:00:01.000Z","temperature":-1e2}]}';
  // Bodies arrive as Buffers, often views into a shared pool: the scan must read only the view.
  const pool = Buffer.from(`xx{"observations":[]}${body}{"observations":[]}`);
  const view = pool.subarray(2 + '{"observations":[]}'.length, 2 + '{"observations":[]}'.length + body.length);
  const fromView = scanUpload(view, MAX);
  const fromText = scanUpload(body, MAX);
  assert.ok(fromView && fromText);
  assert.deepEqual(recordsOf(fromView), recordsOf(fromText));
  assert.deepEqual(recordsOf(fromView), general(body));
  // A byte outside ASCII is never part of the shape read here (keys, digits, JSON whitespace).
  for (const odd of ['{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":1}]}\u00a0', '{"observations":[{"timestamp":"2026-01-31T12:00:00.000Z","temperature":1,"note":"é"}]}']) {
    assert.equal(scanUpload(Buffer.from(odd), MAX), null, odd);
  }
});
