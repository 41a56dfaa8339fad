// The enabled alarm rules as the evaluator finds them: by the device they watch, by device template,
// or by solution (docs/alarms.md "Rules"); and how many template rules each solution has, so an
// observation of a solution without any rule for it is dropped at once.
import type { AlarmRuleRecord } from '../core/alarms.ts';
import { key } from './pairs.ts';

export class RuleIndex {
  private rules = new Map<string, AlarmRuleRecord>();
  private byDevice = new Map<string, AlarmRuleRecord[]>();
  private bySolution = new Map<string, AlarmRuleRecord[]>();
  /** Rules for a device template, by template id; and how many such rules each solution has. */
  private byTemplate = new Map<string, AlarmRuleRecord[]>();
  private templateSolutions = new Map<string, number>();

  get size(): number {
    return this.rules.size;
  }

  get(id: string): AlarmRuleRecord | undefined {
    return this.rules.get(id);
  }

  values(): IterableIterator<AlarmRuleRecord> {
    return this.rules.values();
  }

  /** True when some rule may watch this device: its own, or one of its solution or of a template in it. */
  mayWatch(groupId: string, solution: string, deviceId: string): boolean {
    if (this.byDevice.has(deviceId)) return true;
    const k = key(groupId, solution);
    return this.bySolution.has(k) || this.templateSolutions.has(k);
  }

  /** The device's own rules and its solution's. */
  direct(groupId: string, solution: string, deviceId: string): AlarmRuleRecord[] {
    return [...(this.byDevice.get(deviceId) ?? []), ...(this.bySolution.get(key(groupId, solution)) ?? [])];
  }

  /** True when the solution has rules for a device template (the device's template must be read). */
  hasTemplateRules(groupId: string, solution: string): boolean {
    return this.templateSolutions.has(key(groupId, solution));
  }

  /** The rules of a device template in this solution. */
  forTemplate(groupId: string, solution: string, templateId: string): AlarmRuleRecord[] {
    return this.byTemplate.get(templateId)?.filter((r) => r.groupId === groupId && r.solution === solution) ?? [];
  }

  /** Where a rule is indexed: by its device, its device template, or its solution. */
  private slot(r: AlarmRuleRecord): [Map<string, AlarmRuleRecord[]>, string] {
    if (r.deviceId) return [this.byDevice, r.deviceId];
    if (r.spec.templateId) return [this.byTemplate, r.spec.templateId];
    return [this.bySolution, key(r.groupId, r.solution)];
  }

  /** Indexes a rule (in place of its earlier version); a disabled rule is only removed. */
  add(r: AlarmRuleRecord): void {
    this.remove(r.id);
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
  }

  remove(id: string): void {
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
  }

  clear(): void {
    this.rules.clear();
    this.byDevice.clear();
    this.bySolution.clear();
    this.byTemplate.clear();
    this.templateSolutions.clear();
  }
}
