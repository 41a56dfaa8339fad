// bench/soak.ts's `reef serve` processes: N nodes on one store, each on its own HTTP and CoAP ports
// and data directory, killed (SIGKILL) and started again on the same ports; RSS read from /proc.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, freePort } from './lib.ts';

export interface SoakNode {
  readonly index: number;
  readonly base: string;
  readonly coapPort: number;
  /** Its standard output since it was last started. */
  out: string;
  child: ChildProcess | null;
  /** Times it was killed and started again. */
  restarts: number;
}

export class SoakNodes {
  readonly nodes: SoakNode[] = [];
  private readonly dirs: string[] = [];

  private constructor(private readonly env: Record<string, string>) {}

  /** N nodes with their ports chosen, none started. `env`: what every node gets besides its ports and data directory. */
  static async make(n: number, env: Record<string, string>): Promise<SoakNodes> {
    const s = new SoakNodes(env);
    for (let i = 0; i < n; i++) {
      const http = await freePort('tcp');
      s.nodes.push({ index: i, base: `http://127.0.0.1:${http}`, coapPort: await freePort('udp'), out: '', child: null, restarts: 0 });
      s.dirs.push(fs.mkdtempSync(path.join(os.tmpdir(), `reef-soak-${i}-`)));
    }
    return s;
  }

  /** Starts node i; resolves once it serves ("Reef is running at"). */
  async start(i: number): Promise<void> {
    const n = this.nodes[i]!;
    n.out = '';
    const child = spawn(process.execPath, [BIN, 'serve', '--port', new URL(n.base).port, '--gateway-port', String(n.coapPort)], {
      env: { ...process.env, REEF_LOG_LEVEL: 'error', REEF_DATA_DIR: this.dirs[i]!, REEF_MQTT_PORT: '0', ...this.env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    n.child = child;
    child.stdout!.on('data', (c) => (n.out += c));
    while (!/Reef is running at/.test(n.out)) {
      if (child.exitCode !== null) throw new Error(`reef serve (node ${i}) exited early`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** SIGKILL to node i; resolves once it has exited. */
  async kill(i: number): Promise<void> {
    const child = this.nodes[i]!.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  }

  /** Node i killed and started again on the same ports. */
  async restart(i: number): Promise<void> {
    await this.kill(i);
    this.nodes[i]!.restarts++;
    await this.start(i);
  }

  /** Resident set size of node i's process now, bytes (0 when it is not running). */
  rss(i: number): number {
    const pid = this.nodes[i]!.child?.pid;
    if (!pid) return 0;
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
      return m ? Number(m[1]) * 1024 : 0;
    } catch {
      return 0;
    }
  }

  /** SIGTERM to every node, their data directories removed. */
  stop(): void {
    for (const n of this.nodes) n.child?.kill('SIGTERM');
    for (const d of this.dirs) fs.rmSync(d, { recursive: true, force: true });
  }
}
