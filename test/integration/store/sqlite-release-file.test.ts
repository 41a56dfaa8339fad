// A database written by a released Reef opens and reads the same with this code
// (docs/storage.md "Migrations"): the fixture was written by the release's own store
// (test/integration/store/fixtures/sqlite-release.ts says how), blocks in every encoding included, and what
// that release read from it is checked in beside it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { it } from 'node:test';
import Database from 'better-sqlite3';
import { SqliteStore } from '../../../src/store/sqlite/sqlite-store.ts';
import { digest, fill, readAll } from './fixtures/sqlite-release.ts';

const FIXTURES = path.join(path.dirname(new URL(import.meta.url).pathname), 'fixtures');

const blockRows = (file: string) => {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare('SELECT device_pk, first_ts, last_ts, n, hex(ts) AS ts, hex(t) AS t, extra FROM obs_blocks ORDER BY device_pk, first_ts').all();
  } finally {
    db.close();
  }
};

it("reads a released Reef's SQLite file as that release read it, and writes the same blocks it wrote", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-release-'));
  try {
    const file = path.join(dir, 'reef.db');
    fs.writeFileSync(file, zlib.gunzipSync(fs.readFileSync(path.join(FIXTURES, 'sqlite-release.db.gz'))));
    const store = new SqliteStore({ file });
    await store.migrate();
    const expected = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'sqlite-release.json'), 'utf8')) as Record<string, unknown>;
    const got = digest(await readAll(store));
    for (const key of Object.keys(expected)) assert.deepEqual(got[key], expected[key], key);
    await store.close();

    // The same writes through this code's store give the same blocks, byte for byte.
    const fresh = path.join(dir, 'fresh.db');
    const again = new SqliteStore({ file: fresh });
    await again.migrate();
    await fill(again);
    await again.close();
    assert.deepEqual(blockRows(fresh), blockRows(file));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
