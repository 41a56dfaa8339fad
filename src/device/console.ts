// The network module's diagnostic port (seed §4.4, §8: 115200 baud; system variables, firmware
// update, preferences) as a line console on a serial path (a pty: `reef device --diag PATH`). A
// field engineer types commands; every answer ends with the prompt `> `. Lines end with CR or LF;
// no echo (the terminal echoes). Garbage gets an error line, never a crash. docs/device.md
// "Diagnostic port" lists the commands.
import { spawnSync } from 'node:child_process';
import fs, { readFileSync } from 'node:fs';
import tty from 'node:tty';
import { DEVICE_SETTINGS, DeviceConfig, deviceConfigProblems } from './config.ts';
import { parseFirmwareImage, IMAGE_END } from './firmware.ts';
import { ByteStream, openSerialPort } from './hdlc/transport.ts';
import { LEVEL_NAMES } from './log.ts';
import { prefixFor } from './module.ts';
import type { KitRunner } from './runner.ts';

export const DIAG_BAUD = 115200;
export const PROMPT = '> ';
/** Longest command line, and longest image line; longer input is refused whole. */
const MAX_LINE = 256;
/** Largest image accepted, in lines (about 760 KB of body). */
const MAX_IMAGE_LINES = 10_000;
/**
 * Output kept for a terminal that is not reading (docs/security.md "Kits"); past it output is
 * dropped and a note says how much, so a stalled reader costs the kit this much memory and no time.
 */
export const MAX_PENDING_OUTPUT = 64 * 1024;
/** How often a full line is tried again. */
const RETRY_MS = 25;

/** System variables: console name → configuration key, and whether `set` applies at once or at reboot. */
const VARS: Record<string, { key: keyof DeviceConfig; live: boolean; help: string }> = {
  mac: { key: 'mac', live: false, help: 'MAC, 16 hex digits' },
  gateway: { key: 'gateway', live: false, help: 'gateway host:port, or none' },
  mesh_domain: { key: 'meshDomain', live: false, help: 'mesh domain of the host name' },
  log_level: { key: 'logLevel', live: true, help: 'LOG_LEVEL 0..7 or LOG_DEBUG-style name' },
  period: { key: 'periodMs', live: false, help: 'notification period, e.g. 60s' },
  max_age: { key: 'maxAgeSec', live: false, help: 'COAP_MSG_MAX_AGE_IN_SECS' },
};

const HELP = [
  'commands:',
  '  help                      this list',
  '  show [NAME]               system variables (all, or one)',
  '  set NAME VALUE            set a variable (log_level at once, the others at the next reboot)',
  '  save                      keep the variables as preferences (they survive a restart)',
  '  prefs                     show the saved preferences',
  '  prefs clear               erase them (the next reboot uses the start-up configuration)',
  '  fw                        firmware version, prefix, and a loaded image',
  '  fw load                   receive an image: send its lines, ending with "end"',
  '  fw cancel                 drop a loaded image',
  '  reboot                    restart the kit (a loaded image becomes its firmware)',
  `variables: ${Object.keys(VARS).join(', ')}; read-only: fw, prefix, host, uptime`,
];

/** Sets the line's speed (and raw mode) with stty; a path that is not a terminal keeps its own. */
export function setLineSpeed(path: string, baud: number): boolean {
  const r = spawnSync('stty', ['-F', path, String(baud), 'raw', '-echo'], { encoding: 'utf8' });
  return r.status === 0;
}

