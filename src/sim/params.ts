// What a client may ask of a simulation, checked once: every bad value is a 400 naming its field
// (`interval`, `area.center.latitude`, `profile.noiseC`...). Durations are "500ms", "10s", "5m",
// "1h", "7d" or a number of milliseconds.
import { ReefError } from '../core/errors.ts';
import { duration as durationText, latitude, longitude } from '../core/validate.ts';
import { PROFILES, type Area, type Profile } from './model.ts';

export interface SimLimits {
  /** Shortest reporting interval. 1 s in service; tests may allow less. */
  minIntervalMs: number;
  maxIntervalMs: number;
  maxDevices: number;
  /** Most readings per second one simulation may produce (devices ÷ interval). */
  maxRatePerSecond: number;
  maxBackfillMs: number;
  /** Most readings one backfill may write. */
  maxBackfillObservations: number;
  /** Most simulations of one tenant group running (or backfilling) at once. */
  maxActivePerGroup: number;
}

export const DEFAULT_LIMITS: SimLimits = {
  minIntervalMs: 1000,
  maxIntervalMs: 86_400_000,
  maxDevices: 10_000,
  maxRatePerSecond: 2_000,
  maxBackfillMs: 366 * 86_400_000,
  maxBackfillObservations: 100_000_000,
  maxActivePerGroup: 10,
};

export interface SimParams {
  name: string | null;
  devices: number;
  intervalMs: number;
  /** How long the simulation runs live before it completes; null runs until stopped. */
  durationMs: number | null;
  /** History written before the start, in bulk. */
  backfillMs: number;
  area: Area;
  seed: string;
  profile: Profile;
}

/** Lisbon: mild, sunny, and a daily cycle worth watching. */
export const DEFAULT_AREA: Area = { kind: 'circle', center: { latitude: 38.7223, longitude: -9.1393 }, radiusKm: 20 };
export const MAX_RADIUS_KM = 5000;

function bad(field: string, message: string): never {
  throw new ReefError('VALIDATION_FAILED', `${field} ${message}`, { field });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function only(o: Record<string, unknown>, allowed: string[], prefix: string): void {
  for (const k of Object.keys(o)) if (!allowed.includes(k)) bad(prefix ? `${prefix}.${k}` : k, 'is not a known field');
}

function duration(v: unknown, field: string): number {
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v) || v <= 0) bad(field, 'must be a positive number of milliseconds or a duration such as 10s, 5m, 1h, 7d');
    return v;
  }
  if (typeof v !== 'string') bad(field, 'must be a duration such as 10s, 5m, 1h or 7d, or a number of milliseconds');
  return durationText(v, field);
}

function num(v: unknown, field: string, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) bad(field, `must be a number from ${min} to ${max}`);
  return v;
}

export function parseArea(v: unknown): Area {
  if (v === undefined || v === null) return DEFAULT_AREA;
  if (!isObject(v)) bad('area', 'must be {"center": {"latitude", "longitude"}, "radiusKm"} or {"south", "west", "north", "east"}');
  if (v.center !== undefined || v.radiusKm !== undefined || v.kind === 'circle') {
    only(v, ['kind', 'center', 'radiusKm'], 'area');
    if (!isObject(v.center)) bad('area.center', 'must be an object with latitude and longitude');
    only(v.center, ['latitude', 'longitude'], 'area.center');
    const center = { latitude: latitude(v.center.latitude, 'area.center.latitude'), longitude: longitude(v.center.longitude, 'area.center.longitude') };
    const radiusKm = num(v.radiusKm, 'area.radiusKm', 0, MAX_RADIUS_KM);
    if (radiusKm <= 0) bad('area.radiusKm', 'must be more than 0');
    return { kind: 'circle', center, radiusKm };
  }
  only(v, ['kind', 'south', 'west', 'north', 'east'], 'area');
  if (v.kind !== undefined && v.kind !== 'bbox') bad('area.kind', 'must be "circle" or "bbox"');
  const south = latitude(v.south, 'area.south');
  const north = latitude(v.north, 'area.north');
  const west = longitude(v.west, 'area.west');
  const east = longitude(v.east, 'area.east');
  if (south >= north) bad('area.north', 'must be north of area.south');
  // west > east is a box across the 180° meridian; equal would be an empty strip.
  if (west === east) bad('area.east', 'must differ from area.west');
  return { kind: 'bbox', south, west, north, east };
}

