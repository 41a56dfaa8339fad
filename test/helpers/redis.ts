// A throw-away Redis for a test: Debian's redis-server (package redis-server) as a child process on
// a free loopback port, keeping nothing on disk, killed at the end. Tests never use 6379.
import { spawn, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { freePort } from './ports.ts';

export interface RedisServer {
  port: number;
  /** redis://127.0.0.1:<port>/0 */
  url: string;
  /** Kills the server at once (SIGKILL: an outage, nothing said to the clients). */
  kill(): Promise<void>;
  /** Starts the server again on the same port (empty: it keeps nothing). */
  restart(): Promise<void>;
  /** A client of this server, for the test to look inside (closed by `stop`). */
  client(): Redis;
  /** Kills the server and closes the clients. */
  stop(): Promise<void>;
}

function run(port: number): Promise<{ child: ChildProcess; exited: Promise<void> }> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  let out = '';
  return new Promise((resolve, reject) => {
    child.once('error', (e) => reject(new Error(`redis-server did not start (apt install redis-server): ${e.message}`)));
    const onData = (b: Buffer) => {
      out += b.toString();
      if (/Ready to accept connections/.test(out)) resolve({ child, exited });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    void exited.then(() => reject(new Error(`redis-server exited before it was ready:\n${out}`)));
  });
}

export async function startRedis(): Promise<RedisServer> {
  const port = await freePort();
  let current = await run(port);
  const clients: Redis[] = [];
  const kill = async () => {
    if (current.child.exitCode === null && current.child.signalCode === null) current.child.kill('SIGKILL');
    await current.exited;
  };
  return {
    port,
    url: `redis://127.0.0.1:${port}/0`,
    kill,
    async restart() {
      await kill();
      current = await run(port);
    },
    client() {
      const c = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 });
      c.on('error', () => undefined);
      clients.push(c);
      return c;
    },
    async stop() {
      for (const c of clients) c.disconnect();
      await kill();
    },
  };
}
