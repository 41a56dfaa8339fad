// The alarm evaluator. It runs as a leadership job (src/jobs/leader.ts), so on several nodes
// exactly one node evaluates every rule; the partial unique index on active alarms makes a raise
// by a node that has just lost leadership a no-op rather than a duplicate.
//
// Observations reach it through the event bus, which every ingest path already publishes to after
// the store commits (src/service/observations.ts: HTTP uploads, MQTT ingest, gateway readings,
// simulations): on PostgreSQL the bus carries other nodes' observations to the leader, so one
// subscription sees every path on every node. The listener only queues; evaluation runs after
// the publisher has returned, so ingest never waits for it (docs/alarms.md "Evaluation").
//
// State per (rule, device) lives in memory for speed and is written to the store on every
// transition (normal → pending → raised → normal), so a restart or a new leader continues a
// pending duration and knows which alarms are raised.
import type { Logger } from 'pino';
import type { AlarmEvalState, AlarmReading, AlarmRecord, AlarmRuleRecord, AlarmRuleSpec, WebhookDeliveryRecord } from '../core/alarms.ts';
import type { DeviceRecord, Observation, ObservationRecord } from '../core/types.ts';
import type { EventBus, EventKind, ReefEvent } from '../events/bus.ts';
import type { Store } from '../store/store.ts';
import { breaks, clears, convert, ratePerMinute, readField, readingUnit } from './evaluate.ts';
import { FairQueue, Slicer, type Task } from './fair-queue.ts';
import { applyStep, cleared, newAlarm } from './lifecycle.ts';
import type { AlarmNotifier } from './notify.ts';
import { countAlarmEvaluation } from '../metrics/metrics.ts';

/** The events that change which rules apply: heard even while the engine has no rule. */
const RULE_KINDS: readonly EventKind[] = ['alarm-rule', 'device', 'alarm'];

interface Pair {
  phase: 'normal' | 'pending' | 'raised';
  since: number;
  alarmId?: string;
  /** Timestamp and value (rule unit) of the last reading evaluated: order and rate of change. */
  lastTs?: number;
  lastValue?: number;
}

export interface AlarmEngineOptions {
  store: Store;
  events: EventBus;
  log: Logger;
  notifier: AlarmNotifier;
  now: () => number;
  /**
   * Readings older than this when they arrive are stored but not evaluated: simulation backfill and
   * other history uploads describe the past, and must not page anyone now (docs/alarms.md).
   */
  lateMs: number;
  /**
   * Alarms one silence check may raise per group (tenant); the rest are raised by the next checks,
   * so one tenant's thousands of silent pairs never hold up the node or another tenant's alarms.
   */
  maxRaisesPerCheck: number;
}

const key = (a: string, b: string) => a + '\n' + b;

/**
 * Raises stored per transaction at most: one commit for many alarms, yet short enough that the
 * evaluator still gives the event loop a turn every few milliseconds (docs/alarms.md "Evaluation, precisely").
 */
const RAISE_CHUNK = 50;

/** An alarm about to be stored, with what undoes its pair's change if storing fails. */
interface PendingRaise {
  r: AlarmRuleRecord;
  deviceId: string;
  p: Pair;
  before: { phase: Pair['phase']; since: number };
  alarm: AlarmRecord;
  /** The pair's state as raised (taken when raised: a clear later in the slice changes the pair). */
  state: AlarmEvalState;
  delivery: WebhookDeliveryRecord | null;
}

/** A stored batch: its records when published in this process, else its wire form. */
type Batch = { records: ObservationRecord[]; wire: null } | { records: null; wire: Observation[] };

/** A batch's temperatures in one pass: extremes and steepest changes (°C, °C per minute). */
interface Summary {
  count: number;
  firstTs: number;
  firstV: number;
  lastTs: number;
  lastV: number;
  min: number;
  max: number;
  maxRise: number;
  maxFall: number;
}

/** The reading's other fields, where rules read a field by path and a reading may name its unit. */
function bagOf(records: ObservationRecord[] | null, wire: Observation[] | null, i: number): Record<string, unknown> | null {
  return records ? records[i]!.extra : wire![i]!;
}

function temperatureOf(records: ObservationRecord[] | null, wire: Observation[] | null, i: number): number | null {
  if (records) return records[i]!.temperature;
  const t = wire![i]!.temperature;
  return typeof t === 'number' ? t : null;
}

/**
 * The batch's temperature extremes, oldest first as evaluation goes; null when a reading names its
 * own unit (then every rule is judged reading by reading). Readings without a temperature are left
 * out, and a repeated timestamp counts once, as the per-reading path does.
 */