export class DiagConsole {
  private buf = '';
  private discarding = false;
  private image: string[] | undefined;
  private chain: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly line: ByteStream,
    private readonly runner: KitRunner,
  ) {
    line.onData((d) => this.receive(d));
    this.write(`Reef kit module diagnostic port (${DIAG_BAUD} baud). Type help.`);
    this.prompt();
  }

  /** Opens the console on a serial path at 115200 baud. */
  static open(path: string, runner: KitRunner): DiagConsole {
    const speedSet = setLineSpeed(path, DIAG_BAUD);
    const c = new DiagConsole(openConsoleLine(path), runner);
    if (!speedSet) runner.kit.log.note(`diagnostic port ${path}: not a terminal, line speed left as it is`);
    return c;
  }

  close(): void {
    this.closed = true;
    this.line.close();
  }

  private write(text: string): void {
    if (!this.closed) this.line.write(Buffer.from(text.replace(/\r?\n/g, '\r\n') + '\r\n'));
  }

  private prompt(): void {
    if (!this.closed) this.line.write(Buffer.from(PROMPT));
  }

  private receive(d: Buffer): void {
    // Bytes as latin1, so any garbage is still one character each; lines end at CR or LF.
    for (const ch of d.toString('latin1')) {
      if (ch === '\r' || ch === '\n') {
        const l = this.buf;
        const dropped = this.discarding;
        this.buf = '';
        this.discarding = false;
        if (dropped) this.enqueue(() => this.reply([`error: line longer than ${MAX_LINE} characters ignored`]));
        else if (l.length > 0 || this.image) this.enqueue(() => this.onLine(l));
        continue;
      }
      if (this.discarding) continue;
      if (this.buf.length >= MAX_LINE) {
        this.discarding = true;
        this.buf = '';
        continue;
      }
      this.buf += ch;
    }
  }

  private enqueue(f: () => Promise<void> | void): void {
    this.chain = this.chain.then(f).catch((e: unknown) => this.reply([`error: ${(e as Error).message}`]));
  }

  private reply(lines: string[]): void {
    for (const l of lines) this.write(l);
    this.prompt();
  }

  private async onLine(raw: string): Promise<void> {
    if (this.image) return this.imageLine(raw.trim());
    const line = raw.trim();
    if (line === '') return;
    // eslint-disable-next-line no-control-regex
    if (/[^\x20-\x7e\t]/.test(line)) return this.reply(['error: not a command (unprintable characters); type help']);
    const [cmd = '', ...args] = line.split(/\s+/);
    switch (cmd.toLowerCase()) {
      case 'help':
      case '?':
        return this.reply(HELP);
      case 'show':
        return this.reply(this.show(args[0]));
      case 'set':
        return this.reply(this.set(args[0], args.slice(1).join(' ')));
      case 'save':
        return this.reply([`saved to ${this.runner.save()}`]);
      case 'prefs':
        return this.reply(this.prefs(args[0]));
      case 'fw':
        return this.fw(args[0]);
      case 'reboot':
        this.write('rebooting');
        await this.runner.reboot();
        return this.reply([`up: fw ${this.runner.running.firmware}, prefix /${this.runner.kit.module.prefix}, udp ${this.runner.kit.address().address}:${this.runner.kit.address().port}`]);
      default:
        return this.reply([`error: unknown command "${cmd.slice(0, 32)}"; type help`]);
    }
  }

  private values(): Record<string, string> {
    const r = this.runner.running;
    const k = this.runner.kit;
    return {
      mac: r.mac,
      fw: `${k.config.firmware}`,
      prefix: k.module.prefix,
      host: `SSN${r.mac.toUpperCase()}.${r.meshDomain}`,
      mesh_domain: r.meshDomain,
      gateway: r.gateway ? `${r.gateway.address}:${r.gateway.port}` : 'none',
      log_level: `${k.log.level} (${LEVEL_NAMES[k.log.level] ?? '?'})`,
      period: `${r.periodMs / 1000}s`,
      max_age: `${r.maxAgeSec}`,
      uptime: `${Math.floor(process.uptime())}s`,
    };
  }

  private show(name: string | undefined): string[] {
    const v = this.values();
    if (name === undefined) return Object.entries(v).map(([k, x]) => `${k.padEnd(12)}${x}`);
    if (!(name in v)) return [`error: no variable "${name.slice(0, 32)}"; show lists them`];
    return [`${name} = ${v[name]}`];
  }

  private set(name: string | undefined, value: string): string[] {
    if (!name || value === '') return ['error: usage: set NAME VALUE'];
    const spec = VARS[name];
    if (!spec) return [`error: "${name.slice(0, 32)}" cannot be set (${Object.keys(VARS).join(', ')} can)`];
    // The same parsers and checks as the start-up configuration, so the messages agree.
    const parsed = DEVICE_SETTINGS[spec.key].parse(value);
    const next = { ...this.runner.running, [spec.key]: parsed };
    const problems =
      Number.isNaN(parsed) || parsed === null
        ? [`${spec.key} is not readable`]
        : deviceConfigProblems(next as unknown as Record<keyof DeviceConfig, unknown>).filter((p) => p.startsWith(`${spec.key} `));
    if (problems.length) return [`error: ${name}: ${problems.join('; ')} (${spec.help})`];
    this.runner.running = next as DeviceConfig;
    if (spec.live && spec.key === 'logLevel') this.runner.kit.log.level = parsed as number;
    return [`${name} = ${this.show(name)[0]!.split(' = ')[1]}${spec.live ? '' : ' (at the next reboot; save keeps it)'}`];
  }

  private prefs(arg: string | undefined): string[] {
    if (arg === 'clear') return [this.runner.clear() ? 'preferences erased' : 'no saved preferences'];
    if (arg !== undefined) return ['error: usage: prefs [clear]'];
    if (!this.runner.prefsFile) return ['no state directory: start the kit with --state-dir DIR to keep preferences'];
    let text: string;
    try {
      text = JSON.stringify(JSON.parse(readFileSync(this.runner.prefsFile, 'utf8')));
    } catch {
      return ['no saved preferences'];
    }
    return [text];
  }

  private fw(arg: string | undefined): void {
    if (arg === undefined) {
      const p = this.runner.pendingImage;
      return this.reply([
        `fw ${this.runner.kit.config.firmware}, prefix /${this.runner.kit.module.prefix}`,
        p ? `loaded image ${p.version} (prefix /${prefixFor(p.version)} after reboot)` : 'no image loaded',
      ]);
    }
    if (arg === 'load') {
      this.image = [];
      // No prompt while receiving: each line is part of the image until "end".
      this.write('send the image; it ends with a line "end"');
      return;
    }
    if (arg === 'cancel') {
      this.runner.pendingImage = undefined;
      return this.reply(['image dropped']);
    }
    return this.reply(['error: usage: fw [load|cancel]']);
  }

  private imageLine(line: string): void {
    const img = this.image!;
    if (line !== IMAGE_END) {
      if (img.length >= MAX_IMAGE_LINES) {
        this.image = undefined;
        return this.reply([`error: image longer than ${MAX_IMAGE_LINES} lines; nothing loaded`]);
      }
      img.push(line);
      return;
    }
    this.image = undefined;
    try {
      const parsed = parseFirmwareImage(img);
      this.runner.pendingImage = parsed;
      this.reply([`image ${parsed.version} loaded (${parsed.body.length} bytes, sha256 ok); reboot to run it (prefix /${prefixFor(parsed.version)})`]);
    } catch (e) {
      this.reply([`error: ${(e as Error).message}; nothing loaded`]);
    }
  }
}

