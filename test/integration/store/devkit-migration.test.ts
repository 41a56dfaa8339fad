// Existing stores are migrated to the dev kits' wire names: a kit provisioned by an
// older Reef (provisioningInfo.vendorMacAddress, empty domainInfo) reads back with
// ssniMacAddress, ssniNetworkDeviceType and domainInfo.nic_macID, on SQLite and on PostgreSQL;
// other devices are untouched.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { it } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { MIGRATIONS as SQLITE } from '../../../src/store/sqlite/migrations.ts';
import { SqliteStore } from '../../../src/store/sqlite/sqlite-store.ts';
import { MIGRATIONS as POSTGRES } from '../../../src/store/postgres/migrations.ts';
import { PostgresStore } from '../../../src/store/postgres/postgres-store.ts';
import type { Store } from '../../../src/store/store.ts';
import { createTestDatabase } from '../../helpers/pg.ts';

const OLD_PI = JSON.stringify({ status: 'provisioned', timestamp: '2026-01-01T00:00:00.000Z', vendorMacAddress: '00135005ff1234ab', vendorNetworkDeviceType: 'MILLI' });

async function expectMigrated(store: Store) {
  const kit = await store.getDevice('G', 'sandbox', 'kit');
  assert.deepEqual(kit?.provisioningInfo, { status: 'provisioned', timestamp: '2026-01-01T00:00:00.000Z', ssniMacAddress: '00135005ff1234ab', ssniNetworkDeviceType: 'MILLI' });
  assert.deepEqual(kit?.domainInfo, { note: 'kept', nic_macID: '00135005ff1234ab' });
  const other = await store.getDevice('G', 'sandbox', 'virt');
  assert.deepEqual(other?.domainInfo, { location: { latitude: 1, longitude: 2 } });
  assert.equal(other?.provisioningInfo, undefined);
  assert.equal((await store.getDeviceByMac('00135005ff1234ab'))?.id, 'kit');
}

it('sqlite: a version-5 store gets the wire names', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-mig-kit-'));
  try {
    const file = path.join(dir, 'reef.db');
    const db = new Database(file);
    db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
    // Migration 4 renders through a function the store registers; there are no latest rows yet.
    db.function('reef_observation_json', { varargs: true }, () => null);
    for (const m of SQLITE.filter((x) => x.version <= 5)) {
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_migrations VALUES (?, ?, 0)').run(m.version, m.name);
    }
    db.prepare("INSERT INTO solutions (group_id, name, created_at) VALUES ('G', 'sandbox', 0)").run();
    db.prepare(
      "INSERT INTO devices (id, tenant_id, group_id, solution, device_type, domain_info, provisioning_info, mac, created_at) VALUES ('kit', 'T', 'G', 'sandbox', 'NICDevKit', '{\"note\":\"kept\"}', ?, '00135005ff1234ab', 0)",
    ).run(OLD_PI);
    db.prepare(
      "INSERT INTO devices (id, tenant_id, group_id, solution, device_type, domain_info, created_at) VALUES ('virt', 'T', 'G', 'sandbox', 'VirtualDevice', '{\"location\":{\"latitude\":1,\"longitude\":2}}', 0)",
    ).run();
    const before = db.prepare("SELECT version FROM solutions WHERE name = 'sandbox'").pluck().get() as number;
    db.close();
    const store = new SqliteStore({ file });
    await store.migrate();
    await expectMigrated(store);
    assert.ok((await store.solutionVersion('G', 'sandbox'))! > before, 'cached device lists are invalidated');
    await store.close();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

it('postgres: a version-3 store gets the wire names', async () => {
  const tdb = await createTestDatabase();
  try {
    const c = new pg.Client({ connectionString: tdb.url });
    await c.connect();
    await c.query('CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)');
    for (const m of POSTGRES.filter((x) => x.version <= 3)) {
      await c.query(m.sql);
      await c.query('INSERT INTO schema_migrations VALUES ($1, $2, 0)', [m.version, m.name]);
    }
    await c.query("INSERT INTO solutions (group_id, name, created_at) VALUES ('G', 'sandbox', 0)");
    await c.query(
      "INSERT INTO devices (id, tenant_id, group_id, solution, device_type, domain_info, provisioning_info, mac, created_at) VALUES ('kit', 'T', 'G', 'sandbox', 'NICDevKit', '{\"note\":\"kept\"}', $1, '00135005ff1234ab', 0)",
      [OLD_PI],
    );
    await c.query(
      "INSERT INTO devices (id, tenant_id, group_id, solution, device_type, domain_info, created_at) VALUES ('virt', 'T', 'G', 'sandbox', 'VirtualDevice', '{\"location\":{\"latitude\":1,\"longitude\":2}}', 0)",
    );
    const before = Number((await c.query("SELECT version FROM solutions WHERE name = 'sandbox'")).rows[0].version);
    await c.end();
    const store = new PostgresStore({ connectionString: tdb.url });
    try {
      await store.migrate();
      await expectMigrated(store);
      assert.ok((await store.solutionVersion('G', 'sandbox'))! > before, 'cached device lists are invalidated');
    } finally {
      await store.close();
    }
  } finally {
    await tdb.drop();
  }
});
