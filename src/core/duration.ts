// The one duration module: what people type ("500ms", "10s", "1.5m", "1h", "7d") and what they read
// back ("4.2s", "5m 30s", "2h 5m"). The HTTP API (bucket), simulations (interval, duration,
// backfill), the kit's settings and the CLI all parse and print durations through here.

export const DURATION_UNITS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
export type DurationUnit = keyof typeof DURATION_UNITS;

/**
 * Milliseconds of "500ms", "10s", "1.5m", "1h", "7d" (spaces around allowed); a bare number is in
 * `bareUnit`. NaN when the text is not a duration. Fractions round to the millisecond.
 */
export function parseDuration(text: string, bareUnit: DurationUnit = 'ms'): number {
  const m = /^\s*(\d{1,12}(?:\.\d{1,6})?)\s*(ms|s|m|h|d)?\s*$/.exec(text);
  if (!m) return NaN;
  return Math.round(Number(m[1]) * DURATION_UNITS[(m[2] as DurationUnit | undefined) ?? bareUnit]);
}

/** A duration for people, in at most two units: "750ms", "4.2s", "10s", "5m 30s", "2h 5m", "3d 4h". */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '?';
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const s = ms / 1000;
  if (s < 60) return `${Number.isInteger(s) || s >= 10 ? Math.round(s) : s.toFixed(1)}s`;
  const two = (big: number, bigUnit: string, smallMs: number, smallUnit: string) => {
    const whole = Math.floor(ms / big);
    const rest = Math.round((ms - whole * big) / smallMs);
    // Rounding the smaller unit up to a whole bigger one carries over ("1m 60s" is "2m").
    if (rest * smallMs >= big) return `${whole + 1}${bigUnit}`;
    return rest ? `${whole}${bigUnit} ${rest}${smallUnit}` : `${whole}${bigUnit}`;
  };
  if (s < 3600) return two(60_000, 'm', 1000, 's');
  if (s < 86400) return two(3_600_000, 'h', 60_000, 'm');
  return two(86_400_000, 'd', 3_600_000, 'h');
}