function summarize(n: number, order: number[] | null, tss: Float64Array, records: ObservationRecord[] | null, wire: Observation[] | null): Summary | null {
  let count = 0;
  let firstTs = 0;
  let firstV = 0;
  let lastTs = 0;
  let lastV = 0;
  let min = Infinity;
  let max = -Infinity;
  let maxRise = -Infinity;
  let maxFall = Infinity;
  for (let j = 0; j < n; j++) {
    const i = order ? order[j]! : j;
    let t: number | null;
    if (records) {
      const rec = records[i]!;
      t = rec.temperature;
      if (t === null) continue;
      if (rec.extra !== null && rec.extra.unit !== undefined) return null;
    } else {
      const w = wire![i]!;
      t = typeof w.temperature === 'number' ? w.temperature : null;
      if (t === null) continue;
      if (w.unit !== undefined) return null;
    }
    const ts = tss[i]!;
    if (count) {
      if (ts <= lastTs) continue;
      const r = ((t - lastV) * 60_000) / (ts - lastTs);
      if (r > maxRise) maxRise = r;
      if (r < maxFall) maxFall = r;
    } else {
      firstTs = ts;
      firstV = t;
    }
    if (t < min) min = t;
    if (t > max) max = t;
    lastTs = ts;
    lastV = t;
    count++;
  }
  return { count, firstTs, firstV, lastTs, lastV, min, max, maxRise, maxFall };
}

/** Rounding room: near a threshold the per-reading path decides. */
const EPS = 1e-9;

const toC = (s: AlarmRuleSpec, v: number) => (s.unit === 'F' ? ((v - 32) * 5) / 9 : v);

/**
 * What one device's rules are, resolved once and kept until a rule, a pair or the device changes:
 * the rules (its own, its template's, the solution's), their pairs, and the tightest limits of its
 * temperature rules in °C, so a batch that stays inside all of them settles every rule with one
 * comparison per limit (docs/alarms.md "Every ingest path, one hook").
 */
interface Plan {
  rules: AlarmRuleRecord[];
  pairs: Pair[];
  silence: boolean;
  /** Lowest value that can break an above/outside rule; highest that can break a below/outside rule. */
  hi: number;
  lo: number;
  /** Smallest rise / fall per minute that can break a rate rule. */
  rise: number;
  fall: number;
}

function plan(rules: AlarmRuleRecord[], pairs: Pair[]): Plan {
  const p: Plan = { rules, pairs, silence: false, hi: Infinity, lo: -Infinity, rise: Infinity, fall: Infinity };
  for (const r of rules) {
    const s = r.spec;
    if (s.condition === 'silence') {
      p.silence = true;
      continue;
    }
    if (s.field !== 'temperature') continue;
    switch (s.condition) {
      case 'above':
        p.hi = Math.min(p.hi, toC(s, s.threshold!));
        break;
      case 'below':
        p.lo = Math.max(p.lo, toC(s, s.threshold!));
        break;
      case 'outside':
        p.hi = Math.min(p.hi, toC(s, s.high!));
        p.lo = Math.max(p.lo, toC(s, s.low!));
        break;
      case 'rate': {
        const limit = s.unit === 'F' ? (s.ratePerMinute! * 5) / 9 : s.ratePerMinute!;
        if (s.direction !== 'fall') p.rise = Math.min(p.rise, limit);
        if (s.direction !== 'rise') p.fall = Math.min(p.fall, limit);
        break;
      }
    }
  }
  return p;
}

/**
 * True when no reading of the batch can break this temperature rule, whose pair is normal: the
 * pair moves past the batch at once (what judging each reading would have done). `inside`: the
 * batch is within the device's tightest limits (Plan), so only a rate rule's step from the pair's
 * last reading to the batch's first is left to check.
 */
