// Small shared state: the token signing keys every node uses, and the key-value state background
// jobs (simulations, gateway) keep across restarts.
import type { SigningKey } from '../store.ts';
import type { PostgresConnection } from './connection.ts';

export class PostgresState {
  constructor(private readonly c: PostgresConnection) {}

  async listSigningKeys(): Promise<SigningKey[]> {
    const r = await this.c.q('SELECT kid, secret, created_at FROM signing_keys ORDER BY created_at, kid');
    return r.rows.map((x) => ({ kid: x.kid, secret: x.secret, createdAt: x.created_at }));
  }
  async addSigningKey(k: SigningKey): Promise<void> {
    await this.c.q('INSERT INTO signing_keys (kid, secret, created_at) VALUES ($1, $2, $3) ON CONFLICT (kid) DO NOTHING', [k.kid, k.secret, k.createdAt]);
  }

  async deleteSigningKey(kid: string): Promise<void> {
    await this.c.q('DELETE FROM signing_keys WHERE kid = $1', [kid]);
  }

  async getState(key: string): Promise<string | null> {
    const r = await this.c.q('SELECT value FROM state WHERE key = $1', [key], 'get-state');
    return r.rows[0] ? (r.rows[0].value as string) : null;
  }
  async setState(key: string, value: string): Promise<void> {
    await this.c.q('INSERT INTO state (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value', [key, value], 'set-state');
  }
  async deleteState(key: string): Promise<void> {
    await this.c.q('DELETE FROM state WHERE key = $1', [key]);
  }
  async listState(prefix: string): Promise<{ key: string; value: string }[]> {
    const r = await this.c.q('SELECT key, value FROM state WHERE starts_with(key, $1) ORDER BY key', [prefix]);
    return r.rows as { key: string; value: string }[];
  }
}
