// Wire shapes of the Reef HTTP API as clients see them (seed §2, wire §1, docs/api.md). Copied here
// on purpose: the SDK depends on nothing but `fetch`, so it imports nothing from the server side.

/** Names the seed gives a meaning to (seed §1); any other solution name is a user's own. */
export const SANDBOX = 'sandbox';
export const STUDIO_SIMULATION = 'StudioSimulation';

export interface Location {
  latitude: number;
  longitude: number;
  [key: string]: unknown;
}

export interface DomainInfo {
  location?: Location;
  [key: string]: unknown;
}

/**
 * seed §2 writes the MAC fields with a placeholder `vendor` word; the wire (and Reef) uses `ssni`.
 * Use deviceMac() to read a device's MAC whichever spelling a server sends.
 */
export interface ProvisioningInfo {
  status: 'provisioned' | string;
  timestamp: string;
  ssniMacAddress: string;
  ssniNetworkDeviceType: 'MILLI' | string;
  [key: string]: unknown;
}

/** A sensor of a device template: its name, or an object with at least `name` (unit, type...). */
export type TemplateSensor = string | { name: string; [key: string]: unknown };

/** A device template (docs/api.md "Device templates"); static (system) templates have no id. */
export interface DeviceTemplate {
  id?: string;
  name: string;
  sensors: TemplateSensor[];
}

/** A MAC in the one form Reef stores and the original clients match on: 16 lower-case hex, or null. */
export function normalizeMac(mac: unknown): string | null {
  if (typeof mac !== 'string') return null;
  const m = mac.replace(/[:-]/g, '').toLowerCase();
  return /^[0-9a-f]{16}$/.test(m) ? m : null;
}

/**
 * A device's MAC from any of its spellings: provisioningInfo.ssniMacAddress (the wire),
 * provisioningInfo.vendorMacAddress (the seed's placeholder) or domainInfo.nic_macID (wire §1).
 */
export function deviceMac(d: Pick<Device, 'provisioningInfo' | 'domainInfo'>): string | null {
  const p = d.provisioningInfo as Record<string, unknown> | undefined;
  return normalizeMac(p?.ssniMacAddress) ?? normalizeMac(p?.vendorMacAddress) ?? normalizeMac((d.domainInfo as Record<string, unknown> | undefined)?.nic_macID);
}

export interface Device {
  id: string;
  /** `NICDevKit` (a provisioned dev kit), `VirtualDevice` (simulated), or a user's own type. */
  deviceType: string;
  domainInfo: DomainInfo;
  provisioningInfo?: ProvisioningInfo;
}

export interface NewDevice {
  deviceType: string;
  domainInfo?: DomainInfo;
}

/**
 * A change to a device (PATCH): a new deviceType, and domainInfo as a JSON merge patch (RFC 7396 §2):
 * members given replace the stored ones, nested objects merge, `null` removes a member.
 */
export interface DeviceChange {
  deviceType?: string;
  domainInfo?: { [key: string]: unknown } | null;
}

/**
 * One reading: `timestamp` ISO-8601 UTC with milliseconds, `temperature`, and free-form fields
 * (`humidity`, `batteryLevel`, `accelerometer: {x, y, z}`...). On upload `temperature` may also be a
 * numeric string ("72.50"), as some clients send it; it is stored as a number.
 */
export interface Observation {
  timestamp: string;
  temperature?: number;
  [field: string]: unknown;
}

export interface UploadObservation {
  /** ISO 8601 text, a Date, or epoch milliseconds (sent as ISO text). */
  timestamp: string | Date | number;
  temperature?: number | string;
  [field: string]: unknown;
}

/** An element of "latest observations of all devices" (seed §4.2). */
export interface ObservationGroup {
  deviceId: string;
  observations: Observation[];
}

/** One bucket of `?bucket=`: min/avg/max of temperature over [timestamp, timestamp + bucket). */
export interface Bucket {
  timestamp: string;
  count: number;
  min: number | null;
  avg: number | null;
  max: number | null;
}

export interface ObservationQuery {
  /** Inclusive lower bound. */
  from?: string | Date;
  /** Exclusive upper bound. */
  to?: string | Date;
  /** Only observations whose tags contain this tag. */
  tags?: string;
}

