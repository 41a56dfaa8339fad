// Where the client commands (login, devices, observations, coap) find the service and their
// credentials, and how they report failures.
//
// `reef login` keeps the endpoint, client id and solution in <dir>/config.json and the client
// secret, unless told not to, in <dir>/credentials.json, a file readable by the user alone (0600 in
// a 0700 directory). <dir> is $REEF_CONFIG_DIR, else $XDG_CONFIG_HOME/reef, else ~/.config/reef.
// REEF_ENDPOINT, REEF_CLIENT_ID, REEF_CLIENT_SECRET, REEF_TOKEN and REEF_SOLUTION override the files;
// --endpoint and --solution override both. The environment is read by the command's run() and passed
// in, as the rest of the CLI does.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApiError, NetworkError, ReefClient } from '../sdk/index.ts';
import { UsageError, type Parsed } from './args.ts';

export type Env = Record<string, string | undefined>;

export interface ClientConfig {
  endpoint?: string;
  clientId?: string;
  solution?: string;
}

/** A failure to report as one line and exit 1. */
export class CliError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CliError';
  }
}

export function configDir(env: Env): string {
  if (env.REEF_CONFIG_DIR) return path.resolve(env.REEF_CONFIG_DIR);
  const base = env.XDG_CONFIG_HOME ? path.resolve(env.XDG_CONFIG_HOME) : path.join(env.HOME || os.homedir(), '.config');
  return path.join(base, 'reef');
}

export const configFile = (env: Env) => path.join(configDir(env), 'config.json');
export const secretFile = (env: Env) => path.join(configDir(env), 'credentials.json');

export function readConfig(env: Env): ClientConfig {
  const file = configFile(env);
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new CliError(`cannot read ${file}: ${(e as Error).message}`);
  }
  try {
    const c = JSON.parse(text) as ClientConfig;
    return c && typeof c === 'object' ? c : {};
  } catch {
    throw new CliError(`${file} is not valid JSON: run reef login again`);
  }
}

/** Writes a file only its owner can read, atomically (a temp file renamed over the old one). */
function writePrivate(file: string, text: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, text, { mode: 0o600 });
  fs.chmodSync(tmp, 0o600);
  fs.renameSync(tmp, file);
}

export function writeConfig(env: Env, c: ClientConfig): string {
  const file = configFile(env);
  writePrivate(file, JSON.stringify(c, null, 2) + '\n');
  return file;
}

export function writeSecret(env: Env, clientId: string, clientSecret: string): string {
  const file = secretFile(env);
  writePrivate(file, JSON.stringify({ clientId, clientSecret }, null, 2) + '\n');
  return file;
}

/** Removes what login stored; returns the files removed. */
export function forget(env: Env): string[] {
  const removed: string[] = [];
  for (const f of [secretFile(env), configFile(env)]) {
    try {
      fs.unlinkSync(f);
      removed.push(f);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
  }
  return removed;
}

/** The stored secret for this client id, or null. A file others can read is refused, as ssh does. */
export function readSecret(env: Env, clientId: string): string | null {
  const file = secretFile(env);
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
  } catch {
    return null;
  }
  if (process.platform !== 'win32' && (st.mode & 0o077) !== 0) {
    throw new CliError(`${file} is readable by others (mode ${(st.mode & 0o777).toString(8)}): run chmod 600 ${file}, or reef login again`);
  }
  try {
    const c = JSON.parse(fs.readFileSync(file, 'utf8')) as { clientId?: string; clientSecret?: string };
    return c.clientId?.toLowerCase() === clientId.toLowerCase() && typeof c.clientSecret === 'string' ? c.clientSecret : null;
  } catch {
    return null;
  }
}

export interface Connection {
  endpoint: string;
  solution: string;
  clientId: string | null;
  /** Where the secret came from, for messages. */
  auth: 'token' | 'env' | 'file';
}

export function normalizeEndpoint(v: string): string {
  const e = v.trim().replace(/\/+$/, '');
  let u: URL;
  try {
    u = new URL(e);
  } catch {
    throw new UsageError(`--endpoint must be a URL such as http://127.0.0.1:8080, got ${JSON.stringify(v)}`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new UsageError('--endpoint must be an http:// or https:// URL');
  return e;
}

/** The SDK client for a client command: flags, then environment, then what login stored. */
export function connect(env: Env, args: Parsed): { client: ReefClient; conn: Connection } {
  const stored = readConfig(env);
  const endpointRaw = args.flags.endpoint ?? env.REEF_ENDPOINT ?? stored.endpoint;
  if (!endpointRaw) throw new CliError('not logged in: run reef login --endpoint URL --client-id ID (or set REEF_ENDPOINT)');
  const endpoint = normalizeEndpoint(endpointRaw);
  const solution = args.flags.solution ? args.flags.solution : env.REEF_SOLUTION || stored.solution || 'sandbox';
  if (env.REEF_TOKEN) {
    return { client: new ReefClient({ endpoint, solution, token: env.REEF_TOKEN }), conn: { endpoint, solution, clientId: null, auth: 'token' } };
  }
  const clientId = env.REEF_CLIENT_ID || stored.clientId;
  if (!clientId) throw new CliError('no client id: run reef login, or set REEF_CLIENT_ID and REEF_CLIENT_SECRET');
  let secret = env.REEF_CLIENT_SECRET;
  const auth: Connection['auth'] = secret ? 'env' : 'file';
  secret ||= readSecret(env, clientId) ?? undefined;
  if (!secret) throw new CliError(`no client secret stored for ${clientId}: set REEF_CLIENT_SECRET, or run reef login to store it`);
  return {
    client: new ReefClient({ endpoint, solution, credentials: { clientId, clientSecret: secret } }),
    conn: { endpoint, solution, clientId, auth },
  };
}

export function flagInt(args: Parsed, name: string, min: number, max: number): number | undefined {
  const v = args.flags[name];
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) throw new UsageError(`--${name} must be a whole number from ${min} to ${max}`);
  return Number(v);
}

/** One line for any failure of a client command (stderr), and its exit code. */
export function describeFailure(e: unknown): string | null {
  if (e instanceof ApiError) {
    const extra = [e.code, ...(e.field ? [`field ${e.field}`] : []), `HTTP ${e.status}`, ...(e.requestId ? [`request id ${e.requestId}`] : [])].join(', ');
    return `${e.message} (${extra})`;
  }
  if (e instanceof NetworkError) return `cannot reach the service: ${e.message}`;
  if (e instanceof CliError) return e.message;
  return null;
}

/** Runs a client command: usage errors go up (exit 2); everything else becomes one line and exit 1. */
export async function runClient(cmd: string, f: () => Promise<number>, err: (s: string) => void = (s) => void process.stderr.write(s)): Promise<number> {
  try {
    return await f();
  } catch (e) {
    if (e instanceof UsageError) throw e;
    const line = describeFailure(e) ?? (e as Error)?.message ?? String(e);
    err(`reef ${cmd}: ${line.replace(/\s*\n\s*/g, ' ')}\n`);
    return 1;
  }
}

let pipeGuarded = false;

/** Writes to stdout, waiting when the pipe is full, so a large export keeps memory flat. */
export function writeOut(text: string): Promise<void> | void {
  if (!pipeGuarded) {
    pipeGuarded = true;
    // `reef observations get … | head`: the reader has all it wants, which is success.
    process.stdout.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'EPIPE') process.exit(0);
      throw e;
    });
  }
  if (process.stdout.write(text)) return;
  return new Promise((resolve) => process.stdout.once('drain', resolve));
}
