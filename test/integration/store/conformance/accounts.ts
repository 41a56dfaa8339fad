// Conformance cases every store backend passes (index.ts runs them on each):
// accounts and the token signing keys.
import { it, before } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Store } from '../../../../src/store/store.ts';
import { account, rejectsWith, type StoreRef } from './fixtures.ts';

export function accountCases(ref: StoreRef): void {
  let store!: Store;
  before(() => {
    store = ref.store;
  });

  it('migrate is idempotent', async () => {
    await store.migrate();
    await store.migrate();
    await store.ping();
  });

  it('creates and finds accounts by client id and tenant id', async () => {
    const a = account('alice');
    await store.createAccount(a);
    assert.deepEqual(await store.getAccountByClientId(a.clientId), a);
    assert.deepEqual(await store.getAccountByTenantId(a.tenantId), a);
    assert.equal(await store.getAccountByClientId(randomUUID()), null);
    assert.ok((await store.listAccounts()).some((x) => x.tenantId === a.tenantId));
    assert.ok((await store.countAccounts()) >= 1);
  });

  it('rotates secrets and disables accounts; unknown accounts are ACCOUNT_NOT_FOUND', async () => {
    const a = account('bob');
    await store.createAccount(a);
    await store.setAccountSecret(a.tenantId, 'scrypt$new');
    await store.setAccountDisabled(a.tenantId, true);
    const got = await store.getAccountByTenantId(a.tenantId);
    assert.equal(got?.secretHash, 'scrypt$new');
    assert.equal(got?.disabled, true);
    await rejectsWith(store.setAccountDisabled('TNNOPE', true), 'ACCOUNT_NOT_FOUND');
    await rejectsWith(store.setAccountSecret('TNNOPE', 'x'), 'ACCOUNT_NOT_FOUND');
  });

  it('a duplicate client id is a CONFLICT', async () => {
    const a = account('carol');
    await store.createAccount(a);
    await rejectsWith(store.createAccount({ ...account('carol2'), clientId: a.clientId }), 'CONFLICT');
  });

  it('keeps signing keys; adding one twice keeps one', async () => {
    const k = { kid: randomUUID(), secret: 'x'.repeat(43), createdAt: Date.now() };
    await store.addSigningKey(k);
    await store.addSigningKey(k);
    const keys = (await store.listSigningKeys()).filter((x) => x.kid === k.kid);
    assert.deepEqual(keys, [k]);
  });

  it('lists signing keys oldest first and deletes a retired one', async () => {
    const base = Date.now() + 1_000_000;
    const k1 = { kid: `k1-${randomUUID()}`, secret: 'a'.repeat(43), createdAt: base };
    const k2 = { kid: `k2-${randomUUID()}`, secret: 'b'.repeat(43), createdAt: base + 1 };
    await store.addSigningKey(k2);
    await store.addSigningKey(k1);
    const mine = (await store.listSigningKeys()).filter((x) => x.kid === k1.kid || x.kid === k2.kid);
    assert.deepEqual(mine, [k1, k2]);
    await store.deleteSigningKey(k1.kid);
    await store.deleteSigningKey('no-such-key');
    assert.deepEqual(
      (await store.listSigningKeys()).filter((x) => x.kid === k1.kid || x.kid === k2.kid),
      [k2],
    );
  });
}
