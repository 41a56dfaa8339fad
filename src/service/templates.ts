// Device templates (wire §1 "device templates"): named lists of sensors per solution,
// isolated per tenant group like devices, and the static templates every tenant sees at
// /api/tenants/systemTenant/devicetemplates. Bodies come as {"deviceTemplate": {name, sensors}} (the
// original SDK) or bare {name, sensors}; both are validated here before anything is stored.
import { randomUUID } from 'node:crypto';
import { ReefError } from '../core/errors.ts';
import type { Account, DeviceTemplate, DeviceTemplateRecord } from '../core/types.ts';
import { UUID, solutionName } from '../core/validate.ts';
import type { Store } from '../store/store.ts';
import { resolveSolution } from './devices.ts';

/** Most templates one solution holds; a device template is configuration, not data. */
export const MAX_TEMPLATES_PER_SOLUTION = 1000;
export const MAX_SENSORS = 100;
const MAX_TEMPLATE_JSON = 16 * 1024;
const NAME_MAX = 128;
const SENSOR_NAME_MAX = 64;

/**
 * The static templates (no id: they are not stored and cannot be changed). Sensor names are the
 * observation fields the original clients upload (wire §1): what a device of that kind sends.
 */
export const SYSTEM_TEMPLATES: readonly Omit<DeviceTemplate, 'id'>[] = Object.freeze([
  { name: 'NICDevKit', sensors: [{ name: 'temperature', type: 'number', unit: 'C' }] },
  { name: 'VirtualDevice', sensors: [{ name: 'temperature', type: 'number', unit: 'C' }] },
  {
    name: 'EnvironmentSensor',
    sensors: [
      { name: 'temperature', type: 'number', unit: 'C' },
      { name: 'humidity', type: 'number', unit: '%' },
      { name: 'light', type: 'number', unit: 'lx' },
      { name: 'batteryLevel', type: 'number', unit: '%' },
    ],
  },
  {
    name: 'MotionSensor',
    sensors: [
      { name: 'accelerometer', type: 'vector', fields: ['x', 'y', 'z'], unit: 'g' },
      { name: 'batteryLevel', type: 'number', unit: '%' },
    ],
  },
]);

/** The tenant name the original SDK uses for the static templates. */
export const SYSTEM_TENANT = 'systemTenant';

// Printable text: no control characters (they break logs and terminals, and PostgreSQL refuses NUL).
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

function text(v: unknown, field: string, max: number): string {
  if (typeof v !== 'string' || v.trim() === '' || v.length > max || CONTROL.test(v)) {
    throw new ReefError('VALIDATION_FAILED', `${field} must be 1-${max} printable characters`, { field });
  }
  return v;
}

/** The sensor's name: the item itself when a string, else its `name`. */
function sensorName(s: unknown, field: string): string {
  if (typeof s === 'string') return text(s, field, SENSOR_NAME_MAX);
  if (typeof s === 'object' && s !== null && !Array.isArray(s)) return text((s as { name?: unknown }).name, `${field}.name`, SENSOR_NAME_MAX);
  throw new ReefError('VALIDATION_FAILED', `${field} must be a sensor name or an object with a name`, { field });
}

/** {deviceTemplate: {name, sensors}} or {name, sensors} → a clean {name, sensors}, or 400. */
export function parseTemplate(body: unknown): { name: string; sensors: unknown[] } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new ReefError('VALIDATION_FAILED', 'the body must be {"deviceTemplate": {"name", "sensors"}}', { field: 'body' });
  const wrapped = 'deviceTemplate' in body;
  const t = wrapped ? (body as { deviceTemplate: unknown }).deviceTemplate : body;
  const at = wrapped ? 'deviceTemplate.' : '';
  if (typeof t !== 'object' || t === null || Array.isArray(t)) throw new ReefError('VALIDATION_FAILED', 'deviceTemplate must be an object with name and sensors', { field: 'deviceTemplate' });
  const o = t as { name?: unknown; sensors?: unknown };
  const name = text(o.name, `${at}name`, NAME_MAX);
  if (!Array.isArray(o.sensors)) throw new ReefError('VALIDATION_FAILED', `${at}sensors must be an array`, { field: `${at}sensors` });
  if (o.sensors.length > MAX_SENSORS) throw new ReefError('VALIDATION_FAILED', `${at}sensors holds at most ${MAX_SENSORS} sensors`, { field: `${at}sensors` });
  const seen = new Set<string>();
  o.sensors.forEach((s, i) => {
    const n = sensorName(s, `${at}sensors[${i}]`);
    if (seen.has(n)) throw new ReefError('VALIDATION_FAILED', `${at}sensors[${i}]: sensor ${JSON.stringify(n)} is listed twice`, { field: `${at}sensors[${i}]` });
    seen.add(n);
  });
  const json = JSON.stringify(o.sensors);
  if (json.length > MAX_TEMPLATE_JSON) throw new ReefError('VALIDATION_FAILED', `${at}sensors must be at most ${MAX_TEMPLATE_JSON} bytes of JSON`, { field: `${at}sensors` });
  if (json.includes('\\u0000')) throw new ReefError('VALIDATION_FAILED', `${at}sensors must not contain the NUL character`, { field: `${at}sensors` });
  return { name, sensors: o.sensors };
}

export function toWireTemplate(t: DeviceTemplateRecord): DeviceTemplate {
  return { id: t.id, name: t.name, sensors: t.sensors };
}

function templateId(id: string): string {
  if (!UUID.test(id)) throw new ReefError('VALIDATION_FAILED', `template id ${JSON.stringify(id.slice(0, 80))} is not a UUID`, { field: 'id' });
  return id.toLowerCase();
}

function notFound(id: string, solution: string): ReefError {
  return new ReefError('TEMPLATE_NOT_FOUND', `no device template ${id.toLowerCase()} in solution ${JSON.stringify(solution)}`);
}

export async function listTemplates(store: Store, account: Account, solution: string): Promise<DeviceTemplateRecord[]> {
  await resolveSolution(store, account, solution);
  return store.listTemplates(account.groupId, solution);
}

export async function getTemplate(store: Store, account: Account, solution: string, id: string): Promise<DeviceTemplateRecord> {
  solutionName(solution);
  const t = await store.getTemplate(account.groupId, solution, templateId(id));
  if (!t) throw notFound(id, solution);
  return t;
}

export async function createTemplate(store: Store, account: Account, solution: string, body: unknown): Promise<DeviceTemplateRecord> {
  solutionName(solution);
  const t = parseTemplate(body);
  return store.createTemplate({ id: randomUUID(), groupId: account.groupId, solution, ...t }, MAX_TEMPLATES_PER_SOLUTION);
}

export async function updateTemplate(store: Store, account: Account, solution: string, id: string, body: unknown): Promise<DeviceTemplateRecord> {
  solutionName(solution);
  const tid = templateId(id);
  const t = parseTemplate(body);
  const r = await store.updateTemplate(account.groupId, solution, tid, t);
  if (!r) throw notFound(id, solution);
  return r;
}

export async function deleteTemplate(store: Store, account: Account, solution: string, id: string): Promise<DeviceTemplateRecord> {
  solutionName(solution);
  const r = await store.deleteTemplate(account.groupId, solution, templateId(id));
  if (!r) throw notFound(id, solution);
  return r;
}
