// Alarm rules: what a valid rule is (every entry point — HTTP, SDK, CLI — goes through parseRule),
// and the wire form of rules and alarms. docs/alarms.md describes every field.
import { randomBytes } from 'node:crypto';
import type { AlarmCondition, AlarmRecord, AlarmRuleRecord, AlarmRuleSpec, AlarmSeverity, TemperatureUnit, WebhookDeliveryRecord } from '../core/alarms.ts';
import { ReefError } from '../core/errors.ts';
import { isoUtc } from '../core/time.ts';
import { deviceId as checkDeviceId, duration as durationField } from '../core/validate.ts';

export const CONDITIONS: readonly AlarmCondition[] = ['above', 'below', 'outside', 'rate', 'silence'];
export const SEVERITIES: readonly AlarmSeverity[] = ['critical', 'major', 'minor', 'warning'];
const TEMPLATE_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const FIELD = /^[A-Za-z_][A-Za-z0-9_-]{0,63}(\.[A-Za-z_][A-Za-z0-9_-]{0,63}){0,7}$/;
const ALLOWED = new Set([
  'name',
  'deviceId',
  'templateId',
  'field',
  'condition',
  'threshold',
  'low',
  'high',
  'ratePerMinute',
  'direction',
  'silence',
  'silenceMs',
  'duration',
  'durationMs',
  'hysteresis',
  'unit',
  'severity',
  'enabled',
  'webhook',
  // read-only fields a client may send back unchanged from a GET (PUT of what it read)
  'id',
  'solution',
  'createdAt',
  'updatedAt',
]);
const MAX_DURATION_MS = 7 * 86_400_000;
const MAX_SILENCE_MS = 30 * 86_400_000;
const MIN_SILENCE_MS = 10_000;

function bad(field: string, message: string): never {
  throw new ReefError('VALIDATION_FAILED', message, { field });
}

function num(v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) bad(field, `${field} must be a finite number`);
  return v;
}

/** A duration as "10m", "1h", "30s" or whole milliseconds. */
function duration(v: unknown, field: string, min: number, max: number): number {
  let ms: number;
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v) || v < 0) bad(field, `${field} must be a duration such as "10m" or whole milliseconds`);
    ms = v;
  } else if (typeof v === 'string') {
    ms = v.trim() === '0' ? 0 : durationField(v, field);
  } else bad(field, `${field} must be a duration such as "10m" or whole milliseconds`);
  if (ms < min || ms > max) bad(field, `${field} must be between ${min / 1000} s and ${max / 86_400_000} days`);
  return ms;
}

