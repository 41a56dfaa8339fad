// The one place that chooses the backend. PostgreSQL when a database URL is given, else the
// embedded SQLite file in the data directory; and with the store, what nodes share besides it:
// live-update events and leadership. On SQLite one process is the service (in-process bus, always
// leader); on PostgreSQL events cross nodes by LISTEN/NOTIFY and the leader holds an advisory lock.
// The pg modules load only for PostgreSQL, so an embedded deployment never loads the pg driver.
import path from 'node:path';
import { toWireObservation } from '../core/types.ts';
import type { EventBus } from '../events/bus.ts';
import { LocalEventBus } from '../events/bus.ts';
import { LocalLeadership, makeNodeId, type Leadership } from '../jobs/leader.ts';
import type { Store } from '../store/store.ts';

/** Where the data lives (the settings of src/config that name it, nothing more). */
export interface BackendLocation {
  /** REEF_DATABASE_URL: PostgreSQL when set. */
  databaseUrl: string | null;
  /** REEF_DATABASE_READ_URL: a PostgreSQL standby that serves observation reads. */
  databaseReadUrl?: string | null;
  /** REEF_DATA_DIR: holds reef.db when no database URL is set. */
  dataDir: string;
}

export interface CoordinationOptions {
  onError?: (e: unknown, what: string) => void;
  /** PostgreSQL: how long the start waits for a writable host (REEF_DATABASE_START_WAIT). */
  startWaitMs?: number;
  leaderPollMs?: number;
}

export interface Backend {
  store: Store;
  events: EventBus;
  leadership: Leadership;
}

interface BackendKind {
  /** Opens the store (not yet migrated). */
  openStore(opts: CoordinationOptions): Promise<Store>;
  /** Events and leadership over that store. */
  coordinate(store: Store, opts: CoordinationOptions): Promise<{ events: EventBus; leadership: Leadership }>;
}

function choose(where: BackendLocation): BackendKind {
  const url = where.databaseUrl;
  if (url) return postgres(url, where.databaseReadUrl ?? null);
  return sqlite(path.join(where.dataDir, 'reef.db'));
}

function sqlite(file: string): BackendKind {
  return {
    async openStore() {
      const { SqliteStore } = await import('../store/sqlite/sqlite-store.ts');
      return new SqliteStore({ file });
    },
    async coordinate() {
      return { events: new LocalEventBus(), leadership: new LocalLeadership(makeNodeId()) };
    },
  };
}

// Several hosts in the URL (a primary and its standbys): the store, the LISTEN connection and the
// leader's session all connect through the store's PgHosts, to whichever host is writable, and
// follow it through a failover (docs/operations.md "PostgreSQL standby and failover").
function postgres(connectionString: string, readConnectionString: string | null): BackendKind {
  let opened: import('../store/postgres/postgres-store.ts').PostgresStore | null = null;
  return {
    async openStore(opts) {
      const { PostgresStore } = await import('../store/postgres/postgres-store.ts');
      const onError = opts.onError;
      opened = new PostgresStore({
        connectionString,
        ...(readConnectionString ? { readConnectionString } : {}),
        ...(opts.startWaitMs ? { startWaitMs: opts.startWaitMs } : {}),
        ...(onError
          ? {
              onReadFallback: (e: Error) => onError(e, 'a read failed on the read standby (REEF_DATABASE_READ_URL); reads go to the primary for 5 s'),
              onHostChange: (message: string, detail: { host: string; state?: string }) => onError(Object.assign(new Error(message), detail), message),
              onStartWait: (message: string, detail: { attempt: number; retryInMs: number }) =>
                onError(Object.assign(new Error(message), detail), 'no writable PostgreSQL host yet; looking again (REEF_DATABASE_START_WAIT)'),
            }
          : {}),
      });
      return opened;
    },
    async coordinate(_store, opts) {
      const store = opened;
      if (!store) throw new Error('coordinate() before openStore()');
      const nodeId = makeNodeId();
      const { PgEventBus } = await import('../events/pg-bus.ts');
      const { PgLeadership } = await import('../jobs/pg-leader.ts');
      const newClient = (config: import('pg').ClientConfig) => store.hosts.client(config);
      const events = await PgEventBus.open({
        newClient,
        pool: store.pool,
        nodeId,
        // Observations announced by reference by another node: read back, oldest first like the upload,
        // from the primary (a standby may not have applied them yet when the NOTIFY arrives).
        readObservations: async (deviceId, from, to, count) => {
          const page = await store.queryObservations(deviceId, { from, to: to + 1, limit: Math.max(count, 1) * 2, fresh: true });
          return page.observations.reverse().map(toWireObservation);
        },
        ...(opts.onError ? { onError: opts.onError } : {}),
      });
      const leadership = new PgLeadership({ newClient, nodeId, ...(opts.leaderPollMs ? { pollMs: opts.leaderPollMs } : {}), ...(opts.onError ? { onError: opts.onError } : {}) });
      return { events, leadership };
    },
  };
}

/** Opens and migrates the store only (one-shot commands: `reef account`, `reef provision`). */
export async function openStore(where: BackendLocation): Promise<Store> {
  const store = await choose(where).openStore({});
  await store.migrate();
  return store;
}

/**
 * Opens the store (migrated: SQLite under BEGIN IMMEDIATE, PostgreSQL under an advisory lock, so
 * nodes starting together apply each migration once) with the events and leadership that go with it.
 */
export async function openBackend(where: BackendLocation, opts: CoordinationOptions = {}): Promise<Backend> {
  const kind = choose(where);
  const store = await kind.openStore(opts);
  try {
    await store.migrate();
    const { events, leadership } = await kind.coordinate(store, opts);
    return { store, events, leadership };
  } catch (e) {
    await store.close().catch(() => undefined);
    throw e;
  }
}
