// The kits' device records as the gateway sees them: read from the store by MAC and kept briefly, so
// the usual proxied request, announcement or reading waits for no store read.
import type { DeviceRecord } from '../core/types.ts';
import type { Store } from '../store/store.ts';

/** How long a kit's device record is used from the cache: a kit removed or given to another group is refused after at most this long. */
const DEVICE_FRESH_MS = 1000;

export class DeviceCache {
  private readonly byMac = new Map<string, { d: DeviceRecord | null; at: number }>();

  constructor(private readonly store: Store) {}

  /** The device record of a MAC from the cache when fresh (up to DEVICE_FRESH_MS old); undefined when it must be read. */
  cached(mac: string): DeviceRecord | null | undefined {
    const hit = this.byMac.get(mac);
    return hit && Date.now() - hit.at < DEVICE_FRESH_MS ? hit.d : undefined;
  }

  /** The device record of a MAC, from the cache when fresh, else read (and kept). */
  async get(mac: string): Promise<DeviceRecord | null> {
    const hit = this.cached(mac);
    if (hit !== undefined) return hit;
    const now = Date.now();
    const d = await this.store.getDeviceByMac(mac);
    if (this.byMac.size > 50_000) this.byMac.clear();
    this.byMac.set(mac, { d, at: now });
    return d;
  }
}
