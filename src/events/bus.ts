// Live-update fan-out. The in-process bus serves one node; src/events/pg-bus.ts carries the same
// events across nodes through PostgreSQL LISTEN/NOTIFY. Publishers never wait on subscribers.
import type { Observation } from '../core/types.ts';

export type ReefEvent =
  | { kind: 'observations'; groupId: string; solution: string; deviceId: string; observations: Observation[] }
  | { kind: 'device'; groupId: string; solution: string; deviceId: string; action: 'created' | 'updated' | 'deleted' }
  | { kind: 'simulation'; groupId: string; solution: string; simulationId: string; status: unknown }
  // Alarms (src/alarms, docs/alarms.md): an alarm's lifecycle step, with the alarm in wire form...
  | { kind: 'alarm'; groupId: string; solution: string; deviceId: string; event: 'raised' | 'acknowledged' | 'cleared'; alarm: unknown }
  // ...and a rule created, changed or deleted on any node (the evaluating node reloads it).
  | { kind: 'alarm-rule'; groupId: string; solution: string; ruleId: string; action: 'created' | 'updated' | 'deleted' }
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

/**
 * The time span of an observations event's batch (earliest and latest timestamp, ms, and how many),
 * attached by an in-process publisher, not enumerable: what a bus that crosses nodes tells the
 * others, who read the stored rows back (src/events/pg-bus.ts).
 */
export interface ObservationSpan {
  from: number;
  to: number;
  count: number;
}

/** The span of `n` timestamps, the i-th read by `ts(i)`. */
export function spanOf(n: number, ts: (i: number) => number): ObservationSpan {
  let from = Infinity;
  let to = -Infinity;
  for (let i = 0; i < n; i++) {
    const t = ts(i);
    if (t < from) from = t;
    if (t > to) to = t;
  }
  return { from, to, count: n };
}

/** Set on an event that came from another node (src/events/pg-bus.ts); never serialized. */
const FROM_OTHER_NODE = Symbol('reef.fromOtherNode');

/** Marks an event received from another node. */
export function markFromOtherNode<T extends object>(e: T): T {
  Object.defineProperty(e, FROM_OTHER_NODE, { value: true });
  return e;
}

/**
 * Whether an event came from another node. A consumer whose own state is shared by the nodes (the
 * MQTT broker on Redis, docs/mqtt.md "Several nodes") acts on the events of its node only: every
 * node receives every event, and each acting on it would do it once per node.
 */
export function fromOtherNode(e: ReefEvent): boolean {
  return (e as { [FROM_OTHER_NODE]?: boolean })[FROM_OTHER_NODE] === true;
}

export type Listener = (e: ReefEvent) => void;

export type EventKind = ReefEvent['kind'];

export interface EventBus {
  /**
   * True when nobody can be listening (no local subscriber, no other node): producers may then skip
   * building events. A bus that cannot know (across nodes) leaves it undefined.
   */
  readonly idle?: boolean;
  /** As `idle`, for events of one kind (subscribers that asked for other kinds only do not count). */
  idleFor?(kind: EventKind): boolean;
  publish(e: ReefEvent): void;
  /**
   * Returns the unsubscribe function. With `kinds`, only events of those kinds are delivered, and
   * the subscriber keeps no other kind from being idle (the MQTT broker takes only kit payloads, so
   * it does not make every stored batch build an observations event).
   */
  subscribe(fn: Listener, kinds?: readonly EventKind[]): () => void;
  close(): Promise<void>;
}

export class LocalEventBus implements EventBus {
  /** Each listener with the kinds it takes (null: all). */
  private listeners = new Map<Listener, ReadonlySet<EventKind> | null>();

  get idle(): boolean {
    return this.listeners.size === 0;
  }

  idleFor(kind: EventKind): boolean {
    for (const kinds of this.listeners.values()) if (!kinds || kinds.has(kind)) return false;
    return true;
  }

  publish(e: ReefEvent): void {
    for (const [fn, kinds] of this.listeners) {
      if (kinds && !kinds.has(e.kind)) continue;
      try {
        fn(e);
      } catch {
        // A faulty subscriber must not stop delivery to the others nor fail the publisher.
      }
    }
  }

  subscribe(fn: Listener, kinds?: readonly EventKind[]): () => void {
    // A wrapper per subscription, so the same function may subscribe twice.
    const own: Listener = (e) => fn(e);
    this.listeners.set(own, kinds ? new Set(kinds) : null);
    return () => this.listeners.delete(own);
  }

  async close(): Promise<void> {
    this.listeners.clear();
  }
}