function settled(s: AlarmRuleSpec, p: Pair, sum: Summary, inside: boolean): boolean {
  if (s.field !== 'temperature' || p.phase !== 'normal') return false;
  if (p.lastTs !== undefined && p.lastTs >= sum.firstTs) return false;
  let could = false;
  switch (s.condition) {
    case 'above':
      could = !inside && sum.max > toC(s, s.threshold!) - EPS;
      break;
    case 'below':
      could = !inside && sum.min < toC(s, s.threshold!) + EPS;
      break;
    case 'outside':
      could = !inside && (sum.min < toC(s, s.low!) + EPS || sum.max > toC(s, s.high!) - EPS);
      break;
    case 'rate': {
      let rise = inside ? -Infinity : sum.maxRise;
      let fall = inside ? Infinity : sum.maxFall;
      if (p.lastTs !== undefined && p.lastValue !== undefined) {
        const r0 = ((sum.firstV - toC(s, p.lastValue)) * 60_000) / (sum.firstTs - p.lastTs);
        rise = Math.max(rise, r0);
        fall = Math.min(fall, r0);
      }
      // The limit in °C per minute (a rate converts by the factor alone).
      const limit = s.unit === 'F' ? (s.ratePerMinute! * 5) / 9 : s.ratePerMinute!;
      const up = rise > limit - EPS;
      const down = fall < -limit + EPS;
      could = s.direction === 'rise' ? up : s.direction === 'fall' ? down : up || down;
      if (!could) p.lastValue = s.unit === 'F' ? (sum.lastV * 9) / 5 + 32 : sum.lastV;
      break;
    }
    default:
      return false;
  }
  if (could) return false;
  p.lastTs = sum.lastTs;
  return true;
}

export class AlarmEngine {
  readonly name = 'alarms';
  private rules = new Map<string, AlarmRuleRecord>();
  private byDevice = new Map<string, AlarmRuleRecord[]>();
  private bySolution = new Map<string, AlarmRuleRecord[]>();
  /** Rules for a device template, by template id; and how many such rules each solution has. */
  private byTemplate = new Map<string, AlarmRuleRecord[]>();
  private templateSolutions = new Map<string, number>();
  /** Each device's rules and pairs, resolved on its first batch; dropped when rules or pairs change. */
  private plans = new Map<string, Plan | null>();
  /** Timestamps of the batch being judged, reused from batch to batch. */
  private scratch = new Float64Array(1024);
  private pairs = new Map<string, Pair>();
  /** The keys of `pairs` by rule, so a rule change touches its own pairs only. */
  private pairsByRule = new Map<string, Set<string>>();
  /** When each device's last observation arrived (silence rules). */
  private lastSeen = new Map<string, number>();
  /** Batches take turns by group; rule changes and checks are barriers (src/alarms/fair-queue.ts). */
  private queue = new FairQueue();
  private draining: Promise<void> | null = null;
  private unsubscribe: (() => void) | null = null;
  private active = false;
  /** Readings skipped for arriving too late (backfill), since start. */
  skippedLate = 0;

  constructor(private readonly o: AlarmEngineOptions) {}

  get running(): boolean {
    return this.active;
  }

  private runningWaiters: (() => void)[] = [];

  /** Resolves once this node evaluates (at once if it does): a take-over after the leader went. */
  whenRunning(): Promise<void> {
    if (this.active && !this.loading) return Promise.resolve();
    return new Promise((r) => this.runningWaiters.push(r));
  }

  get ruleCount(): number {
    return this.rules.size;
  }

  /** Leadership job: this node evaluates from now on. */
  async start(): Promise<void> {
    this.active = true;
    this.loading = true;
    // Subscribed before loading, so nothing published meanwhile is missed: it waits in the queue.
    this.subscribe(true);
    this.enqueue(() => this.load());
    await this.flush();
    this.updateSubscription();
    for (const w of this.runningWaiters.splice(0)) w();
  }

  async stop(): Promise<void> {
    this.active = false;
    this.subscribe(false);
    await this.flush();
    this.rules.clear();
    this.byDevice.clear();
    this.bySolution.clear();
    this.byTemplate.clear();
    this.templateSolutions.clear();
    this.plans.clear();
    this.pairs.clear();
    this.pairsByRule.clear();
    this.lastSeen.clear();
    this.seeded.clear();
  }

  /** Resolves once everything queued so far has been evaluated (tests, shutdown). */
  async flush(): Promise<void> {
    while (this.draining) await this.draining;
  }

