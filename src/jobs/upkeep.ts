// Store upkeep, a leader-only job: retention and time partitions (Store.maintain) and rotation of
// the token signing keys. Runs when the node becomes leader and then every interval; what it did
// last is kept in job state under `job:upkeep`, so operators (and tests) see which node ran it.
import { randomBytes, randomUUID } from 'node:crypto';
import type { Store } from '../store/store.ts';
import type { Job } from './leader.ts';

export const UPKEEP_STATE_KEY = 'job:upkeep';

export interface UpkeepOptions {
  store: Store;
  nodeId: string;
  log?: { info(o: object, msg: string): void; error(o: object, msg: string): void };
  intervalMs?: number;
  /** Token signing: rotation only applies to stored keys (no REEF_TOKEN_SECRET). */
  tokens?: { ttlSeconds: number; configuredSecret: boolean };
  /** A new signing key this often (default 30 days). */
  keyRotationMs?: number;
  /** Counts stored observations per account for the observation quota (src/service/quotas.ts). */
  quotas?: { recount(): Promise<void> };
}

/** Every node re-reads the signing keys at least this often (TokenService), so a new key is in use everywhere after it. */
export const KEY_REFRESH_MS = 60_000;

/**
 * Rotates the signing key when the newest is older than rotateMs, and deletes keys no node can have
 * signed with for longer than a token lives: a key stops signing once a newer key exists and every
 * node has re-read the keys.
 */
export async function rotateSigningKeys(store: Store, opts: { now: number; rotateMs: number; ttlSeconds: number }): Promise<{ added: string | null; removed: string[] }> {
  let keys = await store.listSigningKeys();
  let added: string | null = null;
  const newest = keys[keys.length - 1];
  if (!newest || opts.now - newest.createdAt >= opts.rotateMs) {
    added = randomUUID();
    await store.addSigningKey({ kid: added, secret: randomBytes(32).toString('base64url'), createdAt: opts.now });
    keys = await store.listSigningKeys();
  }
  const removed: string[] = [];
  for (let i = 0; i < keys.length - 1; i++) {
    const successor = keys[i + 1]!;
    if (successor.createdAt + KEY_REFRESH_MS + opts.ttlSeconds * 1000 + 60_000 < opts.now) {
      await store.deleteSigningKey(keys[i]!.kid);
      removed.push(keys[i]!.kid);
    }
  }
  return { added, removed };
}

export function upkeepJob(o: UpkeepOptions): Job {
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  const once = async () => {
    try {
      const report = await o.store.maintain(Date.now());
      let keys: { added: string | null; removed: string[] } | null = null;
      if (o.tokens && !o.tokens.configuredSecret) {
        keys = await rotateSigningKeys(o.store, { now: Date.now(), rotateMs: o.keyRotationMs ?? 30 * 86_400_000, ttlSeconds: o.tokens.ttlSeconds });
      }
      await o.quotas?.recount();
      await o.store.setState(UPKEEP_STATE_KEY, JSON.stringify({ node: o.nodeId, at: new Date().toISOString(), ...report, keysAdded: keys?.added ? 1 : 0, keysRemoved: keys?.removed.length ?? 0 }));
      o.log?.info({ job: 'upkeep', ...report }, 'store upkeep done');
    } catch (err) {
      // PostgreSQL unreachable or a lock not granted: try again next time.
      o.log?.error({ err, job: 'upkeep' }, 'store upkeep failed; retrying next interval');
    }
  };
  return {
    name: 'upkeep',
    start() {
      running = once();
      timer = setInterval(
        () => {
          if (!running) running = once().finally(() => (running = null));
        },
        o.intervalMs ?? 10 * 60_000,
      );
      timer.unref();
      void running.finally(() => (running = null));
    },
    async stop() {
      if (timer) clearInterval(timer);
      timer = null;
      await running;
    },
  };
}
