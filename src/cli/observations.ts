// `reef observations get|latest|upload`: read a device's observations (table, CSV, JSON, NDJSON,
// streamed page by page) and upload a CSV or NDJSON file through the SDK.
//
// Upload is all-or-nothing with respect to the file's content: the whole file is read and checked
// first, with the same rules the service applies (src/core/validate.ts), and nothing is sent unless
// every line is good — a bad line N is reported as "line N: ..." and the service is not touched.
// Only then is the file read a second time and sent in batches (each stored whole or not at all by
// the service). Both passes stream the file, so memory stays flat for any size. After validation the
// only possible failures are the service's or the network's; the summary then tells how much was
// stored, and running the same command again is safe: an observation is keyed by device and
// timestamp, so a repeated one replaces itself rather than doubling.
import fs from 'node:fs';
import readline from 'node:readline';
import { isoTimestamp, temperature } from '../core/validate.ts';
import { ReefError } from '../core/errors.ts';
import type { Observation, UploadObservation } from '../sdk/index.ts';
import { UsageError, parseArgs, printJson, printTable, required } from './args.ts';
import { CliError, connect, describeFailure, flagInt, runClient, writeOut } from './client-config.ts';
import { formatDuration } from '../core/duration.ts';
import { Progress, formatCount } from './progress.ts';

const HELP = `Usage:
  reef observations get --device ID [--from ISO] [--to ISO] [--limit N] [--format table|csv|json|ndjson]
      One device's observations, newest first, following the service's pages. --from is inclusive,
      --to exclusive. Output is streamed: any number of observations in flat memory.
  reef observations latest [--json]
      The latest observation of every device of the solution.
  reef observations upload FILE --device ID [--format csv|ndjson] [--batch-size N] [--concurrency N] [--json]
      Uploads a CSV (header line with a timestamp column; temperature and other columns optional,
      "a.b" headers become nested fields) or NDJSON file (one JSON object per line). The whole file
      is checked first: a bad line is reported by number and nothing is sent. Then it is sent in
      batches (default 10000 observations, 3 requests at a time) with a progress bar when stderr is
      a terminal, and a summary.

Common options:
  --solution NAME   solution to address (default: the one given to reef login, else sandbox)
  --endpoint URL    service to call (default: the one given to reef login; REEF_ENDPOINT)
  --json            machine-readable output (for get: the same as --format json)

Exit codes: 0 ok, 1 failure (bad file, the service refused, or could not be reached), 2 usage.
`;

// ---- reading files ----------------------------------------------------------------------------

const NUMBER = /^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$/;

export class FileError extends CliError {}

/** Splits one CSV record (RFC 4180: quoted fields, "" inside quotes). Returns null while a quote is open. */
function splitCsv(text: string): string[] | null {
  if (!text.includes('"')) return text.split(',');
  const out: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quoted) {
      if (ch === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i++;
        } else quoted = false;
      } else field += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ',') {
      out.push(field);
      field = '';
    } else field += ch;
  }
  if (quoted) return null;
  out.push(field);
  return out;
}

function setPath(o: Record<string, unknown>, pathParts: string[], v: unknown): void {
  let cur = o;
  for (let i = 0; i < pathParts.length - 1; i++) {
    const k = pathParts[i]!;
    const next = cur[k];
    if (typeof next !== 'object' || next === null) cur[k] = {};
    cur = cur[k] as Record<string, unknown>;
  }
  cur[pathParts[pathParts.length - 1]!] = v;
}

/** Checks one observation with the service's own rules; the message names the line. */
function check(o: Record<string, unknown>, where: string): UploadObservation {
  try {
    isoTimestamp(o.timestamp, 'timestamp');
    if (o.temperature !== undefined && o.temperature !== null) o.temperature = temperature(o.temperature, 'temperature');
  } catch (e) {
    if (e instanceof ReefError) throw new FileError(`${where}: ${e.message}`);
    throw e;
  }
  return o as UploadObservation;
}

export type FileFormat = 'csv' | 'ndjson';

export function detectFormat(file: string, given: string | undefined): FileFormat {
  if (given !== undefined) {
    if (given !== 'csv' && given !== 'ndjson') throw new UsageError('--format must be csv or ndjson');
    return given;
  }
  if (/\.csv$/i.test(file)) return 'csv';
  if (/\.(ndjson|jsonl|json)$/i.test(file)) return 'ndjson';
  throw new UsageError(`cannot tell the format of ${file} from its name: give --format csv or --format ndjson`);
}

