// Per-account quotas: how many devices an account may create, how many observations
// it may keep stored, and how many observations one simulation may backfill. Checked before any
// work starts; a request that would go past one is refused whole with QUOTA_EXCEEDED (403), the
// message naming the quota, its limit and the current use. Defaults come from REEF_QUOTA_*; an
// operator sets others per account (admin API, `reef account quota`), kept in the store's state.
//
// Devices are counted exactly: the store keeps each account's count with every device made or
// deleted, and a single device (the devices API, kit provisioning) is refused in the same
// transaction as its insert, so concurrent creators never pass the limit together. A simulation's
// devices are checked here, all at once, when it is created (its runner makes them later).
// Stored observations are not counted per request (a full count is a scan): the leader's upkeep
// job counts them per account and keeps the figures in the store's state; every node reads them
// at most once a minute and adds what it wrote since. Every write path (HTTP upload, MQTT ingest,
// gateway readings, simulations: storeObservations) reserves its batch before the store commits,
// checked and reserved with no await between, so writes racing on one node never pass the limit
// together. The observation quota is still soft across nodes: writes on other nodes since the last
// count are not seen until the next one (docs/security.md).
import { deviceQuotaError, ReefError } from '../core/errors.ts';
import type { Store } from '../store/store.ts';

export interface Quotas {
  devices: number;
  observations: number;
  backfill: number;
  /** Solutions, device templates and alarm rules of the account's group (all its solutions). */
  solutions: number;
  templates: number;
  alarmRules: number;
}

/** The kinds of object counted per group, with the words a refusal uses. */
export type ObjectKind = 'solutions' | 'templates' | 'alarmRules';
const OBJECT_WORDS: Record<ObjectKind, string> = { solutions: 'solutions', templates: 'device templates', alarmRules: 'alarm rules' };
const QUOTA_KEYS = ['devices', 'observations', 'backfill', 'solutions', 'templates', 'alarmRules'] as const;

const OVERRIDE_PREFIX = 'quota/';
const USAGE_KEY = 'usage/observations';
const CACHE_MS = 5000;
const USAGE_REFRESH_MS = 60_000;

export interface QuotaUsage {
  devices: number;
  /** Stored observations at the last count plus what this node wrote since. */
  observations: number;
  /** When the stored observations were last counted (ISO), or null before the first count. */
  countedAt: string | null;
}

export class QuotaService {
  private overrides = new Map<string, { q: Partial<Quotas>; at: number }>();
  private counted = new Map<string, number>();
  private countedAt: number | null = null;
  private loadedAt = 0;
  private writtenSince = new Map<string, number>();
  /** The last creation of a counted object queued per group (createObject). */
  private objectLocks = new Map<string, Promise<void>>();
  /** Observations reserved by writes not yet committed, per account. */
  private reserved = new Map<string, number>();

  constructor(
    private readonly store: Store,
    private readonly defaults: Quotas,
    private readonly now: () => number = Date.now,
  ) {}

  /** The account's quotas: its own where an operator set them, else the defaults. */
  async limits(tenantId: string): Promise<Quotas> {
    const hit = this.overrides.get(tenantId);
    let q = hit && this.now() - hit.at < CACHE_MS ? hit.q : undefined;
    if (!q) {
      const raw = await this.store.getState(OVERRIDE_PREFIX + tenantId);
      q = raw ? (JSON.parse(raw) as Partial<Quotas>) : {};
      this.overrides.set(tenantId, { q, at: this.now() });
    }
    return { ...this.defaults, ...q };
  }

  /** Sets (or, with null, resets to the default) some of an account's quotas. */
  async set(tenantId: string, changes: { [K in keyof Quotas]?: number | null }): Promise<Quotas> {
    const raw = await this.store.getState(OVERRIDE_PREFIX + tenantId);
    const q: Partial<Quotas> = raw ? (JSON.parse(raw) as Partial<Quotas>) : {};
    for (const k of QUOTA_KEYS) {
      const v = changes[k];
      if (v === undefined) continue;
      if (v === null) delete q[k];
      else if (!Number.isSafeInteger(v) || v < 0) throw new ReefError('VALIDATION_FAILED', `${k} must be a whole number ≥ 0, or null for the default`, { field: k });
      else q[k] = v;
    }
    if (Object.keys(q).length) await this.store.setState(OVERRIDE_PREFIX + tenantId, JSON.stringify(q));
    else await this.store.deleteState(OVERRIDE_PREFIX + tenantId);
    this.overrides.delete(tenantId);
    return { ...this.defaults, ...q };
  }

  async usage(tenantId: string): Promise<QuotaUsage> {
    await this.loadUsage();
    return {
      devices: await this.store.countDevices(tenantId),
      observations: this.observations(tenantId),
      countedAt: this.countedAt === null ? null : new Date(this.countedAt).toISOString(),
    };
  }

