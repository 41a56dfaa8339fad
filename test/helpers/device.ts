// Test helpers for kits over real UDP on 127.0.0.1 (ephemeral ports).
import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type CoapMessage, parseMessage, serializeMessage } from '../../src/coap/index.ts';
import { loadDeviceConfig, type DeviceConfig } from '../../src/device/config.ts';
import { openSerialPort, type ByteStream } from '../../src/device/hdlc/transport.ts';
import { Kit } from '../../src/device/kit.ts';
import { waitFor as shared } from './wait.ts';

/** A kit on an ephemeral port; it lets direct peers in (the tests talk to it straight) unless `over` says otherwise. */
export async function startKit(over: Partial<DeviceConfig> = {}): Promise<Kit> {
  const cfg = loadDeviceConfig({ port: 0, monitorWindowMs: 0, logLevel: 0, periodMs: 100, uartTimeoutMs: 500, allowDirect: true, ...over });
  const kit = new Kit(cfg);
  await kit.start();
  return kit;
}

/** A raw UDP socket that collects every datagram it receives. */
export class RawClient {
  readonly socket = dgram.createSocket('udp4');
  readonly inbox: Buffer[] = [];
  private waiters: Array<() => void> = [];
  static async open(): Promise<RawClient> {
    const c = new RawClient();
    await new Promise<void>((r) => c.socket.bind(0, '127.0.0.1', () => r()));
    c.socket.on('message', (b) => {
      c.inbox.push(b);
      for (const w of c.waiters.splice(0)) w();
    });
    return c;
  }
  get port(): number {
    return this.socket.address().port;
  }
  send(port: number, data: Buffer | CoapMessage): void {
    this.socket.send(Buffer.isBuffer(data) ? data : serializeMessage(data), port, '127.0.0.1');
  }
  /** Next datagram (removed from the inbox); rejects after `ms` of waiting. */
  async next(ms = 5000): Promise<Buffer> {
    const deadline = Date.now() + ms;
    while (this.inbox.length === 0) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error('no datagram arrived');
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
    return this.inbox.shift()!;
  }
  async nextMessage(ms = 5000): Promise<CoapMessage> {
    return parseMessage(await this.next(ms));
  }
  /** Waits for a message matching `pred`, discarding others. */
  async until(pred: (m: CoapMessage) => boolean, ms = 5000): Promise<CoapMessage> {
    const deadline = Date.now() + ms;
    for (;;) {
      const m = await this.nextMessage(Math.max(1, deadline - Date.now()));
      if (pred(m)) return m;
    }
  }
  /** Resolves true when nothing arrives for `ms` (used to show something is NOT sent). */
  async quiet(ms: number): Promise<boolean> {
    const n = this.inbox.length;
    await new Promise((r) => setTimeout(r, ms));
    return this.inbox.length === n;
  }
  close(): void {
    this.socket.close();
  }
}

/** The shared waitFor (test/helpers/wait.ts) in the argument order of the device tests. */
export async function waitFor(cond: () => boolean, ms = 5000, what = 'condition'): Promise<void> {
  await shared(what, cond, ms, 10);
}

/** Two linked ptys from socat (raw, no echo): what one end writes the other reads. */
export async function ptyPair(): Promise<{ a: string; b: string; close(): void }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-pty-'));
  const a = path.join(dir, 'a');
  const b = path.join(dir, 'b');
  const socat = spawn('socat', [`pty,raw,echo=0,link=${a}`, `pty,raw,echo=0,link=${b}`], { stdio: 'ignore' });
  await waitFor(() => fs.existsSync(a) && fs.existsSync(b), 5000, 'pty links');
  return {
    a,
    b,
    close() {
      socat.kill();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A terminal on a serial path: sends lines, collects what comes back. */
export class Terminal {
  text = '';
  private constructor(private readonly port: ByteStream) {
    port.onData((d) => (this.text += d.toString('latin1')));
  }
  static async open(file: string): Promise<Terminal> {
    return new Terminal(openSerialPort(file));
  }
  write(bytes: Buffer | string): void {
    this.port.write(Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes, 'latin1'));
  }
  /** Sends a command line and resolves with the answer up to the next prompt (CRLF lines, prompt removed). */
  async command(line: string, ms = 15_000): Promise<string> {
    const start = this.text.length;
    this.write(line + '\r');
    await waitFor(() => this.text.slice(start).endsWith('\r\n> '), ms, `the answer to ${JSON.stringify(line)}`);
    return this.text.slice(start, -2).replace(/\r\n/g, '\n').trim();
  }
  close(): void {
    this.port.close();
  }
}
