// The rendered device list of a solution, cached per (group, solution, type filter) and keyed by
// the store's solution version: devices never change once created, and every create or delete
// bumps the version in the same transaction (also from another process or node), so one cheap
// version read proves a cached list current.
import { toWireDevice, type Account } from '../core/types.ts';
import type { Store } from '../store/store.ts';
import { resolveSolutionVersion } from './devices.ts';
import { withModules } from './kit-module.ts';

const MAX_ENTRIES = 2000;

export class DeviceListCache {
  private entries = new Map<string, { version: number; json: string }>();

  constructor(private readonly store: Store) {}

  /** `{"devices":[...]}` as JSON text; an unknown solution is SOLUTION_NOT_FOUND. */
  async json(account: Account, solution: string, deviceType?: string): Promise<string> {
    const version = await resolveSolutionVersion(this.store, account, solution);
    if (version === null) return '{"devices":[]}';
    const key = `${account.groupId}\n${solution}\n${deviceType ?? ''}`;
    const hit = this.entries.get(key);
    if (hit && hit.version === version) return hit.json;
    // Each provisioned kit with its network module (src/service/kit-module.ts).
    const list = await withModules(this.store, account.groupId, solution, deviceType);
    const json = JSON.stringify({ devices: list.map(toWireDevice) });
    if (hit) this.entries.delete(key);
    else if (this.entries.size >= MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { version, json });
    return json;
  }
}