export function webhookUrl(v: unknown, field = 'webhook.url'): string {
  if (typeof v !== 'string' || v.length > 2000) bad(field, `${field} must be an http(s) URL of at most 2000 characters`);
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    bad(field, `${field} is not a URL`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') bad(field, `${field} must use http or https`);
  // Credentials would be stored and shown in plain text; the signature header authenticates us instead.
  if (u.username || u.password) bad(field, `${field} must not carry a user name or password; check the X-Reef-Signature header instead`);
  return u.toString();
}

export interface ParsedRule {
  deviceId: string | null;
  spec: AlarmRuleSpec;
  /** True when the webhook is new or its URL changed: a new signing secret is issued. */
  newWebhook: boolean;
}

/**
 * Validates a rule body (create, or a full replacement of `previous`). Unknown fields are refused,
 * so a misspelt "treshold" is a 400 rather than a rule that silently never fires.
 */
export function parseRule(body: unknown, previous?: AlarmRuleSpec): ParsedRule {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) bad('body', 'the body must be a JSON object describing the rule');
  const b = body as Record<string, unknown>;
  for (const k of Object.keys(b)) if (!ALLOWED.has(k)) bad(k, `unknown field ${JSON.stringify(k)}; see docs/alarms.md for the fields of a rule`);

  const condition = b.condition;
  if (typeof condition !== 'string' || !CONDITIONS.includes(condition as AlarmCondition)) bad('condition', `condition must be one of ${CONDITIONS.join(', ')}`);
  const cond = condition as AlarmCondition;

  let deviceId: string | null = null;
  if (b.deviceId !== undefined && b.deviceId !== null) {
    if (typeof b.deviceId !== 'string') bad('deviceId', 'deviceId must be a device id or null (every device of the solution)');
    try {
      deviceId = checkDeviceId(b.deviceId);
    } catch {
      bad('deviceId', 'deviceId must be a device id (a UUID) or null');
    }
  }

  let templateId: string | null = null;
  if (b.templateId !== undefined && b.templateId !== null) {
    if (typeof b.templateId !== 'string' || !TEMPLATE_ID.test(b.templateId)) bad('templateId', 'templateId must be the id of a device template of the solution (a UUID) or null');
    if (deviceId) bad('templateId', 'a rule watches one device (deviceId), the devices of one template (templateId) or the whole solution (neither), not both');
    templateId = b.templateId.toLowerCase();
  }

  const field = b.field === undefined ? 'temperature' : b.field;
  if (typeof field !== 'string' || !FIELD.test(field) || field === 'timestamp') bad('field', 'field must be the path of a numeric field, such as "temperature" or "accelerometer.z"');

  const spec: AlarmRuleSpec = {
    name: '',
    field,
    condition: cond,
    durationMs: 0,
    hysteresis: 0,
    unit: null,
    severity: 'major',
    enabled: true,
    webhook: null,
    ...(templateId ? { templateId } : {}),
  };

  const forbid = (k: string) => {
    if (b[k] !== undefined && b[k] !== null) bad(k, `${k} does not apply to a ${cond} rule`);
  };
  if (cond === 'above' || cond === 'below') {
    spec.threshold = num(b.threshold, 'threshold');
    for (const k of ['low', 'high', 'ratePerMinute', 'direction', 'silence', 'silenceMs']) forbid(k);
  } else if (cond === 'outside') {
    spec.low = num(b.low, 'low');
    spec.high = num(b.high, 'high');
    if (spec.low >= spec.high) bad('high', 'high must be greater than low');
    for (const k of ['threshold', 'ratePerMinute', 'direction', 'silence', 'silenceMs']) forbid(k);
  } else if (cond === 'rate') {
    spec.ratePerMinute = num(b.ratePerMinute, 'ratePerMinute');
    if (spec.ratePerMinute <= 0) bad('ratePerMinute', 'ratePerMinute must be greater than 0 (the change per minute that raises)');
    const dir = b.direction ?? 'any';
    if (dir !== 'rise' && dir !== 'fall' && dir !== 'any') bad('direction', 'direction must be rise, fall or any');
    spec.direction = dir;
    for (const k of ['threshold', 'low', 'high', 'silence', 'silenceMs']) forbid(k);
  } else {
    const s = b.silence ?? b.silenceMs;
    if (s === undefined || s === null) bad('silence', 'a silence rule needs silence: how long without an observation raises it, e.g. "15m"');
    spec.silenceMs = duration(s, b.silence !== undefined ? 'silence' : 'silenceMs', MIN_SILENCE_MS, MAX_SILENCE_MS);
    for (const k of ['threshold', 'low', 'high', 'ratePerMinute', 'direction', 'hysteresis', 'duration', 'durationMs', 'unit']) forbid(k);
  }

  if (cond !== 'silence') {
    const d = b.duration ?? b.durationMs;
    if (d !== undefined && d !== null) spec.durationMs = duration(d, b.duration !== undefined ? 'duration' : 'durationMs', 0, MAX_DURATION_MS);
    if (b.hysteresis !== undefined && b.hysteresis !== null) {
      spec.hysteresis = num(b.hysteresis, 'hysteresis');
      if (spec.hysteresis < 0) bad('hysteresis', 'hysteresis must not be negative');
    }
    if (cond === 'outside' && spec.hysteresis * 2 >= spec.high! - spec.low!) bad('hysteresis', 'hysteresis must be less than half the normal range, or the alarm could never clear');
    if (cond === 'rate' && spec.hysteresis >= spec.ratePerMinute!) bad('hysteresis', 'hysteresis must be less than ratePerMinute, or the alarm could never clear');
    const unit = b.unit === undefined ? (field === 'temperature' ? 'C' : null) : b.unit;
    if (unit !== null && unit !== 'C' && unit !== 'F') bad('unit', 'unit must be "C", "F" or null');
    if (unit !== null && field !== 'temperature') bad('unit', 'unit applies to temperature rules only');
    spec.unit = unit as TemperatureUnit | null;
  }

  if (b.severity !== undefined) {
    if (typeof b.severity !== 'string' || !SEVERITIES.includes(b.severity as AlarmSeverity)) bad('severity', `severity must be one of ${SEVERITIES.join(', ')}`);
    spec.severity = b.severity as AlarmSeverity;
  }
  if (b.enabled !== undefined) {
    if (typeof b.enabled !== 'boolean') bad('enabled', 'enabled must be true or false');
    spec.enabled = b.enabled;
  }
  if (b.name !== undefined && b.name !== null) {
    if (typeof b.name !== 'string' || b.name.length > 100 || /[\u0000-\u001f]/.test(b.name)) bad('name', 'name must be text of at most 100 characters');
    spec.name = b.name.trim();
  }
  if (!spec.name) spec.name = describe(spec);

  let newWebhook = false;
  if (b.webhook !== undefined && b.webhook !== null) {
    const w = b.webhook;
    const raw = typeof w === 'string' ? w : typeof w === 'object' && !Array.isArray(w) ? (w as Record<string, unknown>).url : undefined;
    if (typeof w === 'object' && w !== null) {
      for (const k of Object.keys(w)) if (k !== 'url') bad(`webhook.${k}`, 'webhook takes only {"url"}; the signing secret is issued by Reef');
    }
    const url = webhookUrl(raw);
    if (previous?.webhook && previous.webhook.url === url) spec.webhook = previous.webhook;
    else {
      spec.webhook = { url, salt: randomBytes(12).toString('base64url') };
      newWebhook = true;
    }
  }
  return { deviceId, spec, newWebhook };
}

