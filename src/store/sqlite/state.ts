// Small shared state: the token signing keys every node uses, and the key-value state background
// jobs (simulations, gateway) keep across restarts.
import type { SigningKey } from '../store.ts';
import type { Row, SqliteContext } from './context.ts';

function statements(c: SqliteContext) {
  const p = (sql: string) => c.db.prepare(sql);
  return {
    listKeys: p('SELECT * FROM signing_keys ORDER BY created_at, kid'),
    deleteKey: p('DELETE FROM signing_keys WHERE kid = ?'),
    addKey: p('INSERT INTO signing_keys (kid, secret, created_at) VALUES (?, ?, ?) ON CONFLICT (kid) DO NOTHING'),
    getState: p('SELECT value FROM state WHERE key = ?').pluck(),
    setState: p('INSERT INTO state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value'),
    deleteState: p('DELETE FROM state WHERE key = ?'),
    listState: p('SELECT key, value FROM state WHERE substr(key, 1, length(@p)) = @p ORDER BY key'),
  };
}

export class SqliteState {
  private readonly s: ReturnType<typeof statements>;
  constructor(private readonly c: SqliteContext) {
    this.s = statements(c);
  }

  listSigningKeys() {
    return this.c.run(() => (this.s.listKeys.all() as Row[]).map((r): SigningKey => ({ kid: r.kid, secret: r.secret, createdAt: r.created_at })));
  }
  addSigningKey(k: SigningKey) {
    return this.c.run(() => {
      this.s.addKey.run(k.kid, k.secret, k.createdAt);
    });
  }
  deleteSigningKey(kid: string) {
    return this.c.run(() => {
      this.s.deleteKey.run(kid);
    });
  }

  getState(key: string) {
    return this.c.run(() => (this.s.getState.get(key) as string | undefined) ?? null);
  }
  setState(key: string, value: string) {
    return this.c.run(() => {
      this.s.setState.run(key, value);
    });
  }
  deleteState(key: string) {
    return this.c.run(() => {
      this.s.deleteState.run(key);
    });
  }
  listState(prefix: string) {
    return this.c.run(() => this.s.listState.all({ p: prefix }) as { key: string; value: string }[]);
  }
}
