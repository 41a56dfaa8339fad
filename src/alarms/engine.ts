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
// State per (rule, device) lives in memory for speed (pairs.ts) and is written to the store on every
// transition (transitions.ts), so a restart or a new leader continues a pending duration and knows
// which alarms are raised. This file is the loop: the queue, rule changes, and each batch judged
// against its device's rules (batch-plan.ts settles most of them at once); silence.ts checks the
// quiet devices.
import type { Logger } from 'pino';
import type { AlarmReading, AlarmRuleRecord } from '../core/alarms.ts';
import type { ObservationBatch } from '../core/observation-batch.ts';
import type { EventBus, EventKind, ReefEvent } from '../events/bus.ts';
import type { Store } from '../store/store.ts';
import { bagOf, EPS, plan, settled, summarize, temperatureOf, type Batch, type Plan } from './batch-plan.ts';
import { breaks, clears, convert, ratePerMinute, readField, readingUnit } from './evaluate.ts';
import { FairQueue, Slicer, type Task } from './fair-queue.ts';
import type { AlarmNotifier } from './notify.ts';
import { key, PairTable, type Pair } from './pairs.ts';
import { RuleIndex } from './rule-index.ts';
import { SilenceWatch } from './silence.ts';
import { TransitionWriter } from './transitions.ts';
import { countAlarmEvaluation } from '../metrics/metrics.ts';

/** The events that change which rules apply: heard even while the engine has no rule. */
const RULE_KINDS: readonly EventKind[] = ['alarm-rule', 'device', 'alarm'];

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

export class AlarmEngine {
  readonly name = 'alarms';
  private rules = new RuleIndex();
  /** Each device's rules and pairs, resolved on its first batch; dropped when rules or pairs change. */
  private plans = new Map<string, Plan | null>();
  /** Timestamps of the batch being judged, reused from batch to batch. */
  private scratch = new Float64Array(1024);
  private pairs = new PairTable();
  /** Pair states, raises and clears into the store. */
  private writer: TransitionWriter;
  /** Devices' last arrivals and the silence check. */
  private silence: SilenceWatch;
  /** Batches take turns by group; rule changes and checks are barriers (src/alarms/fair-queue.ts). */
  private queue = new FairQueue();
  private draining: Promise<void> | null = null;
  private unsubscribe: (() => void) | null = null;
  private active = false;
  /** Readings skipped for arriving too late (backfill), since start. */
  skippedLate = 0;

