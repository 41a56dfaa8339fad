// Where each dev kit's network module listens (wire §3: the gateway is the way into the mesh). Kits
// are learned from their announcements (src/coap/announce.ts: a NON `POST /kits` sent from the
// kit's own CoAP socket) and from static entries the operator configures. An announcement is
// accepted only when it comes from the very address and port it names (so nobody can point the
// gateway at a third party's address), only for a MAC that is provisioned, and a static entry is
// never overridden by one. A learned kit is forgotten after three missed announcement periods.
import type { Announcement, Peer } from '../coap/index.ts';

export type KitPrefix = 'snsr' | 'sensor';

export interface KitEntry {
  mac: string;
  peer: Peer;
  prefix: KitPrefix;
  /** Content-format of its readings (0 text, 60 CBOR). */
  cf: number;
  fw: string;
  /** Boot time in epoch seconds; a new value means the kit restarted. */
  boot: number;
  periodMs: number;
  lastSeen: number;
  source: 'announce' | 'static';
  /** Added sensors the kit announced (type name, path after the prefix); their readings are bridged too. */
  sensors: { type: string; path: string }[];
}

export interface StaticKit {
  mac: string;
  host: string;
  port: number;
  prefix?: KitPrefix;
  cf?: number;
}

export type AnnounceOutcome = 'new' | 'rebooted' | 'moved' | 'refreshed' | 'refused-source' | 'refused-static';

const UNSPECIFIED = new Set(['0.0.0.0', '::', '']);

export class KitDirectory {
  private readonly byMac = new Map<string, KitEntry>();
  private readonly byPeer = new Map<string, KitEntry>();
  /** When each MAC was last heard (an announcement), kept after its entry expires: "offline since". */
  private readonly heardAt = new Map<string, number>();

  constructor(statics: StaticKit[] = []) {
    for (const k of statics) {
      this.set({
        mac: k.mac.toLowerCase(),
        peer: { address: k.host, port: k.port },
        prefix: k.prefix ?? 'snsr',
        cf: k.cf ?? 0,
        fw: '',
        boot: 0,
        periodMs: Number.POSITIVE_INFINITY,
        lastSeen: Date.now(),
        source: 'static',
        sensors: [],
      });
    }
  }

  get size(): number {
    return this.byMac.size;
  }

  /** The kit with this MAC, if it is known and its announcements are current. */
  get(mac: string, now = Date.now()): KitEntry | undefined {
    const k = this.byMac.get(mac);
    if (!k) return undefined;
    if (k.source === 'announce' && now - k.lastSeen > 3 * k.periodMs + 5000) {
      this.delete(k);
      return undefined;
    }
    return k;
  }

  /** The kit whose module sends from this address (its upstream time PUTs and reboot events). */
  byAddress(peer: Peer): KitEntry | undefined {
    return this.byPeer.get(`${peer.address}|${peer.port}`);
  }

  /** When the kit with this MAC was last heard from (epoch ms), even after it went quiet; null if never. */
  lastHeard(mac: string): number | null {
    return this.heardAt.get(mac) ?? null;
  }

  all(): KitEntry[] {
    return [...this.byMac.values()];
  }

  /** Applies an announcement received from `from`; the caller has checked the MAC is provisioned. */
  announce(a: Announcement, from: Peer, now = Date.now()): { outcome: AnnounceOutcome; entry?: KitEntry } {
    const host = UNSPECIFIED.has(a.host) ? from.address : a.host;
    if (host !== from.address || a.port !== from.port) return { outcome: 'refused-source' };
    const old = this.byMac.get(a.mac);
    if (old?.source === 'static') return { outcome: 'refused-static' };
    this.heardAt.set(a.mac, now);
    const entry: KitEntry = {
      mac: a.mac,
      peer: { address: host, port: a.port },
      prefix: a.prefix,
      cf: a.cf,
      fw: a.fw,
      boot: a.boot,
      periodMs: a.period * 1000,
      lastSeen: now,
      source: 'announce',
      sensors: a.sensors ?? [],
    };
    let outcome: AnnounceOutcome = 'new';
    if (old) {
      if (old.peer.address !== host || old.peer.port !== a.port) outcome = 'moved';
      // Another firmware (a new prefix, seed §9) means a restart even within the boot second.
      else if (old.boot !== a.boot || old.fw !== a.fw || old.prefix !== a.prefix) outcome = 'rebooted';
      else outcome = 'refreshed';
      if (outcome === 'refreshed') {
        old.lastSeen = now;
        old.periodMs = entry.periodMs;
        old.cf = entry.cf;
        old.sensors = entry.sensors;
        return { outcome, entry: old };
      }
      this.delete(old);
    }
    this.set(entry);
    return { outcome, entry };
  }

  private set(k: KitEntry): void {
    // One address is one kit: a kit that took over another's address replaces it.
    const prior = this.byPeer.get(`${k.peer.address}|${k.peer.port}`);
    if (prior && prior.mac !== k.mac) this.delete(prior);
    this.byMac.set(k.mac, k);
    this.byPeer.set(`${k.peer.address}|${k.peer.port}`, k);
  }

  delete(k: KitEntry): void {
    if (this.byMac.get(k.mac) === k) this.byMac.delete(k.mac);
    const key = `${k.peer.address}|${k.peer.port}`;
    if (this.byPeer.get(key) === k) this.byPeer.delete(key);
  }
}

/** The kit-side path: the client's first segment replaced by (or prefixed with) the kit's own prefix (seed §9). */
export function kitPath(kit: KitEntry, path: string[]): string[] {
  if (path.length === 2 && path[0] === '.well-known' && path[1] === 'core') return path;
  if (path[0] === 'snsr' || path[0] === 'sensor') return [kit.prefix, ...path.slice(1)];
  return [kit.prefix, ...path];
}
