import { isoUtc } from './time.ts';

// Domain types of seed §2. Wire shapes (what clients see) and stored records are kept apart: the
// store speaks records, the HTTP layer turns them into the wire form.

/** The two solution names the seed gives a meaning to (seed §1). Any other name is a user's own. */
export const SANDBOX = 'sandbox';
export const STUDIO_SIMULATION = 'StudioSimulation';

export const DEVICE_TYPE_DEVKIT = 'NICDevKit';
export const DEVICE_TYPE_VIRTUAL = 'VirtualDevice';

export interface Location {
  latitude: number;
  longitude: number;
}

export interface DomainInfo {
  location?: Location;
  [key: string]: unknown;
}

/**
 * seed §2 writes the two MAC fields with the placeholder word `vendor` "where the wire form carries a
 * vendor word"; the wire word is `ssni`, and the original clients read exactly
 * `provisioningInfo.ssniMacAddress`, so Reef serves the wire names.
 */
export interface ProvisioningInfo {
  status: 'provisioned';
  timestamp: string;
  ssniMacAddress: string;
  ssniNetworkDeviceType: 'MILLI';
}

/** A device as the HTTP API returns it (seed §2). */
export interface Device {
  id: string;
  deviceType: string;
  domainInfo: DomainInfo;
  provisioningInfo?: ProvisioningInfo;
}

/** A device as stored: the wire device plus ownership. */
export interface DeviceRecord extends Device {
  /** Tenant that created or was provisioned the device. */
  tenantId: string;
  /** Tenant group of the owner: visibility is decided by group (seed §5). */
  groupId: string;
  solution: string;
  /** Lower-case 16-hex MAC for dev kits, else null; globally unique. */
  mac: string | null;
  createdAt: number;
}

/**
 * What an upload needs of its device: who it is and whose (owner, group, solution), its type and
 * its MAC (a dev kit's uploads are kept in °C, a kit's network module's go to its kit:
 * docs/api.md "Temperature units", "A kit's network module"). A store may remember them
 * (Store.uploadDevice): none changes while the device exists but a client device's type, and the
 * type is only acted on for provisioned devices, whose type is fixed.
 */
export type DeviceRef = Pick<DeviceRecord, 'id' | 'tenantId' | 'groupId' | 'solution' | 'deviceType' | 'mac'>;

/**
 * One observation as stored: time in epoch milliseconds, temperature split out (it is what every
 * query and the plot use), every other field kept verbatim in `extra`.
 */
export interface ObservationRecord {
  ts: number;
  temperature: number | null;
  extra: Record<string, unknown> | null;
}

/** An observation on the wire: `timestamp` ISO-8601 UTC with milliseconds, `temperature`, free fields. */
export interface Observation {
  timestamp: string;
  temperature?: number;
  [field: string]: unknown;
}

export interface ObservationGroup {
  deviceId: string;
  observations: Observation[];
}

/**
 * A device template: a named list of sensors of a solution. `sensors` items are kept
 * as the client sent them: a sensor name, or an object with at least `name`.
 */
export interface DeviceTemplate {
  id: string;
  name: string;
  sensors: unknown[];
}

export interface DeviceTemplateRecord extends DeviceTemplate {
  groupId: string;
  solution: string;
  createdAt: number;
  updatedAt: number;
}

export interface Account {
  tenantId: string;
  name: string;
  groupId: string;
  clientId: string;
  secretHash: string;
  disabled: boolean;
  createdAt: number;
}

export function toWireObservation(r: ObservationRecord): Observation {
  const o: Observation = { timestamp: isoUtc(r.ts) };
  if (r.temperature !== null) o.temperature = r.temperature;
  if (r.extra) for (const k in r.extra) if (k !== 'timestamp' && k !== 'temperature') o[k] = r.extra[k];
  return o;
}

export function toWireDevice(d: DeviceRecord): Device {
  const out: Device = { id: d.id, deviceType: d.deviceType, domainInfo: d.domainInfo };
  if (d.provisioningInfo) out.provisioningInfo = d.provisioningInfo;
  return out;
}
