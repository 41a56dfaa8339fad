// The kits' clocks (seed §4.4: the device PUTs its current time to /sensor/arduino/time by itself;
// wire §2: a clock is set by PUT with the 10-byte time TLV). The gateway records each kit's report
// (in memory and in the store's state, key `gateway/clock/<mac>`) and, when a kit is off by more than
// `maxSkewMs`, sets it right with `PUT /<prefix>/system/time`, at most once per `minIntervalMs` per
// kit so a kit whose clock will not hold is not flooded. Readings carry the kit's epoch too (whole
// seconds, plus mesh latency), so they count as a coarse report with one extra second of slack.
import type { Store } from '../store/store.ts';

export interface ClockReport {
  mac: string;
  /** The kit's time as it reported it, epoch ms. */
  kitTime: number;
  /** The gateway's time on receipt, epoch ms. */
  receivedAt: number;
  /** kitTime − receivedAt. */
  skewMs: number;
  source: 'time-put' | 'reading';
  /** When the gateway last set this kit's clock, epoch ms. */
  setAt?: number;
}

export class ClockKeeper {
  private readonly reports = new Map<string, ClockReport>();
  private readonly lastSet = new Map<string, number>();

  constructor(
    private readonly store: Store,
    private readonly opts: { maxSkewMs: number; minIntervalMs: number },
    /** Sends the time PUT; resolves true when the kit answered 2.04. */
    private readonly setClock: (mac: string) => Promise<boolean>,
    private readonly onError: (e: unknown) => void = () => undefined,
  ) {}

  get(mac: string): ClockReport | undefined {
    return this.reports.get(mac);
  }

  /** A report of the kit's clock; returns true when a correction was started. */
  report(mac: string, kitTime: number, source: ClockReport['source'], receivedAt = Date.now()): boolean {
    const r: ClockReport = { mac, kitTime, receivedAt, skewMs: kitTime - receivedAt, source };
    const set = this.lastSet.get(mac);
    if (set !== undefined) r.setAt = set;
    // A reading's epoch is whole seconds: only a time PUT is a precise report worth recording.
    if (source === 'time-put' || !this.reports.has(mac)) {
      this.reports.set(mac, r);
      this.store.setState(`gateway/clock/${mac}`, JSON.stringify(r)).catch(this.onError);
    }
    const slack = source === 'reading' ? 1000 : 0;
    if (Math.abs(r.skewMs) <= this.opts.maxSkewMs + slack) return false;
    const now = Date.now();
    if (set !== undefined && now - set < this.opts.minIntervalMs) return false;
    this.lastSet.set(mac, now);
    this.setClock(mac).then(
      (ok) => {
        // A failed correction is retried after minIntervalMs like any other.
        const cur = this.reports.get(mac);
        if (ok && cur) {
          cur.setAt = now;
          this.store.setState(`gateway/clock/${mac}`, JSON.stringify(cur)).catch(this.onError);
        }
      },
      (e) => this.onError(e),
    );
    return true;
  }
}
