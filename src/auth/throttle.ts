// Failed-login throttle per client id: after maxFailures failures inside the window, further
// attempts get 429 with Retry-After until the window has passed. In memory, per node: it slows
// guessing; it is not an account lock-out (which would let anyone lock a victim out).
import { ReefError } from '../core/errors.ts';

export class LoginThrottle {
  private failures = new Map<string, { count: number; since: number }>();

  constructor(private readonly maxFailures: number, private readonly windowMs: number) {}

  check(key: string, now = Date.now()): void {
    const f = this.failures.get(key);
    if (!f) return;
    if (now - f.since >= this.windowMs) {
      this.failures.delete(key);
      return;
    }
    if (f.count >= this.maxFailures) {
      const retryAfter = Math.max(1, Math.ceil((f.since + this.windowMs - now) / 1000));
      throw new ReefError('RATE_LIMITED', `too many failed logins for this client id; retry in ${retryAfter} s`, { retryAfter });
    }
  }

  fail(key: string, now = Date.now()): void {
    const f = this.failures.get(key);
    if (!f || now - f.since >= this.windowMs) {
      if (this.failures.size > 100_000) this.prune(now);
      this.failures.set(key, { count: 1, since: now });
    } else f.count++;
  }

  succeed(key: string): void {
    this.failures.delete(key);
  }

  private prune(now: number): void {
    for (const [k, f] of this.failures) if (now - f.since >= this.windowMs) this.failures.delete(k);
  }
}
