// Failed-login throttle. Three limits, all over a sliding window and all counting an attempt the
// moment it starts (an attempt still being checked counts as a failure until it succeeds), so 200
// guesses sent in parallel are not all checked:
// - per (source address, client id): after `maxFailures`, that source gets 429 for that client id;
// - per source address: after `sourceMaxFailures` over all client ids, that source gets 429;
// - per client id over all addresses: after `clientMaxFailures`, only a *clean* source (no failed
//   or pending attempt in the window) may still try it, so guesses spread over many addresses are
//   bounded too (by the budget plus one per address), while the owner, logging in from an address
//   that has not been guessing, is never locked out.
// In memory, per node: it slows guessing and sheds abuse early; secrets are 256-bit random, so it
// is not what keeps them safe.
import { ReefError } from '../core/errors.ts';

interface Counter {
  /** Failed attempts inside the window. */
  failures: number;
  /** Attempts started and not finished. */
  pending: number;
  since: number;
}

export interface ThrottleLimits {
  maxFailures: number;
  sourceMaxFailures: number;
  clientMaxFailures: number;
  windowMs: number;
}

/** What a caller holds while its attempt is checked; exactly one of ok()/failed() ends it. */
export interface Attempt {
  /** The source had no failed or pending attempt in the window when this one began. */
  readonly clean: boolean;
  ok(): void;
  failed(): void;
}

const MAX_KEYS = 100_000;

export class LoginThrottle {
  private counters = new Map<string, Counter>();

  constructor(
    private readonly limits: ThrottleLimits,
    private readonly now: () => number = Date.now,
  ) {}

  /** Starts an attempt or throws RATE_LIMITED (429 with Retry-After). */
  begin(source: string, clientId: string): Attempt {
    const now = this.now();
    const pairKey = `${source}\u0000${clientId}`;
    const srcKey = `${source}\u0000`;
    const idKey = `\u0001${clientId}`;
    const pair = this.counter(pairKey, now);
    const src = this.counter(srcKey, now);
    const id = this.counter(idKey, now);
    const clean = src.failures + src.pending === 0;
    if (pair.failures + pair.pending >= this.limits.maxFailures) this.refuse(pair, now, 'for this client id from your address');
    if (src.failures + src.pending >= this.limits.sourceMaxFailures) this.refuse(src, now, 'from your address');
    if (!clean && id.failures + id.pending >= this.limits.clientMaxFailures) this.refuse(id, now, 'for this client id');
    pair.pending++;
    src.pending++;
    id.pending++;
    let done = false;
    return {
      clean,
      ok: () => {
        if (done) return;
        done = true;
        // The right secret clears this client id's count from this source; the source's count of
        // failures for other client ids and the client id's count from other sources stay.
        pair.pending--;
        src.pending--;
        id.pending--;
        pair.failures = 0;
        this.drop(pairKey, pair);
        this.drop(idKey, id);
      },
      failed: () => {
        if (done) return;
        done = true;
        pair.pending--;
        src.pending--;
        id.pending--;
        pair.failures++;
        src.failures++;
        id.failures++;
      },
    };
  }

  private counter(key: string, now: number): Counter {
    let c = this.counters.get(key);
    if (c && now - c.since >= this.limits.windowMs) {
      c.failures = 0;
      c.since = now;
    }
    if (!c) {
      if (this.counters.size >= MAX_KEYS) this.prune(now);
      c = { failures: 0, pending: 0, since: now };
      this.counters.set(key, c);
    }
    return c;
  }

  private refuse(c: Counter, now: number, scope: string): never {
    const retryAfter = Math.max(1, Math.ceil((c.since + this.limits.windowMs - now) / 1000));
    throw new ReefError('RATE_LIMITED', `too many failed logins ${scope}; retry in ${retryAfter} s`, { retryAfter });
  }

  private drop(key: string, c: Counter): void {
    if (c.failures === 0 && c.pending === 0) this.counters.delete(key);
  }

  private prune(now: number): void {
    for (const [k, c] of this.counters) if (c.pending === 0 && now - c.since >= this.limits.windowMs) this.counters.delete(k);
  }
}