export interface ObservationPage {
  observations: Observation[];
  /** The next page's full URL from the `next_page` header, or null on the last page. */
  nextPage: string | null;
}

/** The uniform error body of every failed request (docs/errors.md). */
export interface ErrorBody {
  statusCode: number;
  code: string;
  error: string;
  message: string;
  requestId: string;
  field?: string;
}

export interface TokenResponse {
  accessToken: string;
  tokenType?: string;
  expiresIn?: number;
}

/** Events of the live stream (`GET /api/solutions/{S}/events`, Server-Sent Events). */
export type StreamEvent =
  | { type: 'observations'; deviceId: string; observations: Observation[] }
  | { type: 'device'; deviceId: string; action: 'created' | 'deleted' | string }
  | { type: 'alarm'; event: 'raised' | 'acknowledged' | 'cleared'; alarm: Alarm }
  | { type: 'alarm-rule'; ruleId: string; action: 'created' | 'updated' | 'deleted' }
  | { type: string; data: unknown; [key: string]: unknown };

// ---- simulations (docs/simulation.md) ----------------------------------------------------------

export type SimulationStatus = 'running' | 'backfilling' | 'stopped' | 'completed' | 'failed';

export type SimulationArea = { center: { latitude: number; longitude: number }; radiusKm: number; kind?: 'circle' } | { south: number; west: number; north: number; east: number; kind?: 'box' };

export type SimulationProfile = 'outdoor' | 'indoor' | { kind?: string; offsetC?: number; dailySwingC?: number; driftC?: number; noiseC?: number };

/** What a simulation is started with; durations are "10s", "5m", "1h", "7d" or milliseconds. */
export interface NewSimulation {
  devices: number;
  interval: string | number;
  duration?: string | number | null;
  backfill?: string | number;
  area?: SimulationArea;
  seed?: string | number;
  profile?: SimulationProfile;
  name?: string;
}

export interface Simulation {
  id: string;
  name: string | null;
  status: SimulationStatus;
  solution: string;
  devices: number;
  /** In device index order; only on create and on get of one simulation. */
  deviceIds?: string[];
  params: {
    devices: number;
    intervalMs: number;
    durationMs: number | null;
    backfillMs: number;
    /** The area as the server resolved it (a circle, or a box as "bbox"). */
    area: { kind: 'circle'; center: Location; radiusKm: number } | { kind: 'bbox'; south: number; west: number; north: number; east: number };
    seed: string;
    /** The climate profile with every parameter filled in. */
    profile: { kind: 'outdoor' | 'indoor'; offsetC: number; dailySwingC: number; driftC: number; noiseC: number };
  };
  observationsProduced: number;
  createdAt: string;
  startedAt: string;
  endsAt: string | null;
  stoppedAt: string | null;
  backfill: { done: number; total: number } | null;
  error: string | null;
}

// ---- CoAP bridge to dev kits (docs/coap.md "HTTP bridge") ----------------------------------------

/** A dev kit's CoAP response as the gateway's HTTP bridge returns it. */
export interface CoapResponse {
  deviceId: string;
  mac: string;
  /** CoAP response code, "2.05". */
  code: string;
  codeName: string;
  contentFormat: number | null;
  /** Text for text-like formats, else base64 (`payloadEncoding` says which); null without payload. */
  payload: string | null;
  payloadEncoding: 'text' | 'base64' | null;
  /** The decoded temperature reading, in the kit's own unit, when the payload is one. */
  reading: { epoch: number; value: number; unit: 'C' | 'F' } | null;
  maxAge: number | null;
  /** Observe sequence number, on notifications. */
  observe?: number;
}

export interface CoapRequestBody {
  /** Text payload (sent as text/plain unless contentFormat says otherwise). */
  payload?: string;
  payloadBase64?: string;
  contentFormat?: number;
}

// ---- alarms (docs/alarms.md) ---------------------------------------------------------------------

export type AlarmCondition = 'above' | 'below' | 'outside' | 'rate' | 'silence';
export type AlarmSeverity = 'critical' | 'major' | 'minor' | 'warning';
export type AlarmStatus = 'raised' | 'acknowledged' | 'cleared-unacknowledged' | 'cleared';