/** A readable default name: "temperature above 8 °C for 10 min". */
export function describe(s: AlarmRuleSpec): string {
  const u = s.unit ? ` °${s.unit}` : '';
  const hold = s.durationMs ? ` for ${human(s.durationMs)}` : '';
  switch (s.condition) {
    case 'above':
      return `${s.field} above ${s.threshold}${u}${hold}`;
    case 'below':
      return `${s.field} below ${s.threshold}${u}${hold}`;
    case 'outside':
      return `${s.field} outside ${s.low}..${s.high}${u}${hold}`;
    case 'rate':
      return `${s.field} ${s.direction === 'rise' ? 'rising' : s.direction === 'fall' ? 'falling' : 'changing'} faster than ${s.ratePerMinute}${u}/min${hold}`;
    case 'silence':
      return `no observation for ${human(s.silenceMs!)}`;
  }
}

function human(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  return `${ms / 1000} s`;
}

/** A rule on the wire: its spec (the signing salt of its webhook left out) with its keys and times. */
export interface RuleWire extends Omit<AlarmRuleSpec, 'webhook' | 'templateId'> {
  id: string;
  solution: string;
  deviceId: string | null;
  templateId: string | null;
  webhook: { url: string; secret?: string } | null;
  createdAt: string;
  updatedAt: string;
}

export function ruleToWire(r: AlarmRuleRecord, secret?: string): RuleWire {
  const s = r.spec;
  const out: RuleWire = {
    id: r.id,
    solution: r.solution,
    deviceId: r.deviceId,
    templateId: s.templateId ?? null,
    name: s.name,
    field: s.field,
    condition: s.condition,
    durationMs: s.durationMs,
    hysteresis: s.hysteresis,
    unit: s.unit,
    severity: s.severity,
    enabled: s.enabled,
    webhook: s.webhook ? { url: s.webhook.url, ...(secret ? { secret } : {}) } : null,
    createdAt: isoUtc(r.createdAt),
    updatedAt: isoUtc(r.updatedAt),
  };
  if (s.threshold !== undefined) out.threshold = s.threshold;
  if (s.low !== undefined) out.low = s.low;
  if (s.high !== undefined) out.high = s.high;
  if (s.ratePerMinute !== undefined) out.ratePerMinute = s.ratePerMinute;
  if (s.direction !== undefined) out.direction = s.direction;
  if (s.silenceMs !== undefined) out.silenceMs = s.silenceMs;
  return out;
}

const iso = (t: number | null) => (t === null ? null : isoUtc(t));

export function alarmToWire(a: AlarmRecord) {
  return {
    id: a.id,
    solution: a.solution,
    deviceId: a.deviceId,
    ruleId: a.ruleId,
    status: a.status,
    active: a.status === 'raised' || a.status === 'acknowledged',
    severity: a.severity,
    rule: a.rule,
    raisedAt: isoUtc(a.raisedAt),
    reading: a.reading ? { timestamp: isoUtc(a.reading.ts), value: a.reading.value, unit: a.reading.unit } : null,
    acknowledgedAt: iso(a.acknowledgedAt),
    acknowledgedBy: a.acknowledgedBy,
    clearedAt: iso(a.clearedAt),
    updatedAt: isoUtc(a.updatedAt),
    history: a.history.map((h) => ({
      at: isoUtc(h.at),
      event: h.event,
      ...(h.by ? { by: h.by } : {}),
      ...(h.reading ? { reading: { timestamp: isoUtc(h.reading.ts), value: h.reading.value, unit: h.reading.unit } } : {}),
      ...(h.note ? { note: h.note } : {}),
    })),
  };
}

export type AlarmWire = ReturnType<typeof alarmToWire>;

export function deliveryToWire(d: WebhookDeliveryRecord) {
  return {
    id: d.id,
    ruleId: d.ruleId,
    alarmId: d.alarmId,
    status: d.status,
    attempts: d.attempts,
    url: d.url,
    lastError: d.lastError,
    nextAttemptAt: d.status === 'pending' ? isoUtc(d.nextAt) : null,
    createdAt: isoUtc(d.createdAt),
    updatedAt: isoUtc(d.updatedAt),
    body: JSON.parse(d.body) as unknown,
  };
}
