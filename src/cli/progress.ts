// The one progress bar of the CLI (uploads, simulation backfills), on stderr. On a terminal it is
// drawn in place; in a pipe or a log file it would be noise, so there it is silent, or, when the
// command asks for `lines`, one plain line per tenth of the way.
import { formatDuration } from '../core/duration.ts';

export interface ProgressStream {
  isTTY?: boolean;
  columns?: number;
  write(s: string): boolean;
}

export function formatCount(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** "[#####-----]  50%": the bar and the percentage. */
export function progressBar(done: number, total: number, width = 30): string {
  const frac = total > 0 ? Math.min(1, done / total) : 1;
  const filled = Math.round(frac * width);
  return `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${(frac * 100).toFixed(0).padStart(3)}%`;
}

export class Progress {
  private last = 0;
  private startedAt = Date.now();
  private drawn = false;
  private tenth = -1;
  /** Drawn in place (a terminal). */
  readonly enabled: boolean;

  constructor(
    private label: string,
    private total: number,
    private unit: string,
    private readonly out: ProgressStream = process.stderr,
    private readonly opts: { lines?: boolean; now?: () => number } = {},
  ) {
    this.enabled = Boolean(out.isTTY);
    this.startedAt = this.now();
  }

  private now(): number {
    return this.opts.now?.() ?? Date.now();
  }

  /** Starts a new phase on the same line (e.g. "validating" then "uploading"). */
  phase(label: string, total: number, unit: string): void {
    this.label = label;
    this.total = total;
    this.unit = unit;
    this.startedAt = this.now();
    this.last = 0;
    this.tenth = -1;
  }

  /** Seconds since the phase started. */
  elapsed(): number {
    return (this.now() - this.startedAt) / 1000;
  }

  update(done: number, force = false): void {
    const now = this.now();
    if (!this.enabled) {
      // Lines mode: one line per tenth (and the last), so a log shows it moving without flooding.
      const tenth = Math.floor((this.total > 0 ? Math.min(1, done / this.total) : 1) * 10);
      if (!this.opts.lines || tenth === this.tenth) return;
      this.tenth = tenth;
      this.out.write(this.text(done, now) + '\n');
      return;
    }
    if (!force && now - this.last < 100) return;
    this.last = now;
    this.out.write(`\r${this.text(done, now)}\x1b[K`);
    this.drawn = true;
  }

  private text(done: number, now: number): string {
    const elapsed = (now - this.startedAt) / 1000;
    const rate = elapsed > 0 ? done / elapsed : 0;
    const eta = rate > 0 ? (this.total - done) / rate : Infinity;
    const width = Math.max(10, Math.min(30, (this.out.columns ?? 100) - 70));
    return (
      `${this.label ? this.label + ' ' : ''}${progressBar(done, this.total, width)} ${formatCount(done)}/${formatCount(this.total)} ${this.unit}` +
      (rate > 0 ? `  ${formatCount(rate)} ${this.unit}/s${done < this.total ? `  ETA ${formatDuration(eta * 1000)}` : ''}` : '')
    );
  }

  /** Ends the bar: a terminal's line is cleared (`keep`: left, and the cursor moved below it). */
  finish(keep = false): void {
    if (this.enabled && this.drawn) this.out.write(keep ? '\n' : '\r\x1b[K');
    this.drawn = false;
  }
}
