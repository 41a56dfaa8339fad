// Log lines an outsider can cause one per datagram, such as a replayed kit announcement, are rate
// limited per source: the first is logged, then at most one per interval, carrying how many were
// suppressed since the last one logged. A replay loop then costs the log one line a minute, not one
// per datagram (docs/coap.md "Operating it"). Sources are bounded too: with `maxSources` of them
// logged within the interval, a new one is suppressed, so forged source addresses cannot flood it.

export class LogLimiter {
  private readonly sources = new Map<string, { at: number; suppressed: number }>();

  constructor(
    private readonly intervalMs = 60_000,
    /** The clock (tests inject one). */
    private readonly now: () => number = Date.now,
    private readonly maxSources = 1024,
  ) {}

  /** Whether to log a line of `source` now: undefined to suppress it, else how many were suppressed since its last line. */
  take(source: string): number | undefined {
    const now = this.now();
    const e = this.sources.get(source);
    if (e && now - e.at < this.intervalMs) {
      e.suppressed++;
      return undefined;
    }
    if (!e && this.sources.size >= this.maxSources && !this.prune(now)) return undefined;
    this.sources.set(source, { at: now, suppressed: 0 });
    return e?.suppressed ?? 0;
  }

  /** Forgets sources whose interval is over; true when that made room. */
  private prune(now: number): boolean {
    for (const [k, e] of this.sources) if (now - e.at >= this.intervalMs) this.sources.delete(k);
    return this.sources.size < this.maxSources;
  }
}