  constructor(private readonly o: AlarmEngineOptions) {
    this.writer = new TransitionWriter({ store: o.store, log: o.log, notifier: o.notifier, now: o.now });
    this.silence = new SilenceWatch({ store: o.store, log: o.log, now: o.now, maxRaisesPerCheck: o.maxRaisesPerCheck, pairs: this.pairs, writer: this.writer });
  }

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
    this.plans.clear();
    this.pairs.clear();
    this.silence.clear();
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
      if (!this.loading && !this.reloading && !this.rules.mayWatch(e.groupId, e.solution, e.deviceId)) return;
      const at = this.o.now();
      // In-process publishers attach the stored batch (src/service/observations.ts): numbers, no
      // wire form to build or parse. Events from other nodes carry the wire form only.
      const stored = (e as { batch?: ObservationBatch }).batch;
      const batch: Batch = stored ? { batch: stored, wire: null } : { batch: null, wire: e.observations };
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
    this.enqueue(() => this.silence.check(this.rules.values()));
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
          if (slicer.due) await this.writer.flushRaises();
          await slicer.tick();
          const task = this.queue.shift()!;
          try {
            await task();
          } catch (err) {
            this.o.log.error({ err }, 'alarm evaluation failed');
          }
          if (this.writer.full) await this.writer.flushRaises();
        }
        await this.writer.flushRaises();
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
      for (const r of await this.o.store.allAlarmRules()) this.rules.add(r);
      this.plans.clear();
      for (const { ruleId, deviceId, state } of await this.o.store.listAlarmStates()) {
        this.pairs.set(ruleId, deviceId, { phase: state.phase, since: state.since, ...(state.alarmId ? { alarmId: state.alarmId } : {}) });
      }
      // An active alarm is the truth about "raised", whatever state was (or was not) written.
      for (const a of await this.o.store.activeAlarms()) {
        const p = this.pairs.get(key(a.ruleId, a.deviceId));
        if (p?.phase !== 'raised' || p.alarmId !== a.id) this.pairs.set(a.ruleId, a.deviceId, { phase: 'raised', since: a.raisedAt, alarmId: a.id });
      }
      for (const r of [...this.rules.values()]) if (r.spec.condition === 'silence') await this.silence.seed(r.groupId, r.solution);
    } finally {
      this.loading = false;
    }
  }

  private async reloadRule(groupId: string, solution: string, id: string): Promise<void> {
    await this.writer.flushRaises();
    const before = this.rules.get(id);
    const r = await this.o.store.getAlarmRule(groupId, solution, id);
    if (!r) this.rules.remove(id);
    else this.rules.add(r);
    this.plans.clear();
    // A changed condition makes pending durations and rate history meaningless; raised alarms stay
    // raised until a reading clears them under the new rule.
    if (!r || (before && (before.spec.condition !== r.spec.condition || before.deviceId !== r.deviceId || before.spec.templateId !== r.spec.templateId))) {
      // The rule's own pairs only: a deleted rule of 200 devices costs 200 steps, not one per pair of every rule.
      for (const k of this.pairs.keysOf(id)) if (!r || this.pairs.get(k)?.phase !== 'raised') this.pairs.delete(id, k);
    }
    if (r?.spec.condition === 'silence') await this.silence.seed(r.groupId, r.solution);
    this.updateSubscription();
  }

  private async forget(ruleId: string, deviceId: string, alarmId: string): Promise<void> {
    const k = key(ruleId, deviceId);
    const p = this.pairs.get(k);
    if (!p || p.alarmId !== alarmId) return;
    this.pairs.delete(ruleId, k);
    // Only this device's plan holds the pair (plans are per device).
    this.plans.delete(deviceId);
    await this.writer.persist(ruleId, deviceId, null);
  }

  // ---- evaluation -----------------------------------------------------------------------------

  /** The device's rules and their pairs (cached until a rule, a pair or the device changes). */
  private async planFor(groupId: string, solution: string, deviceId: string): Promise<Plan | null> {
    const cached = this.plans.get(deviceId);
    if (cached !== undefined) return cached;
    const rules = this.rules.direct(groupId, solution, deviceId);
    if (this.rules.hasTemplateRules(groupId, solution)) {
      // The device's template as stored now: a device made later, or given another template, is
      // resolved afresh (its plan is dropped on the device's event).
      const d = await this.o.store.getDevice(groupId, solution, deviceId).catch(() => null);
      const t = d?.domainInfo.templateId;
      if (typeof t === 'string') rules.push(...this.rules.forTemplate(groupId, solution, t));
    }
    const pl = rules.length
      ? plan(
          rules,
          rules.map((r) => this.pairs.pair(r.id, deviceId)),
        )
      : null;
    if (this.plans.size >= 100_000) this.plans.clear(); // bounded: a plan is cheap to rebuild
    this.plans.set(deviceId, pl);
    return pl;
  }

  private async observe(groupId: string, solution: string, deviceId: string, batch: Batch, at: number): Promise<void> {
    const pl = await this.planFor(groupId, solution, deviceId);
    if (!pl) return;
    this.silence.seen(deviceId, at);
    const { batch: stored, wire } = batch;
    const n = stored ? stored.ts.length : wire!.length;
    if (!n) return;
    countAlarmEvaluation();
    const { rules, pairs } = pl;
    // Timestamps read once (into a buffer reused from batch to batch); a batch may come in any
    // order, and evaluation goes oldest first.
    if (this.scratch.length < n) this.scratch = new Float64Array(Math.max(n, this.scratch.length * 2));
    const tss = this.scratch;
    let ordered = true;
    for (let i = 0; i < n; i++) {
      tss[i] = stored ? stored.ts[i]! : Date.parse(wire![i]!.timestamp);
      if (i && tss[i]! < tss[i - 1]!) ordered = false;
    }
    const order: number[] | null = ordered ? null : Array.from({ length: n }, (_, i) => i).sort((x, y) => tss[x]! - tss[y]!);
    const newest = order ? order[n - 1]! : n - 1;
    if (pl.silence) {
      for (let k = 0; k < rules.length; k++) {
        const r = rules[k]!;
        const p = pairs[k]!;
        if (r.spec.condition !== 'silence' || p.phase !== 'raised') continue;
        const bag = bagOf(stored, wire, newest);
        const v = r.spec.field === 'temperature' ? temperatureOf(stored, wire, newest) : readField(bag ?? {}, r.spec.field);
        await this.writer.clear(r, deviceId, p, v === null ? null : this.reading(r, tss[newest]!, v, bag), 'an observation arrived');
      }
    }
    const cutoff = at - this.o.lateMs;
    const sum = tss[order ? order[0]! : 0]! >= cutoff ? summarize(n, order, tss, stored, wire) : null;
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
      const temp = temperatureOf(stored, wire, i);
      const bag = bagOf(stored, wire, i);
      for (const k of live) {
        const step = this.evaluate(rules[k]!, pairs[k]!, deviceId, ts, temp, bag);
        if (step) await step;
      }
    }
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
        if (s.durationMs === 0) return this.writer.raise(r, deviceId, p, this.reading(r, ts, raw, bag));
        p.phase = 'pending';
        p.since = ts;
        return this.writer.persist(r.id, deviceId, p);
      case 'pending':
        if (!breaks(s, x)) {
          p.phase = 'normal';
          return this.writer.persist(r.id, deviceId, null);
        }
        if (ts - p.since >= s.durationMs) return this.writer.raise(r, deviceId, p, this.reading(r, ts, raw, bag));
        return;
      case 'raised':
        if (clears(s, x)) return this.writer.clear(r, deviceId, p, this.reading(r, ts, raw, bag));
        return;
    }
  }

  private reading(r: AlarmRuleRecord, ts: number, value: number, bag: Record<string, unknown> | null): AlarmReading {
    return { ts, value, unit: r.spec.field === 'temperature' ? readingUnit(bag ?? {}) : null };
  }
}
