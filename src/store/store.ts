// The Store interface: everything Reef persists, behind one contract that every backend (sqlite/,
// postgres/) implements and that test/integration/store/conformance/ checks. Backends translate
// their driver errors into the catalogue of src/core/errors.ts (unique violations → CONFLICT-family codes,
// connection failures → STORE_UNAVAILABLE), so callers never see a driver error.
import type { AlarmEvalState, AlarmRecord, AlarmRuleRecord, AlarmStatus, DeliveryStatus, WebhookDeliveryRecord } from '../core/alarms.ts';
import type { Account, DeviceRecord, DeviceRef, DeviceTemplateRecord, DomainInfo, ObservationRecord, ProvisioningInfo } from '../core/types.ts';
import type { ObservationBatch } from '../core/observation-batch.ts';
import { ReefError } from '../core/errors.ts';

export interface NewDevice {
  id: string;
  tenantId: string;
  groupId: string;
  solution: string;
  deviceType: string;
  domainInfo: DomainInfo;
  provisioningInfo?: ProvisioningInfo;
  /** Lower-case 16-hex MAC; unique across the whole store. */
  mac?: string | null;
}

/** The record a created device is answered with, on every backend. */
export function deviceRecordOf(d: NewDevice, createdAt: number): DeviceRecord {
  const rec: DeviceRecord = { id: d.id, deviceType: d.deviceType, domainInfo: d.domainInfo, tenantId: d.tenantId, groupId: d.groupId, solution: d.solution, mac: d.mac ?? null, createdAt };
  if (d.provisioningInfo) rec.provisioningInfo = d.provisioningInfo;
  return rec;
}

export interface ObservationQuery {
  /** Inclusive lower bound, epoch ms. */
  from?: number;
  /** Exclusive upper bound, epoch ms. */
  to?: number;
  /** Keyset cursor: only observations strictly older than this (newest-first order). */
  before?: number;
  limit: number;
  /** Only observations whose `tags` field contains this tag (wire §1). */
  tag?: string;
  /**
   * With `tag`: the most stored observations the page examines, newest first. When they run out
   * before the page is full, the page ends there, short or empty, and nextBefore is the timestamp
   * of the last one examined (the next page goes on below it).
   */
  maxScan?: number;
  /**
   * Read what the writable database holds now, never a read standby's copy (PostgreSQL's
   * REEF_DATABASE_READ_URL): for a read a write or another node's event depends on.
   */
  fresh?: boolean;
}

export interface ObservationPage {
  observations: ObservationRecord[];
  /** The cursor for the next page, or null when nothing older remains. */
  nextBefore: number | null;
}

/**
 * Where a solution-wide page stopped: the store's device sequence number (devices are walked in
 * creation order) and the timestamp of the last observation returned for that device.
 */
export interface SolutionCursor {
  device: number;
  ts: number;
}

export interface SolutionObservationQuery {
  /** Inclusive lower bound, epoch ms. */
  from?: number;
  /** Exclusive upper bound, epoch ms. */
  to?: number;
  limit: number;
  /** Only observations whose `tags` field contains this tag. */
  tag?: string;
  /**
   * With `tag`: the most stored observations the page examines, over all the devices it walks, in
   * page order. When they run out before the page is full and more remain, the page ends there,
   * short or empty, and `next` is the position of the last one examined (the next page goes on
   * below it), as ObservationQuery.maxScan does for one device.
   */
  maxScan?: number;
  /** Resume strictly after this position. */
  after?: SolutionCursor;
}

export interface SolutionObservationPage {
  /** Device by device (creation order), newest first within a device. */
  rows: { deviceId: string; observation: ObservationRecord }[];
  /** The cursor of the next page, or null when nothing remains. */
  next: SolutionCursor | null;
}

/**
 * Turns up to limit + 1 rows (pk, id, ts, ...) into a page and its cursor: shared by the backends.
 * `stopped`: where a scan-bounded page ran out of readings to examine (SolutionObservationQuery.maxScan).
 */
export function solutionPage<R extends { pk: number; id: string; ts: number }>(
  rows: R[],
  limit: number,
  toRecord: (r: R) => ObservationRecord,
  stopped: SolutionCursor | null = null,
): SolutionObservationPage {
  const more = rows.length > limit;
  if (more) rows.length = limit;
  const last = rows[rows.length - 1];
  return {
    rows: rows.map((r) => ({ deviceId: r.id, observation: toRecord(r) })),
    next: more && last ? { device: Number(last.pk), ts: Number(last.ts) } : stopped,
  };
}

/**
 * insertObservationsMany's answer from each batch's own outcome: devices gone (DEVICE_NOT_FOUND)
 * are reported, not an error; any other failure is. Shared by the backends.
 */
