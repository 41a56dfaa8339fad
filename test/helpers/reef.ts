// The one way tests run the `reef` command: bin/reef.js in a child process, as a user runs it.
// The client-command variables (REEF_ENDPOINT, REEF_CLIENT_*, REEF_TOKEN, REEF_SOLUTION) of the
// environment running the tests are dropped unless the test gives them, so nothing leaks in.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../bin/reef.js');

export interface ReefResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

const CLIENT_VARS = ['REEF_ENDPOINT', 'REEF_CLIENT_ID', 'REEF_CLIENT_SECRET', 'REEF_TOKEN', 'REEF_SOLUTION'];

export function reef(args: string[], opts: { env?: Record<string, string | undefined>; input?: string } = {}): Promise<ReefResult> {
  return new Promise((resolve, reject) => {
    const env: Record<string, string | undefined> = { ...process.env, REEF_LOG_LEVEL: 'silent', ...opts.env };
    for (const k of CLIENT_VARS) if (!(opts.env && k in opts.env)) delete env[k];
    const child = spawn(process.execPath, [BIN, ...args], { env: env as NodeJS.ProcessEnv, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(opts.input ?? '');
  });
}

export interface ServingReef {
  child: import('node:child_process').ChildProcess;
  /** Everything the process printed so far, stdout and stderr together. */
  output(): string;
  /** SIGTERM, and waits for the exit. */
  stop(): Promise<void>;
}

/**
 * `reef serve ARGS` as a user starts it, resolved once its output matches `until` (the banner line
 * the test needs); rejected with the output if it exits first.
 */
export async function serveReef(args: string[], opts: { until: RegExp; env?: Record<string, string> }): Promise<ServingReef> {
  const child = spawn(process.execPath, [BIN, 'serve', ...args], {
    cwd: path.dirname(path.dirname(BIN)),
    env: { ...process.env, REEF_LOG_LEVEL: 'warn', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (d: Buffer) => {
      out += d;
      if (opts.until.test(out)) resolve();
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => reject(new Error(`reef serve exited (${code}):\n${out}`)));
  });
  return {
    child,
    output: () => out,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
