// What nodes share besides the store: live-update events and leadership. On SQLite one process is
// the service (in-process bus, always leader); on PostgreSQL events cross nodes by LISTEN/NOTIFY and
// the leader holds an advisory lock. The pg modules load only for a PostgreSQL store.
import { toWireObservation } from '../core/types.ts';
import type { EventBus } from '../events/bus.ts';
import { LocalEventBus } from '../events/bus.ts';
import type { Store } from '../store/store.ts';
import { LocalLeadership, makeNodeId, type Leadership } from './leader.ts';

export interface Coordination {
  events: EventBus;
  leadership: Leadership;
}

export async function openCoordination(store: Store, opts: { onError?: (e: unknown, what: string) => void; leaderPollMs?: number } = {}): Promise<Coordination> {
  const nodeId = makeNodeId();
  if (store.kind !== 'postgres') return { events: new LocalEventBus(), leadership: new LocalLeadership(nodeId) };
  const { PostgresStore } = await import('../store/postgres/postgres-store.ts');
  const { PgEventBus } = await import('../events/pg-bus.ts');
  const { PgLeadership } = await import('../store/postgres/leader.ts');
  if (!(store instanceof PostgresStore)) throw new Error('a postgres store must be a PostgresStore');
  const events = await PgEventBus.open({
    connectionString: store.connectionString,
    pool: store.pool,
    nodeId,
    // Observations announced by reference by another node: read back, oldest first like the upload.
    readObservations: async (deviceId, from, to, count) => {
      const page = await store.queryObservations(deviceId, { from, to: to + 1, limit: Math.max(count, 1) * 2 });
      return page.observations.reverse().map(toWireObservation);
    },
    ...(opts.onError ? { onError: opts.onError } : {}),
  });
  const leadership = new PgLeadership({ connectionString: store.connectionString, nodeId, ...(opts.leaderPollMs ? { pollMs: opts.leaderPollMs } : {}), ...(opts.onError ? { onError: opts.onError } : {}) });
  return { events, leadership };
}
