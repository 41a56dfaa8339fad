// A dev kit's network module as a device of its own (docs/api.md "A kit's network module"). Seed §1:
// a device may be "a network interface module (MILLI type)"; the original Windows CoAP client keeps
// only devices of type MILLI and reads their domainInfo.nic_macID, while a provisioned kit is a
// NICDevKit (seed §2). So every provisioned kit is served with its module: a MILLI device with the
// kit's MAC and provisioningInfo, listed right after the kit. The module is derived from the kit,
// not stored: it exists exactly while the kit does (on both stores, for kits provisioned before it
// existed too), takes no place of the device quota, and holds no observations of its own: its
// series is its kit's.
import { createHash } from 'node:crypto';
import { DEVICE_TYPE_DEVKIT, SANDBOX, type DeviceRecord } from '../core/types.ts';
import type { Store } from '../store/store.ts';

/** The network module's device type (seed §1, and the kit's provisioningInfo.ssniNetworkDeviceType). */
export const MODULE_TYPE = 'MILLI';

/** A provisioned kit (only provisioning sets provisioningInfo and a MAC). */
function isProvisionedKit(d: DeviceRecord): boolean {
  return d.deviceType === DEVICE_TYPE_DEVKIT && d.mac !== null && d.provisioningInfo !== undefined;
}

/**
 * A kit's network module. No stored device is one: only provisioning sets provisioningInfo, and on
 * a NICDevKit only; a client's own MILLI device is an ordinary device.
 */
export function isKitModule(d: Pick<DeviceRecord, 'deviceType' | 'provisioningInfo'>): boolean {
  return d.deviceType === MODULE_TYPE && d.provisioningInfo !== undefined;
}

/** The module's id: a function of the kit's, so it stays the same (a name-based UUID, RFC 4122 §4.3). */
export function moduleId(kitId: string): string {
  const h = createHash('sha1').update(`reef-kit-module:${kitId}`).digest('hex');
  const variant = ((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** The network module of a provisioned kit: same owner, MAC and provisioning, `domainInfo.kitId` naming the kit. */
export function moduleOf(kit: DeviceRecord): DeviceRecord {
  return {
    id: moduleId(kit.id),
    deviceType: MODULE_TYPE,
    domainInfo: { nic_macID: kit.mac, kitId: kit.id },
    provisioningInfo: kit.provisioningInfo!,
    tenantId: kit.tenantId,
    groupId: kit.groupId,
    solution: kit.solution,
    mac: null,
    createdAt: kit.createdAt,
  };
}

/**
 * A device list with each provisioned kit's module after the kit; with a type filter, the list of
 * that type (the store's answer for it, and the kits' modules for MILLI, in creation order).
 */
export async function withModules(store: Store, groupId: string, solution: string, deviceType?: string): Promise<DeviceRecord[]> {
  if (solution !== SANDBOX) return store.listDevices(groupId, solution, deviceType);
  if (deviceType === undefined) {
    const out: DeviceRecord[] = [];
    for (const d of await store.listDevices(groupId, solution)) {
      out.push(d);
      if (isProvisionedKit(d)) out.push(moduleOf(d));
    }
    return out;
  }
  const typed = await store.listDevices(groupId, solution, deviceType);
  if (deviceType !== MODULE_TYPE) return typed;
  const modules = (await store.listDevices(groupId, solution, DEVICE_TYPE_DEVKIT)).filter(isProvisionedKit).map(moduleOf);
  return [...modules, ...typed].sort((a, b) => a.createdAt - b.createdAt);
}

/** The module `id` names and its kit, or null: kits are provisioned into sandbox only. */
export async function findModule(store: Store, groupId: string, solution: string, id: string): Promise<{ module: DeviceRecord; kit: DeviceRecord } | null> {
  if (solution !== SANDBOX) return null;
  for (const kit of await store.listDevices(groupId, solution, DEVICE_TYPE_DEVKIT)) {
    if (isProvisionedKit(kit) && moduleId(kit.id) === id) return { module: moduleOf(kit), kit };
  }
  return null;
}
