// Added sensors (seed §4.4: "A resource URI of an added sensor must be registered in the server's
// configuration header"). The software analogue of that header is a JSON file given to the kit
// (`--sensors FILE`, REEF_DEVICE_SENSORS): every sensor it registers is served under the module's
// prefix at its URI, listed in /.well-known/core, readable with `GET <uri>?sens` and observable like
// the temperature. A URI that is not registered stays 4.04. docs/device.md "Added sensors".
//
//   {"sensors": [
//     {"type": "humidity", "uri": "/arduino/humidity", "unit": "%", "base": 45, "swing": 10,
//      "noise": 1, "min": 0, "max": 100, "decimals": 1},
//     {"type": "battery", "uri": "/sys/battery", "unit": "V", "base": 3.7, "noise": 0.01, "decimals": 2,
//      "payload": "cbor"}]}
import { ReefError } from '../core/errors.ts';
import { SENSOR_UNIT } from '../coap/index.ts';

export interface AddedSensorSpec {
  /** The sensor type name: the field its readings become in observations, its MQTT topic part. */
  type: string;
  /** Uri-Path segments after the module's prefix, e.g. ["arduino", "humidity"]. */
  path: string[];
  unit: string;
  /** The value model: base + daily swing (peak 15:00 UTC) + uniform noise, clamped to [min, max]. */
  base: number;
  swing: number;
  noise: number;
  min: number;
  max: number;
  decimals: number;
  /** Payload form: text, CBOR {0: type, 1: text}, or as the kit's readings (`--cbor`). */
  payload: 'text' | 'cbor' | 'kit';
}

/** Field names an observation already uses, and the built-in sensor: not available as a type. */
export const RESERVED_TYPES = new Set(['temp', 'temperature', 'timestamp', 'unit', 'mac', 'source', 'sensor', 'time', 'stats']);
/** Resources the application processor serves itself. */
const BUILT_IN = new Set(['', '.well-known/core', 'arduino/temp', 'system/time', 'sys/time', 'sys/stats']);
export const MAX_ADDED_SENSORS = 16;
const TYPE = /^[a-z][a-z0-9_]{0,31}$/;
const SEGMENT = /^[A-Za-z0-9._~-]{1,32}$/;

/** Parses a sensor configuration; every problem reported together in one VALIDATION_FAILED. */
export function parseSensorConfig(text: string, source = 'sensor configuration'): AddedSensorSpec[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new ReefError('VALIDATION_FAILED', `${source} is not JSON: ${(e as Error).message}`, { field: 'sensors' });
  }
  const list = doc && typeof doc === 'object' && !Array.isArray(doc) ? (doc as { sensors?: unknown }).sensors : undefined;
  if (!Array.isArray(list)) throw new ReefError('VALIDATION_FAILED', `${source} must be {"sensors": [...]}`, { field: 'sensors' });
  const problems: string[] = [];
  if (list.length > MAX_ADDED_SENSORS) problems.push(`at most ${MAX_ADDED_SENSORS} sensors`);
  const out: AddedSensorSpec[] = [];
  const types = new Set<string>();
  const uris = new Set<string>();
  list.forEach((raw, i) => {
    const at = `sensors[${i}]`;
    if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return void problems.push(`${at} must be an object`);
    const s = raw as Record<string, unknown>;
    const known = new Set(['type', 'uri', 'unit', 'base', 'swing', 'noise', 'min', 'max', 'decimals', 'payload']);
    for (const k of Object.keys(s)) if (!known.has(k)) problems.push(`${at}.${k} is not a sensor field`);
    const type = s.type;
    if (typeof type !== 'string' || !TYPE.test(type)) problems.push(`${at}.type must be a lower-case name (a-z, 0-9, _; up to 32)`);
    else if (RESERVED_TYPES.has(type)) problems.push(`${at}.type "${type}" is reserved`);
    else if (types.has(type)) problems.push(`${at}.type "${type}" is registered twice`);
    const uri = typeof s.uri === 'string' ? s.uri.replace(/^\/+/, '') : undefined;
    const path = uri?.split('/') ?? [];
    if (uri === undefined || path.length > 4 || !path.every((p) => SEGMENT.test(p))) problems.push(`${at}.uri must be a path like /arduino/humidity (1..4 segments of A-Z a-z 0-9 . _ ~ -)`);
    else if (BUILT_IN.has(uri)) problems.push(`${at}.uri /${uri} is a built-in resource`);
    else if (uris.has(uri)) problems.push(`${at}.uri /${uri} is registered twice`);
    if (typeof s.unit !== 'string' || !SENSOR_UNIT.test(s.unit)) problems.push(`${at}.unit must be 1..8 characters without comma or space`);
    const num = (k: string, dflt: number): number => {
      const v = s[k] ?? dflt;
      if (typeof v !== 'number' || !Number.isFinite(v)) {
        problems.push(`${at}.${k} must be a number`);
        return dflt;
      }
      return v;
    };
    const base = num('base', 0);
    const swing = num('swing', 0);
    const noise = num('noise', 0);
    const min = num('min', -1e9);
    const max = num('max', 1e9);
    const decimals = num('decimals', 2);
    if (swing < 0 || noise < 0) problems.push(`${at}: swing and noise must be 0 or more`);
    if (min > max) problems.push(`${at}: min must not exceed max`);
    if (!Number.isInteger(decimals) || decimals < 0 || decimals > 6) problems.push(`${at}.decimals must be 0..6`);
    const payload = s.payload ?? 'kit';
    if (payload !== 'text' && payload !== 'cbor' && payload !== 'kit') problems.push(`${at}.payload must be "text", "cbor" or "kit"`);
    if (typeof type === 'string') types.add(type);
    if (uri !== undefined) uris.add(uri);
    out.push({ type: type as string, path, unit: s.unit as string, base, swing, noise, min, max, decimals, payload: payload as AddedSensorSpec['payload'] });
  });
  if (problems.length) throw new ReefError('VALIDATION_FAILED', `${source} invalid: ${problems.join('; ')}`, { field: 'sensors' });
  return out;
}

/** Reads and parses the file; a file that cannot be read is a VALIDATION_FAILED naming it. */
export function loadSensorConfig(path: string, readFile: (p: string) => string): AddedSensorSpec[] {
  let text: string;
  try {
    text = readFile(path);
  } catch (e) {
    throw new ReefError('VALIDATION_FAILED', `sensors (REEF_DEVICE_SENSORS) cannot be read: ${(e as Error).message}`, { field: 'sensors' });
  }
  return parseSensorConfig(text, `sensor configuration ${path}`);
}
