// The evaluator's state per (rule, device) pair (docs/alarms.md "Evaluation, precisely"): its phase,
// since when, its raised alarm, and the last reading judged (order and rate of change). Kept in
// memory, indexed by rule so that a rule change touches its own pairs only; transitions.ts writes
// each transition to the store.

/** Two ids as one map key: (rule, device) for a pair, (group, solution) elsewhere in the evaluator. */
export const key = (a: string, b: string) => a + '\n' + b;

export interface Pair {
  phase: 'normal' | 'pending' | 'raised';
  since: number;
  alarmId?: string;
  /** Timestamp and value (rule unit) of the last reading evaluated: order and rate of change. */
  lastTs?: number;
  lastValue?: number;
}

export class PairTable {
  private pairs = new Map<string, Pair>();
  /** The keys of `pairs` by rule, so a rule change touches its own pairs only. */
  private byRule = new Map<string, Set<string>>();

  /** The pair of this key (rule, device), if it has one. */
  get(k: string): Pair | undefined {
    return this.pairs.get(k);
  }

  /** The pair of a rule and device, made (normal) when it has none. */
  pair(ruleId: string, deviceId: string): Pair {
    const k = key(ruleId, deviceId);
    let p = this.pairs.get(k);
    if (!p) {
      p = { phase: 'normal', since: 0 };
      this.set(ruleId, deviceId, p);
    }
    return p;
  }

  set(ruleId: string, deviceId: string, p: Pair): void {
    const k = key(ruleId, deviceId);
    this.pairs.set(k, p);
    const keys = this.byRule.get(ruleId);
    if (keys) keys.add(k);
    else this.byRule.set(ruleId, new Set([k]));
  }

  delete(ruleId: string, k: string): void {
    this.pairs.delete(k);
    const keys = this.byRule.get(ruleId);
    if (!keys) return;
    keys.delete(k);
    if (!keys.size) this.byRule.delete(ruleId);
  }

  /** The keys of a rule's pairs (a copy: the caller may delete while it goes). */
  keysOf(ruleId: string): string[] {
    return [...(this.byRule.get(ruleId) ?? [])];
  }

  clear(): void {
    this.pairs.clear();
    this.byRule.clear();
  }
}
