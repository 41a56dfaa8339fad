// `reef login` and `reef logout`: remember which service and client id the client commands use.
// The secret is checked against the service first (a token is requested), then kept in a file only
// the user can read (client-config.ts) — or, with --no-store-secret, nowhere.
import fs from 'node:fs';
import { ReefClient } from '../sdk/index.ts';
import { UsageError, parseArgs, printJson } from './args.ts';
import { CliError, configDir, forget, normalizeEndpoint, readConfig, readSecret, runClient, secretFile, writeConfig, writeSecret, type Env } from './client-config.ts';

const HELP = `Usage:
  reef login --endpoint URL --client-id ID [--solution NAME] [--no-store-secret] [--json]
  reef login --show [--json]          what is stored, and where
  reef logout                         forget the stored endpoint, client id and secret

The client secret is read from REEF_CLIENT_SECRET, else from standard input when it is not a
terminal, else asked for without echo. It is checked with the service before anything is stored,
then kept in credentials.json (mode 0600) beside config.json in $REEF_CONFIG_DIR
(default $XDG_CONFIG_HOME/reef or ~/.config/reef). --no-store-secret keeps it nowhere: set
REEF_CLIENT_SECRET for each later command instead.

Exit codes: 0 ok, 1 the service refused or could not be reached, 2 usage.
`;

const LOGOUT_HELP = `Usage: reef logout [--json]

Removes config.json and credentials.json from the reef configuration directory.
`;

async function readHidden(prompt: string): Promise<string> {
  const stdin = process.stdin;
  process.stderr.write(prompt);
  stdin.setRawMode(true);
  stdin.resume();
  stdin.setEncoding('utf8');
  return new Promise((resolve, reject) => {
    let value = '';
    const onData = (chunk: string) => {
      for (const ch of chunk) {
        if (ch === '\r' || ch === '\n' || ch === '\u0004') {
          done();
          process.stderr.write('\n');
          resolve(value);
          return;
        }
        if (ch === '\u0003') {
          done();
          process.stderr.write('\n');
          reject(new CliError('cancelled'));
          return;
        }
        if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
        else value += ch;
      }
    };
    const done = () => {
      stdin.off('data', onData);
      stdin.setRawMode(false);
      stdin.pause();
    };
    stdin.on('data', onData);
  });
}

async function readStdin(): Promise<string> {
  let text = '';
  for await (const chunk of process.stdin) {
    text += chunk;
    if (text.length > 4096) break;
  }
  return text.split(/\r?\n/)[0]!.trim();
}

async function obtainSecret(env: Env): Promise<string> {
  if (env.REEF_CLIENT_SECRET) return env.REEF_CLIENT_SECRET;
  const secret = process.stdin.isTTY ? await readHidden('client secret: ') : await readStdin();
  if (!secret) throw new UsageError('no client secret: pipe it on standard input or set REEF_CLIENT_SECRET');
  return secret;
}

function show(env: Env, json: boolean): number {
  const c = readConfig(env);
  let secretStored = false;
  try {
    secretStored = c.clientId ? readSecret(env, c.clientId) !== null : false;
  } catch {
    secretStored = true;
  }
  const out = { endpoint: c.endpoint ?? null, clientId: c.clientId ?? null, solution: c.solution ?? 'sandbox', secretStored, configDir: configDir(env) };
  if (json) printJson(out);
  else if (!c.endpoint) process.stdout.write(`not logged in (configuration directory: ${out.configDir})\n`);
  else {
    process.stdout.write(
      `endpoint:  ${out.endpoint}\nclient id: ${out.clientId}\nsolution:  ${out.solution}\nsecret:    ${secretStored ? `stored in ${secretFile(env)} (mode 0600)` : 'not stored (set REEF_CLIENT_SECRET)'}\n`,
    );
  }
  return 0;
}

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, { values: ['endpoint', 'client-id', 'solution'], booleans: ['no-store-secret', 'json', 'show'] });
  if (args.flags.help) {
    process.stdout.write(HELP);
    return 0;
  }
  if (args.positional.length) throw new UsageError(`unexpected argument ${JSON.stringify(args.positional[0])}\n${HELP}`);
  const env = process.env;
  const json = args.flags.json === 'true';
  return runClient('login', async () => {
    if (args.flags.show === 'true') return show(env, json);
    const stored = readConfig(env);
    const endpointRaw = args.flags.endpoint ?? env.REEF_ENDPOINT ?? stored.endpoint;
    const clientId = args.flags['client-id'] ?? env.REEF_CLIENT_ID ?? stored.clientId;
    if (!endpointRaw) throw new UsageError('--endpoint is required');
    if (!clientId) throw new UsageError('--client-id is required');
    const endpoint = normalizeEndpoint(endpointRaw);
    const solution = args.flags.solution && args.flags.solution !== 'true' ? args.flags.solution : (stored.solution ?? 'sandbox');
    const clientSecret = await obtainSecret(env);

    // Nothing is stored unless the service accepts the credentials.
    const client = new ReefClient({ endpoint, solution, credentials: { clientId, clientSecret } });
    await client.getToken();
    await client.listDevices();

    const storeSecret = args.flags['no-store-secret'] !== 'true';
    const cfg = writeConfig(env, { endpoint, clientId, solution });
    let secretPath: string | null = null;
    if (storeSecret) secretPath = writeSecret(env, clientId, clientSecret);
    else fs.rmSync(secretFile(env), { force: true });
    if (json) printJson({ endpoint, clientId, solution, configFile: cfg, secretFile: secretPath });
    else {
      process.stdout.write(`logged in to ${endpoint} as ${clientId} (solution ${solution})\n`);
      process.stdout.write(secretPath ? `secret stored in ${secretPath}, readable by you only\n` : 'secret not stored: set REEF_CLIENT_SECRET for later commands\n');
    }
    return 0;
  });
}

export async function runLogout(argv: string[]): Promise<number> {
  const args = parseArgs(argv, { booleans: ['json'] });
  if (args.flags.help) {
    process.stdout.write(LOGOUT_HELP);
    return 0;
  }
  if (args.positional.length) throw new UsageError(`unexpected argument ${JSON.stringify(args.positional[0])}`);
  return runClient('logout', async () => {
    const removed = forget(process.env);
    if (args.flags.json === 'true') printJson({ removed });
    else process.stdout.write(removed.length ? `forgot ${removed.join(' and ')}\n` : `nothing stored in ${configDir(process.env)}\n`);
    return 0;
  });
}
