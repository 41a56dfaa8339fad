// The embedded default store: one SQLite file in WAL mode through better-sqlite3 (docs/storage.md
// "SQLite"). Calls are synchronous underneath; the async interface lets the same callers use the
// PostgreSQL backend. This class opens the file, applies migrations and composes the aggregates,
// one file each: accounts.ts, state.ts (signing keys, job state), devices.ts (solutions, devices,
// templates), observations.ts (reads), writer.ts (writes), retention.ts, alarms.ts.
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { AlarmEvalState, AlarmRecord, AlarmRuleRecord, AlarmStatus, DeliveryStatus, WebhookDeliveryRecord } from '../../core/alarms.ts';
import { observationJson } from '../../core/observation-json.ts';
import type { ObservationBatch } from '../../core/observation-batch.ts';
import type { Account, DomainInfo, ObservationRecord } from '../../core/types.ts';
import type { AlarmQuery, BucketQuery, NewDevice, ObservationQuery, RaiseItem, SigningKey, SolutionObservationQuery, Store } from '../store.ts';
import { SqliteAccounts } from './accounts.ts';
import { SqliteAlarms } from './alarms.ts';
import type { SqliteContext, SqliteOptions } from './context.ts';
import { SqliteDevices } from './devices.ts';
import { translate } from './errors.ts';
import { MIGRATIONS } from './migrations.ts';
import { SqliteObservationReads } from './observations.ts';
import { SqliteRetention } from './retention.ts';
import { SqliteState } from './state.ts';
import { SqliteWriter } from './writer.ts';

export type { SqliteOptions } from './context.ts';
export { COUNT_TENANT_DEVICES } from './devices.ts';