  /**
   * An event from the bus or from this node's own routes (rule changes, acknowledgements): queued
   * and handled in order with the observations.
   */
  handle(e: ReefEvent): void {
    if (!this.active) return;
    if (e.kind === 'observations') {
      if (!this.byDevice.has(e.deviceId) && !this.loading && !this.reloading) {
        const k = key(e.groupId, e.solution);
        if (!this.bySolution.has(k) && !this.templateSolutions.has(k)) return;
      }
      const at = this.o.now();
      // In-process publishers attach the stored records (src/service/observations.ts): numbers, no
      // wire form to build or parse. Events from other nodes carry the wire form only.
      const records = (e as { records?: ObservationRecord[] }).records;
      const batch: Batch = records ? { records, wire: null } : { records: null, wire: e.observations };
      this.enqueue(() => this.observe(e.groupId, e.solution, e.deviceId, batch, at), e.groupId);
    } else if (e.kind === 'alarm-rule') {
      // Listen at once: an upload right after the rule was created must be evaluated.
      if (e.action !== 'deleted') this.subscribe(true);
      this.reloading++;
      this.enqueue(async () => {
        try {
          await this.reloadRule(e.groupId, e.solution, e.ruleId);
        } finally {
          this.reloading--;
        }
      });
    } else if (e.kind === 'device') {
      // A device made, deleted (or given another template): its rules are resolved afresh.
      if (this.plans.has(e.deviceId)) this.enqueue(() => void this.plans.delete(e.deviceId));
    } else if (e.kind === 'alarm' && e.event === 'cleared') {
      const a = e.alarm as { id: string; ruleId: string; deviceId: string };
      this.enqueue(() => this.forget(a.ruleId, a.deviceId, a.id));
    }
  }

  /** Silence rules: raises for every device in scope that has been quiet too long. */
  checkSilence(): Promise<void> {
    this.enqueue(() => this.silence());
    return this.flush();
  }

  // ---- queue ----------------------------------------------------------------------------------

  private loading = false;
  /** Rule reloads queued: observations queued meanwhile are kept, the new rule may want them. */
  private reloading = 0;

  private enqueue(task: Task, group?: string): void {
    this.queue.push(task, group);
    if (!this.draining) this.draining = this.drain();
  }

  private async drain(): Promise<void> {
    // After the publisher returns: ingest never runs evaluation in its own call.
    await new Promise<void>((r) => setImmediate(r));
    try {
      const slicer = new Slicer();
      do {
        while (this.queue.length) {
          // Other requests get the event loop between slices of evaluation; the slice's raises are
          // stored before (one transaction), so no request sees a raise half made.
          if (slicer.due) await this.flushRaises();
          await slicer.tick();
          const task = this.queue.shift()!;
          try {
            await task();
          } catch (err) {
            this.o.log.error({ err }, 'alarm evaluation failed');
          }
          if (this.raising.length >= RAISE_CHUNK) await this.flushRaises();
        }
        await this.flushRaises();
      } while (this.queue.length);
    } finally {
      this.draining = null;
    }
  }

  private readonly listener = (e: ReefEvent) => this.handle(e);

  /** Unsubscribes the engine's listener of observations (the rule-change one is `unsubscribe`). */
  private unsubscribeObservations: (() => void) | null = null;

  /**
   * Listens to rule changes and, when `on` is true, to observations: two subscriptions, so that
   * one to observations can be added while a rule change is being delivered without that event
   * being delivered twice.
   */
  private subscribe(on: boolean | 'rules'): void {
    if (on && !this.unsubscribe) this.unsubscribe = this.o.events.subscribe(this.listener, RULE_KINDS);
    else if (!on && this.unsubscribe) {
      this.unsubscribe();
      this.unsubscribe = null;
    }
    if (on === true && !this.unsubscribeObservations) this.unsubscribeObservations = this.o.events.subscribe(this.listener, ['observations']);
    else if (on !== true && this.unsubscribeObservations) {
      this.unsubscribeObservations();
      this.unsubscribeObservations = null;
    }
  }

  /**
   * With no rules the in-process bus is left idle (producers then build no events at all); across
   * nodes the engine still listens for rules created on other nodes, and for those events only, so
   * that a node alone with no rules builds no observation events either (PgEventBus.idleFor).
   */
  private updateSubscription(): void {
    const crossNode = this.o.events.idle === undefined;
    this.subscribe(this.active && (this.rules.size > 0 || (crossNode ? 'rules' : false)));
  }

  // ---- loading and rule changes ---------------------------------------------------------------

  private async load(): Promise<void> {
    this.loading = true;
    this.plans.clear();
    try {
      for (const r of await this.o.store.allAlarmRules()) this.index(r);
      for (const { ruleId, deviceId, state } of await this.o.store.listAlarmStates()) {
        this.setPair(ruleId, deviceId, { phase: state.phase, since: state.since, ...(state.alarmId ? { alarmId: state.alarmId } : {}) });
      }
      // An active alarm is the truth about "raised", whatever state was (or was not) written.
      for (const a of await this.o.store.activeAlarms()) {
        const p = this.pairs.get(key(a.ruleId, a.deviceId));
        if (p?.phase !== 'raised' || p.alarmId !== a.id) this.setPair(a.ruleId, a.deviceId, { phase: 'raised', since: a.raisedAt, alarmId: a.id });
      }
      const solutions = new Set<string>();
      for (const r of this.rules.values()) if (r.spec.condition === 'silence') solutions.add(key(r.groupId, r.solution));
      for (const s of solutions) await this.seedLastSeen(s);
    } finally {
      this.loading = false;
    }
  }

