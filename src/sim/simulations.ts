// Studio simulations of every account: create, list, read, stop, and the runs of this node.
// Definitions (`sim:<id>`) and progress (`sim-progress:<id>`) live in the store's job state, so
// they survive restarts on SQLite and PostgreSQL alike. Any node answers the API; only the leader
// runs simulations, and it picks up new and stopped ones by reconciling with the store.
import { randomBytes, randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { ReefError } from '../core/errors.ts';
import { STUDIO_SIMULATION, type Account } from '../core/types.ts';
import type { EventBus } from '../events/bus.ts';
import type { Store } from '../store/store.ts';
import type { Leadership } from '../jobs/leader.ts';
import type { ObservationQuota } from '../service/observations.ts';
import { DEFAULT_LIMITS, parseSimulationRequest, type SimLimits, type SimParams } from './params.ts';
import { backfillTotal, initialProgress, observationsProduced, SimulationRun, virtualDeviceId, type SimDefinition, type SimProgress } from './runner.ts';

export type SimStatus = 'running' | 'backfilling' | 'stopped' | 'completed' | 'failed';

/** A simulation as the API returns it (docs/simulation.md). */
export interface Simulation {
  id: string;
  name: string | null;
  status: SimStatus;
  solution: typeof STUDIO_SIMULATION;
  devices: number;
  /** The virtual devices' ids, in index order (one simulation's GET and its creation only). */
  deviceIds?: string[];
  params: Omit<SimParams, 'name'>;
  observationsProduced: number;
  createdAt: string;
  startedAt: string;
  endsAt: string | null;
  stoppedAt: string | null;
  backfill: { done: number; total: number } | null;
  error: string | null;
}

export interface SimulationManagerOptions {
  store: Store;
  events: EventBus;
  log: Logger;
  limits?: Partial<SimLimits>;
  /** Runs simulations only while this node leads; without one, this node runs them (bench, embedding). */
  leadership?: Leadership;
  /** The clock of readings (epoch ms); tests may pin it. */
  now?: () => number;
  /** How often the leader looks for simulations created or stopped through other nodes. */
  reconcileMs?: number;
  /** After a longer outage, only this much of the gap is written on resume (default 1 day). */
  maxCatchUpMs?: number;
  /** Per-account quotas, checked before a simulation is created (src/service/quotas.ts). */
  quotas?: ObservationQuota & { checkDevices(tenantId: string, adding: number): Promise<void>; checkBackfill(tenantId: string, n: number): Promise<void> };
}

const DEF = 'sim:';
const PROGRESS = 'sim-progress:';
const iso = (t: number | null) => (t === null ? null : new Date(t).toISOString());

export class SimulationManager {
  readonly limits: SimLimits;
  private readonly store: Store;
  private readonly events: EventBus;
  private readonly log: Logger;
  private readonly leadership: Leadership | null;
  /** This node runs simulations now (the leader's job is started). */
  private leading: boolean;
  private readonly now: () => number;
  private readonly runs = new Map<string, SimulationRun>();
  private readonly saving = new Map<string, Promise<void>>();
  private reconcileTimer: NodeJS.Timeout | null = null;
  private unregister: (() => Promise<void>) | null = null;
  private reconciling: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly opts: SimulationManagerOptions) {
    this.store = opts.store;
    this.events = opts.events;
    this.log = opts.log;
    this.limits = { ...DEFAULT_LIMITS, ...(opts.limits ?? {}) };
    this.leadership = opts.leadership ?? null;
    this.leading = this.leadership === null;
    this.now = opts.now ?? Date.now;
  }

  /** Resumes the simulations left running (when leader) and keeps following leadership. */
  async start(): Promise<void> {
    // A leader-only job: the leadership starts it when this node leads and stops it (awaited)
    // before another node may take over.
    this.unregister =
      this.leadership?.run({
        name: 'simulations',
        start: () => {
          this.leading = true;
          return this.reconcile();
        },
        stop: () => {
          this.leading = false;
          return this.reconcile();
        },
      }) ?? null;
    await this.reconcile();
    const every = this.opts.reconcileMs ?? 2000;
    this.reconcileTimer = setInterval(() => void this.reconcile(), every);
    this.reconcileTimer.unref();
  }

  /** Stops this node's runs, saving their progress; the simulations resume on the next start. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.reconcileTimer) clearInterval(this.reconcileTimer);
    await this.unregister?.();
    await this.reconciling;
    await Promise.all([...this.runs.values()].map((r) => r.stop()));
    this.runs.clear();
    await Promise.all(this.saving.values());
  }

  /** Brings this node's runs in line with the store and with leadership. */
  reconcile(): Promise<void> {
    this.reconciling = this.reconciling.then(() => this.reconcileOnce()).catch((err) => this.log.error({ err }, 'simulation reconcile failed'));
    return this.reconciling;
  }

  private async reconcileOnce(): Promise<void> {
    if (this.closed) return;
    if (!this.leading) {
      if (this.runs.size) this.log.info({ runs: this.runs.size }, 'not the leader: handing simulations over');
      await Promise.all([...this.runs.values()].map((r) => r.stop()));
      this.runs.clear();
      return;
    }
    const defs = await this.allDefinitions();
    const progress = await this.allProgress();
    for (const def of defs) {
      const run = this.runs.get(def.id);
      const p = progress.get(def.id) ?? initialProgress(def);
      if (def.stoppedAt !== null) {
        if (run) await this.stopRun(def.id);
        continue;
      }
      if (!run && p.state === 'active' && !this.closed) this.startRun(def, p);
    }
  }

  private startRun(def: SimDefinition, p: SimProgress): SimulationRun {
    const run = new SimulationRun(def, p, {
      store: this.store,
      events: this.events,
      log: this.log,
      now: this.now,
      maxCatchUpMs: this.opts.maxCatchUpMs ?? 86_400_000,
      ...(this.opts.quotas ? { quota: this.opts.quotas } : {}),
      save: (prog) => this.saveProgress(def.id, prog),
      changed: (r, kind) => {
        this.publish(r.def, r.progress, r.backfillPartial);
        if (kind === 'status' && r.finished) this.runs.delete(r.def.id);
      },
    });
    this.runs.set(def.id, run);
    run.start();
    return run;
  }

  private async stopRun(id: string): Promise<void> {
    const run = this.runs.get(id);
    if (!run) return;
    this.runs.delete(id);
    await run.stop();
  }

  /** Progress writes of one simulation are serialised so an older snapshot never lands last. */
  private saveProgress(id: string, p: SimProgress): Promise<void> {
    const prev = this.saving.get(id) ?? Promise.resolve();
    const next = prev.then(() => this.store.setState(PROGRESS + id, JSON.stringify(p)));
    const tracked = next.catch((err) => this.log.warn({ err, simulation: id }, 'saving simulation progress failed; retried on the next save'));
    this.saving.set(id, tracked);
    return tracked;
  }

  private async allDefinitions(): Promise<SimDefinition[]> {
    const rows = await this.store.listState(DEF);
    const out: SimDefinition[] = [];
    for (const r of rows) {
      try {
        out.push(JSON.parse(r.value) as SimDefinition);
      } catch {
        this.log.warn({ key: r.key }, 'unreadable simulation definition skipped');
      }
    }
    return out;
  }

  private async allProgress(): Promise<Map<string, SimProgress>> {
    const rows = await this.store.listState(PROGRESS);
    const out = new Map<string, SimProgress>();
    for (const r of rows) {
      try {
        out.set(r.key.slice(PROGRESS.length), JSON.parse(r.value) as SimProgress);
      } catch {
        // Unreadable progress: the simulation resumes from the start of its grid (same values).
      }
    }
    return out;
  }

  private async definition(account: Account, id: string): Promise<SimDefinition> {
    const raw = /^[0-9a-f-]{36}$/i.test(id) ? await this.store.getState(DEF + id.toLowerCase()) : null;
    const def = raw ? (JSON.parse(raw) as SimDefinition) : null;
    // Another group's simulation answers exactly like none (seed §5).
    if (!def || def.groupId !== account.groupId) throw new ReefError('NOT_FOUND', `no simulation ${id.slice(0, 80)} in this account`);
    return def;
  }

  private async progressOf(def: SimDefinition): Promise<{ p: SimProgress; partial: number }> {
    const run = this.runs.get(def.id);
    if (run) return { p: run.progress, partial: run.backfillPartial };
    const raw = await this.store.getState(PROGRESS + def.id);
    return { p: raw ? (JSON.parse(raw) as SimProgress) : initialProgress(def), partial: 0 };
  }

  toWire(def: SimDefinition, p: SimProgress, partial: number, withIds: boolean): Simulation {
    const bfTotal = backfillTotal(def);
    let status: SimStatus;
    if (def.stoppedAt !== null) status = 'stopped';
    else if (p.state === 'completed') status = 'completed';
    else if (p.state === 'failed') status = 'failed';
    else status = p.backfillCursor < def.startedAt ? 'backfilling' : 'running';
    const produced = observationsProduced(def, p, partial);
    const done = observationsProduced(def, { ...p, live: [], removed: [] }, partial);
    const sim: Simulation = {
      id: def.id,
      name: def.params.name,
      status,
      solution: STUDIO_SIMULATION,
      devices: def.params.devices,
      params: {
        devices: def.params.devices,
        intervalMs: def.params.intervalMs,
        durationMs: def.params.durationMs,
        backfillMs: def.params.backfillMs,
        area: def.params.area,
        seed: def.params.seed,
        profile: def.params.profile,
      },
      observationsProduced: produced,
      createdAt: iso(def.createdAt)!,
      startedAt: iso(def.startedAt)!,
      endsAt: iso(def.endsAt),
      stoppedAt: iso(def.stoppedAt ?? p.finishedAt),
      backfill: def.params.backfillMs > 0 ? { done: Math.min(bfTotal, done), total: bfTotal } : null,
      error: p.error,
    };
    if (withIds) sim.deviceIds = Array.from({ length: def.params.devices }, (_, i) => virtualDeviceId(def.id, i));
    return sim;
  }

  private publish(def: SimDefinition, p: SimProgress, partial: number): void {
    this.events.publish({
      kind: 'simulation',
      groupId: def.groupId,
      solution: STUDIO_SIMULATION,
      simulationId: def.id,
      status: this.toWire(def, p, partial, false),
    });
  }

  // --- the API -------------------------------------------------------------------------------

  async create(account: Account, body: unknown): Promise<Simulation> {
    const params = parseSimulationRequest(body, this.limits, () => randomBytes(6).toString('hex'));
    const defs = (await this.allDefinitions()).filter((d) => d.groupId === account.groupId && d.stoppedAt === null);
    const progress = await this.allProgress();
    const active = defs.filter((d) => (progress.get(d.id)?.state ?? 'active') === 'active').length;
    if (active >= this.limits.maxActivePerGroup) {
      throw new ReefError('CONFLICT', `at most ${this.limits.maxActivePerGroup} simulations may run at once per account: stop one first`);
    }
    // Quotas before any work: the devices it creates and the readings its backfill writes.
    if (this.opts.quotas) {
      await this.opts.quotas.checkDevices(account.tenantId, params.devices);
      if (params.backfillMs > 0) await this.opts.quotas.checkBackfill(account.tenantId, Math.ceil(params.backfillMs / params.intervalMs) * params.devices);
    }
    const now = this.now();
    const def: SimDefinition = {
      v: 1,
      id: randomUUID(),
      tenantId: account.tenantId,
      groupId: account.groupId,
      params,
      createdAt: now,
      startedAt: now,
      endsAt: params.durationMs === null ? null : now + params.durationMs,
      stoppedAt: null,
    };
    const p = initialProgress(def);
    await this.store.setState(PROGRESS + def.id, JSON.stringify(p));
    await this.store.setState(DEF + def.id, JSON.stringify(def));
    this.log.info({ simulation: def.id, tenant: def.tenantId, devices: params.devices, intervalMs: params.intervalMs, backfillMs: params.backfillMs }, 'simulation created');
    // The leader starts it at once; another node's leader picks it up when it next reconciles.
    if (this.leading && !this.closed) {
      await this.reconciling;
      if (!this.runs.has(def.id)) this.startRun(def, p);
    }
    this.publish(def, p, 0);
    return this.toWire(def, p, 0, true);
  }

  async list(account: Account): Promise<Simulation[]> {
    const defs = (await this.allDefinitions()).filter((d) => d.groupId === account.groupId);
    const stored = await this.allProgress();
    defs.sort((a, b) => b.createdAt - a.createdAt || a.id.localeCompare(b.id));
    return defs.map((d) => {
      const run = this.runs.get(d.id);
      const p = run?.progress ?? stored.get(d.id) ?? initialProgress(d);
      return this.toWire(d, p, run?.backfillPartial ?? 0, false);
    });
  }

  async get(account: Account, id: string): Promise<Simulation> {
    const def = await this.definition(account, id);
    const { p, partial } = await this.progressOf(def);
    return this.toWire(def, p, partial, true);
  }

  /** Ends a simulation (idempotent): its devices and readings stay. */
  async stop(account: Account, id: string): Promise<Simulation> {
    let def = await this.definition(account, id);
    const before = await this.progressOf(def);
    if (def.stoppedAt === null && before.p.state === 'active') {
      def = { ...def, stoppedAt: this.now() };
      await this.store.setState(DEF + def.id, JSON.stringify(def));
      await this.stopRun(def.id);
      this.log.info({ simulation: def.id }, 'simulation stopped');
      const { p, partial } = await this.progressOf(def);
      this.publish(def, p, partial);
    }
    const { p, partial } = await this.progressOf(def);
    return this.toWire(def, p, partial, true);
  }

  /** Simulations of a group (for the demo's first-start check). */
  async countForGroup(groupId: string): Promise<number> {
    return (await this.allDefinitions()).filter((d) => d.groupId === groupId).length;
  }

  /** For benches and tests: the run of a simulation on this node, if any. */
  runOf(id: string): SimulationRun | undefined {
    return this.runs.get(id);
  }
}
