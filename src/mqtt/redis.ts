// The MQTT state the nodes share in Redis (REEF_REDIS_URL, docs/mqtt.md "Several nodes"): Aedes' own
// engines, aedes-persistence-redis (subscriptions of persistent sessions, their QoS 1 and 2 queues,
// retained messages, wills) and mqemitter-redis (every published message reaches every node's
// subscribers). This module opens them on connections of its own and watches those connections; it
// is loaded only when REEF_REDIS_URL is set, so a node without Redis never loads ioredis.
//
// A lost Redis must never take a node down. The engines' connections do not reconnect by themselves
// (a half-working broker would wait on a queue of commands): when one ends, or a health check
// fails, `onLost` fires once and the broker moves to in-memory state (src/mqtt/broker.ts
// "degrade"), while `reachable()` waits on a probe connection for Redis to answer again. The
// libraries leave some command promises unobserved (`db.lrem(...)` with no handler): every command
// of these connections gets a rejection handler, so a failed one is an error of its caller, never
// an unhandled rejection that would end the process.
import { createRequire } from 'node:module';
import type { Readable } from 'node:stream';
import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import { MESSAGE_WINDOW } from './guard.ts';

const require = createRequire(import.meta.url);

/** How long connecting, and any one command, may take before Redis counts as unreachable. */
const TIMEOUT_MS = 5000;
/** The probe's retries while Redis is away: 100 ms more each time, at most every 2 s. */
const probeBackoff = (times: number) => Math.min(times * 100, 2000);

/** The parts of Aedes' persistence this module adjusts (src/mqtt/sessions.ts wraps others). */
interface PersistenceShape {
  delWill(client: unknown): Promise<unknown>;
  createRetainedStreamCombi(patterns: string[]): Readable;
}

/** Aedes' engines on Redis, for one broker generation (src/mqtt/broker.ts). */
export interface SharedEngines {
  /** Aedes' `persistence` option. */
  persistence: unknown;
  /** Aedes' `mq` option. */
  mq: unknown;
  /** The persistence's connection, for the session bounds (src/mqtt/redis-sessions.ts). */
  db: Redis;
  /** Called once when a connection is lost or a health check fails. */
  onLost(fn: (why: string) => void): void;
  /** A round trip to Redis; a failure counts as the connection lost. */
  check(): Promise<void>;
  /** Closes the connections that Aedes does not close itself (after `aedes.close()`). */
  close(): Promise<void>;
  /** Drops every connection at once (Redis is gone: nothing to say goodbye to). */
  destroy(): void;
}

const noop = () => undefined;

/**
 * A connection whose every command promise has a rejection handler attached; callers awaiting the
 * promise still see the rejection. Methods run on the connection itself.
 */
function observed(conn: Redis): Redis {
  return new Proxy(conn, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target) as unknown;
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        const r = (v as (...a: unknown[]) => unknown).apply(target, args);
        if (r instanceof Promise) r.catch(noop);
        return r;
      };
    },
  });
}

export class RedisLink {
  constructor(
    private readonly url: string,
    private readonly log: Logger,
    /** Seconds a queued message is kept at most (REEF_MQTT_SESSION_EXPIRY): no message outlives its session for long. */
    private readonly packetTtlSeconds: number,
  ) {}

  private connection(extra: RedisOptions = {}): Redis {
    const conn = new Redis(this.url, { lazyConnect: true, connectTimeout: TIMEOUT_MS, commandTimeout: TIMEOUT_MS, maxRetriesPerRequest: 0, retryStrategy: () => null, ...extra });
    // Errors are reported by the commands that meet them and by `onLost`; an 'error' event without
    // a listener would only be printed by ioredis.
    conn.on('error', noop);
    return conn;
  }

  /** Connects the engines; rejects (closing what it opened) when Redis does not answer. */
  async open(): Promise<SharedEngines> {
    const raw = [this.connection(), this.connection(), this.connection()];
    try {
      await Promise.all(raw.map((c) => c.connect()));
    } catch (e) {
      for (const c of raw) c.disconnect();
      throw e;
    }
    const [db, sub, pub] = raw.map(observed) as [Redis, Redis, Redis];
    const persistenceFactory = require('aedes-persistence-redis') as (o: object) => PersistenceShape;
    const MQEmitterRedis = require('mqemitter-redis') as (o: object) => { state: { on(e: 'error', f: (e: Error) => void): void } };
    const persistence = persistenceFactory({ conn: db, packetTTL: () => this.packetTtlSeconds });
    // A will or retained-message read failing with Redis going away ends quietly: Aedes uses
    // `delWill(...).finally(...)` and pipes the retained stream with no error handler.
    const delWill = persistence.delWill.bind(persistence);
    persistence.delWill = (client) => delWill(client).catch(() => null);
    const retained = persistence.createRetainedStreamCombi.bind(persistence);
    persistence.createRetainedStreamCombi = (patterns) => retained(patterns).on('error', (err) => this.log.debug({ err }, 'mqtt could not read retained messages'));
    // As the broker sets Aedes' own emitter: no delivery window (MESSAGE_WINDOW), and '#' also
    // matches the parent level (MQTT 3.1.1 §4.7).
    const mq = MQEmitterRedis({ subConn: sub, pubConn: pub, concurrency: MESSAGE_WINDOW, matchEmptyLevels: true });
    mq.state.on('error', (err) => this.log.debug({ err }, 'mqtt Redis emitter error'));

    let lostFn: ((why: string) => void) | null = null;
    let lost = false;
    let closing = false;
    const lose = (why: string) => {
      if (lost || closing) return;
      lost = true;
      lostFn?.(why);
    };
    for (const c of raw) c.once('end', () => lose('the connection to Redis was closed'));
    return {
      persistence,
      mq,
      db,
      onLost: (fn) => {
        lostFn = fn;
        if (lost) fn('the connection to Redis was closed');
      },
      check: async () => {
        try {
          await db.ping();
        } catch (e) {
          lose(`Redis did not answer: ${(e as Error).message}`);
          throw e;
        }
      },
      close: async () => {
        closing = true;
        await db.quit().catch(noop);
        for (const c of raw) c.disconnect();
      },
      destroy: () => {
        closing = true;
        for (const c of raw) c.disconnect();
      },
    };
  }

  private probe: Redis | null = null;

  /**
   * Resolves true once Redis answers again (a probe connection retrying with backoff), false when
   * `stop()` is called first.
   */
  reachable(): Promise<boolean> {
    this.probe?.disconnect();
    const probe = this.connection({ retryStrategy: probeBackoff, enableOfflineQueue: false });
    this.probe = probe;
    return new Promise((resolve) => {
      probe.once('ready', () => {
        probe.disconnect();
        resolve(true);
      });
      probe.once('end', () => resolve(false));
      probe.connect().catch(noop);
    });
  }

  /** Ends a waiting probe. */
  stop(): void {
    this.probe?.disconnect();
    this.probe = null;
  }
}

/** The URL without its password, for logs. */
export function redisUrlForLog(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return 'redis';
  }
}
