// A device's usual interval is the median gap of its newest readings: a hole or a burst does not move it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { medianGap } from '../../../src/service/cadence.ts';

test('the median gap of readings every 5 s is 5 s, even with one missed reading', () => {
  const t = [100_000, 95_000, 90_000, 80_000, 75_000, 70_000];
  assert.equal(medianGap(t), 5000);
});

test('one reading or repeated timestamps give no interval', () => {
  assert.equal(medianGap([1000]), null);
  assert.equal(medianGap([1000, 1000]), null);
});

test('an even number of gaps averages the middle two', () => {
  assert.equal(medianGap([40, 30, 10]), 15);
});