  /**
   * Before `adding` devices are made for the account later (a simulation's). One device made now
   * passes limits().devices to Store.createDevice instead, which decides with the insert.
   */
  async checkDevices(tenantId: string, adding: number): Promise<void> {
    const { devices: limit } = await this.limits(tenantId);
    const have = await this.store.countDevices(tenantId);
    if (have + adding > limit) throw deviceQuotaError(limit, have, adding);
  }

  /**
   * Reserves `adding` observations for the account before they are stored, or throws
   * QUOTA_EXCEEDED. The returned function settles the reservation with what was written (call it
   * once, also after a failed write, with 0). Check and reservation run with no await between them.
   */
  async reserveObservations(tenantId: string, adding: number): Promise<(written: number) => void> {
    const { observations: limit } = await this.limits(tenantId);
    await this.loadUsage();
    this.refuseObservations(tenantId, limit, adding);
    this.reserved.set(tenantId, (this.reserved.get(tenantId) ?? 0) + adding);
    let settled = false;
    return (written) => {
      if (settled) return;
      settled = true;
      const left = (this.reserved.get(tenantId) ?? 0) - adding;
      if (left > 0) this.reserved.set(tenantId, left);
      else this.reserved.delete(tenantId);
      this.recordWritten(tenantId, written);
    };
  }

  private refuseObservations(tenantId: string, limit: number, adding: number): void {
    const have = this.observations(tenantId);
    if (have + adding > limit) {
      throw new ReefError(
        'QUOTA_EXCEEDED',
        `observation quota: this account may keep ${limit} observations and keeps about ${have}; ${adding} more would exceed it (delete devices, set a retention, or ask the operator)`,
      );
    }
  }

  /**
   * Creates one object of a kind counted per group (a solution, a device template, an alarm rule)
   * unless the group already has the account's quota of them; `newSolution`: the creation also
   * makes a solution (a template or a first device in a new solution), which counts too. Creations
   * for one group take turns on this node, so racing requests never pass the quota together.
   */
  async createObject<T>(account: { tenantId: string; groupId: string }, kind: ObjectKind | null, newSolution: boolean, create: () => Promise<T>): Promise<T> {
    const prev = this.objectLocks.get(account.groupId) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const tail = prev.then(() => mine);
    this.objectLocks.set(account.groupId, tail);
    await prev;
    try {
      const limits = await this.limits(account.tenantId);
      const have = await this.store.countGroupObjects(account.groupId);
      for (const k of [...(kind ? [kind] : []), ...(newSolution ? (['solutions'] as const) : [])]) {
        if (have[k] + 1 > limits[k]) {
          throw new ReefError('QUOTA_EXCEEDED', `${OBJECT_WORDS[k]} quota: this account's group may have ${limits[k]} ${OBJECT_WORDS[k]} and has ${have[k]}; delete some, or ask the operator`);
        }
      }
      return await create();
    } finally {
      release();
      if (this.objectLocks.get(account.groupId) === tail) this.objectLocks.delete(account.groupId);
    }
  }

  /** Before storing `adding` observations for the account (a check only: writes reserve). */
  async checkObservations(tenantId: string, adding: number): Promise<void> {
    const { observations: limit } = await this.limits(tenantId);
    await this.loadUsage();
    this.refuseObservations(tenantId, limit, adding);
  }

  /** Before a simulation backfills `n` observations (and so also against the observation quota). */
  async checkBackfill(tenantId: string, n: number): Promise<void> {
    const { backfill: limit } = await this.limits(tenantId);
    if (n > limit) throw new ReefError('QUOTA_EXCEEDED', `backfill quota: one simulation of this account may backfill ${limit} observations; this one would write ${n}`);
    await this.checkObservations(tenantId, n);
  }

  /** What this node stored for the account since the last count. */
  recordWritten(tenantId: string, n: number): void {
    if (n > 0) this.writtenSince.set(tenantId, (this.writtenSince.get(tenantId) ?? 0) + n);
  }

  /** The full count (leader's upkeep job): stored observations per account, kept in the store's state. */
  async recount(): Promise<void> {
    const at = this.now();
    const counts = await this.store.countObservationsByTenant();
    await this.store.setState(USAGE_KEY, JSON.stringify({ at, counts: Object.fromEntries(counts) }));
    this.apply(at, counts);
  }

  private observations(tenantId: string): number {
    return (this.counted.get(tenantId) ?? 0) + (this.writtenSince.get(tenantId) ?? 0) + (this.reserved.get(tenantId) ?? 0);
  }

  private async loadUsage(): Promise<void> {
    if (this.now() - this.loadedAt < USAGE_REFRESH_MS) return;
    this.loadedAt = this.now();
    const raw = await this.store.getState(USAGE_KEY);
    if (!raw) return;
    const u = JSON.parse(raw) as { at: number; counts: Record<string, number> };
    if (this.countedAt === null || u.at > this.countedAt) this.apply(u.at, new Map(Object.entries(u.counts)));
  }

  private apply(at: number, counts: Map<string, number>): void {
    this.counted = counts;
    this.countedAt = at;
    // What was written before the count is in it; from here on only newer writes are added.
    this.writtenSince.clear();
    this.loadedAt = this.now();
  }
}