export function manyResult(items: readonly { deviceId: string }[], results: readonly PromiseSettledResult<InsertResult>[]): ManyInsertResult {
  const missing: string[] = [];
  let written = 0;
  for (let i = 0; i < items.length; i++) {
    const r = results[i]!;
    if (r.status === 'fulfilled') written += r.value.written;
    else if (r.reason instanceof ReefError && r.reason.code === 'DEVICE_NOT_FOUND') missing.push(items[i]!.deviceId);
    else throw r.reason;
  }
  return { written, missing };
}

export interface BucketQuery {
  from: number;
  to: number;
  bucketMs: number;
}

export interface Bucket {
  /** Bucket start, epoch ms. */
  ts: number;
  count: number;
  min: number | null;
  avg: number | null;
  max: number | null;
}

export interface InsertResult {
  /** Rows written (new or replacing an earlier observation at the same timestamp). */
  written: number;
}

export interface ManyInsertResult {
  written: number;
  /** Devices of the request that do not exist (deleted meanwhile): skipped, not an error. */
  missing: string[];
}

export interface SigningKey {
  kid: string;
  secret: string;
  createdAt: number;
}

/** What one run of Store.maintain did. */
export interface MaintenanceReport {
  /** Time partitions made ahead of need (PostgreSQL; always 0 on SQLite). */
  partitionsCreated: number;
  /** Expired time partitions dropped whole (PostgreSQL; always 0 on SQLite). */
  partitionsDropped: number;
  /** Expired observations deleted one by one (SQLite; PostgreSQL only for out-of-range stragglers). */
  rowsDeleted: number;
}

/** One alarm to raise with what goes with it (Store.raiseAlarms). */
export interface RaiseItem {
  alarm: AlarmRecord;
  state: AlarmEvalState;
  delivery: WebhookDeliveryRecord | null;
}

export interface AlarmQuery {
  deviceId?: string;
  ruleId?: string;
  statuses?: AlarmStatus[];
  /** Keyset cursor: alarms strictly after this one in (raisedAt DESC, id DESC) order. */
  after?: { raisedAt: number; id: string };
  limit: number;
}

export interface Store {
  readonly kind: 'sqlite' | 'postgres';
  /** Applies pending migrations; safe when several processes start at once. */
  migrate(): Promise<void>;
  close(): Promise<void>;
  /** Cheap liveness probe of the backing database (for /readyz). */
  ping(): Promise<void>;

  // accounts (tenants)
  createAccount(a: Account): Promise<Account>;
  getAccountByClientId(clientId: string): Promise<Account | null>;
  getAccountByTenantId(tenantId: string): Promise<Account | null>;
  listAccounts(): Promise<Account[]>;
  setAccountSecret(tenantId: string, secretHash: string): Promise<void>;
  setAccountDisabled(tenantId: string, disabled: boolean): Promise<void>;
  countAccounts(): Promise<number>;

  // token signing keys (shared by every node that uses the store)
  listSigningKeys(): Promise<SigningKey[]>;
  addSigningKey(k: SigningKey): Promise<void>;
  /** Retires a key (rotation, src/jobs/upkeep.ts); tokens it signed are refused from then on. */
  deleteSigningKey(kid: string): Promise<void>;

  // solutions: a name per tenant group, created with its first device
  solutionExists(groupId: string, solution: string): Promise<boolean>;
  /**
   * A number that changes whenever a device of the solution is created or deleted (devices never
   * change otherwise), or null when the group has no such solution: lets callers cache device lists.
   */
  solutionVersion(groupId: string, solution: string): Promise<number | null>;
  /** Creates the solution if the group does not have it yet (the built-in ones before a first device). */
  ensureSolution(groupId: string, solution: string): Promise<void>;

