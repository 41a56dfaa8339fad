// What the conformance cases share: the factory a backend's test gives, the store they run on, and
// small fixtures (accounts with fresh ids, evenly spaced series).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { isReefError } from '../../../../src/core/errors.ts';
import type { Account, ObservationRecord } from '../../../../src/core/types.ts';
import type { Store } from '../../../../src/store/store.ts';

export interface StoreFactory {
  /** A fresh, migrated, empty store. */
  open(): Promise<Store>;
  /** Drops whatever open() made (files, databases). */
  cleanup(): Promise<void>;
}

export function account(n: string, group?: string): Account {
  return {
    tenantId: `TN${n.toUpperCase()}${randomUUID().slice(0, 8)}`,
    name: n,
    groupId: group ?? `G-${n}`,
    clientId: randomUUID(),
    secretHash: 'scrypt$test',
    disabled: false,
    createdAt: Date.now(),
  };
}

export const T0 = Date.UTC(2026, 0, 1);

export function series(n: number, step = 1000, start = T0): ObservationRecord[] {
  return Array.from({ length: n }, (_, i) => ({ ts: start + i * step, temperature: 20 + (i % 100) / 10, extra: null }));
}

export async function rejectsWith(p: Promise<unknown>, code: string) {
  await assert.rejects(p, (e: unknown) => isReefError(e) && e.code === code);
}

/** The store of the running suite: opened in index.ts's before(), read by each case file's own. */
export interface StoreRef {
  readonly store: Store;
}