  /** Solutions whose devices' last arrivals were read (seedLastSeen): once per solution, not per rule. */
  private seeded = new Set<string>();

  /** Last arrival of each device of a solution after a (re)start: its latest stored observation. */
  private async seedLastSeen(groupAndSolution: string): Promise<void> {
    if (this.seeded.has(groupAndSolution)) return;
    this.seeded.add(groupAndSolution);
    const [groupId, solution] = groupAndSolution.split('\n') as [string, string];
    const now = this.o.now();
    for (const l of await this.o.store.latestObservations(groupId, solution)) {
      if (!this.lastSeen.has(l.deviceId)) this.lastSeen.set(l.deviceId, Math.min(now, l.observation.ts));
    }
  }

  /** Where a rule is indexed: by its device, its device template, or its solution. */
  private slot(r: AlarmRuleRecord): [Map<string, AlarmRuleRecord[]>, string] {
    if (r.deviceId) return [this.byDevice, r.deviceId];
    if (r.spec.templateId) return [this.byTemplate, r.spec.templateId];
    return [this.bySolution, key(r.groupId, r.solution)];
  }

  private index(r: AlarmRuleRecord): void {
    this.unindex(r.id);
    if (!r.spec.enabled) return;
    this.rules.set(r.id, r);
    const [m, k] = this.slot(r);
    const list = m.get(k);
    if (list) list.push(r);
    else m.set(k, [r]);
    if (r.spec.templateId) {
      const sk = key(r.groupId, r.solution);
      this.templateSolutions.set(sk, (this.templateSolutions.get(sk) ?? 0) + 1);
    }
    this.plans.clear();
  }

  private unindex(id: string): void {
    const old = this.rules.get(id);
    if (!old) return;
    this.rules.delete(id);
    const [m, k] = this.slot(old);
    const list = m.get(k)?.filter((x) => x.id !== id);
    if (list?.length) m.set(k, list);
    else m.delete(k);
    if (old.spec.templateId) {
      const sk = key(old.groupId, old.solution);
      const n = (this.templateSolutions.get(sk) ?? 1) - 1;
      if (n > 0) this.templateSolutions.set(sk, n);
      else this.templateSolutions.delete(sk);
    }
    this.plans.clear();
  }

  private async reloadRule(groupId: string, solution: string, id: string): Promise<void> {
    await this.flushRaises();
    const before = this.rules.get(id);
    const r = await this.o.store.getAlarmRule(groupId, solution, id);
    if (!r) this.unindex(id);
    else this.index(r);
    // A changed condition makes pending durations and rate history meaningless; raised alarms stay
    // raised until a reading clears them under the new rule.
    if (!r || (before && (before.spec.condition !== r.spec.condition || before.deviceId !== r.deviceId || before.spec.templateId !== r.spec.templateId))) {
      // The rule's own pairs only: a deleted rule of 200 devices costs 200 steps, not one per pair of every rule.
      for (const k of [...(this.pairsByRule.get(id) ?? [])]) if (!r || this.pairs.get(k)?.phase !== 'raised') this.deletePair(id, k);
      this.plans.clear();
    }
    if (r?.spec.condition === 'silence') await this.seedLastSeen(key(r.groupId, r.solution));
    this.updateSubscription();
  }

  private async forget(ruleId: string, deviceId: string, alarmId: string): Promise<void> {
    const k = key(ruleId, deviceId);
    const p = this.pairs.get(k);
    if (!p || p.alarmId !== alarmId) return;
    this.deletePair(ruleId, k);
    // Only this device's plan holds the pair (plans are per device).
    this.plans.delete(deviceId);
    await this.persist(ruleId, deviceId, null);
  }

  // ---- evaluation -----------------------------------------------------------------------------

