// Device operations shared by the HTTP routes, the CLI, the gateway and simulations: one place
// decides what a valid device is, how a solution is resolved and what a caller may see.
import { randomUUID } from 'node:crypto';
import { ReefError } from '../core/errors.ts';
import { DEVICE_TYPE_DEVKIT, SANDBOX, STUDIO_SIMULATION, type Account, type DeviceRecord, type DeviceRef, type DomainInfo, type ProvisioningInfo } from '../core/types.ts';
import { UUID, deviceId as checkDeviceId, latitude, longitude, macAddress, solutionName } from '../core/validate.ts';
import type { EventBus } from '../events/bus.ts';
import { issueKitKey } from './kit-keys.ts';
import { findModule, isKitModule } from './kit-module.ts';
import type { Store } from '../store/store.ts';

const DEVICE_TYPE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const MAX_DOMAIN_INFO_BYTES = 16 * 1024;

/** The two solutions of seed §1 exist for every account even before they hold a device. */
export function isBuiltInSolution(name: string): boolean {
  return name === SANDBOX || name === STUDIO_SIMULATION;
}

/**
 * Validates the solution name and that the caller's group has it. Unknown solutions are 404; the
 * built-in ones always exist (an empty one lists no devices rather than failing).
 */
export async function resolveSolution(store: Store, account: Account, name: string): Promise<string> {
  solutionName(name);
  if (isBuiltInSolution(name)) return name;
  if (!(await store.solutionExists(account.groupId, name))) throw solutionNotFound(name);
  return name;
}

/**
 * resolveSolution's rule, answering the solution's version (Store.solutionVersion) in the same
 * read: null for a built-in solution that holds nothing yet.
 */
export async function resolveSolutionVersion(store: Store, account: Account, name: string): Promise<number | null> {
  solutionName(name);
  const version = await store.solutionVersion(account.groupId, name);
  if (version === null && !isBuiltInSolution(name)) throw solutionNotFound(name);
  return version;
}

function solutionNotFound(name: string): ReefError {
  return new ReefError('SOLUTION_NOT_FOUND', `no solution ${JSON.stringify(name)} in this account (names are case sensitive)`);
}

/**
 * A device of the caller's group, or 404 — another group's device answers exactly like none. A
 * kit's network module (src/service/kit-module.ts) is found as the device it is served as.
 */
export function findDevice(store: Store, account: Account, solution: string, id: string): Promise<DeviceRecord> {
  return lookUp(solution, id, async (checked) => (await store.getDevice(account.groupId, solution, checked)) ?? (await findModule(store, account.groupId, solution, checked))?.module ?? null);
}

/**
 * The device whose observations `id` names: findDevice's device, except that a kit's network
 * module names its kit's series (docs/api.md "A kit's network module").
 */
export async function findSeriesDevice(store: Store, account: Account, solution: string, id: string): Promise<DeviceRecord> {
  const d = await findDevice(store, account, solution, id);
  if (!isKitModule(d)) return d;
  return (await findModule(store, account.groupId, solution, d.id))?.kit ?? d;
}

/**
 * The device an upload names, as findDevice finds it (same checks, same 404), from the store's
 * memory where it keeps one (Store.uploadDevice): on PostgreSQL the read was a round trip and a
 * pooled backend woken for every upload, about a tenth of PostgreSQL's CPU per observation
 * uploaded (docs/performance.md, "PostgreSQL: the device cache for uploads").
 */
export function findUploadDevice(store: Store, account: Account, solution: string, id: string): Promise<DeviceRef> {
  // A kit's network module holds no observations: what is uploaded to it is its kit's (a look-up
  // made only for an id no stored device has).
  return lookUp(
    solution,
    id,
    async (checked) => (await (store.uploadDevice ?? store.getDevice).call(store, account.groupId, solution, checked)) ?? (await findModule(store, account.groupId, solution, checked))?.kit ?? null,
  );
}

/** The solution name and id checked, the device read by `read`, or 404. */
async function lookUp<D>(solution: string, id: string, read: (checkedId: string) => Promise<D | null>): Promise<D> {
  solutionName(solution);
  const d = await read(checkDeviceId(id));
  if (!d) throw new ReefError('DEVICE_NOT_FOUND', `no device ${id.toLowerCase()} in solution ${JSON.stringify(solution)}`);
  return d;
}

export interface DeviceInput {
  deviceType?: unknown;
  domainInfo?: unknown;
  provisioningInfo?: unknown;
}