/**
 * The observations of a CSV or NDJSON file, each checked, streamed; `onBytes` reports how far the
 * file has been read. Throws FileError naming the line at the first bad one.
 */
export async function* readObservations(file: string, format: FileFormat, onBytes?: (n: number) => void): AsyncGenerator<UploadObservation> {
  let stream: fs.ReadStream;
  try {
    await fs.promises.access(file, fs.constants.R_OK);
    stream = fs.createReadStream(file, { highWaterMark: 1 << 20 });
  } catch (e) {
    throw new FileError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  const lines = readline.createInterface({ input: stream, crlfDelay: Infinity });
  let lineNo = 0;
  let header: { name: string; path: string[] }[] | null = null;
  let pending = '';
  let pendingLine = 0;
  try {
    for await (let line of lines) {
      lineNo++;
      if ((lineNo & 0x3fff) === 0) onBytes?.(stream.bytesRead);
      if (lineNo === 1 && line.charCodeAt(0) === 0xfeff) line = line.slice(1);
      if (format === 'ndjson') {
        if (!line.trim()) continue;
        let o: unknown;
        try {
          o = JSON.parse(line);
        } catch (e) {
          throw new FileError(`${file} line ${lineNo}: not valid JSON (${(e as Error).message})`);
        }
        if (typeof o !== 'object' || o === null || Array.isArray(o)) throw new FileError(`${file} line ${lineNo}: must be a JSON object with a timestamp`);
        yield check(o as Record<string, unknown>, `${file} line ${lineNo}`);
        continue;
      }
      // CSV: a quoted field may span lines; the record is reported by the line it starts on.
      let text = line;
      let at = lineNo;
      if (pending) {
        text = pending + '\n' + line;
        at = pendingLine;
      }
      const fields = splitCsv(text);
      if (fields === null) {
        if (!pending) pendingLine = lineNo;
        pending = text;
        continue;
      }
      pending = '';
      if (!text.trim()) continue;
      if (!header) {
        header = fields.map((f) => {
          const name = f.trim();
          return { name, path: name.split('.') };
        });
        const names = header.map((h) => h.name);
        if (!names.includes('timestamp')) throw new FileError(`${file} line ${at}: the header must name a timestamp column (found: ${names.join(', ')})`);
        const empty = names.findIndex((n) => !n || n.split('.').some((p) => !p));
        if (empty >= 0) throw new FileError(`${file} line ${at}: column ${empty + 1} of the header has no name`);
        const dup = names.find((n, i) => names.indexOf(n) !== i);
        if (dup) throw new FileError(`${file} line ${at}: column ${dup} appears twice in the header`);
        continue;
      }
      if (fields.length !== header.length) throw new FileError(`${file} line ${at}: expected ${header.length} fields as in the header, found ${fields.length}`);
      const o: Record<string, unknown> = {};
      for (let i = 0; i < fields.length; i++) {
        const v = fields[i]!;
        if (v === '') continue;
        const h = header[i]!;
        if (h.name === 'timestamp') o.timestamp = v.trim();
        else if (h.name === 'temperature') o.temperature = v;
        else {
          const value = NUMBER.test(v) ? Number(v) : v === 'true' ? true : v === 'false' ? false : v;
          if (h.path.length === 1) o[h.name] = value;
          else setPath(o, h.path, value);
        }
      }
      if (o.timestamp === undefined) throw new FileError(`${file} line ${at}: timestamp is empty`);
      yield check(o, `${file} line ${at}`);
    }
    if (pending) throw new FileError(`${file} line ${pendingLine}: a quoted field is never closed`);
    if (format === 'csv' && !header) throw new FileError(`${file} is empty: a CSV file needs a header line naming a timestamp column`);
    onBytes?.(stream.bytesRead);
  } finally {
    lines.close();
    stream.destroy();
  }
}

// ---- writing observations ------------------------------------------------------------------------

/** Dotted-path columns of an observation: nested objects are flattened ("accelerometer.x"). */
function flatten(o: Record<string, unknown>, prefix = '', out: Record<string, unknown> = {}): Record<string, unknown> {
  for (const [k, v] of Object.entries(o)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v && typeof v === 'object' && !Array.isArray(v)) flatten(v as Record<string, unknown>, key, out);
    else out[key] = v;
  }
  return out;
}

