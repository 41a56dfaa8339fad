// Conformance cases every store backend passes (index.ts runs them on each):
// job state by key.
import { it, before } from 'node:test';
import assert from 'node:assert/strict';
import type { Store } from '../../../../src/store/store.ts';
import type { StoreRef } from './fixtures.ts';

export function stateCases(ref: StoreRef): void {
  let store!: Store;
  before(() => {
    store = ref.store;
  });

  it('keeps job state by key and lists it by prefix', async () => {
    await store.setState('sim:1', '{"a":1}');
    await store.setState('sim:2', '{"a":2}');
    await store.setState('other', 'x');
    await store.setState('sim:1', '{"a":3}');
    assert.equal(await store.getState('sim:1'), '{"a":3}');
    assert.deepEqual(await store.listState('sim:'), [
      { key: 'sim:1', value: '{"a":3}' },
      { key: 'sim:2', value: '{"a":2}' },
    ]);
    await store.deleteState('sim:1');
    assert.equal(await store.getState('sim:1'), null);
  });
}