export function parseDomainInfo(v: unknown): DomainInfo {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw new ReefError('VALIDATION_FAILED', 'domainInfo must be an object', { field: 'domainInfo' });
  const info = v as DomainInfo;
  if (info.location !== undefined) {
    const loc = info.location as unknown;
    if (typeof loc !== 'object' || loc === null || Array.isArray(loc)) {
      throw new ReefError('VALIDATION_FAILED', 'domainInfo.location must be an object with latitude and longitude', { field: 'domainInfo.location' });
    }
    const l = loc as Record<string, unknown>;
    info.location = { ...l, latitude: latitude(l.latitude), longitude: longitude(l.longitude) };
  }
  // A MAC given by a client is kept in the one form the original clients match on (wire §1:
  // 16 lower-case hex), whichever separators or case it came in.
  if (info.nic_macID !== undefined) {
    if (typeof info.nic_macID !== 'string') throw new ReefError('VALIDATION_FAILED', 'domainInfo.nic_macID must be a MAC of 16 hexadecimal characters', { field: 'domainInfo.nic_macID' });
    info.nic_macID = macAddress(info.nic_macID, 'domainInfo.nic_macID');
  }
  if (JSON.stringify(info).length > MAX_DOMAIN_INFO_BYTES) {
    throw new ReefError('VALIDATION_FAILED', `domainInfo must be at most ${MAX_DOMAIN_INFO_BYTES} bytes of JSON`, { field: 'domainInfo' });
  }
  return info;
}

/** `maxDevices`: the account's device quota, decided with the insert (Store.createDevice). */
export async function createDevice(store: Store, events: EventBus, account: Account, solution: string, input: DeviceInput, maxDevices?: number): Promise<DeviceRecord> {
  solutionName(solution);
  if (typeof input.deviceType !== 'string' || !DEVICE_TYPE.test(input.deviceType)) {
    throw new ReefError('VALIDATION_FAILED', "deviceType must be 1-64 letters, digits, '_', '-' or '.'", { field: 'deviceType' });
  }
  if (input.provisioningInfo !== undefined) {
    throw new ReefError('VALIDATION_FAILED', 'provisioningInfo is set by provisioning a dev kit (reef provision), not by clients', { field: 'provisioningInfo' });
  }
  const domainInfo = await checkTemplate(store, account, solution, parseDomainInfo(input.domainInfo));
  const d = await store.createDevice(
    {
      id: randomUUID(),
      tenantId: account.tenantId,
      groupId: account.groupId,
      solution,
      deviceType: input.deviceType,
      domainInfo,
    },
    maxDevices,
  );
  events.publish({ kind: 'device', groupId: d.groupId, solution, deviceId: d.id, action: 'created' });
  return d;
}

/**
 * A device may name a template of its solution (docs/api.md "Device templates"): the
 * name must resolve, so a typo is a clear 400 rather than a dangling link.
 */
async function checkTemplate(store: Store, account: Account, solution: string, domainInfo: DomainInfo): Promise<DomainInfo> {
  if (domainInfo.templateId === undefined) return domainInfo;
  const tid = domainInfo.templateId;
  if (typeof tid !== 'string' || !UUID.test(tid) || !(await store.getTemplate(account.groupId, solution, tid.toLowerCase()))) {
    throw new ReefError('VALIDATION_FAILED', `domainInfo.templateId must be the id of a device template of solution ${JSON.stringify(solution)}`, { field: 'domainInfo.templateId' });
  }
  domainInfo.templateId = tid.toLowerCase();
  return domainInfo;
}

/** A change to a device: its type, and its domainInfo as a JSON merge patch (RFC 7396 §2). */
export interface DeviceUpdate {
  deviceType?: unknown;
  domainInfo?: unknown;
}