export class SqliteStore implements Store, SqliteContext {
  readonly kind = 'sqlite' as const;
  readonly db: Database.Database;
  private readonly opts: SqliteOptions;
  // The aggregates: made by migrate(), once the tables their statements name exist.
  private accounts!: SqliteAccounts;
  private state!: SqliteState;
  private devices!: SqliteDevices;
  private reads!: SqliteObservationReads;
  private writes: SqliteWriter | null = null;
  private retention!: SqliteRetention;
  private alarms!: SqliteAlarms;

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
    this.accounts = new SqliteAccounts(this);
    this.state = new SqliteState(this);
    this.devices = new SqliteDevices(this);
    this.reads = new SqliteObservationReads(this, this.opts.bucketChunk);
    this.writes = new SqliteWriter(this, this.opts);
    this.retention = new SqliteRetention(this);
    this.alarms = new SqliteAlarms(this);
  }

  async close(): Promise<void> {
    await this.writes?.close();
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
  readonly run = <T>(f: () => T): Promise<T> => {
    this.writes?.flushInline();
    try {
      return Promise.resolve(f());
    } catch (e) {
      try {
        translate(e);
      } catch (t) {
        return Promise.reject(t);
      }
    }
  };

  // ---- accounts.ts, state.ts ------------------------------------------------------------------
  createAccount(a: Account) {
    return this.accounts.createAccount(a);
  }
  getAccountByClientId(clientId: string) {
    return this.accounts.getAccountByClientId(clientId);
  }
  getAccountByTenantId(tenantId: string) {
    return this.accounts.getAccountByTenantId(tenantId);
  }
  listAccounts() {
    return this.accounts.listAccounts();
  }
  setAccountSecret(tenantId: string, secretHash: string) {
    return this.accounts.setAccountSecret(tenantId, secretHash);
  }
  setAccountDisabled(tenantId: string, disabled: boolean) {
    return this.accounts.setAccountDisabled(tenantId, disabled);
  }
  countAccounts() {
    return this.accounts.countAccounts();
  }
  listSigningKeys() {
    return this.state.listSigningKeys();
  }
  addSigningKey(k: SigningKey) {
    return this.state.addSigningKey(k);
  }
  deleteSigningKey(kid: string) {
    return this.state.deleteSigningKey(kid);
  }
  getState(key: string) {
    return this.state.getState(key);
  }
  setState(key: string, value: string) {
    return this.state.setState(key, value);
  }
  deleteState(key: string) {
    return this.state.deleteState(key);
  }
  listState(prefix: string) {
    return this.state.listState(prefix);
  }

  // ---- devices.ts -----------------------------------------------------------------------------
  solutionExists(groupId: string, solution: string) {
    return this.devices.solutionExists(groupId, solution);
  }
  solutionVersion(groupId: string, solution: string) {
    return this.devices.solutionVersion(groupId, solution);
  }
  ensureSolution(groupId: string, solution: string) {
    return this.devices.ensureSolution(groupId, solution);
  }
  createDevice(d: NewDevice, maxForTenant?: number) {
    return this.devices.createDevice(d, maxForTenant);
  }
  listDevices(groupId: string, solution: string, deviceType?: string) {
    return this.devices.listDevices(groupId, solution, deviceType);
  }
  getDevice(groupId: string, solution: string, id: string) {
    return this.devices.getDevice(groupId, solution, id);
  }
  getDeviceByMac(mac: string) {
    return this.devices.getDeviceByMac(mac);
  }
  deleteDevice(groupId: string, solution: string, id: string) {
    return this.devices.deleteDevice(groupId, solution, id);
  }
  updateDevice(groupId: string, solution: string, id: string, expected: DomainInfo, next: { deviceType: string; domainInfo: DomainInfo }) {
    return this.devices.updateDevice(groupId, solution, id, expected, next);
  }
  countDevices(tenantId: string) {
    return this.devices.countDevices(tenantId);
  }
  listTemplates(groupId: string, solution: string) {
    return this.devices.listTemplates(groupId, solution);
  }
  getTemplate(groupId: string, solution: string, id: string) {
    return this.devices.getTemplate(groupId, solution, id);
  }
  createTemplate(t: { id: string; groupId: string; solution: string; name: string; sensors: unknown[] }, maxPerSolution: number) {
    return this.devices.createTemplate(t, maxPerSolution);
  }
  updateTemplate(groupId: string, solution: string, id: string, t: { name: string; sensors: unknown[] }) {
    return this.devices.updateTemplate(groupId, solution, id, t);
  }
  deleteTemplate(groupId: string, solution: string, id: string) {
    return this.devices.deleteTemplate(groupId, solution, id);
  }

  // ---- writer.ts, observations.ts, retention.ts -----------------------------------------------
  insertObservations(deviceId: string, batch: ObservationBatch) {
    return this.writes!.insertObservations(deviceId, batch);
  }
  insertObservationsMany(items: { deviceId: string; batch: ObservationBatch }[]) {
    return this.writes!.insertObservationsMany(items);
  }
  latestObservations(groupId: string, solution: string) {
    return this.reads.latestObservations(groupId, solution);
  }
  latestObservationsJson(groupId: string, solution: string) {
    return this.reads.latestObservationsJson(groupId, solution);
  }
  queryObservations(deviceId: string, q: ObservationQuery) {
    return this.reads.queryObservations(deviceId, q);
  }
  observationPageJson(deviceId: string, q: ObservationQuery) {
    return this.reads.observationPageJson(deviceId, q);
  }
  querySolutionObservations(groupId: string, solution: string, q: SolutionObservationQuery) {
    return this.reads.querySolutionObservations(groupId, solution, q);
  }
  bucketObservations(deviceId: string, q: BucketQuery) {
    return this.reads.bucketObservations(deviceId, q);
  }
  countObservationsByTenant() {
    return this.reads.countObservationsByTenant();
  }
  setRetention(groupId: string, solution: string, days: number | null) {
    return this.retention.setRetention(groupId, solution, days);
  }
  getRetention(groupId: string, solution: string) {
    return this.retention.getRetention(groupId, solution);
  }
  maintain(now?: number) {
    return this.retention.maintain(now);
  }

  // ---- alarms.ts ------------------------------------------------------------------------------
  createAlarmRule(r: AlarmRuleRecord) {
    return this.alarms.createAlarmRule(r);
  }
  updateAlarmRule(r: AlarmRuleRecord) {
    return this.alarms.updateAlarmRule(r);
  }
  deleteAlarmRule(groupId: string, solution: string, id: string) {
    return this.alarms.deleteAlarmRule(groupId, solution, id);
  }
  getAlarmRule(groupId: string, solution: string, id: string) {
    return this.alarms.getAlarmRule(groupId, solution, id);
  }
  listAlarmRules(groupId: string, solution: string) {
    return this.alarms.listAlarmRules(groupId, solution);
  }
  countGroupObjects(groupId: string) {
    return this.alarms.countGroupObjects(groupId);
  }
  countAlarmRules(groupId: string, solution: string) {
    return this.alarms.countAlarmRules(groupId, solution);
  }
  allAlarmRules() {
    return this.alarms.allAlarmRules();
  }
  insertAlarm(a: AlarmRecord) {
    return this.alarms.insertAlarm(a);
  }
  raiseAlarms(items: readonly RaiseItem[]) {
    return this.alarms.raiseAlarms(items);
  }
  updateAlarm(a: AlarmRecord, expect: AlarmStatus) {
    return this.alarms.updateAlarm(a, expect);
  }
  updateAlarms(items: readonly { alarm: AlarmRecord; expect: AlarmStatus }[]) {
    return this.alarms.updateAlarms(items);
  }
  getAlarm(groupId: string, solution: string, id: string) {
    return this.alarms.getAlarm(groupId, solution, id);
  }
  listAlarms(groupId: string, solution: string, q: AlarmQuery) {
    return this.alarms.listAlarms(groupId, solution, q);
  }
  activeAlarms() {
    return this.alarms.activeAlarms();
  }
  activeAlarmCounts(groupId: string, solution: string) {
    return this.alarms.activeAlarmCounts(groupId, solution);
  }
  listAlarmStates() {
    return this.alarms.listAlarmStates();
  }
  setAlarmState(ruleId: string, deviceId: string, state: AlarmEvalState | null) {
    return this.alarms.setAlarmState(ruleId, deviceId, state);
  }
  insertDelivery(d: WebhookDeliveryRecord) {
    return this.alarms.insertDelivery(d);
  }
  updateDelivery(d: WebhookDeliveryRecord) {
    return this.alarms.updateDelivery(d);
  }
  getDelivery(groupId: string, solution: string, id: string) {
    return this.alarms.getDelivery(groupId, solution, id);
  }
  dueDeliveries(now: number, limit: number) {
    return this.alarms.dueDeliveries(now, limit);
  }
  listDeliveries(groupId: string, solution: string, status: DeliveryStatus, limit: number, before?: { createdAt: number; id: string }) {
    return this.alarms.listDeliveries(groupId, solution, status, limit, before);
  }
}