/** A rule as created or replaced; durations are "10m", "1h"... or milliseconds. */
export interface NewAlarmRule {
  condition: AlarmCondition;
  /** One device, or absent/null for every device of the solution (or of templateId). */
  deviceId?: string | null;
  /** Every device naming this device template, devices made later included (not with deviceId). */
  templateId?: string | null;
  name?: string;
  /** Path of a numeric field; default "temperature". */
  field?: string;
  threshold?: number;
  low?: number;
  high?: number;
  ratePerMinute?: number;
  direction?: 'rise' | 'fall' | 'any';
  silence?: string | number;
  duration?: string | number;
  hysteresis?: number;
  unit?: 'C' | 'F' | null;
  severity?: AlarmSeverity;
  enabled?: boolean;
  /** Alarm events are POSTed here, signed (docs/alarms.md "Webhooks"). */
  webhook?: { url: string } | string | null;
}

export interface AlarmRule {
  id: string;
  solution: string;
  deviceId: string | null;
  templateId: string | null;
  name: string;
  field: string;
  condition: AlarmCondition;
  threshold?: number;
  low?: number;
  high?: number;
  ratePerMinute?: number;
  direction?: 'rise' | 'fall' | 'any';
  silenceMs?: number;
  durationMs: number;
  hysteresis: number;
  unit: 'C' | 'F' | null;
  severity: AlarmSeverity;
  enabled: boolean;
  /** `secret` only in the answer that issued it (create, or a new URL). */
  webhook: { url: string; secret?: string } | null;
  createdAt: string;
  updatedAt: string;
}

export interface AlarmReading {
  timestamp: string;
  value: number;
  unit: 'C' | 'F' | null;
}

export interface Alarm {
  id: string;
  solution: string;
  deviceId: string;
  ruleId: string;
  status: AlarmStatus;
  active: boolean;
  severity: AlarmSeverity;
  rule: { name: string; field: string; condition: AlarmCondition };
  raisedAt: string;
  reading: AlarmReading | null;
  acknowledgedAt: string | null;
  acknowledgedBy: { tenantId: string; name: string } | null;
  clearedAt: string | null;
  updatedAt: string;
  history: { at: string; event: 'raised' | 'acknowledged' | 'cleared'; by?: { tenantId: string; name: string }; reading?: AlarmReading; note?: string }[];
}

export interface AlarmQuery {
  /** "active", or statuses. */
  status?: 'active' | AlarmStatus | AlarmStatus[];
  deviceId?: string;
  ruleId?: string;
  limit?: number;
  /** nextAfter of the previous page. */
  after?: string;
}

/** A solution's alarm webhook (docs/alarms.md "Webhooks"). */
export interface SolutionWebhook {
  url: string;
  /** The signing secret: only in the answer that issued it. */
  secret?: string;
  updatedAt: string;
}

export interface AlarmDelivery {
  id: string;
  ruleId: string;
  alarmId: string;
  status: 'pending' | 'delivered' | 'dead';
  attempts: number;
  url: string;
  lastError: string | null;
  nextAttemptAt: string | null;
  createdAt: string;
  updatedAt: string;
  body: { event: string; sentAt: string; alarm: Alarm };
}

/** GET /api/mqtt: how to connect to the service's MQTT broker (docs/mqtt.md). */
export interface MqttConnectInfo {
  url: string;
  tlsUrl: string | null;
  username: string;
  /** What to send as the password (a description: an access token, or the client secret). */
  password: string;
  tenantId: string;
  topics: { alerts: string; ingest: string; errors: string };
  /** A mosquitto_sub command line to start from ($TOKEN: an access token). */
  example: string;
}

/** GET /api/solutions/{s}/cadence: when a device last reported and how often it usually does. */
export interface DeviceCadence {
  deviceId: string;
  /** Its newest reading's time (ISO 8601). */
  lastSeen: string;
  /** The median gap between its newest readings; null with fewer than two. */
  intervalSeconds: number | null;
}

/** GET /api/solutions/{s}/kits: a dev kit as the gateway sees it. */
export interface KitStatus {
  deviceId: string;
  mac: string;
  reachable: boolean;
  /** The last announcement the gateway received (ISO 8601); null when never heard. */
  lastHeard: string | null;
  announcePeriodSeconds: number | null;
  firmware: string | null;
}
