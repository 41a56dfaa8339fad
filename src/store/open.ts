// Chooses the backend from config: PostgreSQL when REEF_DATABASE_URL is set, else the embedded
// SQLite file in the data directory.
import path from 'node:path';
import type { Config } from '../config/config.ts';
import type { Store } from './store.ts';
import { SqliteStore } from './sqlite/sqlite-store.ts';

export async function openStore(config: Pick<Config, 'dataDir' | 'databaseUrl'>): Promise<Store> {
  let store: Store;
  if (config.databaseUrl) {
    // Loaded on demand so an embedded deployment never loads the pg driver.
    const { PostgresStore } = await import('./postgres/postgres-store.ts');
    store = new PostgresStore({ connectionString: config.databaseUrl });
  } else {
    store = new SqliteStore({ file: path.join(config.dataDir, 'reef.db') });
  }
  await store.migrate();
  return store;
}
