// One observation's fields besides timestamp and temperature are bounded as JSON
// (REEF_MAX_OBSERVATION_EXTRA, docs/security.md "Limits"), however they are nested.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isReefError } from '../../../src/core/errors.ts';
import { recordsOf } from '../../../src/core/observation-batch.ts';
import { jsonLongerThan, parseBatch } from '../../../src/service/observations.ts';

const ts = '2026-02-01T10:00:00Z';

describe('one observation of a batch: its other fields', () => {
  it('keeps fields that fit, as given', () => {
    const [o] = recordsOf(parseBatch({ observations: [{ timestamp: ts, temperature: 1, note: 'x'.repeat(900), tags: ['a', 'b'] }] }, 10, 1024));
    assert.deepEqual(o?.extra, { note: 'x'.repeat(900), tags: ['a', 'b'] });
  });

  it('refuses one past the bound, naming the observation, whether the size is in one string or spread through arrays and objects', () => {
    for (const big of [{ pad: 'x'.repeat(2000) }, { a: Array.from({ length: 300 }, () => 'abcdef') }, { a: { b: { c: Array.from({ length: 200 }, (_, i) => ({ [`k${i}`]: i })) } } }]) {
      assert.throws(
        () => parseBatch({ observations: [{ timestamp: ts }, { timestamp: ts, ...big }] }, 10, 1024),
        (e: unknown) => isReefError(e) && e.code === 'VALIDATION_FAILED' && e.field === 'observations/1',
      );
    }
  });

  it('measures no more than JSON would', () => {
    const v = { note: 'hello', n: 12.5, ok: true, list: [1, null, 'x'], o: { k: 'v' } };
    const len = JSON.stringify(v).length;
    assert.equal(jsonLongerThan(v, len), false);
    assert.equal(jsonLongerThan({ pad: 'x'.repeat(len) }, len), true);
  });
});
