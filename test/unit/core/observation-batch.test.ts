// The one batch type (src/core/observation-batch.ts): records in and out unchanged, the newest
// found as the stores pick it, and repeated timestamps collapsed with the later one winning.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchOf, lastWins, recordsOf, wireOf } from '../../../src/core/observation-batch.ts';
import type { ObservationRecord } from '../../../src/core/types.ts';

const rows: ObservationRecord[] = [
  { ts: 3000, temperature: 1.5, extra: null },
  { ts: 1000, temperature: null, extra: { note: 'a' } },
  { ts: 3000, temperature: -2, extra: { tags: ['x'] } },
  { ts: 2000, temperature: 0, extra: null },
];

test('records become columns and come back the same; the newest is the last of the greatest timestamp', () => {
  const b = batchOf(rows);
  assert.deepEqual([...b.ts], [3000, 1000, 3000, 2000]);
  assert.ok(Number.isNaN(b.temperature[1]!));
  assert.equal(b.newest, 2);
  assert.deepEqual(recordsOf(b), rows);
  assert.deepEqual(wireOf(b)[1], { timestamp: '1970-01-01T00:00:01.000Z', note: 'a' });
});

test('a batch without free fields keeps none', () => {
  const b = batchOf([{ ts: 1, temperature: 2, extra: null }]);
  assert.equal(b.extra, null);
  assert.deepEqual(recordsOf(lastWins(b)), [{ ts: 1, temperature: 2, extra: null }]);
});

test('repeated timestamps collapse to the later observation, the others kept in their order', () => {
  const b = lastWins(batchOf(rows));
  assert.deepEqual(recordsOf(b), [rows[1], rows[2], rows[3]]);
  assert.equal(b.ts[b.newest], 3000);
  assert.equal(b.temperature[b.newest], -2);
  const unique = batchOf([rows[1]!, rows[3]!]);
  assert.equal(lastWins(unique), unique);
});
