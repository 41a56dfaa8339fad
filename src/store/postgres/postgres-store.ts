// The scale-out store: PostgreSQL through pg's connection pool (docs/storage.md "PostgreSQL"). Any
// number of stateless Reef nodes may share one database; everything they must agree on (accounts,
// signing keys, devices, observations, job state) lives here. Schema and partitioning:
// migrations.ts, partitions.ts. This class migrates and composes the aggregates, one file each:
// accounts.ts, state.ts (signing keys, job state), devices.ts (solutions, devices, templates),
// observations.ts (reads), writer.ts (writes, with copy.ts), retention.ts, alarms.ts; connection.ts
// holds what they share.
import type pg from 'pg';
import type { AlarmEvalState, AlarmRecord, AlarmRuleRecord, AlarmStatus, DeliveryStatus, WebhookDeliveryRecord } from '../../core/alarms.ts';
import { ReefError } from '../../core/errors.ts';
import type { ObservationBatch } from '../../core/observation-batch.ts';
import type { Account, DomainInfo, ObservationRecord } from '../../core/types.ts';
import type { AlarmQuery, BucketQuery, NewDevice, ObservationQuery, RaiseItem, SigningKey, SolutionObservationQuery, Store } from '../store.ts';
import { PostgresAccounts } from './accounts.ts';
import { PostgresAlarms } from './alarms.ts';
import { PostgresConnection, type PostgresOptions } from './connection.ts';
import { PostgresDevices } from './devices.ts';
import { RETRY_AFTER_SECONDS, translate } from './errors.ts';
import { NoWritableHostError, type PgHosts } from './hosts.ts';
import { LOCK_MIGRATE, MIGRATIONS } from './migrations.ts';
import { PostgresObservationReads } from './observations.ts';
import { PostgresRetention } from './retention.ts';
import { PostgresState } from './state.ts';
import { PostgresWriter } from './writer.ts';

export type { PostgresOptions } from './connection.ts';
export { BY_ID_IN_SOLUTION } from './devices.ts';

/** The start-up's looks for a writable host: the first again after this long, doubling to once a second. */
const START_LOOK_FIRST_MS = 250;
const START_LOOK_EVERY_MS = 1000;

export class PostgresStore implements Store {
  readonly kind = 'postgres' as const;
  private readonly c: PostgresConnection;
  private readonly accounts: PostgresAccounts;
  private readonly state: PostgresState;
  private readonly devices: PostgresDevices;
  private readonly reads: PostgresObservationReads;
  private readonly primaryReads: PostgresObservationReads;
  private readonly writer: PostgresWriter;
  private readonly retention: PostgresRetention;
  private readonly alarms: PostgresAlarms;

  constructor(opts: PostgresOptions) {
    this.c = new PostgresConnection(opts);
    this.accounts = new PostgresAccounts(this.c);
    this.state = new PostgresState(this.c);
    this.devices = new PostgresDevices(this.c);
    this.reads = new PostgresObservationReads(this.c);
    this.primaryReads = new PostgresObservationReads(this.c, 'primary');
    this.writer = new PostgresWriter(this.c);
    this.retention = new PostgresRetention(this.c);
    this.alarms = new PostgresAlarms(this.c);
  }

  get pool(): pg.Pool {
    return this.c.pool;
  }

  /** How companions connect (LISTEN, leadership): to the writable host, as the store does (hosts.ts). */
  get hosts(): PgHosts {
    return this.c.hosts;
  }

  async migrate(): Promise<void> {
    await this.findWritableHost();
    let client: pg.PoolClient;
    try {
      client = await this.c.pool.connect();
    } catch (e) {
      translate(e);
    }
    let broken: Error | undefined;
    // A checked-out client has no pool listener: a connection ended under it (a restart, or the
    // host given up: hosts.ts) fails the next statement instead of throwing out of the process.
    const lost = (e: Error) => {
      broken = e;
    };
    client.on('error', lost);
    try {
      // A session lock: a second node starting at the same moment waits here, then finds every
      // migration applied. Each migration commits with its version row, so a crash midway leaves
      // either all of a migration or none of it.
      await client.query('SELECT pg_advisory_lock($1)', [LOCK_MIGRATE.toString()]);
      try {
        await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)');
        const done = new Set((await client.query('SELECT version FROM schema_migrations')).rows.map((r) => r.version as number));
        for (const m of MIGRATIONS) {
          if (done.has(m.version)) continue;
          await client.query('BEGIN');
          try {
            await client.query(m.sql);
            await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [m.version, m.name, Date.now()]);
            await client.query('COMMIT');
          } catch (e) {
            await client.query('ROLLBACK');
            throw e;
          }
        }
      } finally {
        await client.query('SELECT pg_advisory_unlock($1)', [LOCK_MIGRATE.toString()]);
      }
    } catch (e) {
      broken = e as Error;
      translate(e);
    } finally {
      client.off('error', lost);
      client.release(broken);
    }
    await this.c.loadPartitions();
    await this.c.ensureRanges(this.c.parts.ahead(Date.now()));
  }

  /**
   * At start-up, a list with no writable host is looked at again (a node started while a standby
   * is being promoted) until startWaitMs has passed, then stops the start naming what each host is;
   * at once when a host refused the login or lacks the database (the settings are wrong).
   * The looks come quickly at first and then every second: the promotion takes seconds.
   */
  private async findWritableHost(): Promise<void> {
    const deadline = Date.now() + (this.c.opts.startWaitMs ?? 0);
    for (let attempt = 1, delay = START_LOOK_FIRST_MS; ; attempt++, delay = Math.min(delay * 2, START_LOOK_EVERY_MS)) {
      try {
        await this.c.hosts.search();
        return;
      } catch (e) {
        if (!(e instanceof NoWritableHostError)) throw e;
        const left = deadline - Date.now();
        if (left <= 0 || e.misconfigured) throw new ReefError('STORE_UNAVAILABLE', e.message, { retryAfter: RETRY_AFTER_SECONDS, cause: e });
        const retryInMs = Math.min(delay, left);
        this.c.opts.onStartWait?.(e.message, { attempt, retryInMs });
        await new Promise((r) => setTimeout(r, retryInMs));
      }
    }
  }

  async close(): Promise<void> {
    // Batches already accepted are written (or fail) before the pool goes.
    await this.writer.close();
    await Promise.all([this.c.pool.end(), this.c.readPool?.end()]);
  }

  async ping(): Promise<void> {
    await this.c.q('SELECT 1');
  }

  /** Reads the partition tree from the catalogue into the cache. */
  loadPartitions(): Promise<void> {
    return this.c.loadPartitions();
  }

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
  uploadDevice(groupId: string, solution: string, id: string) {
    return this.devices.uploadDevice(groupId, solution, id);
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
    return this.writer.insertObservations(deviceId, batch);
  }
  insertObservationsMany(items: { deviceId: string; batch: ObservationBatch }[]) {
    return this.writer.insertObservationsMany(items);
  }
  latestObservations(groupId: string, solution: string) {
    return this.reads.latestObservations(groupId, solution);
  }
  latestObservationsJson(groupId: string, solution: string) {
    return this.reads.latestObservationsJson(groupId, solution);
  }
  queryObservations(deviceId: string, q: ObservationQuery) {
    return (q.fresh ? this.primaryReads : this.reads).queryObservations(deviceId, q);
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
