// The one argument parser of every `reef` command: node:util parseArgs, strict (an unknown option
// or a missing value is a usage error, exit 2). Options are declared as taking a value or not, so a
// flag never swallows the word after it (`--json FILE` leaves FILE a positional argument).
import { parseArgs as nodeParseArgs } from 'node:util';

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export interface Parsed {
  /** Option values by long name; an option without a value (a boolean) reads 'true'. */
  flags: Record<string, string>;
  positional: string[];
}

export interface ArgSpec {
  /** Options that take a value: --name VALUE or --name=VALUE. */
  values?: readonly string[];
  /** Options that take none: --json. `--help` (and -h) is always accepted. */
  booleans?: readonly string[];
  /** One-letter aliases, e.g. { h: 'help' }. */
  short?: Record<string, string>;
}

/**
 * Parses argv against `spec`. A value that is a negative number (`--lon -9.14`) is taken as the
 * value, as a person means it; any other value starting with a dash must be written `--name=-x`.
 */
export function parseArgs(argv: readonly string[], spec: ArgSpec): Parsed {
  const values = new Set(spec.values ?? []);
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = { help: { type: 'boolean', short: 'h' } };
  for (const v of values) options[v] = { type: 'string' };
  for (const b of spec.booleans ?? []) options[b] = { type: 'boolean' };
  for (const [s, long] of Object.entries(spec.short ?? {})) if (options[long]) options[long]!.short = s;
  const args: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const next = argv[i + 1];
    if (a.startsWith('--') && !a.includes('=') && values.has(a.slice(2)) && next !== undefined && /^-\d/.test(next)) {
      args.push(`${a}=${next}`);
      i++;
    } else args.push(a);
  }
  let parsed: ReturnType<typeof nodeParseArgs>;
  try {
    parsed = nodeParseArgs({ args, options, strict: true, allowPositionals: true });
  } catch (e) {
    throw new UsageError(usageMessage(e as Error & { code?: string }));
  }
  const flags: Record<string, string> = {};
  for (const [k, v] of Object.entries(parsed.values)) if (v !== undefined && v !== false) flags[k] = v === true ? 'true' : String(v);
  return { flags, positional: parsed.positionals };
}

/** node:util's messages, in the CLI's own words. */
function usageMessage(e: Error & { code?: string }): string {
  const unknown = /Unknown option '([^']+)'/.exec(e.message);
  if (unknown) return `unknown option ${unknown[1]}`;
  const missing = /Option '(--[\w-]+)(?: <value>)?' argument (missing|is ambiguous)/.exec(e.message);
  if (missing) return `${missing[1]} needs a value`;
  const extra = /Option '(--[\w-]+)' does not take an argument/.exec(e.message);
  if (extra) return `${extra[1]} takes no value`;
  return e.message.split('\n')[0]!;
}

export function required(p: Parsed, name: string): string {
  const v = p.flags[name];
  if (v === undefined || v === '') throw new UsageError(`--${name} is required`);
  return v;
}

export function printJson(v: unknown): void {
  process.stdout.write(JSON.stringify(v, null, 2) + '\n');
}

/** A plain aligned table for people (--json gives machines the data). */
export function printTable(rows: Record<string, unknown>[], columns: string[], write: (s: string) => void = (s) => void process.stdout.write(s)): void {
  const cells = rows.map((r) => columns.map((c) => String(r[c] ?? '')));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i]!.length)));
  const line = (vals: string[]) =>
    vals
      .map((v, i) => v.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  write([line(columns.map((c) => c.toUpperCase())), ...cells.map(line)].join('\n') + '\n');
}
