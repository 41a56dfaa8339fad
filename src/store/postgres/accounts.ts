// Accounts (tenants): one row each, found by client id or tenant id.
import { ReefError } from '../../core/errors.ts';
import type { Account } from '../../core/types.ts';
import type { PostgresConnection, Row } from './connection.ts';

function accountFromRow(r: Row): Account {
  return {
    tenantId: r.tenant_id,
    name: r.name,
    groupId: r.group_id,
    clientId: r.client_id,
    secretHash: r.secret_hash,
    disabled: r.disabled,
    createdAt: r.created_at,
  };
}

export class PostgresAccounts {
  constructor(private readonly c: PostgresConnection) {}

  async createAccount(a: Account): Promise<Account> {
    await this.c.q('INSERT INTO accounts (tenant_id, name, group_id, client_id, secret_hash, disabled, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
      a.tenantId,
      a.name,
      a.groupId,
      a.clientId,
      a.secretHash,
      a.disabled,
      a.createdAt,
    ]);
    return a;
  }
  async getAccountByClientId(clientId: string): Promise<Account | null> {
    const r = await this.c.q('SELECT * FROM accounts WHERE client_id = $1', [clientId], 'account-by-client');
    return r.rows[0] ? accountFromRow(r.rows[0]) : null;
  }
  async getAccountByTenantId(tenantId: string): Promise<Account | null> {
    const r = await this.c.q('SELECT * FROM accounts WHERE tenant_id = $1', [tenantId], 'account-by-tenant');
    return r.rows[0] ? accountFromRow(r.rows[0]) : null;
  }
  async listAccounts(): Promise<Account[]> {
    return (await this.c.q('SELECT * FROM accounts ORDER BY created_at, tenant_id')).rows.map(accountFromRow);
  }
  async setAccountSecret(tenantId: string, secretHash: string): Promise<void> {
    if ((await this.c.q('UPDATE accounts SET secret_hash = $1 WHERE tenant_id = $2', [secretHash, tenantId])).rowCount === 0) throw new ReefError('ACCOUNT_NOT_FOUND');
  }
  async setAccountDisabled(tenantId: string, disabled: boolean): Promise<void> {
    if ((await this.c.q('UPDATE accounts SET disabled = $1 WHERE tenant_id = $2', [disabled, tenantId])).rowCount === 0) throw new ReefError('ACCOUNT_NOT_FOUND');
  }
  async countAccounts(): Promise<number> {
    return (await this.c.q('SELECT count(*) AS n FROM accounts')).rows[0]!.n;
  }
}
