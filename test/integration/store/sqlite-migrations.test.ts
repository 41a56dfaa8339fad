// A data directory made by an older Reef opens with a newer one: pending migrations apply and
// rows written before them are served correctly (migration 4 renders existing latest rows).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { it } from 'node:test';
import Database from 'better-sqlite3';
import { MIGRATIONS } from '../../../src/store/sqlite/migrations.ts';
import { SqliteStore } from '../../../src/store/sqlite/sqlite-store.ts';

it('upgrades a version-3 database and keeps its observations readable', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-mig-'));
  try {
    const file = path.join(dir, 'reef.db');
    const db = new Database(file);
    db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
    for (const m of MIGRATIONS.filter((x) => x.version <= 3)) {
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_migrations VALUES (?, ?, 0)').run(m.version, m.name);
    }
    db.prepare("INSERT INTO solutions (group_id, name, created_at) VALUES ('G', 's', 0)").run();
    db.prepare("INSERT INTO devices (pk, id, tenant_id, group_id, solution, device_type, domain_info, created_at) VALUES (1, 'd1', 'T', 'G', 's', 'V', '{}', 0)").run();
    db.prepare("INSERT INTO devices (pk, id, tenant_id, group_id, solution, device_type, domain_info, created_at) VALUES (2, 'd2', 'T', 'G', 's', 'V', '{}', 0)").run();
    db.prepare('INSERT INTO observations VALUES (1, 1000, 20.5, ?)').run('{"humidity":40}');
    // Enough rows for several blocks (migration 10 moves rows into per-device blocks).
    const row = db.prepare('INSERT INTO observations VALUES (?, ?, ?, NULL)');
    for (let i = 0; i < 2500; i++) row.run(2, 5000 + i * 10, i % 7 === 3 ? null : i / 4);
    db.prepare('INSERT INTO latest (device_pk, ts, temperature, extra) VALUES (1, 1000, 20.5, ?)').run('{"humidity":40}');
    db.close();

    const store = new SqliteStore({ file });
    await store.migrate();
    // The device quota's count (migration 12) starts from the devices already there.
    assert.equal(await store.countDevices('T'), 2);
    assert.equal((await store.latestObservationsJson!('G', 's')).toString(), '[{"deviceId":"d1","observations":[{"timestamp":"1970-01-01T00:00:01.000Z","temperature":20.5,"humidity":40}]}]');
    const d1 = await store.queryObservations('d1', { limit: 10 });
    assert.deepEqual(d1.observations, [{ ts: 1000, temperature: 20.5, extra: { humidity: 40 } }]);
    const d2 = await store.queryObservations('d2', { limit: 5000 });
    assert.equal(d2.observations.length, 2500);
    assert.deepEqual(d2.observations[0], { ts: 5000 + 2499 * 10, temperature: 2499 / 4, extra: null });
    assert.deepEqual(d2.observations[2499], { ts: 5000, temperature: 0, extra: null });
    assert.equal(d2.observations[2499 - 3]!.temperature, null);
    assert.ok(d2.observations.every((o, i) => o.ts === 5000 + (2499 - i) * 10));
    const versions = new Database(file).prepare('SELECT version FROM schema_migrations ORDER BY version').pluck().all();
    assert.deepEqual(
      versions,
      MIGRATIONS.map((m) => m.version),
    );
    await store.close();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
