// Accounts (tenants): one row each, found by client id or tenant id.
import { ReefError } from '../../core/errors.ts';
import type { Account } from '../../core/types.ts';
import type { Row, SqliteContext } from './context.ts';

function accountFromRow(r: Row): Account {
  return {
    tenantId: r.tenant_id,
    name: r.name,
    groupId: r.group_id,
    clientId: r.client_id,
    secretHash: r.secret_hash,
    disabled: r.disabled === 1,
    createdAt: r.created_at,
  };
}

function statements(c: SqliteContext) {
  const p = (sql: string) => c.db.prepare(sql);
  return {
    insertAccount: p('INSERT INTO accounts (tenant_id, name, group_id, client_id, secret_hash, disabled, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)'),
    accountByClient: p('SELECT * FROM accounts WHERE client_id = ?'),
    accountByTenant: p('SELECT * FROM accounts WHERE tenant_id = ?'),
    listAccounts: p('SELECT * FROM accounts ORDER BY created_at, tenant_id'),
    setSecret: p('UPDATE accounts SET secret_hash = ? WHERE tenant_id = ?'),
    setDisabled: p('UPDATE accounts SET disabled = ? WHERE tenant_id = ?'),
    countAccounts: p('SELECT count(*) AS n FROM accounts'),
  };
}

export class SqliteAccounts {
  private readonly s: ReturnType<typeof statements>;
  constructor(private readonly c: SqliteContext) {
    this.s = statements(c);
  }

  createAccount(a: Account) {
    return this.c.run(() => {
      this.s.insertAccount.run(a.tenantId, a.name, a.groupId, a.clientId, a.secretHash, a.disabled ? 1 : 0, a.createdAt);
      return a;
    });
  }
  getAccountByClientId(clientId: string) {
    return this.c.run(() => {
      const r = this.s.accountByClient.get(clientId) as Row | undefined;
      return r ? accountFromRow(r) : null;
    });
  }
  getAccountByTenantId(tenantId: string) {
    return this.c.run(() => {
      const r = this.s.accountByTenant.get(tenantId) as Row | undefined;
      return r ? accountFromRow(r) : null;
    });
  }
  listAccounts() {
    return this.c.run(() => (this.s.listAccounts.all() as Row[]).map(accountFromRow));
  }
  setAccountSecret(tenantId: string, secretHash: string) {
    return this.c.run(() => {
      if (this.s.setSecret.run(secretHash, tenantId).changes === 0) throw new ReefError('ACCOUNT_NOT_FOUND');
    });
  }
  setAccountDisabled(tenantId: string, disabled: boolean) {
    return this.c.run(() => {
      if (this.s.setDisabled.run(disabled ? 1 : 0, tenantId).changes === 0) throw new ReefError('ACCOUNT_NOT_FOUND');
    });
  }
  countAccounts() {
    return this.c.run(() => (this.s.countAccounts.get() as Row).n as number);
  }
}