/**
 * The console's line. On a terminal the output side is its own non-blocking descriptor behind a
 * bounded queue: Node writes to a tty synchronously (tty.WriteStream blocks), so a reader that stops
 * reading would otherwise stop the whole kit once the pty's buffer is full. Anything else (a FIFO,
 * a socket) is already written asynchronously and gets the same bound.
 */
export function openConsoleLine(path: string): ByteStream {
  const rfd = fs.openSync(path, fs.constants.O_RDWR | fs.constants.O_NOCTTY);
  if (!tty.isatty(rfd)) {
    fs.closeSync(rfd);
    return openSerialPort(path);
  }
  const input = new tty.ReadStream(rfd);
  input.setRawMode(true);
  input.on('error', () => undefined);
  const wfd = fs.openSync(path, fs.constants.O_WRONLY | fs.constants.O_NOCTTY | fs.constants.O_NONBLOCK);
  let listener: ((d: Buffer) => void) | undefined;
  input.on('data', (d: Buffer) => listener?.(d));
  const raw: ByteStream = {
    write: () => undefined,
    onData: (cb) => {
      listener = cb;
    },
    close: () => input.destroy(),
  };
  return new BoundedLine(raw, wfd);
}

/** A terminal line whose writes never block and never queue more than MAX_PENDING_OUTPUT bytes. */
class BoundedLine implements ByteStream {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private dropped = 0;
  private writing = false;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    /** The read side. */
    private readonly inner: ByteStream,
    /** The non-blocking descriptor written to. */
    private readonly fd: number,
  ) {}

  onData(cb: (data: Buffer) => void): void {
    this.inner.onData(cb);
  }

  write(data: Buffer): void {
    if (this.closed) return;
    if (this.pendingBytes + data.length > MAX_PENDING_OUTPUT) {
      this.dropped += data.length;
      return;
    }
    this.pending.push(data);
    this.pendingBytes += data.length;
    this.pump();
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.pending = [];
    this.inner.close();
    fs.close(this.fd, () => undefined);
  }

  private pump(): void {
    if (this.writing || this.closed) return;
    if (!this.pending.length && this.dropped) {
      // The reader reads again: tell it what it missed, in the console's own line form.
      const note = Buffer.from(`\r\n[${this.dropped} bytes of output dropped: the terminal was not reading]\r\n${PROMPT}`);
      this.dropped = 0;
      this.pending.push(note);
      this.pendingBytes += note.length;
    }
    if (!this.pending.length) return;
    const buf = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending);
    this.pending = [buf];
    this.writing = true;
    fs.write(this.fd, buf, 0, buf.length, null, (err, n) => {
      this.writing = false;
      if (this.closed) return;
      if (err && (err.code === 'EAGAIN' || err.code === 'EWOULDBLOCK')) {
        this.timer = setTimeout(() => this.pump(), RETRY_MS).unref();
        return;
      }
      if (err) {
        // The terminal is gone (EIO on a pty whose other side closed): nothing more can be sent.
        this.pending = [];
        this.pendingBytes = 0;
        return;
      }
      // pending[0] is buf; later writes queued behind it while it was written.
      if (n >= buf.length) this.pending.shift();
      else this.pending[0] = buf.subarray(n);
      this.pendingBytes -= n;
      this.pump();
    });
  }
}