export function parseProfile(v: unknown): Profile {
  if (v === undefined || v === null) return { ...PROFILES.outdoor };
  if (typeof v === 'string') {
    if (v !== 'outdoor' && v !== 'indoor') bad('profile', 'must be "outdoor" or "indoor", or an object');
    return { ...PROFILES[v] };
  }
  if (!isObject(v)) bad('profile', 'must be "outdoor" or "indoor", or an object');
  only(v, ['kind', 'offsetC', 'dailySwingC', 'driftC', 'noiseC'], 'profile');
  const kind = v.kind ?? 'outdoor';
  if (kind !== 'outdoor' && kind !== 'indoor') bad('profile.kind', 'must be "outdoor" or "indoor"');
  const p = { ...PROFILES[kind] };
  if (v.offsetC !== undefined) p.offsetC = num(v.offsetC, 'profile.offsetC', -50, 50);
  if (v.dailySwingC !== undefined) p.dailySwingC = num(v.dailySwingC, 'profile.dailySwingC', 0, 30);
  if (v.driftC !== undefined) p.driftC = num(v.driftC, 'profile.driftC', 0, 30);
  if (v.noiseC !== undefined) p.noiseC = num(v.noiseC, 'profile.noiseC', 0, 10);
  return p;
}

/** Validates a create request; throws VALIDATION_FAILED naming the first bad field. */
export function parseSimulationRequest(body: unknown, limits: SimLimits, randomSeed: () => string): SimParams {
  if (!isObject(body)) bad('body', 'must be a JSON object');
  only(body, ['name', 'devices', 'interval', 'duration', 'backfill', 'area', 'seed', 'profile'], '');

  let name: string | null = null;
  if (body.name !== undefined && body.name !== null) {
    if (typeof body.name !== 'string' || body.name.length > 100) bad('name', 'must be a string of at most 100 characters');
    name = body.name;
  }
  const devices = body.devices;
  if (typeof devices !== 'number' || !Number.isInteger(devices) || devices < 1 || devices > limits.maxDevices) {
    bad('devices', `must be a whole number from 1 to ${limits.maxDevices}`);
  }
  if (body.interval === undefined) bad('interval', 'is required (e.g. "10s")');
  const intervalMs = duration(body.interval, 'interval');
  if (intervalMs < limits.minIntervalMs || intervalMs > limits.maxIntervalMs) {
    bad('interval', `must be from ${limits.minIntervalMs} ms to ${limits.maxIntervalMs / 3_600_000} h`);
  }
  if ((devices * 1000) / intervalMs > limits.maxRatePerSecond) {
    bad('devices', `at most ${limits.maxRatePerSecond} readings per second per simulation: use fewer devices or a longer interval`);
  }
  const durationMs = body.duration === undefined || body.duration === null ? null : duration(body.duration, 'duration');
  if (durationMs !== null && durationMs < intervalMs) bad('duration', 'must be at least one interval');
  let backfillMs = 0;
  if (body.backfill !== undefined && body.backfill !== null && body.backfill !== 0 && body.backfill !== '0') {
    backfillMs = duration(body.backfill, 'backfill');
    if (backfillMs > limits.maxBackfillMs) bad('backfill', `must be at most ${Math.floor(limits.maxBackfillMs / 86_400_000)} days`);
    if (Math.ceil(backfillMs / intervalMs) * devices > limits.maxBackfillObservations) {
      bad('backfill', `would write more than ${limits.maxBackfillObservations} readings: shorten it, use fewer devices or a longer interval`);
    }
  }
  let seed: string;
  if (body.seed === undefined || body.seed === null) seed = randomSeed();
  else if (typeof body.seed === 'string' && body.seed.length >= 1 && body.seed.length <= 100) seed = body.seed;
  else if (typeof body.seed === 'number' && Number.isSafeInteger(body.seed)) seed = String(body.seed);
  else bad('seed', 'must be a string of 1 to 100 characters or a whole number');

  return { name, devices, intervalMs, durationMs, backfillMs, area: parseArea(body.area), seed, profile: parseProfile(body.profile) };
}
