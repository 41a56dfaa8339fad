// The hand-written JSON of the hot read paths must equal JSON.stringify of the wire form exactly.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { toWireObservation, type ObservationRecord } from '../../../src/core/types.ts';
import { latestJson, latestJsonOfColumns, pageJson, pageJsonOfColumns } from '../../../src/core/observation-json.ts';

const records: ObservationRecord[] = [
  { ts: 0, temperature: null, extra: null },
  { ts: Date.UTC(2026, 0, 1, 12, 0, 0, 5), temperature: -0.0001, extra: null },
  { ts: 1_700_000_000_123, temperature: 21.5, extra: { humidity: 40, note: 'quote " backslash \\ ☃ \u2028', nested: { a: [1, null, true] } } },
  { ts: 1_700_000_000_124, temperature: 1e21, extra: {} },
  { ts: 1_700_000_000_125, temperature: null, extra: { tags: ['x'] } },
];

it('pageJson equals JSON.stringify of the wire observations', () => {
  assert.equal(pageJson(records), JSON.stringify({ observations: records.map(toWireObservation) }));
  assert.deepEqual(JSON.parse(pageJson([])), { observations: [] });
});

it('latestJson equals JSON.stringify of the observation groups', () => {
  const rows = records.map((observation, i) => ({ deviceId: `00000000-0000-4000-8000-00000000000${i}`, observation }));
  assert.equal(latestJson(rows), JSON.stringify(rows.map((r) => ({ deviceId: r.deviceId, observations: [toWireObservation(r.observation)] }))));
  assert.equal(latestJson([]), '[]');
});

/** The columns a store reads: timestamps, temperatures (NaN: none), free fields as the stored JSON text. */
const columnsOf = (rs: ObservationRecord[]) => {
  const extra = rs.map((r) => (r.extra ? JSON.stringify(r.extra) : null));
  return [Float64Array.from(rs, (r) => r.ts), Float64Array.from(rs, (r) => r.temperature ?? Number.NaN), extra.some((e) => e !== null) ? extra : null] as const;
};
const pageOf = (rs: ObservationRecord[], n = rs.length) => pageJsonOfColumns(...columnsOf(rs), n);

const awkward: ObservationRecord[] = [
  ...records,
  // Timestamps before 1970, before year 0, after 9999, on day and second edges.
  ...[-62198755200000, -1, -86_400_001, 86_399_999, 999, 253402300799999, 253402300800000, 8.64e15, -8.64e15].map((ts) => ({ ts, temperature: 1, extra: null })),
  // Numbers whose shortest form has 16-17 digits, an exponent, or none of either.
  ...[
    0.1 + 0.2,
    1 / 3,
    5e-324,
    -5e-324,
    1.7976931348623157e308,
    123456789012345680000,
    1e21,
    1e-7,
    -1e-7,
    1e-6,
    2 ** 53 + 2,
    100,
    -0,
    0,
    1e15,
    1e16,
    0.000123,
    21.0000000000001,
    -273.15,
    // Around the few-decimals path: its edges, trailing zeros, leading zeros of the fraction, -0.00001 (rounds to -0).
    9.9999,
    -0.0001,
    0.0001,
    0.5,
    0.05,
    10.1,
    20.0001,
    -0.00001,
    999999999.9999,
    -999999999.9999,
    1e9,
    -1e9,
    123456789.1234,
    0.12345,
    1.00005,
    65.53,
    -40,
  ].map((temperature, i) => ({ ts: 1_700_000_000_000 + i, temperature, extra: null })),
  { ts: 1, temperature: null, extra: { s: 'é😀\u0000', big: 'x'.repeat(5000) } },
];

it('pageJsonOfColumns equals pageJson, fixed awkward cases', () => {
  assert.equal(pageOf(awkward), pageJson(awkward));
  assert.equal(pageOf([]), pageJson([]));
  // Only the first n rows (the store reads one more than the page to see whether another follows).
  assert.equal(pageOf(awkward, 3), pageJson(awkward.slice(0, 3)));
});

/** n random readings: any timestamp and finite double, some without temperature, some with free fields. */
function randomRecords(n: number): ObservationRecord[] {
  // A seeded generator so that a failure can be reproduced.
  let seed = 0x2f6b_1a3d;
  const rand = () => {
    seed = (Math.imul(seed ^ (seed >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) | 0;
    return (seed >>> 0) / 2 ** 32;
  };
  const bits = new DataView(new ArrayBuffer(8));
  const number = () => {
    const k = rand();
    if (k < 0.3) return Math.round((rand() * 200 - 100) * 10 ** Math.floor(rand() * 6)) / 10 ** Math.floor(rand() * 6);
    if (k < 0.5) return (rand() - 0.5) * 10 ** Math.floor(rand() * 40 - 20);
    // Any finite double, from random bits.
    let v: number;
    do {
      bits.setUint32(0, (rand() * 2 ** 32) >>> 0);
      bits.setUint32(4, (rand() * 2 ** 32) >>> 0);
      v = bits.getFloat64(0);
    } while (!Number.isFinite(v));
    return v;
  };
  const rs: ObservationRecord[] = [];
  for (let i = 0; i < n; i++) {
    const k = rand();
    const ts = k < 0.6 ? Math.floor(rand() * 253402300800000) : k < 0.8 ? Math.floor((rand() - 0.5) * 2 * 8.64e15) : Math.floor(rand() * 4e9) - 2e9;
    rs.push({
      ts,
      temperature: rand() < 0.1 ? null : number(),
      extra: rand() < 0.05 ? { n: number(), s: String.fromCharCode(...Array.from({ length: 4 }, () => Math.floor(rand() * 0xd7ff))) } : null,
    });
  }
  return rs;
}

it('pageJsonOfColumns equals pageJson, 20,000 random rows', () => {
  const rs = randomRecords(20_000);
  assert.equal(pageOf(rs), pageJson(rs));
});

/** latestJsonOfColumns of records given one device each, as text. */
const latestOf = (ids: string[], rs: ObservationRecord[]) => latestJsonOfColumns(ids, ...columnsOf(rs), rs.length).toString('utf8');
const uuid = (i: number) => `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;

it('latestJsonOfColumns equals latestJson, fixed awkward cases and random rows', () => {
  for (const rs of [awkward, randomRecords(20_000)]) {
    const ids = rs.map((_, i) => uuid(i));
    assert.equal(latestOf(ids, rs), latestJson(rs.map((observation, i) => ({ deviceId: ids[i]!, observation }))));
  }
  assert.equal(latestOf([], []), latestJson([]));
  // An id that is not ASCII is encoded whole (latestJson writes ids as they are).
  const odd = [{ ts: 1, temperature: 2, extra: null }];
  assert.equal(latestOf(['gerät-ü'], odd), latestJson([{ deviceId: 'gerät-ü', observation: odd[0]! }]));
});

it('latestJsonOfColumns hands out its own bytes: a later page does not change them', () => {
  const first = latestJsonOfColumns([uuid(1)], [1000], [20.5], null, 1);
  const text = first.toString('utf8');
  pageJsonOfColumns(
    Float64Array.from({ length: 2000 }, (_, i) => i),
    new Float64Array(2000),
    null,
    2000,
  );
  latestJsonOfColumns([uuid(2)], [2000], [-3], null, 1);
  assert.equal(first.toString('utf8'), text);
});
