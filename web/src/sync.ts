// Keeps the page's picture of a solution current: the device list reloaded after device events
// (one reload per burst), the latest reading and reporting interval of each device, the fields the
// readings and the devices' templates offer, and each dev kit's reachability polled from the gateway.
import type { Connection, Device, Observation } from './api.ts';
import { collectPaths, noteTemplateFields } from './fields.ts';
import { isDevKit } from './format.ts';
import type { KitState, Latest } from './table.ts';

/** How often the kits' reachability is asked of the gateway (announcements come every minute or so). */
const KITS_EVERY_MS = 15_000;

type LatestGroups = Awaited<ReturnType<Connection['latest']>>;
type Cadence = Awaited<ReturnType<Connection['cadence']>>;

/** The solution's devices, the latest reading of each and how often each reports (older servers: none). */
export function fetchSolution(conn: Connection): Promise<[Device[], LatestGroups, Cadence]> {
  return Promise.all([conn.devices(), conn.latest(), conn.cadence()]);
}

/** What the sync reads and tells of the page. */
export interface SyncHost {
  conn(): Connection | null;
  devices(): Device[];
  selected(): string[];
  latest: Map<string, Latest>;
  kits: Map<string, KitState>;
  fields: Set<string>;
  setDevices(devices: Device[]): void;
  /** Nothing is selected and the list has devices: one is chosen. */
  selectFirst(devices: Device[]): void;
  /** New fields to offer. */
  fieldsChanged(): void;
  /** The kits' reachability changed. */
  kitsChanged(): void;
  failed(err: unknown): void;
}

export class DeviceSync {
  private reloadTimer: ReturnType<typeof setTimeout> | undefined;
  private kitsTimer: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly host: SyncHost) {}

  /** The readings and intervals of a freshly fetched solution. */
  note(latest: LatestGroups, cadence: Cadence): void {
    for (const g of latest) this.noteLatest(g.deviceId, g.observations);
    this.noteCadence(cadence);
  }

  /** Kit polling for the current connection. */
  start(): void {
    void this.refreshKits();
    this.kitsTimer = setInterval(() => void this.refreshKits(), KITS_EVERY_MS);
  }

  stop(): void {
    clearInterval(this.kitsTimer);
    clearTimeout(this.reloadTimer);
  }

  // Device events come in bursts (a simulation creates hundreds): one reload per burst.
  reloadSoon = (): void => {
    clearTimeout(this.reloadTimer);
    this.reloadTimer = setTimeout(() => void this.reloadDevices(), 300);
  };

  private async reloadDevices(): Promise<void> {
    const conn = this.host.conn();
    if (!conn) return;
    try {
      const [devices, latest, cadence] = await fetchSolution(conn);
      if (conn !== this.host.conn()) return;
      this.note(latest, cadence);
      this.host.setDevices(devices);
      void this.refreshKits();
      if (!this.host.selected().length && devices.length) this.host.selectFirst(devices);
    } catch (err) {
      this.host.failed(err);
    }
  }

  /**
   * The fields the devices' templates name (domainInfo.templateId, docs/api.md "Device templates") are
   * offered to plot before any reading carries them, with the units the templates state.
   */
  async loadTemplateFields(devices: Device[]): Promise<void> {
    const conn = this.host.conn();
    const named = new Set(devices.map((d) => d.domainInfo?.templateId).filter((t): t is string => typeof t === 'string'));
    if (!conn || !named.size) return;
    try {
      const templates = await conn.client.listDeviceTemplates();
      if (conn !== this.host.conn()) return;
      for (const t of templates) if (t.id && named.has(t.id)) noteTemplateFields(t.sensors, this.host.fields);
      this.host.fieldsChanged();
    } catch {
      // Templates only add fields to offer: the readings still offer theirs.
    }
  }

  /** Each dev kit's reachability from the gateway; only asked when the solution has kits. */
  private async refreshKits(): Promise<void> {
    const conn = this.host.conn();
    if (!conn || !this.host.devices().some(isDevKit)) return;
    try {
      const kits = await conn.kits();
      if (conn !== this.host.conn()) return;
      this.host.kits.clear();
      for (const k of kits) {
        this.host.kits.set(k.deviceId, { reachable: k.reachable, lastHeard: k.lastHeard ? Date.parse(k.lastHeard) : null, periodMs: k.announcePeriodSeconds ? k.announcePeriodSeconds * 1000 : null });
      }
      this.host.kitsChanged();
    } catch {
      // Reachability is a hint: the table keeps its last answer; a real failure shows on the next call.
    }
  }

  /** How often each device reports, as the server measured it: a fresh page knows what is stale. */
  private noteCadence(list: Cadence): void {
    for (const c of list) {
      const l = this.host.latest.get(c.deviceId);
      if (l && c.intervalSeconds !== null && c.intervalSeconds > 0) l.every = c.intervalSeconds * 1000;
    }
  }

  noteLatest(deviceId: string, obs: Observation[]): void {
    const { latest, fields } = this.host;
    let grew = false;
    for (const o of obs) {
      const ts = Date.parse(o.timestamp);
      const cur = latest.get(deviceId);
      if (!Number.isFinite(ts) || (cur && ts < cur.ts)) continue;
      latest.set(deviceId, {
        ts,
        obs: o,
        ...(cur && ts > cur.ts ? { prevTs: cur.ts } : cur?.prevTs !== undefined ? { prevTs: cur.prevTs } : {}),
        ...(cur?.every !== undefined ? { every: cur.every } : {}),
      });
      const before = fields.size;
      collectPaths(o, fields);
      grew ||= fields.size !== before;
    }
    if (grew) this.host.fieldsChanged();
  }
}