/**
 * RFC 7396 §2 (MergePatch): members of the patch replace the target's, null removes one, objects
 * merge member by member, anything else replaces the whole value. Keys are set as own properties
 * (a "__proto__" member of a JSON body is data, never the object's prototype).
 */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> = {};
  if (typeof target === 'object' && target !== null && !Array.isArray(target)) {
    for (const [k, v] of Object.entries(target)) Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
  }
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else Object.defineProperty(out, k, { value: mergePatch(out[k], v), enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** Optimistic attempts before a device changed by others all the while answers 409. */
const UPDATE_ATTEMPTS = 5;

/**
 * Changes a device's type and domainInfo (PATCH, docs/api.md "Changing a device"): the patch is
 * applied to the device as read, checked as a new device's would be, and written only if nobody
 * changed the device meanwhile (else read again). A dev kit keeps what provisioning set: its type
 * and its MAC. Publishes `device` `updated`: lists, the app and the alarm evaluator (a new
 * template brings its rules) follow.
 */
export async function updateDevice(store: Store, events: EventBus, account: Account, solution: string, id: string, input: DeviceUpdate): Promise<DeviceRecord> {
  if (input.deviceType !== undefined && (typeof input.deviceType !== 'string' || !DEVICE_TYPE.test(input.deviceType))) {
    throw new ReefError('VALIDATION_FAILED', "deviceType must be 1-64 letters, digits, '_', '-' or '.'", { field: 'deviceType' });
  }
  if (input.domainInfo !== undefined && input.domainInfo !== null && (typeof input.domainInfo !== 'object' || Array.isArray(input.domainInfo))) {
    throw new ReefError('VALIDATION_FAILED', 'domainInfo must be an object (a JSON merge patch: null removes a member)', { field: 'domainInfo' });
  }
  for (let attempt = 0; attempt < UPDATE_ATTEMPTS; attempt++) {
    const d = await findDevice(store, account, solution, id);
    if (isKitModule(d)) throw moduleIsTheKits(d);
    const deviceType = (input.deviceType as string | undefined) ?? d.deviceType;
    const merged = input.domainInfo === undefined ? structuredClone(d.domainInfo) : input.domainInfo === null ? {} : mergePatch(d.domainInfo, input.domainInfo);
    const domainInfo = await checkTemplate(store, account, solution, parseDomainInfo(merged));
    if (d.provisioningInfo) {
      // Provisioning names a dev kit (seed §3): the gateway and the original clients find it by these.
      if (deviceType !== d.deviceType) throw new ReefError('VALIDATION_FAILED', "a dev kit's deviceType is set by provisioning", { field: 'deviceType' });
      if (domainInfo.nic_macID !== d.domainInfo.nic_macID) throw new ReefError('VALIDATION_FAILED', "a dev kit's domainInfo.nic_macID is its provisioned MAC", { field: 'domainInfo.nic_macID' });
    }
    const r = await store.updateDevice(account.groupId, solution, d.id, d.domainInfo, { deviceType, domainInfo });
    if (r === 'missing') throw new ReefError('DEVICE_NOT_FOUND', `no device ${id.toLowerCase()} in solution ${JSON.stringify(solution)}`);
    if (r === 'changed') continue;
    events.publish({ kind: 'device', groupId: account.groupId, solution, deviceId: d.id, action: 'updated' });
    return r;
  }
  throw new ReefError('CONFLICT', 'the device kept changing while this change was made; send it again');
}

/** Deletes the device and its observations; answers the device as it was. */
export async function deleteDevice(store: Store, events: EventBus, account: Account, solution: string, id: string): Promise<DeviceRecord> {
  const d = await findDevice(store, account, solution, id);
  if (isKitModule(d)) throw moduleIsTheKits(d);
  // A concurrent delete may win between the read and this: then it is gone, as for the loser.
  const ok = await store.deleteDevice(account.groupId, solution, d.id);
  if (!ok) throw new ReefError('DEVICE_NOT_FOUND', `no device ${id.toLowerCase()} in solution ${JSON.stringify(solution)}`);
  events.publish({ kind: 'device', groupId: account.groupId, solution, deviceId: d.id, action: 'deleted' });
  return d;
}

/** A kit's network module is served from its kit: it changes and goes with it. */
function moduleIsTheKits(d: DeviceRecord): ReefError {
  return new ReefError('CONFLICT', `device ${d.id} is the network module of dev kit ${String(d.domainInfo.kitId)}: it changes and is deleted with its kit`);
}

/**
 * Dev-kit provisioning (seed §3, "on order fulfillment"): a NICDevKit in the account's sandbox with
 * provisioningInfo. A MAC is provisioned once across the whole platform.
 */
/**
 * Provisions a dev kit and issues its kit key (src/service/kit-keys.ts): the key is returned here
 * once, to be given to the kit (`reef device --key`); Reef keeps only what derives it.
 */
export async function provisionKit(store: Store, events: EventBus | null, account: Account, mac: string, maxDevices?: number): Promise<{ device: DeviceRecord; kitKey: string }> {
  const m = macAddress(mac, 'mac');
  const existing = await store.getDeviceByMac(m);
  if (existing) throw new ReefError('MAC_ALREADY_PROVISIONED', `a dev kit with MAC ${m} is already provisioned`, { field: 'mac' });
  const provisioningInfo: ProvisioningInfo = {
    status: 'provisioned',
    timestamp: new Date().toISOString(),
    ssniMacAddress: m,
    ssniNetworkDeviceType: 'MILLI',
  };
  const d = await store.createDevice(
    {
      id: randomUUID(),
      tenantId: account.tenantId,
      groupId: account.groupId,
      solution: SANDBOX,
      deviceType: DEVICE_TYPE_DEVKIT,
      // The Windows and MQTT clients find kits by domainInfo.nic_macID (16 lower-case hex, wire §1).
      domainInfo: { nic_macID: m },
      provisioningInfo,
      mac: m,
    },
    maxDevices,
  );
  const kitKey = await issueKitKey(store, m);
  events?.publish({ kind: 'device', groupId: d.groupId, solution: SANDBOX, deviceId: d.id, action: 'created' });
  return { device: d, kitKey };
}
