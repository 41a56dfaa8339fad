// The embedded default store: one SQLite file in WAL mode through better-sqlite3. Calls are
// synchronous underneath; the async interface lets the same callers use the PostgreSQL backend.
import { isDeepStrictEqual } from 'node:util';
import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { deviceQuotaError, ReefError } from '../../core/errors.ts';
import { observationJson, observationJsonText, pageJsonOfColumns } from '../../core/observation-json.ts';
import type { PackedObservations } from '../../core/observation-scan.ts';
import type { AlarmEvalState, AlarmRecord, AlarmRuleRecord, AlarmStatus, DeliveryStatus, WebhookDeliveryRecord } from '../../core/alarms.ts';
import type { Account, DeviceRecord, DeviceTemplateRecord, DomainInfo, ObservationRecord } from '../../core/types.ts';
import type {
  AlarmQuery,
  Bucket,
  BucketQuery,
  InsertResult,
  ManyInsertResult,
  MaintenanceReport,
  NewDevice,
  ObservationPage,
  ObservationQuery,
  SigningKey,
  SolutionObservationPage,
  SolutionObservationQuery,
  Store,
  RaiseItem,
} from '../store.ts';
import { solutionPage } from '../store.ts';
import { blockStatements, decodeBlock, insertBlocks, storeBatch, type BlockRow, type BlockStatements, type Columns } from './blocks.mjs';
import { MIGRATIONS } from './migrations.ts';

export interface SqliteOptions {
  /** File path, or ':memory:'. */
  file: string;
  /**
   * FULL fsyncs every commit, so an acknowledged upload survives a power cut; NORMAL survives a
   * process crash only (SQLite docs, "WAL mode and synchronous").
   */
  synchronous?: 'FULL' | 'NORMAL';
  /**
   * Commit observation uploads on a writer thread with its own connection (writer-thread.mjs), so
   * parsing the next uploads overlaps the commit's fsync. Files only; default true.
   */
  writerThread?: boolean;
}

interface Queued {
  deviceId: string;
  /** Records, or the upload scanner's numbers (insertPackedObservations). */
  batch: ObservationRecord[] | PackedObservations;
  resolve: (r: InsertResult) => void;
  reject: (e: unknown) => void;
}

const rowsOf = (b: ObservationRecord[] | PackedObservations) => (Array.isArray(b) ? b.length : b.ts.length);

/** A batch as the writer thread takes it: numbers in typed arrays (moved, not copied), latest rendered. */
function packBatch(deviceId: string, batch: ObservationRecord[] | PackedObservations) {
  if (!Array.isArray(batch)) {
    // Already numbers (the upload scanner's): nothing to copy, and no free fields.
    const { ts, temperature, newest } = batch;
    const t = temperature[newest]!;
    return { deviceId, ts, temperature, extra: null, newest, wire: ts.length ? observationJsonText(ts[newest]!, Number.isNaN(t) ? null : t, null) : '' };
  }
  const n = batch.length;
  const ts = new Float64Array(n);
  const temperature = new Float64Array(n);
  let extra: (string | null)[] | null = null;
  let newest = 0;
  for (let i = 0; i < n; i++) {
    const o = batch[i]!;
    ts[i] = o.ts;
    temperature[i] = o.temperature ?? NaN; // validated finite, so NaN can only mean "none"
    if (o.extra) (extra ??= new Array<string | null>(n).fill(null))[i] = JSON.stringify(o.extra);
    if (o.ts >= batch[newest]!.ts) newest = i;
  }
  return { deviceId, ts, temperature, extra, newest, wire: n ? observationJson(batch[newest]!) : '' };
}

type Row = Record<string, any>;

/** Solutions whose latest-of-all text is remembered at once (latestObservationsJson). */
const LATEST_CACHE = 16;
/**
 * Groups handed to the writer thread at once: the next group waits in the writer's queue while one
 * commits, so the writer starts it without a round trip to this thread (which measured ~0.4 ms
 * per group: the result's message, this thread finishing what it was doing, the next message).
 */
const WRITER_GROUPS = 2;
/** Most observations the writer thread commits in one transaction (see sendToWriter). */
const GROUP_ROWS = 50_000;

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

function deviceFromRow(r: Row): DeviceRecord {
  const d: DeviceRecord = {
    id: r.id,
    deviceType: r.device_type,
    domainInfo: JSON.parse(r.domain_info),
    tenantId: r.tenant_id,
    groupId: r.group_id,
    solution: r.solution,
    mac: r.mac ?? null,
    createdAt: r.created_at,
  };
  if (r.provisioning_info) d.provisioningInfo = JSON.parse(r.provisioning_info);
  return d;
}

function templateFromRow(r: Row): DeviceTemplateRecord {
  return { id: r.id, name: r.name, sensors: JSON.parse(r.sensors), groupId: r.group_id, solution: r.solution, createdAt: r.created_at, updatedAt: r.updated_at };
}

function obsFromRow(r: Row): ObservationRecord {
  return { ts: r.ts, temperature: r.temperature ?? null, extra: r.extra ? JSON.parse(r.extra) : null };
}

/** Driver errors → the catalogue. */
function translate(e: unknown): never {
  const code = (e as { code?: string })?.code ?? '';
  const msg = (e as Error)?.message ?? '';
  if (code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
    if (msg.includes('devices.mac')) throw new ReefError('MAC_ALREADY_PROVISIONED', undefined, { field: 'ssniMacAddress', cause: e });
    throw new ReefError('CONFLICT', 'an entry with the same key exists', { cause: e });
  }
  if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED' || code === 'SQLITE_CANTOPEN' || code === 'SQLITE_IOERR' || code === 'SQLITE_FULL') {
    throw new ReefError('STORE_UNAVAILABLE', 'the database is busy or unavailable; retry shortly', { retryAfter: 1, cause: e });
  }
  if (e instanceof TypeError && /database connection is not open/.test(msg)) {
    throw new ReefError('STORE_UNAVAILABLE', 'the database is closed (the service is shutting down)', { retryAfter: 1, cause: e });
  }
  throw e;
}

/** The catalogue error a driver error stands for. */
function translated(e: unknown): unknown {
  try {
    translate(e);
  } catch (t) {
    return t;
  }
}

/** An account's devices (the device quota): the count the triggers of migration 12 keep. */
export const COUNT_TENANT_DEVICES = 'SELECT n FROM device_counts WHERE tenant_id = ?';

export class SqliteStore implements Store {
  readonly kind = 'sqlite' as const;
  private db: Database.Database;
  private s!: ReturnType<SqliteStore['prepare']>;
  private blocks!: BlockStatements;
  private opts: SqliteOptions;
  private writer: Worker | null = null;
  /**
   * The groups handed to the writer thread, oldest first (at most WRITER_GROUPS): the one it is
   * committing and the one it takes next; further batches wait in `queued`.
   */
  private inFlight: Queued[][] = [];
  private drained: (() => void)[] = [];

