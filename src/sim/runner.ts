// One simulation running on this node: provisions its virtual devices, writes their readings live
// (one timer for the whole fleet, a slice of devices per second) and, alongside, backfills the
// history in bulk. Progress is kept in the store so another start — or another node — resumes
// where this one left off, on the same reading grid, so nothing is duplicated.
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { isReefError } from '../core/errors.ts';
import { DEVICE_TYPE_VIRTUAL, STUDIO_SIMULATION, type DeviceRecord } from '../core/types.ts';
import type { ObservationBatch } from '../core/observation-batch.ts';
import type { EventBus } from '../events/bus.ts';
import { storeObservations, storeObservationsMany, type ObservationQuota } from '../service/observations.ts';
import type { Store } from '../store/store.ts';
import { deviceModel, temperatureAt, type VirtualDeviceModel } from './model.ts';
import { hashString } from './prng.ts';
import { countIn, firstAtOrAfter, fleetCountIn, makeGrid, nextGridTime, phaseOf, type Grid } from './schedule.ts';
import type { SimParams } from './params.ts';

/** The simulation as created: written once (and once more when it is stopped). Key `sim:<id>`. */
export interface SimDefinition {
  v: 1;
  id: string;
  tenantId: string;
  groupId: string;
  params: SimParams;
  createdAt: number;
  /** Live readings start here; the backfill covers [startedAt − backfill, startedAt). */
  startedAt: number;
  endsAt: number | null;
  stoppedAt: number | null;
}

/** What has been done, written by the node running the simulation. Key `sim-progress:<id>`. */
export interface SimProgress {
  v: 1;
  /** Devices 0..provisioned−1 exist. */
  provisioned: number;
  /** Indices of devices deleted by their owner: no longer written. */
  removed: number[];
  /** The backfill is written for [startedAt − backfill, backfillCursor). */
  backfillCursor: number;
  /** Live time written, as [from, to) segments; a new one starts after a long outage. */
  live: [number, number][];
  state: 'active' | 'completed' | 'failed';
  error: string | null;
  finishedAt: number | null;
  updatedAt: number;
}

export interface RunDeps {
  store: Store;
  events: EventBus;
  log: Logger;
  now: () => number;
  /** Persists progress (serialised by the caller, latest wins). */
  save(p: SimProgress): Promise<void>;
  /** Status changed or progress moved: the manager publishes it. */
  changed(run: SimulationRun, kind: 'status' | 'progress'): void;
  /** After an outage longer than this, the gap is left empty rather than written. */
  maxCatchUpMs: number;
  /** The owner's observation quota: every write reserves against it; past it the run fails with QUOTA_EXCEEDED. */
  quota?: ObservationQuota;
}

/** Readings per device per store call in bulk writing (backfill and catch-up). */
const BULK_POINTS = 2000;
/**
 * A live slice yields to the event loop after this much work, ms: SQLite calls are synchronous
 * (each commit waits for its fsync), so a slice of 1,000 devices must not hold HTTP requests up.
 */
const YIELD_AFTER_MS = 15;
/** Live progress is persisted at most this often; a crash rewrites at most this much (same values). */
const SAVE_EVERY_MS = 1000;
const PROGRESS_EVENT_MS = 500;

