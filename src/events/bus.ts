// Live-update fan-out. The in-process bus serves one node; src/events/pg-bus.ts carries the same
// events across nodes through PostgreSQL LISTEN/NOTIFY. Publishers never wait on subscribers.
import type { Observation } from '../core/types.ts';

export type ReefEvent =
  | { kind: 'observations'; groupId: string; solution: string; deviceId: string; observations: Observation[] }
  | { kind: 'device'; groupId: string; solution: string; deviceId: string; action: 'created' | 'deleted' }
  | { kind: 'simulation'; groupId: string; solution: string; simulationId: string; status: unknown }
  // Alarms (src/alarms, docs/alarms.md): an alarm's lifecycle step, with the alarm in wire form...
  | { kind: 'alarm'; groupId: string; solution: string; deviceId: string; event: 'raised' | 'acknowledged' | 'cleared'; alarm: unknown }
  // ...and a rule created, changed or deleted on any node (the evaluating node reloads it).
  | { kind: 'alarm-rule'; groupId: string; solution: string; ruleId: string; action: 'created' | 'updated' | 'deleted' };

export type Listener = (e: ReefEvent) => void;

export interface EventBus {
  /**
   * True when nobody can be listening (no local subscriber, no other node): producers may then skip
   * building events. A bus that cannot know (across nodes) leaves it undefined.
   */
  readonly idle?: boolean;
  publish(e: ReefEvent): void;
  /** Returns the unsubscribe function. */
  subscribe(fn: Listener): () => void;
  close(): Promise<void>;
}

export class LocalEventBus implements EventBus {
  private listeners = new Set<Listener>();

  get idle(): boolean {
    return this.listeners.size === 0;
  }

  publish(e: ReefEvent): void {
    for (const fn of this.listeners) {
      try {
        fn(e);
      } catch {
        // A faulty subscriber must not stop delivery to the others nor fail the publisher.
      }
    }
  }

  subscribe(fn: Listener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  async close(): Promise<void> {
    this.listeners.clear();
  }
}
