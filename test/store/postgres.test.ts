// The store conformance suite against the real PostgreSQL on 127.0.0.1:5432, in a throw-away
// database made for this run and dropped afterwards.
import { storeConformance } from '../../src/store/conformance.ts';
import { PostgresStore } from '../../src/store/postgres/postgres-store.ts';
import { createTestDatabase } from '../helpers/pg.ts';

let db: Awaited<ReturnType<typeof createTestDatabase>> | undefined;

storeConformance('postgres', {
  async open() {
    db = await createTestDatabase();
    const s = new PostgresStore({ connectionString: db.url });
    await s.migrate();
    return s;
  },
  async cleanup() {
    await db?.drop();
  },
});