/** Device ids are a function of (simulation, index): a resumed simulation finds its devices again. */
export function virtualDeviceId(simulationId: string, index: number): string {
  const h = createHash('sha1').update(`reef-sim:${simulationId}:${index}`).digest('hex');
  // Formatted as a name-based (version 5) UUID, RFC 4122 §4.3.
  const variant = ((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

export function initialProgress(def: SimDefinition): SimProgress {
  return {
    v: 1,
    provisioned: 0,
    removed: [],
    backfillCursor: def.startedAt - def.params.backfillMs,
    live: [],
    state: 'active',
    error: null,
    finishedAt: null,
    updatedAt: def.createdAt,
  };
}

/** Readings written so far, computed from the grid and the progress, never counted twice. */
export function observationsProduced(def: SimDefinition, p: SimProgress, extra = 0): number {
  const g = makeGrid(def.params.devices, def.params.intervalMs);
  const removed = new Set(p.removed);
  let n = fleetCountIn(g, def.startedAt - def.params.backfillMs, p.backfillCursor, removed);
  for (const [from, to] of p.live) n += fleetCountIn(g, from, to, removed);
  return n + extra;
}

export function backfillTotal(def: SimDefinition): number {
  const g = makeGrid(def.params.devices, def.params.intervalMs);
  return fleetCountIn(g, def.startedAt - def.params.backfillMs, def.startedAt);
}

const sleep = () => new Promise<void>((r) => setImmediate(r));

export class SimulationRun {
  readonly grid: Grid;
  private readonly models: VirtualDeviceModel[] = [];
  private readonly records: DeviceRecord[] = [];
  private removed: Set<number>;
  private stopping = false;
  private timer: NodeJS.Timeout | null = null;
  private liveLoop: Promise<void> | null = null;
  private wakeLive: (() => void) | null = null;
  private backfillLoop: Promise<void> = Promise.resolve();
  private main: Promise<void> = Promise.resolve();
  private lastSave = 0;
  private lastProgressEvent = 0;
  private liveDone = false;
  /** Backfill readings written in the current window, beyond backfillCursor (for progress). */
  backfillPartial = 0;

  constructor(
    readonly def: SimDefinition,
    readonly progress: SimProgress,
    private readonly deps: RunDeps,
  ) {
    this.grid = makeGrid(def.params.devices, def.params.intervalMs);
    this.removed = new Set(progress.removed);
    const seed = hashString(def.params.seed);
    for (let i = 0; i < def.params.devices; i++) {
      const m = deviceModel(seed, i, def.params.area, def.params.profile);
      this.models.push(m);
      this.records.push({
        id: virtualDeviceId(def.id, i),
        deviceType: DEVICE_TYPE_VIRTUAL,
        domainInfo: { location: m.location, simulationId: def.id },
        tenantId: def.tenantId,
        groupId: def.groupId,
        solution: STUDIO_SIMULATION,
        mac: null,
        createdAt: def.createdAt,
      });
    }
  }

  get deviceIds(): string[] {
    return this.records.map((r) => r.id);
  }

  get backfillFrom(): number {
    return this.def.startedAt - this.def.params.backfillMs;
  }

  get backfilling(): boolean {
    return this.progress.backfillCursor < this.def.startedAt;
  }

  /** Starts the run; returns at once (the work goes on until stop() or completion). */
  start(): void {
    this.main = this.run().catch((err) => this.fail(err));
  }

  /** Stops this node's work and saves progress; the simulation itself stays as it is in the store. */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.wakeLive?.();
    await this.main;
    await this.liveLoop;
    await this.backfillLoop;
    await this.save(true);
  }

  private async run(): Promise<void> {
    await this.provision();
    if (this.stopping) return;
    this.backfillLoop = this.backfill().catch((err) => this.fail(err));
    this.liveLoop = this.live().catch((err) => this.fail(err));
    await Promise.all([this.backfillLoop, this.liveLoop]);
  }

  private async provision(): Promise<void> {
    const { store, events } = this.deps;
    const p = this.progress;
    for (let i = p.provisioned; i < this.records.length && !this.stopping; i++) {
      const r = this.records[i]!;
      try {
        await store.createDevice({ id: r.id, tenantId: r.tenantId, groupId: r.groupId, solution: r.solution, deviceType: r.deviceType, domainInfo: r.domainInfo });
        events.publish({ kind: 'device', groupId: r.groupId, solution: r.solution, deviceId: r.id, action: 'created' });
      } catch (err) {
        // Made by an earlier start that stopped before saving its progress: it is ours already.
        if (!(isReefError(err) && err.code === 'CONFLICT')) throw err;
      }
      if ((i + 1) % 500 === 0 || i + 1 === this.records.length) {
        p.provisioned = i + 1;
        await this.save(true);
        await sleep();
      }
    }
  }

  /**
   * Writes every device's readings on the grid in [from, to), one store call per device. False
   * when a stop cut it short (the range then counts as not written: it is rewritten on resume).
   */
  private async writeRange(from: number, to: number, live: boolean, onDevice?: (n: number) => void): Promise<boolean> {
    const g = this.grid;
    const I = g.intervalMs;
    let lastYield = performance.now();
    for (let s = 0; s < g.slots; s++) {
      const first = firstAtOrAfter(g, phaseOf(g, s), from);
      if (first >= to) continue;
      const n = countIn(g, phaseOf(g, s), from, to);
      // Live ticks write every device of the slot in one store call (one commit on SQLite): a
      // commit per device would make the disk's fsync rate the simulation's limit.
      const tick: { device: DeviceRecord; batch: ObservationBatch; i: number }[] = [];
      for (let i = s; i < g.devices; i += g.slots) {
        if (this.stopping) return false;
        if (this.removed.has(i)) continue;
        const m = this.models[i]!;
        // On the grid, ascending: the newest is the last.
        const batch: ObservationBatch = { ts: new Float64Array(n), temperature: new Float64Array(n), extra: null, newest: Math.max(n - 1, 0) };
        for (let k = 0; k < n; k++) {
          const ts = first + k * I;
          batch.ts[k] = ts;
          batch.temperature[k] = temperatureAt(m, ts);
        }
        if (live) {
          tick.push({ device: this.records[i]!, batch, i });
          continue;
        }
        try {
          // The one store path of every producer; bulk history is not fanned out as live events.
          await storeObservations(this.deps.store, live ? this.deps.events : null, this.records[i]!, batch, this.deps.quota, 'simulation');
        } catch (err) {
          if (isReefError(err) && err.code === 'DEVICE_NOT_FOUND') {
            this.markRemoved(i);
            continue;
          }
          throw err;
        }
        onDevice?.(n);
        await sleep();
        lastYield = performance.now();
      }
      if (tick.length && !this.stopping) {
        const gone = new Set(await storeObservationsMany(this.deps.store, this.deps.events, tick, this.deps.quota, 'simulation'));
        for (const t of tick) {
          if (gone.has(t.device.id)) this.markRemoved(t.i);
          else onDevice?.(n);
        }
        if (performance.now() - lastYield > YIELD_AFTER_MS) {
          await sleep();
          lastYield = performance.now();
        }
      }
    }
    return true;
  }

  private markRemoved(i: number): void {
    if (this.removed.has(i)) return;
    this.removed.add(i);
    this.progress.removed.push(i);
    this.deps.log.info({ simulation: this.def.id, device: this.records[i]!.id }, 'a simulated device was deleted; it is no longer written');
  }

  private async backfill(): Promise<void> {
    const p = this.progress;
    const to = this.def.startedAt;
    const windowMs = BULK_POINTS * this.grid.intervalMs;
    while (p.backfillCursor < to && !this.stopping) {
      const end = Math.min(to, p.backfillCursor + windowMs);
      this.backfillPartial = 0;
      const whole = await this.writeRange(p.backfillCursor, end, false, (n) => {
        this.backfillPartial += n;
        this.progressEvent();
      });
      if (!whole) break;
      p.backfillCursor = end;
      this.backfillPartial = 0;
      await this.save(true);
    }
    this.backfillPartial = 0;
    if (!this.stopping && this.def.params.backfillMs > 0) {
      this.deps.log.info({ simulation: this.def.id, observations: backfillTotal(this.def) }, 'simulation backfill done');
      this.deps.changed(this, 'status');
    }
    await this.maybeComplete();
  }

  private async live(): Promise<void> {
    const p = this.progress;
    const now = this.deps.now();
    const last = p.live[p.live.length - 1];
    if (!last) p.live.push([this.def.startedAt, this.def.startedAt]);
    else if (now - last[1] > this.deps.maxCatchUpMs && (this.def.endsAt === null || last[1] < this.def.endsAt)) {
      // A long outage: the readings of the last maxCatchUp are written, older ones are left out.
      const from = Math.min(now - this.deps.maxCatchUpMs, this.def.endsAt ?? Infinity);
      p.live.push([from, from]);
    }
    const I = this.grid.intervalMs;
    while (!this.stopping) {
      const seg = p.live[p.live.length - 1]!;
      const t = this.deps.now();
      let end = t + 1;
      if (this.def.endsAt !== null) end = Math.min(end, this.def.endsAt);
      // Catching up after a restart: in chunks, so the fleet's first readings come soon.
      const more = end - seg[1] > BULK_POINTS * I;
      if (more) end = seg[1] + BULK_POINTS * I;
      if (end > seg[1]) {
        const catchUp = end - seg[1] > I;
        if (!(await this.writeRange(seg[1], end, !catchUp))) break;
        seg[1] = end;
        await this.save(false);
      }
      if (this.def.endsAt !== null && seg[1] >= this.def.endsAt) {
        this.liveDone = true;
        await this.maybeComplete();
        return;
      }
      if (more) {
        await sleep();
        continue;
      }
      const delay = Math.max(0, nextGridTime(this.grid, seg[1]) - this.deps.now());
      await new Promise<void>((resolve) => {
        this.wakeLive = resolve;
        this.timer = setTimeout(resolve, delay);
      });
      this.wakeLive = null;
      this.timer = null;
    }
  }

  private async maybeComplete(): Promise<void> {
    if (this.stopping || this.progress.state !== 'active') return;
    if (!this.liveDone || this.backfilling) return;
    this.progress.state = 'completed';
    this.progress.finishedAt = this.def.endsAt ?? this.deps.now();
    await this.save(true);
    this.deps.log.info({ simulation: this.def.id }, 'simulation completed');
    this.deps.changed(this, 'status');
  }

  private async fail(err: unknown): Promise<void> {
    if (this.progress.state !== 'active') return;
    this.stopping = true;
    if (this.timer) clearTimeout(this.timer);
    this.wakeLive?.();
    this.deps.log.error({ err, simulation: this.def.id }, 'simulation failed');
    this.progress.state = 'failed';
    this.progress.error = isReefError(err) ? `${err.code}: ${err.message}` : 'internal error (see the service log)';
    this.progress.finishedAt = this.deps.now();
    await this.save(true).catch(() => {});
    this.deps.changed(this, 'status');
  }

  private async save(force: boolean): Promise<void> {
    const t = this.deps.now();
    if (!force && t - this.lastSave < SAVE_EVERY_MS) return;
    this.lastSave = t;
    this.progress.updatedAt = t;
    await this.deps.save(this.progress);
  }

  private progressEvent(): void {
    const t = Date.now();
    if (t - this.lastProgressEvent < PROGRESS_EVENT_MS) return;
    this.lastProgressEvent = t;
    this.deps.changed(this, 'progress');
  }

  get finished(): boolean {
    return this.progress.state !== 'active';
  }
}
