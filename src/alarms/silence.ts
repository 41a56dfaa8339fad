// Silence rules (docs/alarms.md "Rules": a device that sends nothing for too long): when each
// device's last observation arrived, seeded from the store's latest observations after a (re)start,
// and the periodic check that raises an alarm for every device in a rule's scope that has been quiet
// too long, at most `maxRaisesPerCheck` per group per check so one tenant's thousands of silent
// pairs never hold up the node or another tenant's alarms.
import type { Logger } from 'pino';
import type { AlarmRuleRecord } from '../core/alarms.ts';
import type { DeviceRecord } from '../core/types.ts';
import type { Store } from '../store/store.ts';
import { Slicer } from './fair-queue.ts';
import { key, type PairTable } from './pairs.ts';
import type { TransitionWriter } from './transitions.ts';

export interface SilenceDeps {
  store: Store;
  log: Logger;
  now: () => number;
  maxRaisesPerCheck: number;
  pairs: PairTable;
  writer: TransitionWriter;
}

export class SilenceWatch {
  /** When each device's last observation arrived. */
  private lastSeen = new Map<string, number>();
  /** Solutions whose devices' last arrivals were read (seed): once per solution, not per rule. */
  private seeded = new Set<string>();

  constructor(private readonly o: SilenceDeps) {}

  /** An observation of the device arrived at `at`. */
  seen(deviceId: string, at: number): void {
    this.lastSeen.set(deviceId, at);
  }

  /** Last arrival of each device of a solution after a (re)start: its latest stored observation. */
  async seed(groupId: string, solution: string): Promise<void> {
    const k = key(groupId, solution);
    if (this.seeded.has(k)) return;
    this.seeded.add(k);
    const now = this.o.now();
    for (const l of await this.o.store.latestObservations(groupId, solution)) {
      if (!this.lastSeen.has(l.deviceId)) this.lastSeen.set(l.deviceId, Math.min(now, l.observation.ts));
    }
  }

  clear(): void {
    this.lastSeen.clear();
    this.seeded.clear();
  }

  /** Raises for every device in the silence rules' scope that has been quiet too long. */
  async check(rules: Iterable<AlarmRuleRecord>): Promise<void> {
    const { writer } = this.o;
    const now = this.o.now();
    /** Alarms raised in this check, per group; devices listed in this check, per solution. */
    const raised = new Map<string, number>();
    const listed = new Map<string, DeviceRecord[] | null>();
    const slicer = new Slicer();
    let deferred = 0;
    for (const r of [...rules]) {
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
        if (slicer.due) await writer.flushRaises();
        await slicer.tick();
        // A device never heard from counts from when the rule was set or the device made.
        const last = this.lastSeen.get(d.id) ?? Math.max(r.updatedAt, d.createdAt);
        if (now - last < r.spec.silenceMs!) continue;
        const p = this.o.pairs.pair(r.id, d.id);
        if (p.phase === 'raised') continue;
        const n = raised.get(r.groupId) ?? 0;
        if (n >= this.o.maxRaisesPerCheck) {
          deferred++;
          break;
        }
        raised.set(r.groupId, n + 1);
        await writer.raise(r, d.id, p, null, `no observation since ${new Date(last).toISOString()}`);
        if (writer.full) await writer.flushRaises();
      }
    }
    await writer.flushRaises();
    if (deferred) this.o.log.info({ limit: this.o.maxRaisesPerCheck }, 'silence check: a group reached the alarms one check may raise; the rest wait for the next checks');
  }
}
