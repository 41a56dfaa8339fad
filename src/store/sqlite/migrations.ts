// Versioned schema of the SQLite backend. Append only: a released migration is never edited.
// Times are epoch milliseconds (INTEGER); JSON documents are TEXT.
import type Database from 'better-sqlite3';
import { BLOCK_MAX, blockStatements, insertBlocks } from './blocks.ts';

/** A migration: its SQL, then (if it has one) a step in JavaScript, in the same transaction. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
  run?: (db: Database.Database) => void;
}

/** Rows read at a time while migration 10 moves observations into blocks. */
const MOVE_ROWS = 100_000;

/**
 * Migration 10's step: every row of `observations`, read in key order (device, time), written as
 * that device's blocks of BLOCK_MAX readings; then the table goes. Keyset pages of MOVE_ROWS rows,
 * as better-sqlite3 runs no other statement on a connection while one is being iterated.
 */
function moveObservationsIntoBlocks(db: Database.Database): void {
  const st = blockStatements(db);
  const page = db.prepare('SELECT device_pk, ts, temperature, extra FROM observations WHERE (device_pk, ts) > (?, ?) ORDER BY device_pk, ts LIMIT ?').raw(true);
  // One block's readings at a time (insertBlocks encodes them as it writes, so the arrays are reused).
  let pk = -1;
  const ts = new Float64Array(BLOCK_MAX);
  const t = new Float64Array(BLOCK_MAX);
  const extra: (string | null)[] = [];
  let withExtra = false;
  let n = 0;
  const flush = () => {
    if (n) insertBlocks(st, pk, { n, ts: ts.subarray(0, n), t: t.subarray(0, n), extra: withExtra ? extra : null });
    extra.length = 0;
    withExtra = false;
    n = 0;
  };
  let after: [number, number] = [-1, -Number.MAX_VALUE];
  for (;;) {
    const rows = page.all(after[0], after[1], MOVE_ROWS) as [number, number, number | null, string | null][];
    for (const [p, time, temperature, fields] of rows) {
      if (p !== pk || n === BLOCK_MAX) {
        flush();
        pk = p;
      }
      ts[n] = time;
      t[n] = temperature ?? Number.NaN;
      extra.push(fields);
      if (fields !== null) withExtra = true;
      n++;
    }
    if (rows.length < MOVE_ROWS) break;
    const last = rows[rows.length - 1]!;
    after = [last[0], last[1]];
  }
  flush();
  db.exec('DROP TABLE observations');
}