  constructor(opts: SqliteOptions) {
    this.opts = opts;
    if (opts.file !== ':memory:') {
      // The database holds the token signing keys and the kit master key: only its owner may read
      // it. The directory is created 0700 and the file 0600 before SQLite opens it;
      // SQLite gives its -wal and -shm files the database file's permissions.
      fs.mkdirSync(path.dirname(opts.file), { recursive: true, mode: 0o700 });
      fs.closeSync(fs.openSync(opts.file, 'a', 0o600));
      const mode = fs.statSync(opts.file).mode & 0o777;
      if (mode & 0o077) fs.chmodSync(opts.file, 0o600);
    }
    this.db = new Database(opts.file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma(`synchronous = ${opts.synchronous ?? 'FULL'}`);
    // A CLI command (reef account create) may write while the server runs: wait, don't fail.
    this.db.pragma('busy_timeout = 5000');
    this.db.pragma('foreign_keys = ON');
    this.db.function('reef_observation_json', { deterministic: true }, (ts, temperature, extra) =>
      observationJson({ ts: Number(ts), temperature: temperature === null ? null : Number(temperature), extra: extra ? JSON.parse(String(extra)) : null }),
    );
  }

  private prepare() {
    const p = (sql: string) => this.db.prepare(sql);
    return {
      insertAccount: p('INSERT INTO accounts (tenant_id, name, group_id, client_id, secret_hash, disabled, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)'),
      accountByClient: p('SELECT * FROM accounts WHERE client_id = ?'),
      accountByTenant: p('SELECT * FROM accounts WHERE tenant_id = ?'),
      listAccounts: p('SELECT * FROM accounts ORDER BY created_at, tenant_id'),
      setSecret: p('UPDATE accounts SET secret_hash = ? WHERE tenant_id = ?'),
      setDisabled: p('UPDATE accounts SET disabled = ? WHERE tenant_id = ?'),
      countAccounts: p('SELECT count(*) AS n FROM accounts'),
      listKeys: p('SELECT * FROM signing_keys ORDER BY created_at, kid'),
      deleteKey: p('DELETE FROM signing_keys WHERE kid = ?'),
      addKey: p('INSERT INTO signing_keys (kid, secret, created_at) VALUES (?, ?, ?) ON CONFLICT (kid) DO NOTHING'),
      solutionExists: p('SELECT 1 FROM solutions WHERE group_id = ? AND name = ?'),
      ensureSolution: p('INSERT INTO solutions (group_id, name, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING'),
      bumpSolution: p('UPDATE solutions SET version = version + 1 WHERE group_id = ? AND name = ?'),
      solutionVersion: p('SELECT version FROM solutions WHERE group_id = ? AND name = ?').pluck(),
      insertDevice: p(`INSERT INTO devices (id, tenant_id, group_id, solution, device_type, domain_info, provisioning_info, mac, created_at)
                       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
      listDevices: p('SELECT * FROM devices WHERE group_id = ? AND solution = ? ORDER BY pk'),
      listDevicesByType: p('SELECT * FROM devices WHERE group_id = ? AND solution = ? AND device_type = ? ORDER BY pk'),
      getDevice: p('SELECT * FROM devices WHERE group_id = ? AND solution = ? AND id = ?'),
      deviceByMac: p('SELECT * FROM devices WHERE mac = ?'),
      devicePk: p('SELECT pk FROM devices WHERE id = ?').pluck(),
      countTenantDevices: p(COUNT_TENANT_DEVICES).pluck(),
      deleteObs: p('DELETE FROM obs_blocks WHERE device_pk = ?'),
      deleteLatest: p('DELETE FROM latest WHERE device_pk = ?'),
      deleteDevice: p('DELETE FROM devices WHERE pk = ?'),
      updateDevice: p('UPDATE devices SET device_type = ?, domain_info = ? WHERE pk = ?'),
      // The whole response body in one row, built in SQLite's C code from the rendered rows, and
      // handed over as its UTF-8 bytes (a Buffer; no JavaScript string of it is made).
      // The subquery's order comes from the covering index (no sort step; an ORDER BY inside
      // group_concat would sort the strings); the conformance suite checks it matches pk order.
      latestJson: p(`SELECT CAST('[' || coalesce(group_concat(g, ','), '') || ']' AS BLOB) FROM (
                       SELECT coalesce(l.item, '{"deviceId":"' || d.id || '","observations":[' || l.wire || ']}') AS g
                       FROM devices d JOIN latest l ON l.device_pk = d.pk WHERE d.group_id = ? AND d.solution = ? ORDER BY d.pk)`).pluck(),
      // Rows as arrays: for 10,000 devices, not building a keyed object per row is a measurable share.
      latestOfSolution: p(`SELECT d.id, l.ts, l.temperature, l.extra FROM devices d JOIN latest l ON l.device_pk = d.pk
                           WHERE d.group_id = ? AND d.solution = ? ORDER BY d.pk`).raw(true),
      // A device's blocks that start before `to`, newest first (a page walks them until it has its
      // rows or reaches blocks that end before its range).
      blocksDesc: p('SELECT first_ts, last_ts, n, ts, t, extra FROM obs_blocks WHERE device_pk = ? AND first_ts < ? ORDER BY first_ts DESC').raw(true),
      // A device's blocks that start in [from, to), oldest first (buckets walk forwards).
      blocksAsc: p('SELECT first_ts, last_ts, n, ts, t, extra FROM obs_blocks WHERE device_pk = ? AND first_ts >= ? AND first_ts < ? ORDER BY first_ts').raw(true),
      // Solution-wide pages: the solution's devices in pk order from the covering index.
      solDevices: p('SELECT pk, id FROM devices WHERE group_id = ? AND solution = ? AND pk > ? ORDER BY pk LIMIT 256').raw(true),
      countObs: p('SELECT coalesce(sum(n), 0) FROM obs_blocks WHERE device_pk = ?').pluck(),
      listTemplates: p('SELECT * FROM device_templates WHERE group_id = ? AND solution = ? ORDER BY pk'),
      getTemplate: p('SELECT * FROM device_templates WHERE group_id = ? AND solution = ? AND id = ?'),
      countTemplates: p('SELECT count(*) FROM device_templates WHERE group_id = ? AND solution = ?').pluck(),
      insertTemplate: p('INSERT INTO device_templates (id, group_id, solution, name, sensors, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)'),
      updateTemplate: p('UPDATE device_templates SET name = ?, sensors = ?, updated_at = ? WHERE group_id = ? AND solution = ? AND id = ?'),
      deleteTemplate: p('DELETE FROM device_templates WHERE group_id = ? AND solution = ? AND id = ?'),
      setRetention: p('UPDATE solutions SET retention_days = ? WHERE group_id = ? AND name = ?'),
      getRetention: p('SELECT retention_days AS days FROM solutions WHERE group_id = ? AND name = ?'),
      retentions: p('SELECT group_id, name, retention_days AS days FROM solutions WHERE retention_days IS NOT NULL'),
      // Retention: blocks wholly before the cutoff go; the one a cutoff falls inside is cut.
      // Answers each deleted block's reading count, so the rows gone are counted in the same pass.
      expireObs: p('DELETE FROM obs_blocks WHERE last_ts < ? AND device_pk IN (SELECT pk FROM devices WHERE group_id = ? AND solution = ?) RETURNING n').pluck(),
      straddling: p(`SELECT device_pk, first_ts, last_ts, n, ts, t, extra FROM obs_blocks
                     WHERE first_ts < @cutoff AND last_ts >= @cutoff AND device_pk IN (SELECT pk FROM devices WHERE group_id = @g AND solution = @s)`).raw(true),
      expireLatest: p('DELETE FROM latest WHERE ts < ? AND device_pk IN (SELECT pk FROM devices WHERE group_id = ? AND solution = ?)'),
      getState: p('SELECT value FROM state WHERE key = ?').pluck(),
      setState: p('INSERT INTO state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value'),
      deleteState: p('DELETE FROM state WHERE key = ?'),
      dataVersion: p('PRAGMA data_version').pluck(),
      totalChanges: p('SELECT total_changes()').pluck(),
      listState: p('SELECT key, value FROM state WHERE substr(key, 1, length(@p)) = @p ORDER BY key'),
    };
  }

  async migrate(): Promise<void> {
    try {
      this.db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
      // BEGIN IMMEDIATE takes the write lock first, so two processes starting at once apply each
      // migration exactly once (the second waits on busy_timeout, then sees it applied).
      const apply = this.db.transaction(() => {
        const done = new Set(this.db.prepare('SELECT version FROM schema_migrations').pluck().all() as number[]);
        for (const m of MIGRATIONS) {
          if (done.has(m.version)) continue;
          this.db.exec(m.sql);
          m.run?.(this.db);
          this.db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, Date.now());
        }
      });
      apply.immediate();
    } catch (e) {
      translate(e);
    }
    this.s = this.prepare();
    this.blocks = blockStatements(this.db);
  }

  async close(): Promise<void> {
    if (this.db.open) this.flushQueued();
    if (this.inFlight.length || this.queued.length) await new Promise<void>((r) => this.drained.push(r));
    const w = this.writer;
    if (w) {
      this.writer = null;
      await new Promise<void>((resolve) => {
        w.once('exit', () => resolve());
        w.once('message', () => void w.terminate());
        w.ref(); // an unreferenced worker would let the event loop end while close() waits
        w.postMessage({ close: true });
      });
    }
    if (this.db.open) this.db.close();
  }

  async ping(): Promise<void> {
    try {
      this.db.prepare('SELECT 1').get();
    } catch (e) {
      translate(e);
    }
  }

  // Write transactions here BEGIN IMMEDIATE: the writer thread's connection writes too, and a
  // transaction that read first could not wait for the write lock (SQLITE_BUSY_SNAPSHOT in WAL
  // mode); taking the lock at BEGIN waits on busy_timeout instead.
  private run<T>(f: () => T): Promise<T> {
    if (this.queued.length && !this.writer) this.flushQueued();
    try {
      return Promise.resolve(f());
    } catch (e) {
      try {
        translate(e);
      } catch (t) {
        return Promise.reject(t);
      }
    }
  }

  createAccount(a: Account) {
    return this.run(() => {
      this.s.insertAccount.run(a.tenantId, a.name, a.groupId, a.clientId, a.secretHash, a.disabled ? 1 : 0, a.createdAt);
      return a;
    });
  }
  getAccountByClientId(clientId: string) {
    return this.run(() => {
      const r = this.s.accountByClient.get(clientId) as Row | undefined;
      return r ? accountFromRow(r) : null;
    });
  }
  getAccountByTenantId(tenantId: string) {
    return this.run(() => {
      const r = this.s.accountByTenant.get(tenantId) as Row | undefined;
      return r ? accountFromRow(r) : null;
    });
  }
  listAccounts() {
    return this.run(() => (this.s.listAccounts.all() as Row[]).map(accountFromRow));
  }
  setAccountSecret(tenantId: string, secretHash: string) {
    return this.run(() => {
      if (this.s.setSecret.run(secretHash, tenantId).changes === 0) throw new ReefError('ACCOUNT_NOT_FOUND');
    });
  }
  setAccountDisabled(tenantId: string, disabled: boolean) {
    return this.run(() => {
      if (this.s.setDisabled.run(disabled ? 1 : 0, tenantId).changes === 0) throw new ReefError('ACCOUNT_NOT_FOUND');
    });
  }
  countAccounts() {
    return this.run(() => (this.s.countAccounts.get() as Row).n as number);
  }

  listSigningKeys() {
    return this.run(() => (this.s.listKeys.all() as Row[]).map((r): SigningKey => ({ kid: r.kid, secret: r.secret, createdAt: r.created_at })));
  }
  addSigningKey(k: SigningKey) {
    return this.run(() => {
      this.s.addKey.run(k.kid, k.secret, k.createdAt);
    });
  }

  deleteSigningKey(kid: string) {
    return this.run(() => {
      this.s.deleteKey.run(kid);
    });
  }

  solutionExists(groupId: string, solution: string) {
    return this.run(() => this.s.solutionExists.get(groupId, solution) !== undefined);
  }
  solutionVersion(groupId: string, solution: string) {
    return this.run(() => (this.s.solutionVersion.get(groupId, solution) as number | undefined) ?? null);
  }
  ensureSolution(groupId: string, solution: string) {
    return this.run(() => {
      this.s.ensureSolution.run(groupId, solution, Date.now());
    });
  }

  createDevice(d: NewDevice, maxForTenant?: number) {
    return this.run(() => {
      const now = Date.now();
      // BEGIN IMMEDIATE: the account's count and the insert see the same devices (no two creators past the quota).
      const tx = this.db.transaction(() => {
        if (maxForTenant !== undefined) {
          const have = this.tenantDevices(d.tenantId);
          if (have + 1 > maxForTenant) throw deviceQuotaError(maxForTenant, have, 1);
        }
        this.s.ensureSolution.run(d.groupId, d.solution, now);
        this.s.bumpSolution.run(d.groupId, d.solution);
        this.s.insertDevice.run(
          d.id,
          d.tenantId,
          d.groupId,
          d.solution,
          d.deviceType,
          JSON.stringify(d.domainInfo),
          d.provisioningInfo ? JSON.stringify(d.provisioningInfo) : null,
          d.mac ?? null,
          now,
        );
      });
      tx.immediate();
      const rec: DeviceRecord = {
        id: d.id,
        deviceType: d.deviceType,
        domainInfo: d.domainInfo,
        tenantId: d.tenantId,
        groupId: d.groupId,
        solution: d.solution,
        mac: d.mac ?? null,
        createdAt: now,
      };
      if (d.provisioningInfo) rec.provisioningInfo = d.provisioningInfo;
      return rec;
    });
  }
  listTemplates(groupId: string, solution: string) {
    return this.run(() => (this.s.listTemplates.all(groupId, solution) as Row[]).map(templateFromRow));
  }
  getTemplate(groupId: string, solution: string, id: string) {
    return this.run(() => {
      const r = this.s.getTemplate.get(groupId, solution, id) as Row | undefined;
      return r ? templateFromRow(r) : null;
    });
  }
  createTemplate(t: { id: string; groupId: string; solution: string; name: string; sensors: unknown[] }, maxPerSolution: number) {
    return this.run(() => {
      const now = Date.now();
      // BEGIN IMMEDIATE: the count and the insert see the same solution (no two writers past the cap).
      this.db
        .transaction(() => {
          if ((this.s.countTemplates.get(t.groupId, t.solution) as number) >= maxPerSolution) {
            throw new ReefError('TOO_MANY_TEMPLATES', `a solution holds at most ${maxPerSolution} device templates`);
          }
          this.s.ensureSolution.run(t.groupId, t.solution, now);
          this.s.insertTemplate.run(t.id, t.groupId, t.solution, t.name, JSON.stringify(t.sensors), now, now);
        })
        .immediate();
      return { ...t, createdAt: now, updatedAt: now };
    });
  }
  updateTemplate(groupId: string, solution: string, id: string, t: { name: string; sensors: unknown[] }) {
    return this.run(() => {
      if (this.s.updateTemplate.run(t.name, JSON.stringify(t.sensors), Date.now(), groupId, solution, id).changes === 0) return null;
      return templateFromRow(this.s.getTemplate.get(groupId, solution, id) as Row);
    });
  }
  deleteTemplate(groupId: string, solution: string, id: string) {
    return this.run(() => {
      const r = this.s.getTemplate.get(groupId, solution, id) as Row | undefined;
      if (!r || this.s.deleteTemplate.run(groupId, solution, id).changes === 0) return null;
      return templateFromRow(r);
    });
  }
  listDevices(groupId: string, solution: string, deviceType?: string) {
    return this.run(() => {
      const rows = (deviceType === undefined ? this.s.listDevices.all(groupId, solution) : this.s.listDevicesByType.all(groupId, solution, deviceType)) as Row[];
      return rows.map(deviceFromRow);
    });
  }
  countDevices(tenantId: string) {
    return this.run(() => this.tenantDevices(tenantId));
  }
  /** The account's kept device count (no row before its first device). */
  private tenantDevices(tenantId: string): number {
    return (this.s.countTenantDevices.get(tenantId) as number | undefined) ?? 0;
  }
  /**
   * Device by device, each count one range of the (device_pk, ts) key, yielding to the event loop
   * every ~10 ms: better-sqlite3 runs on the main thread, and one statement over every row kept a
   * 100,000,000-row server from answering (or, at start, from listening) for 41–95 s at each upkeep
   * (bench:scale's start-up figures). Rows a device gains or loses
   * meanwhile may be counted or not: the quota is approximate between counts anyway.
   */
  async countObservationsByTenant() {
    const devices = (await this.run(() => this.db.prepare('SELECT pk, tenant_id AS t FROM devices').all())) as { pk: number; t: string }[];
    const count = this.s.countObs;
    const out = new Map<string, number>();
    let sliceStart = performance.now();
    for (const d of devices) {
      const n = (await this.run(() => count.get(d.pk))) as number;
      if (n) out.set(d.t, (out.get(d.t) ?? 0) + n);
      if (performance.now() - sliceStart > 10) {
        await new Promise<void>((resolve) => setImmediate(resolve));
        sliceStart = performance.now();
      }
    }
    return out;
  }
  getDevice(groupId: string, solution: string, id: string) {
    return this.run(() => {
      const r = this.s.getDevice.get(groupId, solution, id) as Row | undefined;
      return r ? deviceFromRow(r) : null;
    });
  }
  getDeviceByMac(mac: string) {
    return this.run(() => {
      const r = this.s.deviceByMac.get(mac) as Row | undefined;
      return r ? deviceFromRow(r) : null;
    });
  }
  deleteDevice(groupId: string, solution: string, id: string) {
    return this.run(() => {
      const r = this.s.getDevice.get(groupId, solution, id) as Row | undefined;
      if (!r) return false;
      this.db
        .transaction(() => {
          this.s.deleteObs.run(r.pk);
          this.s.deleteLatest.run(r.pk);
          this.s.deleteDevice.run(r.pk);
          this.s.bumpSolution.run(groupId, solution);
        })
        .immediate();
      return true;
    });
  }

  updateDevice(groupId: string, solution: string, id: string, expected: DomainInfo, next: { deviceType: string; domainInfo: DomainInfo }) {
    return this.run(() =>
      this.db
        .transaction((): DeviceRecord | 'missing' | 'changed' => {
          const r = this.s.getDevice.get(groupId, solution, id) as Row | undefined;
          if (!r) return 'missing';
          const now = deviceFromRow(r);
          if (!isDeepStrictEqual(now.domainInfo, expected)) return 'changed';
          const text = JSON.stringify(next.domainInfo);
          this.s.updateDevice.run(next.deviceType, text, r.pk);
          this.s.bumpSolution.run(groupId, solution);
          return deviceFromRow({ ...r, device_type: next.deviceType, domain_info: text });
        })
        .immediate(),
    );
  }

  /**
   * Group commit: batches handed in during one turn of the event loop, or while the previous group
   * was being committed, are written in one transaction: concurrent uploads share one commit and
   * one fsync instead of one each. With a database file the commit runs on the writer thread
   * (writer-thread.mjs) while this thread goes on parsing. Each caller's promise settles only after
   * the commit holding its batch (synchronous=FULL: on disk), so a 201 still means stored; each
   * batch stays all or nothing, and one failing batch never fails the others (the group is retried
   * one by one). Without the thread, every other store call first writes what is queued (run()).
   */
  insertObservations(deviceId: string, batch: ObservationRecord[]): Promise<InsertResult> {
    return this.enqueue(deviceId, batch);
  }

  /** The upload scanner's numbers go to the writer thread as they are (no records in between). */
  insertPackedObservations(deviceId: string, batch: PackedObservations): Promise<InsertResult> {
    return this.enqueue(deviceId, batch);
  }

  private enqueue(deviceId: string, batch: ObservationRecord[] | PackedObservations): Promise<InsertResult> {
    return new Promise((resolve, reject) => {
      this.queued.push({ deviceId, batch, resolve, reject });
      if (this.queued.length === 1 && this.inFlight.length < WRITER_GROUPS) setImmediate(this.flushQueued);
    });
  }

  private queued: Queued[] = [];

  private readonly flushQueued = (): void => {
    if (!this.queued.length || this.inFlight.length >= WRITER_GROUPS || !this.db.open) {
      if (!this.queued.length && !this.inFlight.length) this.drained.splice(0).forEach((r) => r());
      if (this.queued.length && !this.db.open) this.queued.splice(0).forEach((it) => it.reject(translated(new TypeError('The database connection is not open'))));
      return;
    }
    if (this.opts.writerThread !== false && this.opts.file !== ':memory:') {
      while (this.queued.length && this.inFlight.length < WRITER_GROUPS) this.sendToWriter();
      return;
    }
    const items = this.queued;
    this.queued = [];
    const outcome = (it: Queued): InsertResult | ReefError => {
      const pk = this.s.devicePk.get(it.deviceId) as number | undefined;
      if (pk === undefined) return new ReefError('DEVICE_NOT_FOUND');
      const n = rowsOf(it.batch);
      if (n) this.writeBatch(pk, it.batch);
      return { written: n };
    };
    const settle = (it: Queued, r: InsertResult | ReefError) => (r instanceof ReefError ? it.reject(r) : it.resolve(r));
    let results: (InsertResult | ReefError)[] | null = null;
    try {
      results = this.db.transaction(() => items.map(outcome)).immediate();
    } catch (e) {
      if (items.length === 1) items[0]!.reject(translated(e));
    }
    if (results) items.forEach((it, i) => settle(it, results![i]!));
    else if (items.length > 1) {
      for (const it of items) {
        try {
          settle(it, this.db.transaction(() => outcome(it)).immediate());
        } catch (e) {
          it.reject(translated(e));
        }
      }
    }
    this.drained.splice(0).forEach((r) => r());
  };

  private sendToWriter(): void {
    const w = (this.writer ??= this.startWriter());
    // A group holds at most GROUP_ROWS observations (always at least one batch), so one commit
    // stays short and the uploads behind it are not held up by an ever larger transaction.
    let n = 0;
    let rows = 0;
    while (n < this.queued.length && (n === 0 || rows + rowsOf(this.queued[n]!.batch) <= GROUP_ROWS)) rows += rowsOf(this.queued[n++]!.batch);
    const items = this.queued.splice(0, n);
    this.inFlight.push(items);
    const batches = items.map((it) => packBatch(it.deviceId, it.batch));
    w.ref();
    w.postMessage(
      { batches },
      batches.flatMap((b) => [b.ts.buffer, b.temperature.buffer]),
    );
  }

  private startWriter(): Worker {
    const w = new Worker(new URL('./writer-thread.mjs', import.meta.url), { workerData: { file: this.opts.file, synchronous: this.opts.synchronous ?? 'FULL' } });
    w.on('message', (m: { results?: (number | { code: string; message: string })[] }) => {
      if (!m.results) return;
      const items = this.inFlight.shift()!;
      m.results.forEach((r, i) => {
        const it = items[i]!;
        if (typeof r !== 'number') it.reject(translated(Object.assign(new Error(r.message), { code: r.code })));
        else if (r < 0) it.reject(new ReefError('DEVICE_NOT_FOUND'));
        else it.resolve({ written: r });
      });
      if (this.queued.length) this.sendToWriter();
      else if (!this.inFlight.length) {
        w.unref();
        this.drained.splice(0).forEach((r) => r());
      }
    });
    // A writer that dies takes no batch with it silently: what it held is refused with 503 (it may
    // or may not have been committed; re-sending is safe, as the same timestamps replace), and later
    // batches are written on this thread.
    const failed = (e: unknown) => {
      if (this.writer !== w) return; // closed on purpose, or already handled
      this.writer = null;
      this.opts = { ...this.opts, writerThread: false };
      this.inFlight
        .splice(0)
        .flat()
        .forEach((it) => it.reject(new ReefError('STORE_UNAVAILABLE', 'the database writer failed; retry shortly', { retryAfter: 1, cause: e })));
      if (this.queued.length) setImmediate(this.flushQueued);
      else this.drained.splice(0).forEach((r) => r());
    };
    w.on('error', failed);
    w.on('exit', (code) => failed(new Error(`the writer thread exited (code ${code})`)));
    w.unref();
    return w;
  }

  insertObservationsMany(items: { deviceId: string; batch: ObservationRecord[] }[]): Promise<ManyInsertResult> {
    return this.run(() => {
      const missing: string[] = [];
      let written = 0;
      // One transaction, so one commit (one fsync) for every device of a simulation tick.
      this.db
        .transaction(() => {
          for (const { deviceId, batch } of items) {
            const pk = this.s.devicePk.get(deviceId) as number | undefined;
            if (pk === undefined) {
              missing.push(deviceId);
              continue;
            }
            if (!batch.length) continue;
            this.writeBatch(pk, batch);
            written += batch.length;
          }
        })
        .immediate();
      return { written, missing };
    });
  }

  /** Stores one device's batch in its blocks and moves its latest row forward; the caller holds a transaction. */
  private writeBatch(pk: number, batch: ObservationRecord[] | PackedObservations): void {
    storeBatch(this.blocks, pk, packBatch('', batch));
  }

  latestObservations(groupId: string, solution: string) {
    return this.run(() =>
      (this.s.latestOfSolution.all(groupId, solution) as [string, number, number | null, string | null][]).map(([deviceId, ts, temperature, extra]) => ({
        deviceId,
        observation: { ts, temperature: temperature ?? null, extra: extra ? JSON.parse(extra) : null },
      })),
    );
  }

  /**
   * Latest of all, remembered per solution until the database changes: a dashboard polling it
   * between uploads gets the same text without SQLite assembling 10,000 rows again. The database's
   * version is PRAGMA data_version (moves when any other connection commits: the writer thread,
   * another process such as `reef provision` or a second `reef serve`) with this connection's own
   * total_changes() (its own writes, which data_version does not count). Each upload's commit
   * moves it, so under constant uploads every read builds the text afresh. Kept as bytes: see
   * Store.latestObservationsJson.
   */
  latestObservationsJson(groupId: string, solution: string) {
    return this.run(() => {
      const version = `${this.s.dataVersion.get() as number}:${this.s.totalChanges.get() as number}`;
      const key = `${groupId}\u0000${solution}`;
      const hit = this.latestCache.get(key);
      if (hit && hit.version === version) return hit.json;
      const json = this.s.latestJson.get(groupId, solution) as Buffer;
      if (this.latestCache.size >= LATEST_CACHE) this.latestCache.clear();
      this.latestCache.set(key, { version, json });
      return json;
    });
  }
  private latestCache = new Map<string, { version: string; json: Buffer }>();

  private pkOf(deviceId: string): number {
    const pk = this.s.devicePk.get(deviceId) as number | undefined;
    if (pk === undefined) throw new ReefError('DEVICE_NOT_FOUND');
    return pk;
  }

  /**
   * Up to `limit` of device `pk`'s readings with from <= ts < to, newest first, that have the tag
   * if one is given: the device's blocks walked backwards from the last one starting before `to`
   * until enough are found or the blocks end before `from`.
   */
  private newestFirst(pk: number, from: number, to: number, limit: number, tag?: string, maxScan = Number.POSITIVE_INFINITY): Columns & { scannedTo: number | null } {
    // Room for what is found, grown as needed: a solution-wide page asks every device for up to a
    // page, and most answer with few readings or none.
    let ts = new Float64Array(Math.min(limit, 1024));
    let t = new Float64Array(ts.length);
    let extra: (string | null)[] | null = null;
    let m = 0;
    // A filtered walk examines at most maxScan readings (ObservationQuery.maxScan).
    let scanned = 0;
    let scannedTo: number | null = null;
    let lastExamined = 0;
    const quotedTag = tag === undefined ? '' : JSON.stringify(tag);
    if (limit > 0 && from < to) {
      for (const row of this.s.blocksDesc.iterate(pk, to) as IterableIterator<BlockRow>) {
        if (row[1] < from) break;
        const b = decodeBlock(row);
        let i = below(b.ts, to) - 1;
        for (; i >= 0 && m < limit; i--) {
          const time = b.ts[i]!;
          if (time < from) break;
          const fields = b.extra === null ? null : b.extra[i]!;
          if (tag !== undefined) {
            if (scanned === maxScan) {
              scannedTo = lastExamined;
              break;
            }
            scanned++;
            lastExamined = time;
            if (!hasTag(fields, tag, quotedTag)) continue;
          }
          if (m === ts.length) {
            const size = Math.min(limit, ts.length * 2);
            const ts2 = new Float64Array(size);
            ts2.set(ts);
            ts = ts2;
            const t2 = new Float64Array(size);
            t2.set(t);
            t = t2;
          }
          ts[m] = time;
          t[m] = b.t[i]!;
          if (fields !== null) {
            extra ??= [];
            while (extra.length < m) extra.push(null);
            extra[m] = fields;
          }
          m++;
        }
        if (m === limit || i >= 0 || scannedTo !== null) break;
      }
    }
    if (extra !== null) while (extra.length < m) extra.push(null);
    return { n: m, ts, t, extra, scannedTo };
  }

  /** A page: one more reading than asked tells whether another page exists. */
  private page(deviceId: string, q: ObservationQuery): { c: Columns; nextBefore: number | null } {
    const pk = this.pkOf(deviceId);
    const from = q.from ?? 0;
    const to = Math.min(q.to ?? Number.MAX_SAFE_INTEGER, q.before ?? Number.MAX_SAFE_INTEGER);
    const c = this.newestFirst(pk, from, to, q.limit + 1, q.tag, q.maxScan);
    const more = c.n > q.limit;
    if (more) c.n = q.limit;
    return { c, nextBefore: more ? c.ts[q.limit - 1]! : c.scannedTo };
  }

  queryObservations(deviceId: string, q: ObservationQuery): Promise<ObservationPage> {
    return this.run(() => {
      const { c, nextBefore } = this.page(deviceId, q);
      return { observations: recordsOfColumns(c), nextBefore };
    });
  }

  /** The page rendered from the blocks' numbers; the stored free-field text is spliced in, not parsed. */
  observationPageJson(deviceId: string, q: ObservationQuery) {
    return this.run(() => {
      const { c, nextBefore } = this.page(deviceId, q);
      return { json: pageJsonOfColumns(c.ts, c.t, c.extra, c.n), nextBefore };
    });
  }

  querySolutionObservations(groupId: string, solution: string, q: SolutionObservationQuery): Promise<SolutionObservationPage> {
    return this.run(() => {
      const from = q.from ?? 0;
      const to = q.to ?? Number.MAX_SAFE_INTEGER;
      // One more than asked tells whether another page exists.
      const want = q.limit + 1;
      const rows: { pk: number; id: string; ts: number; temperature: number | null; extra: string | null }[] = [];
      const take = (pk: number, id: string, upTo: number) => {
        const c = this.newestFirst(pk, from, upTo, want - rows.length, q.tag);
        for (let i = 0; i < c.n; i++) {
          const t = c.t[i]!;
          rows.push({ pk, id, ts: c.ts[i]!, temperature: Number.isNaN(t) ? null : t, extra: c.extra === null ? null : c.extra[i]! });
        }
      };
      // The cursor's own device first, its upper bound moved to the cursor; then the devices after it.
      // Devices are read 256 at a time: better-sqlite3 runs no other statement while one iterates.
      let after = q.after ? q.after.device - 1 : -1;
      while (rows.length < want) {
        const devices = this.s.solDevices.all(groupId, solution, after) as [number, string][];
        for (const [pk, id] of devices) {
          if (rows.length >= want) break;
          take(pk, id, q.after && pk === q.after.device ? Math.min(to, q.after.ts) : to);
        }
        if (devices.length < 256) break;
        after = devices[devices.length - 1]![0];
      }
      return solutionPage(rows, q.limit, obsFromRow);
    });
  }

  /**
   * Count, min, mean and max per interval, oldest first, empty intervals left out; min/mean/max over
   * the readings that have a temperature (null when none has), the mean summed as SQLite's avg()
   * does (Kahan-Babuska-Neumaier).
   */
  bucketObservations(deviceId: string, q: BucketQuery): Promise<Bucket[]> {
    return this.run(() => {
      const pk = this.pkOf(deviceId);
      const out: Bucket[] = [];
      if (!(q.from < q.to)) return out;
      let cur: { ts: number; count: number; n: number; sum: number; err: number; min: number; max: number } | null = null;
      const close = () => {
        if (cur) out.push({ ts: cur.ts, count: cur.count, min: cur.n ? cur.min : null, avg: cur.n ? (cur.sum + cur.err) / cur.n : null, max: cur.n ? cur.max : null });
      };
      const add = (row: BlockRow) => {
        const b = decodeBlock(row);
        for (let i = 0; i < b.n; i++) {
          const time = b.ts[i]!;
          if (time < q.from) continue;
          if (time >= q.to) break;
          const start = Math.trunc((time - q.from) / q.bucketMs) * q.bucketMs + q.from;
          if (!cur || cur.ts !== start) {
            close();
            cur = { ts: start, count: 0, n: 0, sum: 0, err: 0, min: Infinity, max: -Infinity };
          }
          cur.count++;
          const v = b.t[i]!;
          if (!Number.isNaN(v)) {
            cur.n++;
            // Neumaier's compensated sum.
            const s = cur.sum + v;
            cur.err += Math.abs(cur.sum) >= Math.abs(v) ? cur.sum - s + v : v - s + cur.sum;
            cur.sum = s;
            if (v < cur.min) cur.min = v;
            if (v > cur.max) cur.max = v;
          }
        }
      };
      // The block the range starts inside, then those starting in the range, read one at a time.
      const first = this.blocks.before.get(pk, q.from) as BlockRow | undefined;
      if (first !== undefined && first[1] >= q.from) add(first);
      for (const row of this.s.blocksAsc.iterate(pk, q.from, q.to) as IterableIterator<BlockRow>) add(row);
      close();
      return out;
    });
  }

  setRetention(groupId: string, solution: string, days: number | null) {
    return this.run(() => {
      if (days !== null && (!Number.isInteger(days) || days < 1 || days > 36500)) {
        throw new ReefError('VALIDATION_FAILED', 'retention must be a whole number of days from 1 to 36500, or null', { field: 'retention' });
      }
      if (this.s.setRetention.run(days, groupId, solution).changes === 0) throw new ReefError('SOLUTION_NOT_FOUND');
    });
  }
  getRetention(groupId: string, solution: string) {
    return this.run(() => {
      const r = this.s.getRetention.get(groupId, solution) as Row | undefined;
      if (!r) throw new ReefError('SOLUTION_NOT_FOUND');
      return (r.days ?? null) as number | null;
    });
  }
  /** SQLite has no partitions: expired observations are deleted by time range, per solution. */
  maintain(now = Date.now()): Promise<MaintenanceReport> {
    return this.run(() => {
      let rowsDeleted = 0;
      for (const r of this.s.retentions.all() as Row[]) {
        const cutoff = now - (r.days as number) * 86_400_000;
        this.db
          .transaction(() => {
            for (const n of this.s.expireObs.all(cutoff, r.group_id, r.name) as number[]) rowsDeleted += n;
            for (const row of this.s.straddling.all({ cutoff, g: r.group_id, s: r.name }) as [number, ...BlockRow][]) {
              const [pk, ...block] = row;
              const b = decodeBlock(block as BlockRow);
              let k = 0;
              while (b.ts[k]! < cutoff) k++;
              rowsDeleted += k;
              this.blocks.remove.run(pk, block[0]);
              insertBlocks(this.blocks, pk, { n: b.n - k, ts: b.ts.subarray(k), t: b.t.subarray(k), extra: b.extra === null ? null : b.extra.slice(k) });
            }
            this.s.expireLatest.run(cutoff, r.group_id, r.name);
          })
          .immediate();
      }
      return { partitionsCreated: 0, partitionsDropped: 0, rowsDeleted };
    });
  }

  getState(key: string) {
    return this.run(() => (this.s.getState.get(key) as string | undefined) ?? null);
  }
  setState(key: string, value: string) {
    return this.run(() => {
      this.s.setState.run(key, value);
    });
  }
  deleteState(key: string) {
    return this.run(() => {
      this.s.deleteState.run(key);
    });
  }
  listState(prefix: string) {
    return this.run(() => this.s.listState.all({ p: prefix }) as { key: string; value: string }[]);
  }

  // ---- alarms (docs/alarms.md) ----------------------------------------------------------------

  createAlarmRule(r: AlarmRuleRecord) {
    return this.run(() => {
      this.db
        .prepare('INSERT INTO alarm_rules (id, group_id, tenant_id, solution, device_id, spec, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
        .run(r.id, r.groupId, r.tenantId, r.solution, r.deviceId, JSON.stringify(r.spec), r.createdAt, r.updatedAt);
    });
  }
  updateAlarmRule(r: AlarmRuleRecord) {
    return this.run(
      () =>
        this.db
          .prepare('UPDATE alarm_rules SET device_id = ?, spec = ?, updated_at = ? WHERE id = ? AND group_id = ? AND solution = ?')
          .run(r.deviceId, JSON.stringify(r.spec), r.updatedAt, r.id, r.groupId, r.solution).changes > 0,
    );
  }
  deleteAlarmRule(groupId: string, solution: string, id: string) {
    return this.run(() =>
      this.db.transaction(() => {
        const n = this.db.prepare('DELETE FROM alarm_rules WHERE id = ? AND group_id = ? AND solution = ?').run(id, groupId, solution).changes;
        if (n) this.db.prepare('DELETE FROM alarm_states WHERE rule_id = ?').run(id);
        return n > 0;
      })(),
    );
  }
  getAlarmRule(groupId: string, solution: string, id: string) {
    return this.run(() => {
      const r = this.db.prepare('SELECT * FROM alarm_rules WHERE id = ? AND group_id = ? AND solution = ?').get(id, groupId, solution) as Row | undefined;
      return r ? ruleFromRow(r) : null;
    });
  }
  listAlarmRules(groupId: string, solution: string) {
    return this.run(() => (this.db.prepare('SELECT * FROM alarm_rules WHERE group_id = ? AND solution = ? ORDER BY created_at, id').all(groupId, solution) as Row[]).map(ruleFromRow));
  }
  countGroupObjects(groupId: string) {
    return this.run(
      () =>
        this.db
          .prepare(
            `SELECT (SELECT count(*) FROM solutions WHERE group_id = @g) AS solutions, (SELECT count(*) FROM device_templates WHERE group_id = @g) AS templates,
                    (SELECT count(*) FROM alarm_rules WHERE group_id = @g) AS alarmRules`,
          )
          .get({ g: groupId }) as { solutions: number; templates: number; alarmRules: number },
    );
  }
  countAlarmRules(groupId: string, solution: string) {
    return this.run(() => this.db.prepare('SELECT count(*) FROM alarm_rules WHERE group_id = ? AND solution = ?').pluck().get(groupId, solution) as number);
  }
  allAlarmRules() {
    return this.run(() => (this.db.prepare('SELECT * FROM alarm_rules ORDER BY created_at, id').all() as Row[]).map(ruleFromRow));
  }
  insertAlarm(a: AlarmRecord) {
    return this.run(
      () =>
        this.db
          .prepare(`INSERT INTO alarms (id, group_id, solution, device_id, rule_id, status, raised_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                       ON CONFLICT (rule_id, device_id) WHERE status IN ('raised', 'acknowledged') DO NOTHING`)
          .run(a.id, a.groupId, a.solution, a.deviceId, a.ruleId, a.status, a.raisedAt, JSON.stringify(a)).changes > 0,
    );
  }
  raiseAlarms(items: readonly RaiseItem[]) {
    return this.run(() =>
      this.db.transaction(() =>
        items.map(({ alarm: a, state, delivery: d }) => {
          const inserted =
            this.db
              .prepare(`INSERT INTO alarms (id, group_id, solution, device_id, rule_id, status, raised_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                       ON CONFLICT (rule_id, device_id) WHERE status IN ('raised', 'acknowledged') DO NOTHING`)
              .run(a.id, a.groupId, a.solution, a.deviceId, a.ruleId, a.status, a.raisedAt, JSON.stringify(a)).changes > 0;
          if (!inserted) return false;
          this.db
            .prepare('INSERT INTO alarm_states (rule_id, device_id, state) VALUES (?, ?, ?) ON CONFLICT (rule_id, device_id) DO UPDATE SET state = excluded.state')
            .run(a.ruleId, a.deviceId, JSON.stringify(state));
          if (d) {
            this.db
              .prepare('INSERT INTO alarm_deliveries (id, group_id, solution, status, next_at, created_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?)')
              .run(d.id, d.groupId, d.solution, d.status, d.nextAt, d.createdAt, JSON.stringify(d));
          }
          return true;
        }),
      )(),
    );
  }
  updateAlarm(a: AlarmRecord, expect: AlarmStatus) {
    return this.run(() => this.db.prepare('UPDATE alarms SET status = ?, doc = ? WHERE id = ? AND status = ?').run(a.status, JSON.stringify(a), a.id, expect).changes > 0);
  }
  updateAlarms(items: readonly { alarm: AlarmRecord; expect: AlarmStatus }[]) {
    return this.run(() =>
      this.db.transaction(() => {
        const st = this.db.prepare('UPDATE alarms SET status = ?, doc = ? WHERE id = ? AND status = ?');
        return items.map(({ alarm: a, expect }) => st.run(a.status, JSON.stringify(a), a.id, expect).changes > 0);
      })(),
    );
  }
  getAlarm(groupId: string, solution: string, id: string) {
    return this.run(() => {
      const r = this.db.prepare('SELECT doc FROM alarms WHERE id = ? AND group_id = ? AND solution = ?').pluck().get(id, groupId, solution) as string | undefined;
      return r ? (JSON.parse(r) as AlarmRecord) : null;
    });
  }
  listAlarms(groupId: string, solution: string, q: AlarmQuery) {
    return this.run(() => {
      const where = ['group_id = @g', 'solution = @s'];
      const args: Record<string, unknown> = { g: groupId, s: solution, limit: q.limit };
      if (q.deviceId !== undefined) {
        where.push('device_id = @d');
        args.d = q.deviceId;
      }
      if (q.ruleId !== undefined) {
        where.push('rule_id = @r');
        args.r = q.ruleId;
      }
      if (q.statuses?.length) {
        where.push(`status IN (${q.statuses.map((_, i) => `@st${i}`).join(', ')})`);
        for (const [i, st] of q.statuses.entries()) args[`st${i}`] = st;
      }
      if (q.after) {
        where.push('(raised_at < @ar OR (raised_at = @ar AND id < @ai))');
        args.ar = q.after.raisedAt;
        args.ai = q.after.id;
      }
      const rows = this.db
        .prepare(`SELECT doc FROM alarms WHERE ${where.join(' AND ')} ORDER BY raised_at DESC, id DESC LIMIT @limit`)
        .pluck()
        .all(args) as string[];
      return rows.map((d) => JSON.parse(d) as AlarmRecord);
    });
  }
  activeAlarms() {
    return this.run(() => (this.db.prepare("SELECT doc FROM alarms WHERE status IN ('raised', 'acknowledged')").pluck().all() as string[]).map((d) => JSON.parse(d) as AlarmRecord));
  }
  activeAlarmCounts(groupId: string, solution: string) {
    return this.run(() =>
      (
        this.db
          .prepare(`SELECT device_id AS d, count(*) AS n FROM alarms WHERE group_id = ? AND solution = ? AND status IN ('raised', 'acknowledged')
                        GROUP BY device_id ORDER BY device_id`)
          .all(groupId, solution) as Row[]
      ).map((r) => ({ deviceId: r.d as string, count: r.n as number })),
    );
  }
  listAlarmStates() {
    return this.run(() =>
      (this.db.prepare('SELECT rule_id, device_id, state FROM alarm_states').all() as Row[]).map((r) => ({
        ruleId: r.rule_id as string,
        deviceId: r.device_id as string,
        state: JSON.parse(r.state) as AlarmEvalState,
      })),
    );
  }
  setAlarmState(ruleId: string, deviceId: string, state: AlarmEvalState | null) {
    return this.run(() => {
      if (state === null) this.db.prepare('DELETE FROM alarm_states WHERE rule_id = ? AND device_id = ?').run(ruleId, deviceId);
      else {
        this.db
          .prepare('INSERT INTO alarm_states (rule_id, device_id, state) VALUES (?, ?, ?) ON CONFLICT (rule_id, device_id) DO UPDATE SET state = excluded.state')
          .run(ruleId, deviceId, JSON.stringify(state));
      }
    });
  }
  insertDelivery(d: WebhookDeliveryRecord) {
    return this.run(() => {
      this.db
        .prepare('INSERT INTO alarm_deliveries (id, group_id, solution, status, next_at, created_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?)')
        .run(d.id, d.groupId, d.solution, d.status, d.nextAt, d.createdAt, JSON.stringify(d));
    });
  }
  updateDelivery(d: WebhookDeliveryRecord) {
    return this.run(() => {
      this.db.prepare('UPDATE alarm_deliveries SET status = ?, next_at = ?, doc = ? WHERE id = ?').run(d.status, d.nextAt, JSON.stringify(d), d.id);
    });
  }
  getDelivery(groupId: string, solution: string, id: string) {
    return this.run(() => {
      const r = this.db.prepare('SELECT doc FROM alarm_deliveries WHERE id = ? AND group_id = ? AND solution = ?').pluck().get(id, groupId, solution) as string | undefined;
      return r ? (JSON.parse(r) as WebhookDeliveryRecord) : null;
    });
  }
  dueDeliveries(now: number, limit: number) {
    return this.run(() =>
      (this.db.prepare("SELECT doc FROM alarm_deliveries WHERE status = 'pending' AND next_at <= ? ORDER BY next_at, id LIMIT ?").pluck().all(now, limit) as string[]).map(
        (d) => JSON.parse(d) as WebhookDeliveryRecord,
      ),
    );
  }
  listDeliveries(groupId: string, solution: string, status: DeliveryStatus, limit: number, before?: { createdAt: number; id: string }) {
    return this.run(() => {
      const rows = before
        ? this.db
            .prepare(`SELECT doc FROM alarm_deliveries WHERE group_id = ? AND solution = ? AND status = ? AND (created_at < ? OR (created_at = ? AND id < ?))
                           ORDER BY created_at DESC, id DESC LIMIT ?`)
            .pluck()
            .all(groupId, solution, status, before.createdAt, before.createdAt, before.id, limit)
        : this.db
            .prepare('SELECT doc FROM alarm_deliveries WHERE group_id = ? AND solution = ? AND status = ? ORDER BY created_at DESC, id DESC LIMIT ?')
            .pluck()
            .all(groupId, solution, status, limit);
      return (rows as string[]).map((d) => JSON.parse(d) as WebhookDeliveryRecord);
    });
  }
}

function ruleFromRow(r: Row): AlarmRuleRecord {
  return { id: r.id, groupId: r.group_id, tenantId: r.tenant_id, solution: r.solution, deviceId: r.device_id ?? null, spec: JSON.parse(r.spec), createdAt: r.created_at, updatedAt: r.updated_at };
}

/** How many of the ascending timestamps are below `to` (binary search). */
function below(ts: Float64Array, to: number): number {
  let lo = 0;
  let hi = ts.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ts[mid]! < to) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Whether stored free fields carry `tag` in their `tags` list (wire §1: a list of strings). */
function hasTag(fields: string | null, tag: string, quoted = JSON.stringify(tag)): boolean {
  if (fields === null || !fields.includes('"tags"')) return false;
  // Text without a backslash holds every string literally: no "tag" in it, no such tag. Saves the
  // parse for almost every reading a filter walks past.
  if (!fields.includes(quoted) && !fields.includes('\\')) return false;
  const tags = (JSON.parse(fields) as { tags?: unknown }).tags;
  return Array.isArray(tags) ? tags.includes(tag) : tags === tag;
}

function recordsOfColumns(c: Columns): ObservationRecord[] {
  const out: ObservationRecord[] = new Array(c.n);
  for (let i = 0; i < c.n; i++) {
    const t = c.t[i]!;
    const fields = c.extra === null ? null : c.extra[i]!;
    out[i] = { ts: c.ts[i]!, temperature: Number.isNaN(t) ? null : t, extra: fields ? JSON.parse(fields) : null };
  }
  return out;
}
