// Time partitions of the observations table (see migrations.ts for the layout): which range holds a
// timestamp, which ranges exist, which must be made before a batch is inserted, and which have
// expired. Pure arithmetic here; the SQL lives in postgres-store.ts and the migration's functions.

const DAY = 86_400_000;
const WEEK = 7 * DAY;
/** 1970-01-05, the first Monday: weeks start on Monday like PostgreSQL's date_trunc('week'). */
const MONDAY = 4 * DAY;

/** Range partitions are made on demand only this close to now; other timestamps go to the default. */
export const ON_DEMAND_PAST_MS = 5 * 366 * DAY;
export const ON_DEMAND_FUTURE_MS = 400 * DAY;
/** Partitions made ahead of time: this many periods after the current one (and the one before). */
export const AHEAD_PERIODS = 3;

export type Width = 'week' | 'month';

/** Short retentions get weekly partitions so that expiry is no more than a week late. */
export function widthOf(tier: number): Width {
  return tier > 0 && tier <= 93 ? 'week' : 'month';
}

export function periodStart(width: Width, ts: number): number {
  if (width === 'week') return Math.floor((ts - MONDAY) / WEEK) * WEEK + MONDAY;
  const d = new Date(ts);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

export function periodEnd(width: Width, start: number): number {
  if (width === 'week') return start + WEEK;
  const d = new Date(start);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

export interface Range {
  start: number;
  end: number;
}

/** The range partitions known to exist, per tier; a cache of the catalogue (which stays the truth). */
export class PartitionMap {
  private readonly tiers = new Map<number, Range[]>();

  tierList(): number[] {
    return [...this.tiers.keys()].sort((a, b) => a - b);
  }

  hasTier(tier: number): boolean {
    return this.tiers.has(tier);
  }

  addTier(tier: number): void {
    if (!this.tiers.has(tier)) this.tiers.set(tier, []);
  }

  ranges(tier: number): readonly Range[] {
    return this.tiers.get(tier) ?? [];
  }

  /** Replaces the cache with what the catalogue says. */
  load(rows: { tier: number; start: number | null; end: number | null }[]): void {
    this.tiers.clear();
    for (const r of rows) {
      if (!this.tiers.has(r.tier)) this.tiers.set(r.tier, []);
      if (r.start !== null && r.end !== null) this.tiers.get(r.tier)!.push({ start: r.start, end: r.end });
    }
    for (const list of this.tiers.values()) list.sort((a, b) => a.start - b.start);
  }

  add(tier: number, r: Range): void {
    const list = this.tiers.get(tier) ?? [];
    if (!list.some((x) => x.start === r.start)) list.push(r);
    list.sort((a, b) => a.start - b.start);
    this.tiers.set(tier, list);
  }

  covering(tier: number, ts: number): Range | undefined {
    const list = this.tiers.get(tier);
    if (!list) return undefined;
    // Binary search: the last range starting at or before ts.
    let lo = 0;
    let hi = list.length - 1;
    let found: Range | undefined;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (list[mid]!.start <= ts) {
        found = list[mid];
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found && ts < found.end ? found : undefined;
  }

  /**
   * Whether, in every tier, one range holds all of [from, to]: then no timestamp of a batch spanning
   * it needs a partition made, and `missing` need not look at each one (the usual upload, whose
   * thousand readings share a month).
   */
  holds(from: number, to: number): boolean {
    for (const tier of this.tiers.keys()) {
      const r = this.covering(tier, from);
      if (!r || to >= r.end) return false;
    }
    return true;
  }

  /**
   * The ranges to make, in every tier, so that each timestamp lands in a range partition (those
   * outside the on-demand window are left to the default partition).
   */
  missing(timestamps: Iterable<number>, now: number): { tier: number; start: number; end: number }[] {
    const out = new Map<string, { tier: number; start: number; end: number }>();
    const lo = now - ON_DEMAND_PAST_MS;
    const hi = now + ON_DEMAND_FUTURE_MS;
    for (const tier of this.tiers.keys()) {
      const width = widthOf(tier);
      let last: Range | undefined; // consecutive timestamps usually share a range
      for (const ts of timestamps) {
        if (last && ts >= last.start && ts < last.end) continue;
        if (ts < lo || ts >= hi) continue;
        const have = this.covering(tier, ts);
        if (have) {
          last = have;
          continue;
        }
        const start = periodStart(width, ts);
        const r = { start, end: periodEnd(width, start) };
        out.set(`${tier}:${start}`, { tier, ...r });
        last = r;
      }
    }
    return [...out.values()];
  }

  /** The ranges around now that upkeep keeps ready: the previous period, this one, and AHEAD_PERIODS more. */
  ahead(now: number): { tier: number; start: number; end: number }[] {
    const out: { tier: number; start: number; end: number }[] = [];
    for (const tier of this.tiers.keys()) {
      const width = widthOf(tier);
      let start = periodStart(width, periodStart(width, now) - 1);
      for (let i = 0; i < AHEAD_PERIODS + 2; i++) {
        const end = periodEnd(width, start);
        if (!this.covering(tier, start)) out.push({ tier, start, end });
        start = end;
      }
    }
    return out;
  }
}

/** Parses pg_get_expr(relpartbound) of a range partition: FOR VALUES FROM ('1') TO ('2'). */
export function parseRangeBound(expr: string): Range | null {
  const m = /FROM \('?(-?\d+)'?\) TO \('?(-?\d+)'?\)/.exec(expr);
  return m ? { start: Number(m[1]), end: Number(m[2]) } : null;
}
