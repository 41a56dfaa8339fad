// Observation fields: besides `temperature` (°C in the store), observations carry free-form fields
// (seed §4.3: any JSON alongside the timestamp) such as humidity, battery level, accelerometer
// x/y/z or light. Any numeric field, nested ones by dotted path ("acc.x"), can be plotted, tiled,
// coloured on the map and exported. Units are shown where the name makes them known.
import type { TemplateSensor } from '../../src/sdk/index.ts';
import type { Observation } from './api.ts';
import type { Unit } from './format.ts';

export const TEMPERATURE = 'temperature';

/** Fields that are not measurements: never offered. */
const SKIP = new Set(['timestamp', 'tags', 'deviceId', 'id']);
/** Nesting deeper than this is not offered (a measurement is rarely further down). */
const MAX_DEPTH = 3;

/** The number at `path` ("acc.x"), or null; numeric strings count (some clients send "72.50"). */
export function valueAt(o: Observation | undefined, path: string): number | null {
  if (!o) return null;
  let v: unknown = o;
  for (const k of path.split('.')) {
    if (v === null || typeof v !== 'object') return null;
    v = (v as Record<string, unknown>)[k];
  }
  if (typeof v === 'number') return Number.isFinite(v) ? v : null;
  if (typeof v === 'string' && v.trim() !== '' && /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(v.trim())) return Number(v);
  return null;
}

/** Adds every numeric field path of `o` to `into`. */
export function collectPaths(o: Observation, into: Set<string>): void {
  const walk = (v: unknown, prefix: string, depth: number) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v) || depth > MAX_DEPTH) return;
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      if (depth === 0 && SKIP.has(k)) continue;
      const path = prefix ? `${prefix}.${k}` : k;
      if (typeof x === 'number' || (typeof x === 'string' && valueAt(o, path) !== null)) into.add(path);
      else walk(x, path, depth + 1);
    }
  };
  walk(o, '', 0);
}

/** Known units by the field's last name (case-insensitive). */
const UNITS: [RegExp, string][] = [
  [/^(humidity|rh|relative_?humidity)$/i, '%'],
  [/^(battery|battery_?level|batterylevel|soc)$/i, '%'],
  [/^(light|lux|illuminance)$/i, 'lx'],
  [/^(pressure|air_?pressure)$/i, 'hPa'],
  [/^(voltage|volt|vbat|battery_?voltage)$/i, 'V'],
  [/^(co2)$/i, 'ppm'],
  [/^(rssi)$/i, 'dBm'],
];

/** Units stated by the device templates of the solution's devices (path → unit); they win over the names. */
const templateUnits = new Map<string, string>();

/**
 * The numeric field paths a device template's sensors name, with the units they state (docs/api.md
 * "Device templates"): `"humidity"`, `{name, unit}`, or a vector `{name, fields: ["x","y","z"]}`
 * (paths `name.x`...). Sensors of another declared type (text, boolean) are not plottable.
 * Temperature keeps the app's °C/°F choice: the store holds it in °C whatever a template says.
 */
export function templateFields(sensors: readonly TemplateSensor[]): { path: string; unit: string }[] {
  const out: { path: string; unit: string }[] = [];
  for (const s of sensors) {
    if (typeof s === 'string') {
      out.push({ path: s, unit: '' });
      continue;
    }
    if (typeof s.name !== 'string' || !s.name) continue;
    if (s.type !== undefined && s.type !== 'number' && s.type !== 'vector') continue;
    const unit = typeof s.unit === 'string' ? s.unit : '';
    const parts = Array.isArray(s.fields) ? s.fields.filter((f): f is string => typeof f === 'string' && f !== '') : [];
    if (parts.length) for (const f of parts) out.push({ path: `${s.name}.${f}`, unit });
    else out.push({ path: s.name, unit });
  }
  return out;
}

/** Adds the template's fields to `into` and remembers their units for `quantity`. */
export function noteTemplateFields(sensors: readonly TemplateSensor[], into: Set<string>): void {
  for (const f of templateFields(sensors)) {
    into.add(f.path);
    if (f.unit && f.path !== TEMPERATURE) templateUnits.set(f.path, f.unit);
  }
}

/** Forgets the units of the previous solution's templates. */
export function clearTemplateUnits(): void {
  templateUnits.clear();
}

/** How one field is shown: its name, unit, and the conversion from stored to shown values. */
export interface Quantity {
  path: string;
  name: string;
  unit: string;
  conv: (v: number) => number;
  isTemperature: boolean;
}

export function quantity(path: string, tempUnit: Unit): Quantity {
  if (path === TEMPERATURE) {
    return { path, name: 'Temperature', unit: `°${tempUnit}`, conv: tempUnit === 'F' ? (c) => (c * 9) / 5 + 32 : (c) => c, isTemperature: true };
  }
  const last = path.split('.').pop()!;
  const unit = templateUnits.get(path) ?? UNITS.find(([re]) => re.test(last))?.[1] ?? '';
  return { path, name: path, unit, conv: (v) => v, isTemperature: false };
}

/** A value with its unit ("21.3 °C", "54 %", "0.98"), or a dash. */
export function fmtValue(v: number | null | undefined, q: Quantity, digits = q.isTemperature ? 1 : 2): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—';
  const shown = q.conv(v);
  // Non-temperature fields: as many decimals as needed, up to `digits`.
  const text = q.isTemperature ? shown.toFixed(digits) : String(Number(shown.toFixed(digits)));
  return q.unit ? `${text} ${q.unit}` : text;
}
