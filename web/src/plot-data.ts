// The plot's pure helpers: where a series' line breaks (gaps), its usual sampling gap, the nearest
// point to a time, the y tick labels, and a tooltip row.

/** A series' usual gap (seconds): the median of its gaps (at most 200 looked at), a minute without any. */
export function sampleGap(xs: number[]): number {
  const gaps: number[] = [];
  const step = Math.max(1, Math.floor(xs.length / 200));
  for (let i = step; i < xs.length; i += step) gaps.push(xs[i]! - xs[i - 1]!);
  if (!gaps.length) return 60;
  gaps.sort((a, b) => a - b);
  return Math.max(1, gaps[gaps.length >> 1]!);
}

/** The columns with a null at each silence longer than three usual gaps (and a minute): the line breaks there. */
export function withGaps(x: number[], cols: (number | null)[][]): { x: number[]; cols: (number | null)[][]; gaps: number } {
  if (x.length < 3) return { x, cols, gaps: 0 };
  const limit = Math.max(60, 3 * sampleGap(x));
  let gaps = 0;
  for (let i = 1; i < x.length; i++) if (x[i]! - x[i - 1]! > limit) gaps++;
  if (!gaps) return { x, cols, gaps: 0 };
  const gx: number[] = [];
  const gc: (number | null)[][] = cols.map(() => []);
  for (let i = 0; i < x.length; i++) {
    if (i > 0 && x[i]! - x[i - 1]! > limit) {
      gx.push((x[i]! + x[i - 1]!) / 2);
      for (const c of gc) c.push(null);
    }
    gx.push(x[i]!);
    cols.forEach((c, k) => gc[k]!.push(c[i] ?? null));
  }
  return { x: gx, cols: gc, gaps };
}

export function tipRow(colour: string, name: string, value: string): HTMLElement {
  const row = document.createElement('div');
  const sw = document.createElement('span');
  sw.className = 'swatch';
  sw.style.background = colour;
  const v = document.createElement('strong');
  v.textContent = value;
  row.append(sw, `${name} `, v);
  return row;
}

export function nearest(xs: number[], t: number): number {
  let lo = 0,
    hi = xs.length - 1;
  if (hi < 0) return -1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid]! < t) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0 && Math.abs(xs[lo - 1]! - t) <= Math.abs(xs[lo]! - t)) return lo - 1;
  return lo;
}

/** Decimals a tick step needs so that no label is rounded (0.25 → 2, 0.5 → 1, 5 → 0). */
export function stepDecimals(step: number): number {
  let d = 0;
  while (d < 6 && Math.abs(Math.round(step * 10 ** d) - step * 10 ** d) > 1e-6 * 10 ** d) d++;
  return d;
}

/** Y tick labels exactly at the ticks: the decimals follow the tick step (a tick at 21.25 reads 21.25). */
export function yTicks(splits: number[]): string[] {
  const step = splits.length > 1 ? Math.abs(splits[1]! - splits[0]!) : 1;
  const d = stepDecimals(step);
  return splits.map((v) => (Object.is(Math.round(v * 10 ** d) / 10 ** d, -0) ? 0 : v).toFixed(d));
}