  /** The device's rules and their pairs (cached until a rule, a pair or the device changes). */
  private async planFor(groupId: string, solution: string, deviceId: string): Promise<Plan | null> {
    const cached = this.plans.get(deviceId);
    if (cached !== undefined) return cached;
    const sk = key(groupId, solution);
    const rules = [...(this.byDevice.get(deviceId) ?? []), ...(this.bySolution.get(sk) ?? [])];
    if (this.templateSolutions.has(sk)) {
      // The device's template as stored now: a device made later, or given another template, is
      // resolved afresh (its plan is dropped on the device's event).
      const d = await this.o.store.getDevice(groupId, solution, deviceId).catch(() => null);
      const t = d?.domainInfo.templateId;
      if (typeof t === 'string') rules.push(...(this.byTemplate.get(t)?.filter((r) => r.groupId === groupId && r.solution === solution) ?? []));
    }
    const pl = rules.length
      ? plan(
          rules,
          rules.map((r) => this.pair(r.id, deviceId)),
        )
      : null;
    if (this.plans.size >= 100_000) this.plans.clear(); // bounded: a plan is cheap to rebuild
    this.plans.set(deviceId, pl);
    return pl;
  }

  private async observe(groupId: string, solution: string, deviceId: string, batch: Batch, at: number): Promise<void> {
    const pl = await this.planFor(groupId, solution, deviceId);
    if (!pl) return;
    this.lastSeen.set(deviceId, at);
    const { records, wire } = batch;
    const n = records ? records.length : wire!.length;
    if (!n) return;
    countAlarmEvaluation();
    const { rules, pairs } = pl;
    // Timestamps read once (into a buffer reused from batch to batch); a batch may come in any
    // order, and evaluation goes oldest first.
    if (this.scratch.length < n) this.scratch = new Float64Array(Math.max(n, this.scratch.length * 2));
    const tss = this.scratch;
    let ordered = true;
    for (let i = 0; i < n; i++) {
      tss[i] = records ? records[i]!.ts : Date.parse(wire![i]!.timestamp);
      if (i && tss[i]! < tss[i - 1]!) ordered = false;
    }
    const order: number[] | null = ordered ? null : Array.from({ length: n }, (_, i) => i).sort((x, y) => tss[x]! - tss[y]!);
    const newest = order ? order[n - 1]! : n - 1;
    if (pl.silence) {
      for (let k = 0; k < rules.length; k++) {
        const r = rules[k]!;
        const p = pairs[k]!;
        if (r.spec.condition !== 'silence' || p.phase !== 'raised') continue;
        const bag = bagOf(records, wire, newest);
        const v = r.spec.field === 'temperature' ? temperatureOf(records, wire, newest) : readField(bag ?? {}, r.spec.field);
        await this.clear(r, deviceId, p, v === null ? null : this.reading(r, tss[newest]!, v, bag), 'an observation arrived');
      }
    }
    const cutoff = at - this.o.lateMs;
    const sum = tss[order ? order[0]! : 0]! >= cutoff ? summarize(n, order, tss, records, wire) : null;
    // A batch inside the device's tightest limits settles every rule at one comparison per limit;
    // otherwise each rule is checked against the batch's extremes, and only a rule that some
    // reading could break is judged reading by reading (with the same outcome as judging all).
    const inside = sum !== null && sum.count > 0 && sum.max < pl.hi - EPS && sum.min > pl.lo + EPS && sum.maxRise < pl.rise - EPS && sum.maxFall > -pl.fall + EPS;
    let live: number[] | null = null;
    for (let k = 0; k < rules.length; k++) {
      const r = rules[k]!;
      if (r.spec.condition === 'silence') continue;
      if (sum !== null && sum.count > 0 && settled(r.spec, pairs[k]!, sum, inside)) continue;
      if (live) live.push(k);
      else live = [k];
    }
    if (!live) return;
    for (let j = 0; j < n; j++) {
      const i = order ? order[j]! : j;
      const ts = tss[i]!;
      if (ts < cutoff) {
        this.skippedLate++;
        continue;
      }
      const temp = temperatureOf(records, wire, i);
      const bag = bagOf(records, wire, i);
      for (const k of live) {
        const step = this.evaluate(rules[k]!, pairs[k]!, deviceId, ts, temp, bag);
        if (step) await step;
      }
    }
  }

  private pair(ruleId: string, deviceId: string): Pair {
    const k = key(ruleId, deviceId);
    let p = this.pairs.get(k);
    if (!p) {
      p = { phase: 'normal', since: 0 };
      this.setPair(ruleId, deviceId, p);
    }
    return p;
  }

  private setPair(ruleId: string, deviceId: string, p: Pair): void {
    const k = key(ruleId, deviceId);
    this.pairs.set(k, p);
    const keys = this.pairsByRule.get(ruleId);
    if (keys) keys.add(k);
    else this.pairsByRule.set(ruleId, new Set([k]));
  }