  // devices
  /**
   * Creates the device (and its solution). A MAC already in use → MAC_ALREADY_PROVISIONED. With
   * `maxForTenant` (the device quota), QUOTA_EXCEEDED when the account already has that many
   * devices, decided atomically with the insert (concurrent creators never pass it together).
   */
  createDevice(d: NewDevice, maxForTenant?: number): Promise<DeviceRecord>;
  listDevices(groupId: string, solution: string, deviceType?: string): Promise<DeviceRecord[]>;
  getDevice(groupId: string, solution: string, id: string): Promise<DeviceRecord | null>;
  /**
   * Optional: the device an upload names, as getDevice finds it, but only what an upload needs; a
   * store may answer from an earlier read. Then its writes must not store a batch on a device that
   * is not the one answered: gone meanwhile, the batch fails with DEVICE_NOT_FOUND; made again
   * under the same id in another group or solution, likewise. Callers fall back to getDevice.
   */
  uploadDevice?(groupId: string, solution: string, id: string): Promise<DeviceRef | null>;
  /** Any group: for the gateway, which addresses kits by MAC. */
  getDeviceByMac(mac: string): Promise<DeviceRecord | null>;
  /** Deletes the device and all its observations; false when there was none. */
  deleteDevice(groupId: string, solution: string, id: string): Promise<boolean>;
  /**
   * Replaces a device's type and domainInfo, if its domainInfo is still `expected` (as read by the
   * caller; compared as JSON values): 'changed' when another change came first (the caller reads
   * again), 'missing' when the device is gone. Moves the solution's version on, as create and
   * delete do. Answers the device as stored.
   */
  updateDevice(groupId: string, solution: string, id: string, expected: DomainInfo, next: { deviceType: string; domainInfo: DomainInfo }): Promise<DeviceRecord | 'missing' | 'changed'>;
  /** Devices the account (tenant) created, over all solutions (the device quota): a kept count, one read. */
  countDevices(tenantId: string): Promise<number>;
  /**
   * Stored observations per tenant (of the devices each created), for the observation quota. A full
   * count: the leader's upkeep job runs it, never a request (src/service/quotas.ts).
   */
  countObservationsByTenant(): Promise<Map<string, number>>;

  // device templates: per group and solution, in creation order
  listTemplates(groupId: string, solution: string): Promise<DeviceTemplateRecord[]>;
  getTemplate(groupId: string, solution: string, id: string): Promise<DeviceTemplateRecord | null>;
  /**
   * Creates the template (and its solution) unless the solution already holds `maxPerSolution`
   * templates: then TOO_MANY_TEMPLATES, decided atomically with the insert.
   */
  createTemplate(t: { id: string; groupId: string; solution: string; name: string; sensors: unknown[] }, maxPerSolution: number): Promise<DeviceTemplateRecord>;
  /** Replaces name and sensors; null when the group's solution has no such template. */
  updateTemplate(groupId: string, solution: string, id: string, t: { name: string; sensors: unknown[] }): Promise<DeviceTemplateRecord | null>;
  /** The deleted template, or null when there was none. */
  deleteTemplate(groupId: string, solution: string, id: string): Promise<DeviceTemplateRecord | null>;

  // observations
  /**
   * Stores a batch for one device in one transaction: all or nothing. An observation with the same
   * device and timestamp as a stored one replaces it (last write wins), so a re-sent batch never
   * duplicates (within the batch too: of a repeated timestamp the later observation wins). Keeps
   * the device's latest observation current in the same transaction. The batch is left as it was
   * given (the caller publishes it after).
   */
  insertObservations(deviceId: string, batch: ObservationBatch): Promise<InsertResult>;
  /**
   * Several devices' batches at once, with insertObservations' rules per device (each batch all or
   * nothing); devices that do not exist are skipped and reported. The batches go through the same
   * group writer as uploads, queued together so that they share commits (docs/storage.md).
   */
  insertObservationsMany(items: { deviceId: string; batch: ObservationBatch }[]): Promise<ManyInsertResult>;
  /** The latest observation of every device of the solution that has one. */
  latestObservations(groupId: string, solution: string): Promise<{ deviceId: string; observation: ObservationRecord }[]>;
  /**
   * Optional fast path: the body of "latest of all devices" as UTF-8 JSON, exactly what rendering
   * latestObservations gives (the conformance suite checks). Callers fall back when absent. Bytes,
   * not a string: for 10,000 devices (1.3 MB) Node spends ~6 ms encoding a string into freshly
   * mapped memory for each response, and ~0.4 ms writing a Buffer it already has
   * (docs/performance.md, "Latest of all as bytes").
   */
  latestObservationsJson?(groupId: string, solution: string): Promise<Buffer>;
  /** One device, newest first, keyset-paged. */
  queryObservations(deviceId: string, q: ObservationQuery): Promise<ObservationPage>;
  /**
   * Optional fast path: queryObservations' page as the response body, exactly pageJson of its
   * observations (the conformance suite checks), with the same cursor. Callers fall back when absent.
   */
  observationPageJson?(deviceId: string, q: ObservationQuery): Promise<{ json: string; nextBefore: number | null }>;
  /**
   * Every observation of the group's solution in the range, keyset-paged: device by
   * device in creation order, newest first within a device. A page costs index range scans of the
   * devices it touches (one probe for a device with nothing in range); never OFFSET or COUNT.
   */
  querySolutionObservations(groupId: string, solution: string, q: SolutionObservationQuery): Promise<SolutionObservationPage>;
  /** Per-bucket min/avg/max of temperature over [from, to), oldest first, empty buckets omitted. */
  bucketObservations(deviceId: string, q: BucketQuery): Promise<Bucket[]>;

