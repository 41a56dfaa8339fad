// Live-update fan-out. The in-process bus serves one node; src/events/pg-bus.ts carries the same
// events across nodes through PostgreSQL LISTEN/NOTIFY. Publishers never wait on subscribers.
import type { Observation } from '../core/types.ts';

export type ReefEvent =
  | { kind: 'observations'; groupId: string; solution: string; deviceId: string; observations: Observation[] }
  | { kind: 'device'; groupId: string; solution: string; deviceId: string; action: 'created' | 'deleted' }
  | { kind: 'simulation'; groupId: string; solution: string; simulationId: string; status: unknown }
  | KitPayloadEvent;

/**
 * A kit's payload exactly as the gateway received it (base64), for the MQTT bubble-up
 * (docs/mqtt.md): carried by the bus so a reading received on one node reaches MQTT subscribers on
 * every node. Not an observation: live observation streams (SSE) ignore it.
 */
export interface KitPayloadEvent {
  kind: 'kit-payload';
  groupId: string;
  /** The kit's owner: the first level of its MQTT topic. */
  tenantId: string;
  mac: string;
  sensorType: string;
  payload: string;
}

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