  private deletePair(ruleId: string, k: string): void {
    this.pairs.delete(k);
    const keys = this.pairsByRule.get(ruleId);
    if (!keys) return;
    keys.delete(k);
    if (!keys.size) this.pairsByRule.delete(ruleId);
  }

  /**
   * One reading against one rule; returns a promise only when the pair changes state (rarely).
   * `bag` holds the reading's other fields (and its `unit`).
   */
  private evaluate(r: AlarmRuleRecord, p: Pair, deviceId: string, ts: number, temperature: number | null, bag: Record<string, unknown> | null): Promise<void> | undefined {
    const s = r.spec;
    const raw = s.field === 'temperature' ? temperature : bag ? readField(bag, s.field) : null;
    if (raw === null) return;
    if (p.lastTs !== undefined && ts <= p.lastTs) return; // older than what was judged already
    let v = raw;
    if (s.unit !== null) {
      const from = bag && bag.unit !== undefined ? readingUnit(bag) : 'C';
      if (from !== s.unit) v = convert(raw, from, s.unit);
    }
    let x = v;
    if (s.condition === 'rate') {
      const prevTs = p.lastTs;
      const prevValue = p.lastValue;
      p.lastTs = ts;
      p.lastValue = v;
      if (prevTs === undefined || prevValue === undefined) return;
      const rate = ratePerMinute(prevTs, prevValue, ts, v);
      if (rate === null) return;
      x = rate;
    } else p.lastTs = ts;
    switch (p.phase) {
      case 'normal':
        if (!breaks(s, x)) return;
        if (s.durationMs === 0) return this.raise(r, deviceId, p, this.reading(r, ts, raw, bag));
        p.phase = 'pending';
        p.since = ts;
        return this.persist(r.id, deviceId, p);
      case 'pending':
        if (!breaks(s, x)) {
          p.phase = 'normal';
          return this.persist(r.id, deviceId, null);
        }
        if (ts - p.since >= s.durationMs) return this.raise(r, deviceId, p, this.reading(r, ts, raw, bag));
        return;
      case 'raised':
        if (clears(s, x)) return this.clear(r, deviceId, p, this.reading(r, ts, raw, bag));
        return;
    }
  }

  private reading(r: AlarmRuleRecord, ts: number, value: number, bag: Record<string, unknown> | null): AlarmReading {
    return { ts, value, unit: r.spec.field === 'temperature' ? readingUnit(bag ?? {}) : null };
  }

  private async silence(): Promise<void> {
    const now = this.o.now();
    /** Alarms raised in this check, per group; devices listed in this check, per solution. */
    const raised = new Map<string, number>();
    const listed = new Map<string, DeviceRecord[] | null>();
    const slicer = new Slicer();
    let deferred = 0;
    for (const r of [...this.rules.values()]) {
      if (r.spec.condition !== 'silence') continue;
      if ((raised.get(r.groupId) ?? 0) >= this.o.maxRaisesPerCheck) continue;
      let devices: { id: string; createdAt: number }[];
      if (r.deviceId) devices = [{ id: r.deviceId, createdAt: 0 }];
      else {
        const sk = key(r.groupId, r.solution);
        let all = listed.get(sk);
        if (all === undefined) {
          all = await this.o.store.listDevices(r.groupId, r.solution).catch((err: unknown) => {
            this.o.log.warn({ err }, 'listing devices for silence rules failed');
            return null;
          });
          listed.set(sk, all);
        }
        if (!all) continue;
        devices = r.spec.templateId ? all.filter((d) => d.domainInfo.templateId === r.spec.templateId) : all;
      }
      for (const d of devices) {
        if (slicer.due) await this.flushRaises();
        await slicer.tick();
        // A device never heard from counts from when the rule was set or the device made.
        const last = this.lastSeen.get(d.id) ?? Math.max(r.updatedAt, d.createdAt);
        if (now - last < r.spec.silenceMs!) continue;
        const p = this.pair(r.id, d.id);
        if (p.phase === 'raised') continue;
        const n = raised.get(r.groupId) ?? 0;
        if (n >= this.o.maxRaisesPerCheck) {
          deferred++;
          break;
        }
        raised.set(r.groupId, n + 1);
        await this.raise(r, d.id, p, null, `no observation since ${new Date(last).toISOString()}`);
        if (this.raising.length >= RAISE_CHUNK) await this.flushRaises();
      }
    }
    await this.flushRaises();
    if (deferred) this.o.log.info({ limit: this.o.maxRaisesPerCheck }, 'silence check: a group reached the alarms one check may raise; the rest wait for the next checks');
  }

