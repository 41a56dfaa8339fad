// A progress bar on stderr, drawn only when stderr is a terminal: in a pipe or a log file it would
// be noise, so there the command prints its plain summary alone.

export interface ProgressStream {
  isTTY?: boolean;
  columns?: number;
  write(s: string): boolean;
}

export function formatCount(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  const m = Math.floor(seconds / 60);
  return `${m} min ${Math.round(seconds - m * 60)} s`;
}

export class Progress {
  private last = 0;
  private startedAt = Date.now();
  private drawn = false;
  readonly enabled: boolean;

  constructor(
    private label: string,
    private total: number,
    private unit: string,
    private readonly out: ProgressStream = process.stderr,
  ) {
    this.enabled = Boolean(out.isTTY);
  }

  /** Starts a new phase on the same line (e.g. "validating" then "uploading"). */
  phase(label: string, total: number, unit: string): void {
    this.label = label;
    this.total = total;
    this.unit = unit;
    this.startedAt = Date.now();
    this.last = 0;
  }

  update(done: number, force = false): void {
    if (!this.enabled) return;
    const now = Date.now();
    if (!force && now - this.last < 100) return;
    this.last = now;
    const frac = this.total > 0 ? Math.min(1, done / this.total) : 0;
    const elapsed = (now - this.startedAt) / 1000;
    const rate = elapsed > 0 ? done / elapsed : 0;
    const eta = rate > 0 ? (this.total - done) / rate : Infinity;
    const width = Math.max(10, Math.min(30, (this.out.columns ?? 80) - 70));
    const filled = Math.round(frac * width);
    const bar = '#'.repeat(filled) + '-'.repeat(width - filled);
    const text = `${this.label} [${bar}] ${(frac * 100).toFixed(0).padStart(3)}% ${formatCount(done)}/${formatCount(this.total)} ${this.unit}` +
      (rate > 0 ? `  ${formatCount(rate)} ${this.unit}/s  ETA ${formatDuration(eta)}` : '');
    this.out.write(`\r${text}\x1b[K`);
    this.drawn = true;
  }

  /** Clears the bar so the summary that follows starts on a clean line. */
  finish(): void {
    if (this.enabled && this.drawn) this.out.write('\r\x1b[K');
    this.drawn = false;
  }
}
