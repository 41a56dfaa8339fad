// Client secrets at rest: scrypt (RFC 7914) with a per-secret salt, compared in constant time.
// The stored form carries its parameters so they can be raised later without a migration.
import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { ReefError } from '../core/errors.ts';

const N = 16384;
const R = 8;
const P = 1;
const KEYLEN = 32;

function scrypt(secret: string, salt: Buffer, keylen: number, opts: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => scryptCb(secret, salt, keylen, opts, (e, k) => (e ? reject(e) : resolve(k))));
}

/** A new client secret: 32 random bytes, base64url (43 characters). */
export function generateSecret(): string {
  return randomBytes(32).toString('base64url');
}

export async function hashSecret(secret: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(secret, salt, KEYLEN, { N, r: R, p: P, maxmem: 64 * 1024 * 1024 });
  return `scrypt$${N}$${R}$${P}$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

// A fixed hash to compare against when the client id is unknown, so a wrong id costs the same time
// as a wrong secret and response timing does not reveal which client ids exist.
let dummyHash: Promise<string> | null = null;
export function dummySecretHash(): Promise<string> {
  dummyHash ??= hashSecret(generateSecret());
  return dummyHash;
}

export async function verifySecret(secret: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [, n, r, p, saltB64, keyB64] = parts as [string, string, string, string, string, string];
  const expected = Buffer.from(keyB64, 'base64url');
  const got = await scrypt(secret, Buffer.from(saltB64, 'base64url'), expected.length, {
    N: Number(n),
    r: Number(r),
    p: Number(p),
    maxmem: 64 * 1024 * 1024,
  });
  return got.length === expected.length && timingSafeEqual(got, expected);
}

/**
 * Bounds scrypt work. scrypt runs on libuv's thread pool (4 threads), which file I/O and DNS share;
 * a flood of logins would fill it, and everything behind it would wait. At most `concurrency` hashes
 * run at once. Waiting work is in two lanes, each queued per source address and served
 * round-robin: the first lane (a known client id from a source with no recent failures, the shape
 * of a real login: src/auth/accounts.ts) is always served before the second (everything else), and
 * with two or more slots one is kept for it, so a flood of bogus logins from any number of
 * addresses does not make a real login wait for its checks. At most `maxQueued` wait in all and `maxQueuedPerSource` from one
 * address; when the queue is full, the newest waiting check of the address with the most waiting
 * is shed to make room (from the second lane first, and from the first only for a first-lane
 * check), so many flooding addresses cannot lock out one that is not. A shed check fails at once
 * with SERVER_BUSY (503, Retry-After) instead of waiting.
 */
export class HashQueue {
  private running = 0;
  /** Of those running, second-lane checks. */
  private runningSecond = 0;
  private queued = 0;
  /** Waiting checks per source: [first lane, second lane]. */
  private readonly lanes: [Map<string, Waiter[]>, Map<string, Waiter[]>] = [new Map(), new Map()];
  /** Highest number of hashes seen running at once (for tests and /health-style reporting). */
  peakRunning = 0;
  shed = 0;

  constructor(private readonly limits: { concurrency: number; maxQueued: number; maxQueuedPerSource: number }) {}

  /** Hashes running and waiting now. */
  get active(): number {
    return this.running + this.queued;
  }

  /** Checks waiting now. */
  get waiting(): number {
    return this.queued;
  }

  /** Runs `work` when a slot is free; `first`: the first lane (see the class comment). */
  async run<T>(source: string, work: () => Promise<T>, first = false): Promise<T> {
    if (this.canStart(first)) this.start(first);
    else await this.wait(source, first ? 0 : 1); // the slot is handed over already started
    this.peakRunning = Math.max(this.peakRunning, this.running);
    try {
      return await work();
    } finally {
      this.running--;
      if (!first) this.runningSecond--;
      this.next();
    }
  }

  /**
   * With two or more slots, one is kept for the first lane: a real login then waits for no
   * flood check at all, only for other first-lane checks.
   */
  private canStart(first: boolean): boolean {
    if (this.running >= this.limits.concurrency) return false;
    return first || this.runningSecond < Math.max(1, this.limits.concurrency - 1);
  }

  private start(first: boolean): void {
    this.running++;
    if (!first) this.runningSecond++;
  }

  private busy(): ReefError {
    this.shed++;
    return new ReefError('SERVER_BUSY', 'too many logins are being checked right now; retry shortly', { retryAfter: 1 });
  }

  private wait(source: string, lane: 0 | 1): Promise<void> {
    const mine = (this.lanes[0].get(source)?.length ?? 0) + (this.lanes[1].get(source)?.length ?? 0);
    if (mine >= this.limits.maxQueuedPerSource) return Promise.reject(this.busy());
    if (this.queued >= this.limits.maxQueued) {
      // Make room by shedding from the address with the most waiting in the second lane, or (for a
      // first-lane check only) in the first, if it would have at least as many as this one:
      // per-address fairness is all that can be told apart without credentials.
      const victim = this.heaviest(this.lanes[1], source, lane === 0 ? 0 : mine) ?? (lane === 0 ? this.heaviest(this.lanes[0], source, mine) : null);
      if (victim === null) return Promise.reject(this.busy());
      this.queued--;
      victim.shed();
    }
    return new Promise<void>((resolve, reject) => {
      const waiting = this.lanes[lane];
      let list = waiting.get(source);
      if (!list) waiting.set(source, (list = []));
      list.push({ go: resolve, shed: () => reject(this.busy()) });
      this.queued++;
    });
  }

  /** Takes the newest waiter of the source (not `except`) with more than `than` waiting. */
  private heaviest(waiting: Map<string, Waiter[]>, except: string, than: number): Waiter | null {
    let heaviest: string | null = null;
    let most = than;
    for (const [src, list] of waiting) {
      if (src !== except && list.length > most) {
        most = list.length;
        heaviest = src;
      }
    }
    if (heaviest === null) return null;
    const list = waiting.get(heaviest)!;
    const victim = list.pop()!;
    if (!list.length) waiting.delete(heaviest);
    return victim;
  }

  /** Starts the next waiting check that may start: first lane first, each lane round-robin by source (the served source moved to the back). */
  private next(): void {
    for (const lane of [0, 1] as const) {
      if (!this.canStart(lane === 0)) continue;
      const waiting = this.lanes[lane];
      for (const [source, list] of waiting) {
        const entry = list.shift()!;
        waiting.delete(source);
        if (list.length) waiting.set(source, list);
        this.queued--;
        this.start(lane === 0);
        entry.go();
        return;
      }
    }
  }
}

interface Waiter {
  go: () => void;
  shed: () => void;
}
