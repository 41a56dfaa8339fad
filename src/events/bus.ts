// Live-update fan-out. The in-process bus serves one node; src/events/pg-bus.ts carries the same
// events across nodes through PostgreSQL LISTEN/NOTIFY. Publishers never wait on subscribers.
import type { Observation } from '../core/types.ts';

export type ReefEvent =
  | { kind: 'observations'; groupId: string; solution: string; deviceId: string; observations: Observation[] }
  | { kind: 'device'; groupId: string; solution: string; deviceId: string; action: 'created' | 'deleted' }
  | { kind: 'simulation'; groupId: string; solution: string; simulationId: string; status: unknown };

export type Listener = (e: ReefEvent) => void;

export interface EventBus {
  publish(e: ReefEvent): void;
  /** Returns the unsubscribe function. */
  subscribe(fn: Listener): () => void;
  close(): Promise<void>;
}

export class LocalEventBus implements EventBus {
  private listeners = new Set<Listener>();

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
