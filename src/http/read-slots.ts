// Observation reads in progress per account (docs/security.md "Reads"). A range, tag-filtered or
// bucketed read costs store work in proportion to what it covers, and on SQLite that work runs on
// the main thread: a few requests of one account looping on them used to hold every other
// tenant's requests for seconds. Each account may have `maxPerAccount` running on a node; more
// wait their turn, in order, up to `maxWaiting`; one more is answered 429 TOO_MANY_READS with
// Retry-After at once, before any work. A read that waited starts on a later turn of the event
// loop (setImmediate), so other tenants' requests that arrived meanwhile are served in between.
import { ReefError } from '../core/errors.ts';

interface Account {
  running: number;
  waiting: (() => void)[];
}

export class ReadSlots {
  private readonly accounts = new Map<string, Account>();
  /** Reads refused since start (tests and reporting). */
  refused = 0;

  constructor(
    private readonly maxPerAccount: number,
    private readonly maxWaiting = maxPerAccount * 16,
  ) {}

  async run<T>(account: string, work: () => Promise<T>): Promise<T> {
    let a = this.accounts.get(account);
    if (!a) this.accounts.set(account, (a = { running: 0, waiting: [] }));
    if (a.running >= this.maxPerAccount) {
      if (a.waiting.length >= this.maxWaiting) {
        this.refused++;
        throw new ReefError('TOO_MANY_READS', `at most ${this.maxPerAccount} observation reads of one account run at once and ${this.maxWaiting} wait; retry when some have finished`, {
          retryAfter: 1,
        });
      }
      await new Promise<void>((resolve) => a.waiting.push(resolve));
    } else a.running++;
    try {
      return await work();
    } finally {
      const next = a.waiting.shift();
      // The slot passes on (running stays the same), on the next turn of the event loop.
      if (next) setImmediate(next);
      else if (--a.running === 0) this.accounts.delete(account);
    }
  }
}
