// Application deadlines of many requests with one timer. A timer per request (setTimeout, then
// clearTimeout when the answer comes, the usual case) costs more than the rest of a proxied
// request's bookkeeping at tens of thousands of requests a second. Requests given the same duration
// fall due in the order they were made, so each duration keeps a set in insertion order (a "lane")
// and only the earliest head of all lanes has a timer.

export interface Timed {
  /** When it falls due (the clock's milliseconds); set by Deadlines.add. */
  due: number;
  /** Its lane (the duration it was given); set by Deadlines.add. */
  lane: number;
}

export class Deadlines<T extends Timed> {
  private readonly lanes = new Map<number, Set<T>>();
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;

  /** `expire` is called once for each item that falls due before it is removed; `now` is the clock (tests inject one). */
  constructor(
    private readonly expire: (item: T) => void,
    private readonly now: () => number = () => performance.now(),
  ) {}

  add(item: T, ms: number): void {
    item.due = this.now() + ms;
    item.lane = ms;
    let lane = this.lanes.get(ms);
    if (!lane) {
      lane = new Set();
      this.lanes.set(ms, lane);
    }
    lane.add(item);
    if (item.due < this.timerAt) this.arm(item.due);
  }

  /** Forgets an item (answered in time). Its lane's timer, if it had one, fires for nothing once. */
  remove(item: T): void {
    this.lanes.get(item.lane)?.delete(item);
  }

  /** Forgets everything and stops the timer. */
  clear(): void {
    this.lanes.clear();
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
  }

  private arm(at: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => this.sweep(), Math.max(0, at - this.now()));
  }

  private sweep(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = this.now();
    let next = Infinity;
    for (const [ms, lane] of this.lanes) {
      for (const item of lane) {
        if (item.due > now) {
          if (item.due < next) next = item.due;
          break;
        }
        lane.delete(item);
        this.expire(item);
      }
      if (lane.size === 0) this.lanes.delete(ms);
    }
    if (next < Infinity && next < this.timerAt) this.arm(next);
  }
}
