// The store conformance suite: one set of tests that every backend must pass, run by
// test/integration/store/<backend>.test.ts with a factory that makes a fresh, empty, migrated store.
// The cases are kept by aggregate, as the backends keep their files (src/store/<backend>/).
import { after, before, describe } from 'node:test';
import type { Store } from '../../../../src/store/store.ts';
import { accountCases } from './accounts.ts';
import { alarmCases } from './alarms.ts';
import { deviceCases } from './devices.ts';
import type { StoreFactory, StoreRef } from './fixtures.ts';
import { observationReadCases } from './observation-reads.ts';
import { observationWriteCases } from './observation-writes.ts';
import { retentionCases } from './retention.ts';
import { stateCases } from './state.ts';

export type { StoreFactory } from './fixtures.ts';

export function storeConformance(backend: string, factory: StoreFactory): void {
  describe(`store conformance: ${backend}`, () => {
    let store: Store | undefined;
    const ref: StoreRef = {
      get store() {
        if (!store) throw new Error('the store is not open yet');
        return store;
      },
    };
    before(async () => {
      store = await factory.open();
    });
    after(async () => {
      await store?.close();
      await factory.cleanup();
    });

    accountCases(ref);
    stateCases(ref);
    deviceCases(ref);
    observationWriteCases(ref);
    observationReadCases(ref);
    retentionCases(ref);
    alarmCases(ref);
  });
}
