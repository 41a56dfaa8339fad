// An alarm's life: raised → acknowledged → cleared, or raised → cleared-unacknowledged →
// (acknowledged) cleared. Every step appends to the alarm's history. Steps are written with
// compare-and-set on the status (Store.updateAlarm), so an acknowledgement on one node and a clear
// by the evaluator on another never overwrite each other: the loser reads again and re-applies.
import { randomUUID } from 'node:crypto';
import type { AlarmReading, AlarmRecord, AlarmRuleRecord, AlarmStatus } from '../core/alarms.ts';
import { ReefError } from '../core/errors.ts';
import type { Store } from '../store/store.ts';

export type Actor = { tenantId: string; name: string };

export function isActive(s: AlarmStatus): boolean {
  return s === 'raised' || s === 'acknowledged';
}

export function newAlarm(rule: AlarmRuleRecord, deviceId: string, at: number, reading: AlarmReading | null, note?: string): AlarmRecord {
  return {
    id: randomUUID(),
    groupId: rule.groupId,
    solution: rule.solution,
    deviceId,
    ruleId: rule.id,
    status: 'raised',
    severity: rule.spec.severity,
    raisedAt: at,
    updatedAt: at,
    reading,
    rule: { name: rule.spec.name, field: rule.spec.field, condition: rule.spec.condition },
    acknowledgedAt: null,
    acknowledgedBy: null,
    clearedAt: null,
    history: [{ at, event: 'raised', ...(reading ? { reading } : {}), ...(note ? { note } : {}) }],
  };
}

/** The acknowledged alarm, or null when it already was (acknowledging twice changes nothing). */
export function acknowledged(a: AlarmRecord, by: Actor, at: number): AlarmRecord | null {
  if (a.status === 'acknowledged' || a.status === 'cleared') return null;
  return {
    ...a,
    status: a.status === 'raised' ? 'acknowledged' : 'cleared',
    acknowledgedAt: at,
    acknowledgedBy: by,
    updatedAt: at,
    history: [...a.history, { at, event: 'acknowledged', by }],
  };
}

/** The cleared alarm, or null when it is no longer active. */
export function cleared(a: AlarmRecord, at: number, how: { reading?: AlarmReading; by?: Actor; note?: string }): AlarmRecord | null {
  if (!isActive(a.status)) return null;
  return {
    ...a,
    status: a.status === 'acknowledged' ? 'cleared' : 'cleared-unacknowledged',
    clearedAt: at,
    updatedAt: at,
    history: [...a.history, { at, event: 'cleared', ...(how.by ? { by: how.by } : {}), ...(how.reading ? { reading: how.reading } : {}), ...(how.note ? { note: how.note } : {}) }],
  };
}

/**
 * Applies a step with compare-and-set, re-reading on a lost race. Returns the alarm as written, or
 * null when the step changed nothing (already in that state). ALARM_NOT_FOUND when it is gone.
 */
export async function applyStep(store: Store, groupId: string, solution: string, id: string, step: (a: AlarmRecord) => AlarmRecord | null): Promise<{ alarm: AlarmRecord; changed: boolean }> {
  for (let i = 0; i < 5; i++) {
    const a = await store.getAlarm(groupId, solution, id);
    if (!a) throw new ReefError('ALARM_NOT_FOUND', `no alarm ${id} in solution ${JSON.stringify(solution)}`);
    const next = step(a);
    if (!next) return { alarm: a, changed: false };
    if (await store.updateAlarm(next, a.status)) return { alarm: next, changed: true };
  }
  throw new ReefError('CONFLICT', 'the alarm kept changing while it was being updated; retry');
}
