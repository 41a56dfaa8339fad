// What the alarms feature needs of the running service and what it gives back, written as the
// structural shapes it uses. This is the one place the feature touches the composition contract
// (src/server.ts's Services and Component): when those types move below the features, only this
// file changes. Nothing here imports src/server.ts.
import type { FastifyPluginAsync } from 'fastify';
import type { Logger } from 'pino';
import type { EventBus } from '../events/bus.ts';
import type { Leadership } from '../jobs/leader.ts';
import type { Store } from '../store/store.ts';

/** The parts of Services the alarms component uses. */
export interface AlarmServices {
  store: Store;
  events: EventBus;
  leadership: Leadership;
  log: Logger;
}

/** A Component as src/server.ts runs it: routes, start and stop. */
export interface AlarmComponentShape {
  name: string;
  apiPlugin?: FastifyPluginAsync;
  start?(): Promise<void>;
  stop?(): Promise<void>;
}

export type AlarmComponentFactory = (s: AlarmServices, demo: unknown) => Promise<AlarmComponentShape | null>;