function columnsOf(sample: Observation[]): string[] {
  const seen = new Set<string>();
  for (const o of sample) for (const k of Object.keys(flatten(o))) seen.add(k);
  seen.delete('timestamp');
  seen.delete('temperature');
  return ['timestamp', 'temperature', ...[...seen].sort()];
}

function csvCell(v: unknown): string {
  if (v === undefined || v === null) return '';
  const s = typeof v === 'object' ? JSON.stringify(v) : String(v);
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

function tableCell(v: unknown, width: number): string {
  const s = v === undefined || v === null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v);
  return s.padEnd(width);
}

// ---- commands ------------------------------------------------------------------------------------

async function get(args: ReturnType<typeof parseArgs>): Promise<number> {
  const deviceId = required(args, 'device');
  let format = args.flags.format ?? (args.flags.json === 'true' ? 'json' : 'table');
  if (!['table', 'csv', 'json', 'ndjson'].includes(format)) throw new UsageError('--format must be table, csv, json or ndjson');
  if (args.flags.json === 'true' && args.flags.format && format !== 'json') throw new UsageError('--json and --format are exclusive');
  format = format as 'table' | 'csv' | 'json' | 'ndjson';
  const limit = flagInt(args, 'limit', 1, Number.MAX_SAFE_INTEGER);
  for (const f of ['from', 'to'] as const) {
    const v = args.flags[f];
    if (v === undefined) continue;
    try {
      isoTimestamp(v, `--${f}`);
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
  }
  return runClient('observations', async () => {
    const { client } = connect(process.env, args);
    const pages = client.observationPages(deviceId, {
      ...(args.flags.from ? { from: args.flags.from } : {}),
      ...(args.flags.to ? { to: args.flags.to } : {}),
      ...(limit ? { limit } : {}),
      pageSize: 5000,
    });
    let columns: string[] | null = null;
    let widths: number[] = [];
    let count = 0;
    if (format === 'json') await writeOut('[');
    for await (const page of pages) {
      if (!columns) {
        columns = columnsOf(page.observations.slice(0, 100));
        if (format === 'csv') await writeOut(columns.join(',') + '\n');
        if (format === 'table') {
          const flat = page.observations.slice(0, 100).map((o) => flatten(o));
          widths = columns.map((c) => Math.max(c.length, ...flat.map((f) => tableCell(f[c], 0).length)));
          if (page.observations.length)
            await writeOut(
              columns
                .map((c, i) => c.toUpperCase().padEnd(widths[i]!))
                .join('  ')
                .trimEnd() + '\n',
            );
        }
      }
      let chunk = '';
      for (const o of page.observations) {
        if (format === 'ndjson') chunk += JSON.stringify(o) + '\n';
        else if (format === 'json') chunk += (count ? ',\n' : '\n') + JSON.stringify(o);
        else {
          const f = flatten(o);
          chunk +=
            format === 'csv'
              ? columns.map((c) => csvCell(f[c])).join(',') + '\n'
              : columns
                  .map((c, i) => tableCell(f[c], widths[i]!))
                  .join('  ')
                  .trimEnd() + '\n';
        }
        count++;
      }
      await writeOut(chunk);
    }
    if (format === 'json') await writeOut(count ? '\n]\n' : ']\n');
    if (format === 'table' && count === 0) process.stderr.write('no observations\n');
    return 0;
  });
}

async function latest(args: ReturnType<typeof parseArgs>): Promise<number> {
  return runClient('observations', async () => {
    const { client } = connect(process.env, args);
    const groups = await client.latestObservations();
    if (args.flags.json === 'true') printJson(groups);
    else if (!groups.length) process.stdout.write('no observations\n');
    else {
      printTable(
        groups.map((g) => ({ deviceId: g.deviceId, timestamp: g.observations[0]?.timestamp ?? '', temperature: g.observations[0]?.temperature ?? '' })),
        ['deviceId', 'timestamp', 'temperature'],
      );
    }
    return 0;
  });
}

async function upload(args: ReturnType<typeof parseArgs>): Promise<number> {
  if (args.positional.length !== 1) throw new UsageError('upload needs one FILE');
  const file = args.positional[0]!;
  const deviceId = required(args, 'device');
  const format = detectFormat(file, args.flags.format);
  const batchSize = flagInt(args, 'batch-size', 1, 1_000_000) ?? 10_000;
  const concurrency = flagInt(args, 'concurrency', 1, 64) ?? 3;
  const json = args.flags.json === 'true';

  return runClient('observations', async () => {
    const { client } = connect(process.env, args);
    // The device (and the login) first: a wrong id fails before a long file is read.
    await client.getDevice(deviceId);

    let size = 0;
    try {
      size = fs.statSync(file).size;
    } catch (e) {
      throw new FileError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
    const started = Date.now();
    const progress = new Progress('checking ', size, 'bytes');

    // Pass 1: every line checked; nothing is sent.
    let total = 0;
    for await (const _ of readObservations(file, format, (n) => progress.update(n))) total++;
    progress.update(size, true);
    if (total === 0) {
      progress.finish();
      throw new FileError(`${file} holds no observations`);
    }
    const checkedAt = fs.statSync(file);
    const checkSeconds = (Date.now() - started) / 1000;

    // Pass 2: the same reading, sent in batches.
    progress.phase('uploading', total, 'obs');
    const upStart = Date.now();
    let stored = 0;
    let failure: unknown = null;
    let batches = 0;
    try {
      const r = await client.uploadObservations(deviceId, readObservations(file, format), {
        batchSize,
        concurrency,
        onProgress: (p) => {
          stored = p.stored;
          batches = p.batches;
          progress.update(p.stored);
        },
      });
      stored = r.stored;
      batches = r.batches;
    } catch (e) {
      failure = e;
    }
    progress.update(stored, true);
    progress.finish();
    const after = fs.statSync(file);
    if (after.size !== checkedAt.size || after.mtimeMs !== checkedAt.mtimeMs) {
      failure ??= new CliError(`${file} changed while it was being uploaded`);
    }
    const uploadSeconds = (Date.now() - upStart) / 1000;
    const summary = {
      file,
      deviceId: deviceId.toLowerCase(),
      format,
      observations: total,
      stored,
      batches,
      complete: !failure && stored === total,
      checkSeconds: Math.round(checkSeconds * 1000) / 1000,
      uploadSeconds: Math.round(uploadSeconds * 1000) / 1000,
      observationsPerSecond: uploadSeconds > 0 ? Math.round(stored / uploadSeconds) : stored,
    };
    if (failure) {
      if (json) printJson({ ...summary, error: failure instanceof Error ? failure.message : String(failure) });
      const base = describeFailure(failure) ?? (failure instanceof Error ? failure.message : String(failure));
      throw new CliError(`${base}; ${formatCount(stored)} of ${formatCount(total)} observations were stored before the failure (running the same upload again is safe)`);
    }
    if (json) printJson(summary);
    else {
      process.stdout.write(
        `uploaded ${formatCount(stored)} observations from ${file} to device ${summary.deviceId} in ${batches} batches: ` +
          `${formatDuration(uploadSeconds * 1000)} (${formatCount(summary.observationsPerSecond)} obs/s), checked in ${formatDuration(checkSeconds * 1000)}\n`,
      );
    }
    return 0;
  });
}

export async function run(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  const args = parseArgs(rest, { values: ['device', 'from', 'to', 'limit', 'format', 'batch-size', 'concurrency', 'solution', 'endpoint'], booleans: ['json'] });
  if (!sub || sub === '--help' || sub === '-h' || args.flags.help) {
    process.stdout.write(HELP);
    return sub ? 0 : 2;
  }
  switch (sub) {
    case 'get':
      if (args.positional.length) throw new UsageError(`unexpected argument ${JSON.stringify(args.positional[0])}`);
      return get(args);
    case 'latest':
      if (args.positional.length) throw new UsageError(`unexpected argument ${JSON.stringify(args.positional[0])}`);
      return latest(args);
    case 'upload':
      return upload(args);
    default:
      throw new UsageError(`unknown subcommand ${JSON.stringify(sub)}\n${HELP}`);
  }
}