  private async persist(ruleId: string, deviceId: string, p: Pair | null): Promise<void> {
    // Raises made before this write are stored before it: the store sees the evaluator's steps in order.
    await this.flushRaises();
    const state: AlarmEvalState | null = p && p.phase !== 'normal' ? { phase: p.phase, since: p.since, ...(p.alarmId ? { alarmId: p.alarmId } : {}) } : null;
    try {
      await this.o.store.setAlarmState(ruleId, deviceId, state);
    } catch (err) {
      // The state in memory is still right; only a restart before the next transition would lose it.
      this.o.log.warn({ err, rule: ruleId, device: deviceId }, 'saving alarm evaluation state failed');
    }
  }

  /**
   * Raises wait in `raising` until the slice ends (or RAISE_CHUNK of them, or another store write
   * of the evaluator), then are stored together: one commit for a burst of alarm-raising uploads.
   */
  private async raise(r: AlarmRuleRecord, deviceId: string, p: Pair, reading: AlarmReading | null, note?: string): Promise<void> {
    this.raising.push(await this.prepareRaise(r, deviceId, p, reading, note));
  }

  /** Raises made in this slice, not yet stored (see raise). */
  private raising: PendingRaise[] = [];

  private flushRaises(): Promise<void> {
    return this.commitRaises(this.raising.splice(0));
  }

  /** Marks the pair raised and builds the alarm and its delivery; commitRaises stores them. */
  private async prepareRaise(r: AlarmRuleRecord, deviceId: string, p: Pair, reading: AlarmReading | null, note?: string): Promise<PendingRaise> {
    const alarm = newAlarm(r, deviceId, this.o.now(), reading, note);
    const before = { phase: p.phase, since: p.since };
    p.phase = 'raised';
    p.alarmId = alarm.id;
    const delivery = await this.o.notifier.delivery('raised', alarm, r);
    return { r, deviceId, p, before, alarm, state: { phase: 'raised', since: p.since, alarmId: alarm.id }, delivery };
  }

  /**
   * Stores the alarms, their pairs' states and their deliveries in one transaction: on SQLite each
   * commit is an fsync on the main thread, and one per alarm (three, before) held up other tenants'
   * requests while a flood of alarms was raised (docs/security.md "Limits").
   */
  private async commitRaises(list: PendingRaise[]): Promise<void> {
    if (!list.length) return;
    let inserted: boolean[];
    try {
      inserted = await this.o.store.raiseAlarms(list.map(({ alarm, state, delivery }) => ({ alarm, state, delivery })));
    } catch (err) {
      for (const { r, deviceId, p, before } of list) {
        // Not raised: the next breaking reading (or silence check) tries again.
        this.o.log.warn({ err, rule: r.id, device: deviceId }, 'raising an alarm failed');
        p.phase = before.phase === 'normal' ? 'normal' : 'pending';
        p.since = before.since;
        delete p.alarmId;
      }
      return;
    }
    for (const [i, { r, deviceId, p, alarm, delivery }] of list.entries()) {
      if (!inserted[i]) {
        // Already active (raised by another node, or before a restart whose state write was lost).
        const [existing] = await this.o.store.listAlarms(r.groupId, r.solution, { ruleId: r.id, deviceId, statuses: ['raised', 'acknowledged'], limit: 1 });
        if (existing) p.alarmId = existing.id;
        await this.persist(r.id, deviceId, p);
        continue;
      }
      await this.o.notifier.announce('raised', alarm, r);
      if (delivery) this.o.notifier.delivered(delivery);
    }
  }

  private async clear(r: AlarmRuleRecord, deviceId: string, p: Pair, reading: AlarmReading | null, note?: string): Promise<void> {
    const id = p.alarmId;
    p.phase = 'normal';
    p.since = 0;
    delete p.alarmId;
    await this.persist(r.id, deviceId, null);
    if (!id) return;
    try {
      const { alarm, changed } = await applyStep(this.o.store, r.groupId, r.solution, id, (a) => cleared(a, this.o.now(), { ...(reading ? { reading } : {}), ...(note ? { note } : {}) }));
      if (changed) await this.o.notifier.notify('cleared', alarm, r);
    } catch (err) {
      this.o.log.warn({ err, alarm: id }, 'clearing an alarm failed');
    }
  }
}
