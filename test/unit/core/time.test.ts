import assert from 'node:assert/strict';
import { it } from 'node:test';
import { isoUtc } from '../../../src/core/time.ts';

it('isoUtc writes exactly what toISOString writes', () => {
  const samples = [0, 1, 999, 1000, 86_399_999, 86_400_000, Date.UTC(2024, 1, 29, 23, 59, 59, 999), Date.UTC(2026, 11, 31, 23, 59, 59, 1), 253402300799999];
  // and a walk across days, hours and leap years in both directions of the day cache
  for (let t = Date.UTC(1999, 11, 30); t < Date.UTC(2001, 2, 2); t += 3_599_999 + 7) samples.push(t, Date.UTC(2100, 1, 28) + (t % 172_800_000));
  for (const ms of samples) assert.equal(isoUtc(ms), new Date(ms).toISOString(), String(ms));
  assert.equal(isoUtc(-1), new Date(-1).toISOString());
  assert.equal(isoUtc(1.5), new Date(1.5).toISOString());
});