export const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'initial',
    sql: `
CREATE TABLE accounts (
  tenant_id   TEXT PRIMARY KEY,
  name        TEXT NOT NULL,
  group_id    TEXT NOT NULL,
  client_id   TEXT NOT NULL UNIQUE,
  secret_hash TEXT NOT NULL,
  disabled    INTEGER NOT NULL DEFAULT 0,
  created_at  INTEGER NOT NULL
);
CREATE TABLE signing_keys (
  kid        TEXT PRIMARY KEY,
  secret     TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE TABLE solutions (
  group_id   TEXT NOT NULL,
  name       TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (group_id, name)
) WITHOUT ROWID;
CREATE TABLE devices (
  pk                INTEGER PRIMARY KEY,
  id                TEXT NOT NULL UNIQUE,
  tenant_id         TEXT NOT NULL,
  group_id          TEXT NOT NULL,
  solution          TEXT NOT NULL,
  device_type       TEXT NOT NULL,
  domain_info       TEXT NOT NULL,
  provisioning_info TEXT,
  mac               TEXT UNIQUE,
  created_at        INTEGER NOT NULL
);
CREATE INDEX devices_by_solution ON devices (group_id, solution, pk);
-- (device, time) is the key: one observation per device per millisecond, which is the dedupe rule.
CREATE TABLE observations (
  device_pk   INTEGER NOT NULL,
  ts          INTEGER NOT NULL,
  temperature REAL,
  extra       TEXT,
  PRIMARY KEY (device_pk, ts)
) WITHOUT ROWID;
-- The latest observation of each device, kept in the insert's transaction so that
-- "latest of all devices" (seed §4.2) never scans history.
CREATE TABLE latest (
  device_pk   INTEGER PRIMARY KEY,
  ts          INTEGER NOT NULL,
  temperature REAL,
  extra       TEXT
);
CREATE TABLE state (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;
`,
  },
  {
    version: 2,
    name: 'retention',
    // Days to keep a solution's observations (Store.setRetention); NULL keeps them forever.
    sql: 'ALTER TABLE solutions ADD COLUMN retention_days INTEGER;',
  },
  {
    version: 3,
    name: 'devices-covering-index',
    // Latest of all devices reads (group, solution) → (pk, id): with id in the index the 10,000-row
    // join never visits the devices table.
    sql: `CREATE INDEX devices_by_solution_id ON devices (group_id, solution, pk, id);
          DROP INDEX devices_by_solution;`,
  },
  {
    version: 4,
    name: 'latest-wire',
    // The latest observation kept also as its rendered wire JSON (written once per upload batch), so
    // "latest of all devices" is assembled by SQLite without touching each row in JavaScript.
    // reef_observation_json is registered on every connection by SqliteStore.
    sql: `ALTER TABLE latest ADD COLUMN wire TEXT;
          UPDATE latest SET wire = reef_observation_json(ts, temperature, extra);`,
  },
  {
    version: 5,
    name: 'solution-version',
    // Bumped with every device created or deleted in the solution (devices never change otherwise),
    // so the device list can be cached and known current with one cheap read — also when another
    // process (reef provision) wrote it.
    sql: 'ALTER TABLE solutions ADD COLUMN version INTEGER NOT NULL DEFAULT 0;',
  },
  {
    version: 6,
    name: 'devkit-wire-names',
    // Dev kits carry the original's wire names: provisioningInfo.ssniMacAddress and
    // ssniNetworkDeviceType instead of the seed's vendor* placeholders, and domainInfo.nic_macID.
    // Their solutions' versions move on so no cached device list outlives the rewrite.
    sql: `UPDATE devices SET
            provisioning_info = json_set(json_remove(provisioning_info, '$.vendorMacAddress', '$.vendorNetworkDeviceType'),
              '$.ssniMacAddress', mac,
              '$.ssniNetworkDeviceType', coalesce(json_extract(provisioning_info, '$.vendorNetworkDeviceType'), json_extract(provisioning_info, '$.ssniNetworkDeviceType'), 'MILLI')),
            domain_info = json_set(domain_info, '$.nic_macID', mac)
          WHERE mac IS NOT NULL AND provisioning_info IS NOT NULL;
          UPDATE solutions SET version = version + 1
          WHERE EXISTS (SELECT 1 FROM devices d WHERE d.group_id = solutions.group_id AND d.solution = solutions.name AND d.mac IS NOT NULL);`,
  },
  {
    version: 7,
    name: 'device-templates',
    // Device templates: per tenant group and solution, listed in creation order.
    sql: `CREATE TABLE device_templates (
            pk         INTEGER PRIMARY KEY,
            id         TEXT NOT NULL UNIQUE,
            group_id   TEXT NOT NULL,
            solution   TEXT NOT NULL,
            name       TEXT NOT NULL,
            sensors    TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
          );
          CREATE INDEX device_templates_by_solution ON device_templates (group_id, solution, pk);`,
  },
  {
    version: 8,
    name: 'alarms',
    // Alarm rules, alarms (the whole record as JSON beside the columns queries use), the evaluation
    // state of (rule, device) pairs between readings, and webhook deliveries (docs/alarms.md).
    // At most one active alarm per (rule, device): the partial unique index makes a second raise,
    // by another evaluator or a retry, a no-op.
    sql: `
CREATE TABLE alarm_rules (
  id         TEXT PRIMARY KEY,
  group_id   TEXT NOT NULL,
  tenant_id  TEXT NOT NULL,
  solution   TEXT NOT NULL,
  device_id  TEXT,
  spec       TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX alarm_rules_by_solution ON alarm_rules (group_id, solution, created_at);
CREATE TABLE alarms (
  id         TEXT PRIMARY KEY,
  group_id   TEXT NOT NULL,
  solution   TEXT NOT NULL,
  device_id  TEXT NOT NULL,
  rule_id    TEXT NOT NULL,
  status     TEXT NOT NULL,
  raised_at  INTEGER NOT NULL,
  doc        TEXT NOT NULL
);
CREATE UNIQUE INDEX alarms_one_active ON alarms (rule_id, device_id) WHERE status IN ('raised', 'acknowledged');
CREATE INDEX alarms_by_solution ON alarms (group_id, solution, raised_at DESC, id DESC);
CREATE INDEX alarms_active ON alarms (status) WHERE status IN ('raised', 'acknowledged');
CREATE TABLE alarm_states (
  rule_id   TEXT NOT NULL,
  device_id TEXT NOT NULL,
  state     TEXT NOT NULL,
  PRIMARY KEY (rule_id, device_id)
) WITHOUT ROWID;
CREATE TABLE alarm_deliveries (
  id         TEXT PRIMARY KEY,
  group_id   TEXT NOT NULL,
  solution   TEXT NOT NULL,
  status     TEXT NOT NULL,
  next_at    INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  doc        TEXT NOT NULL
);
CREATE INDEX alarm_deliveries_due ON alarm_deliveries (next_at) WHERE status = 'pending';
CREATE INDEX alarm_deliveries_by_solution ON alarm_deliveries (group_id, solution, status, created_at DESC, id DESC);
`,
  },
  {
    version: 9,
    name: 'latest-item',
    // The latest observation also as its whole element of "latest of all devices"
    // ({"deviceId":...,"observations":[...]}), written with the row, so the 10,000-device response
    // is one group_concat of stored text (SQLite's per-row concatenation was 4 of its 5 ms).
    sql: `ALTER TABLE latest ADD COLUMN item TEXT;
          UPDATE latest SET item = '{"deviceId":"' || (SELECT id FROM devices WHERE pk = latest.device_pk) || '","observations":[' || wire || ']}';`,
  },
  {
    version: 10,
    name: 'observation-blocks',
    // Observations in per-device blocks (blocks.ts): a batch is one B-tree insert
    // instead of one per reading. The rows move over in this migration's step. A rowid table with
    // a separate (device_pk, first_ts) index, not WITHOUT ROWID: there every interior page of the
    // key's tree would hold copies of whole ~1 KB records (3-4 per page: 6 levels at 100,000
    // blocks), where the index keeps only the three integers.
    sql: `CREATE TABLE obs_blocks (
            device_pk INTEGER NOT NULL,
            first_ts  INTEGER NOT NULL,
            last_ts   INTEGER NOT NULL,
            n         INTEGER NOT NULL,
            ts        BLOB NOT NULL,
            t         BLOB NOT NULL,
            extra     TEXT
          );
          CREATE UNIQUE INDEX obs_blocks_by_device ON obs_blocks (device_pk, first_ts);`,
    run: moveObservationsIntoBlocks,
  },
  {
    version: 11,
    name: 'devices-by-tenant',
    // The device quota counts an account's devices before each one is made (QuotaService
    // .checkDevices): without an index that count read every device of every account, 3.5 ms at
    // 100,000 devices against 27 µs with it.
    sql: 'CREATE INDEX devices_by_tenant ON devices (tenant_id);',
  },
  {
    version: 12,
    name: 'device-counts',
    // Each account's device count, kept by triggers with every device made or deleted, whatever
    // makes or deletes it: the device quota reads one row (and decides with the insert, in its
    // transaction: SqliteStore.createDevice) instead of counting the account's devices, a cost
    // that grew with them (docs/performance.md, "Device quota kept as a count"). The tenant index served only
    // the old count.
    sql: `CREATE TABLE device_counts (
            tenant_id TEXT PRIMARY KEY,
            n         INTEGER NOT NULL
          ) WITHOUT ROWID;
          INSERT INTO device_counts (tenant_id, n) SELECT tenant_id, count(*) FROM devices GROUP BY tenant_id;
          CREATE TRIGGER devices_counted AFTER INSERT ON devices BEGIN
            INSERT INTO device_counts (tenant_id, n) VALUES (NEW.tenant_id, 1)
              ON CONFLICT (tenant_id) DO UPDATE SET n = n + 1;
          END;
          CREATE TRIGGER devices_uncounted AFTER DELETE ON devices BEGIN
            UPDATE device_counts SET n = n - 1 WHERE tenant_id = OLD.tenant_id;
          END;
          DROP INDEX devices_by_tenant;`,
  },
];
