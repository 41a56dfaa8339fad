// The evaluator's transitions, written to the store (docs/alarms.md "Evaluation, precisely"): a
// pair's state on every change (normal → pending → raised → normal), so a restart or a new leader
// continues a pending duration and knows which alarms are raised; raises, gathered per slice of
// evaluation and stored with their states and deliveries in one transaction; clears through the
// alarm's lifecycle (lifecycle.ts); and the notifications of each (notify.ts).
import type { Logger } from 'pino';
import type { AlarmEvalState, AlarmReading, AlarmRecord, AlarmRuleRecord, WebhookDeliveryRecord } from '../core/alarms.ts';
import type { Store } from '../store/store.ts';
import { applyStep, cleared, newAlarm } from './lifecycle.ts';
import type { AlarmNotifier } from './notify.ts';
import type { Pair } from './pairs.ts';

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

export interface TransitionDeps {
  store: Store;
  log: Logger;
  notifier: AlarmNotifier;
  now: () => number;
}

export class TransitionWriter {
  /** Raises made in this slice, not yet stored (see raise). */
  private raising: PendingRaise[] = [];

  constructor(private readonly o: TransitionDeps) {}

  /** RAISE_CHUNK raises wait: store them before going on. */
  get full(): boolean {
    return this.raising.length >= RAISE_CHUNK;
  }

  /** Writes a pair's state (null: normal, no row). */
  async persist(ruleId: string, deviceId: string, p: Pair | null): Promise<void> {
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
  async raise(r: AlarmRuleRecord, deviceId: string, p: Pair, reading: AlarmReading | null, note?: string): Promise<void> {
    this.raising.push(await this.prepareRaise(r, deviceId, p, reading, note));
  }

  /** Stores the raises made so far. */
  flushRaises(): Promise<void> {
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

  /** The pair back to normal, and its alarm (if any) cleared and announced. */
  async clear(r: AlarmRuleRecord, deviceId: string, p: Pair, reading: AlarmReading | null, note?: string): Promise<void> {
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
