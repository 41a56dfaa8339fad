// Small, strict argument parsing shared by every subcommand: unknown flags are usage errors.
import { parseFlags } from '../config/config.ts';

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export interface Parsed {
  flags: Record<string, string>;
  positional: string[];
}

/** Parses argv and refuses flags not in `allowed` (each `--help` is always allowed). */
export function parseArgs(argv: string[], allowed: string[]): Parsed {
  const { flags, rest } = parseFlags(argv);
  for (const k of Object.keys(flags)) {
    if (k !== 'help' && !allowed.includes(k)) throw new UsageError(`unknown option --${k}`);
  }
  return { flags, positional: rest };
}

export function required(p: Parsed, name: string): string {
  const v = p.flags[name];
  if (v === undefined || v === 'true' || v === '') throw new UsageError(`--${name} is required`);
  return v;
}

export function printJson(v: unknown): void {
  process.stdout.write(JSON.stringify(v, null, 2) + '\n');
}

/** A plain aligned table for people (--json gives machines the data). */
export function printTable(rows: Record<string, unknown>[], columns: string[]): void {
  const cells = rows.map((r) => columns.map((c) => String(r[c] ?? '')));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i]!.length)));
  const line = (vals: string[]) => vals.map((v, i) => v.padEnd(widths[i]!)).join('  ').trimEnd();
  process.stdout.write([line(columns.map((c) => c.toUpperCase())), ...cells.map(line)].join('\n') + '\n');
}
