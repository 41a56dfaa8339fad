// Alarm domain types (docs/alarms.md): rules, alarms with their lifecycle and history,
// evaluation state and webhook deliveries. Records are what the store keeps; the feature
// (src/alarms) validates rules and turns records into the wire form.

export type AlarmCondition = 'above' | 'below' | 'outside' | 'rate' | 'silence';
export type AlarmSeverity = 'critical' | 'major' | 'minor' | 'warning';
export type TemperatureUnit = 'C' | 'F';

/** What a rule watches and when it raises; stored as one JSON document beside the key columns. */
export interface AlarmRuleSpec {
  name: string;
  /** Path of a numeric field of the observation: "temperature", "accelerometer.z". */
  field: string;
  condition: AlarmCondition;
  /** above / below. */
  threshold?: number;
  /** outside: the range that is normal. */
  low?: number;
  high?: number;
  /** rate: change per minute that raises; `direction` says which way counts. */
  ratePerMinute?: number;
  direction?: 'rise' | 'fall' | 'any';
  /** silence: no observation for this long raises. */
  silenceMs?: number;
  /** How long the condition must hold before the alarm is raised (0: at once). */
  durationMs: number;
  /** How far back inside the normal range a reading must be to clear the alarm. */
  hysteresis: number;
  /** The unit the thresholds are written in (temperature rules); readings in the other unit are converted. */
  unit: TemperatureUnit | null;
  severity: AlarmSeverity;
  enabled: boolean;
  /** Where alarm events of this rule are POSTed; the signing secret is derived, never stored. */
  webhook: { url: string; salt: string } | null;
  /**
   * A rule for every device naming this device template (instead of one device or the whole
   * solution); kept in the spec document, absent for the others.
   */
  templateId?: string;
}

export interface AlarmRuleRecord {
  id: string;
  groupId: string;
  /** The account that created the rule. */
  tenantId: string;
  solution: string;
  /** null: every device of the solution. */
  deviceId: string | null;
  spec: AlarmRuleSpec;
  createdAt: number;
  updatedAt: number;
}

export type AlarmStatus = 'raised' | 'acknowledged' | 'cleared-unacknowledged' | 'cleared';
export const ACTIVE_STATUSES: readonly AlarmStatus[] = ['raised', 'acknowledged'];

export interface AlarmReading {
  /** The observation's timestamp (epoch ms). */
  ts: number;
  /** The value as read, in the reading's own unit. */
  value: number;
  unit: TemperatureUnit | null;
}

export interface AlarmHistoryEntry {
  at: number;
  event: 'raised' | 'acknowledged' | 'cleared';
  /** Who acknowledged or cleared by hand (tenant id and account name); absent when the rule did it. */
  by?: { tenantId: string; name: string };
  reading?: AlarmReading;
  note?: string;
}

export interface AlarmRecord {
  id: string;
  groupId: string;
  solution: string;
  deviceId: string;
  ruleId: string;
  status: AlarmStatus;
  severity: AlarmSeverity;
  raisedAt: number;
  updatedAt: number;
  /** The reading that raised it (none for a silence alarm). */
  reading: AlarmReading | null;
  /** A copy of the rule's name and condition when raised, so history reads well after edits. */
  rule: { name: string; field: string; condition: AlarmCondition };
  acknowledgedAt: number | null;
  acknowledgedBy: { tenantId: string; name: string } | null;
  clearedAt: number | null;
  history: AlarmHistoryEntry[];
}

/** Where a (rule, device) pair stands between readings; kept so a restart loses no pending duration. */
export interface AlarmEvalState {
  phase: 'pending' | 'raised';
  /** pending: timestamp of the first reading of the breach. */
  since: number;
  alarmId?: string;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'dead';

export interface WebhookDeliveryRecord {
  id: string;
  groupId: string;
  solution: string;
  ruleId: string;
  alarmId: string;
  status: DeliveryStatus;
  attempts: number;
  /** When the next attempt is due (pending). */
  nextAt: number;
  createdAt: number;
  updatedAt: number;
  url: string;
  /** The JSON body, exactly as signed and sent. */
  body: string;
  lastError: string | null;
}