  // retention (docs/storage.md "Retention and upkeep"): per solution, enforced by maintain()
  /**
   * Keeps a solution's observations for `days` (a whole number, 1..36500), or forever with null.
   * SOLUTION_NOT_FOUND when the group has no such solution.
   */
  setRetention(groupId: string, solution: string, days: number | null): Promise<void>;
  getRetention(groupId: string, solution: string): Promise<number | null>;
  /**
   * Upkeep, run by one node at a time (the leader): removes observations older than their
   * solution's retention as of `now` (PostgreSQL drops whole partitions, so an expired observation
   * may outlive its retention by up to one partition period) together with a latest observation
   * that expired, and prepares upcoming time partitions.
   */
  maintain(now?: number): Promise<MaintenanceReport>;

  // small key-value state for background jobs (simulations, gateway) that must survive restarts
  getState(key: string): Promise<string | null>;
  setState(key: string, value: string): Promise<void>;
  deleteState(key: string): Promise<void>;
  listState(prefix: string): Promise<{ key: string; value: string }[]>;

  // alarms (src/alarms, docs/alarms.md): rules, alarms with their history, evaluation state and
  // webhook deliveries. Deleting a device or a rule leaves its alarms (they are history).
  createAlarmRule(r: AlarmRuleRecord): Promise<void>;
  /** Replaces the rule's device, spec and updatedAt; false when there is no such rule. */
  updateAlarmRule(r: AlarmRuleRecord): Promise<boolean>;
  /** Deletes the rule and its evaluation state; false when there was none. */
  deleteAlarmRule(groupId: string, solution: string, id: string): Promise<boolean>;
  getAlarmRule(groupId: string, solution: string, id: string): Promise<AlarmRuleRecord | null>;
  /** The group's rules of a solution, oldest first. */
  listAlarmRules(groupId: string, solution: string): Promise<AlarmRuleRecord[]>;
  countAlarmRules(groupId: string, solution: string): Promise<number>;
  /** The group's solutions, device templates and alarm rules, over all its solutions (the object quotas). */
  countGroupObjects(groupId: string): Promise<{ solutions: number; templates: number; alarmRules: number }>;
  /** Every rule of every group (the evaluating node loads them once, then follows changes). */
  allAlarmRules(): Promise<AlarmRuleRecord[]>;
  /**
   * Stores a new alarm; false (nothing stored) when the rule already has an active (raised or
   * acknowledged) alarm for the device, so two evaluators can never raise the same alarm twice.
   */
  insertAlarm(a: AlarmRecord): Promise<boolean>;
  /**
   * Raises several alarms in one transaction (one commit, one fsync on SQLite: docs/alarms.md
   * "Evaluation, precisely"): each alarm is inserted as by insertAlarm and, when inserted, its pair's
   * state set and its delivery (if any) stored with it. The answer says, per item, whether it was inserted.
   */
  raiseAlarms(items: readonly RaiseItem[]): Promise<boolean[]>;
  /** Writes the alarm only if its status is still `expect` (compare-and-set); false otherwise. */
  updateAlarm(a: AlarmRecord, expect: AlarmStatus): Promise<boolean>;
  /** updateAlarm for several alarms in one transaction (one commit); per item, whether it was written. */
  updateAlarms(items: readonly { alarm: AlarmRecord; expect: AlarmStatus }[]): Promise<boolean[]>;
  getAlarm(groupId: string, solution: string, id: string): Promise<AlarmRecord | null>;
  /** Newest raised first, keyset-paged. */
  listAlarms(groupId: string, solution: string, q: AlarmQuery): Promise<AlarmRecord[]>;
  /** Every active alarm of every group (loaded by the evaluating node). */
  activeAlarms(): Promise<AlarmRecord[]>;
  /** Counts of active alarms per device of the solution (device badges). */
  activeAlarmCounts(groupId: string, solution: string): Promise<{ deviceId: string; count: number }[]>;
  listAlarmStates(): Promise<{ ruleId: string; deviceId: string; state: AlarmEvalState }[]>;
  /** Sets (or with null removes) the evaluation state of a (rule, device) pair. */
  setAlarmState(ruleId: string, deviceId: string, state: AlarmEvalState | null): Promise<void>;
  insertDelivery(d: WebhookDeliveryRecord): Promise<void>;
  updateDelivery(d: WebhookDeliveryRecord): Promise<void>;
  getDelivery(groupId: string, solution: string, id: string): Promise<WebhookDeliveryRecord | null>;
  /** Pending deliveries due at `now`, oldest due first. */
  dueDeliveries(now: number, limit: number): Promise<WebhookDeliveryRecord[]>;
  /** A solution's deliveries in one status, newest first; `before` is the keyset cursor (createdAt, id). */
  listDeliveries(groupId: string, solution: string, status: DeliveryStatus, limit: number, before?: { createdAt: number; id: string }): Promise<WebhookDeliveryRecord[]>;
}
