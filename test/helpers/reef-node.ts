// Real `reef serve` processes for the scale-out and failover tests (e2e/scale, e2e/mqtt): each a
// child process on an ephemeral port, all on one PostgreSQL database. The port is read from the line the server prints when ready.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');

export interface ReefNode {
  url: string;
  pid: number;
  child: ChildProcess;
  /** Everything the process wrote, for failure messages. */
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  hasExited(): boolean;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

export async function startNode(databaseUrl: string, env: Record<string, string> = {}): Promise<ReefNode> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-node-'));
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'reef.js'), 'serve'], {
    cwd: ROOT,
    env: {
      ...process.env,
      REEF_DATABASE_URL: databaseUrl,
      REEF_HTTP_HOST: '127.0.0.1',
      REEF_HTTP_PORT: '0',
      REEF_GATEWAY: 'false',
      REEF_MQTT_PORT: '0',
      REEF_DEMO: 'false',
      REEF_LOG_LEVEL: 'warn',
      REEF_DATA_DIR: dataDir,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let done = false;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => {
      done = true;
      fs.rmSync(dataDir, { recursive: true, force: true });
      resolve({ code, signal });
    });
  });
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (b: Buffer) => {
      out += b.toString();
      const m = /Reef is running at (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) resolve(m[1]!);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
    void exited.then((x) => reject(new Error(`reef serve exited (${x.code ?? x.signal}) before listening:\n${out}`)));
  });
  return {
    url,
    pid: child.pid!,
    child,
    output: () => out,
    exited,
    hasExited: () => done,
    async kill(signal = 'SIGTERM') {
      if (done) return;
      child.kill(signal);
      await exited;
    },
  };
}

// The shared waitFor (test/helpers/wait.ts), re-exported for the tests that start nodes.
export { waitFor } from './wait.ts';

export async function json<T = any>(r: Response): Promise<T> {
  const t = await r.text();
  try {
    return JSON.parse(t) as T;
  } catch {
    throw new Error(`not JSON (${r.status}): ${t}`);
  }
}
