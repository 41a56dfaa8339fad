// `reef device`: runs one or many software dev kits (docs/device.md). Prints one line per kit
// (MAC, address), then runs until SIGINT/SIGTERM and shuts down cleanly.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isReefError } from '../core/errors.ts';
import { DeviceConfig, loadDeviceConfig } from '../device/config.ts';
import { firmwareImage } from '../device/firmware.ts';
import { Fleet } from '../device/fleet.ts';
import { openSerialPort } from '../device/hdlc/transport.ts';
import { Kit } from '../device/kit.ts';
import { KitRunner } from '../device/runner.ts';
import { UsageError, parseArgs } from './args.ts';

const HELP = `Usage: reef device [options]

Runs simulated Reef dev kits (network module + HDLC + sensor CoAP server).

Options (each also as an environment variable REEF_DEVICE_*):
  --count N             kits in this process (kit i: MAC + i, port + i)        [1]
  --host H              UDP address of the module's CoAP port                    [127.0.0.1]
  --port P              first kit's CoAP port; 0 = ephemeral per kit             [4849]
  --mac M               first kit's MAC, 16 hex characters                       [0000000000000001]
  --firmware V          module firmware 1.2.1000.<build>; build <= 112738 uses
                        the prefix /sensor, later builds /snsr                   [1.2.1000.117958]
  --gateway host:port   where announcements, the clock PUT and events go         [none]
  --period D            observe notification period (e.g. 60s, 500ms)           [60s]
  --max-age S           COAP_MSG_MAX_AGE_IN_SECS of readings                    [90]
  --uart-timeout D      UART_TIMEOUT_IN_MS (HDLC response timeout)              [2000ms]
  --con-every N         every N-th notification is CON (0 = never)              [5]
  --cbor                readings as CBOR {0:"temp",1:text}, content-format 60
  --unit C|F            initial temperature unit                                [F]
  --no-sensor           the sensor is missing (reads 100.0 C)
  --announce D          announcement interval                                   [60s]
  --time-sync D         interval of the clock PUT upstream                      [3600s]
  --log-level N         0 mutes .. 7 traces every HDLC frame and CoAP message   [5]
  --monitor-window D    serial-monitor window after reset (with --no-monitor)   [15s]
  --no-monitor          no serial monitor: logs stay off, the CoAP server starts
                        after the monitor window as on the real kit
  --serial A,B          run HDLC over two serial/pty paths (module side, sensor side)
  --seed N              temperature model seed (0 = from the MAC)               [0]
  --key K               the kit key \`reef provision\` printed (64 hex digits); the
                        gateway ignores announcements without the right key
  --key-file F          a fleet's keys: one "<mac> <key>" line per kit
  --sensors FILE        sensor configuration: added sensors (JSON, docs/device.md)
  --observe-203         answer observe registrations 2.03 as the Sensor API firmware
                        did (default 2.05, RFC 7641)
  --diag PATH|auto      the module's diagnostic port on a serial/pty path (115200
                        baud): system variables, preferences, firmware update;
                        auto makes a pty pair (socat) and prints where to connect
  --state-dir DIR       where the console's \`save\` keeps preferences (<mac>.json)
  --mesh-domain D       mesh domain of the kit's host name                       [mesh.reef.local]
  --uart-ptr A,B        UART_PTR: the serial paths carrying HDLC (same as --serial)
  --ser-mon-ptr PATH|auto  SER_MON_PTR: the serial monitor on a path; a monitor
                        that sends a byte within the window after reset gets the log
  --allow-direct        lab use: answer any CoAP peer, not only the gateway (by
                        default a kit is reached only through its gateway, seed §5)
  -h, --help            this text

Other modes:
  reef device --monitor PATH            attach to a kit's serial monitor (the other end
                                        of its --ser-mon-ptr pty) and print its output
  reef device --firmware-image VERSION  print a firmware image for the console's \`fw load\`
`;

/** Options that take a value, and the kit setting each one sets. */
const FLAGS: Record<string, keyof DeviceConfig> = {
  count: 'count',
  host: 'host',
  port: 'port',
  mac: 'mac',
  firmware: 'firmware',
  gateway: 'gateway',
  period: 'periodMs',
  'max-age': 'maxAgeSec',
  'uart-timeout': 'uartTimeoutMs',
  'con-every': 'conEvery',
  unit: 'unit',
  announce: 'announceIntervalMs',
  'time-sync': 'timeSyncIntervalMs',
  'log-level': 'logLevel',
  'monitor-window': 'monitorWindowMs',
  serial: 'serial',
  seed: 'seed',
  key: 'key',
  'key-file': 'keyFile',
  sensors: 'sensors',
  diag: 'diag',
  'state-dir': 'stateDir',
  'mesh-domain': 'meshDomain',
  'uart-ptr': 'uartPtr',
  'ser-mon-ptr': 'serMonPtr',
};

export interface RunIo {
  out?: (line: string) => void;
  err?: (line: string) => void;
  env?: Record<string, string | undefined>;
  /** Resolves when the command should stop (tests); defaults to SIGINT/SIGTERM. */
  until?: Promise<unknown>;
}

export function parseDeviceArgs(argv: string[]): {
  values: Partial<Record<keyof DeviceConfig, unknown>>;
  help: boolean;
  monitor: boolean;
  errors: string[];
  attach?: string;
  image?: string;
} {
  const values: Partial<Record<keyof DeviceConfig, unknown>> = {};
  let args;
  try {
    args = parseArgs(argv, {
      values: [...Object.keys(FLAGS), 'monitor', 'firmware-image'],
      booleans: ['cbor', 'no-sensor', 'no-monitor', 'allow-direct', 'observe-203'],
    });
  } catch (e) {
    if (e instanceof UsageError) return { values, help: false, monitor: true, errors: [e.message] };
    throw e;
  }
  const errors = args.positional.map((p) => `unexpected argument ${JSON.stringify(p)}`);
  for (const [flag, key] of Object.entries(FLAGS)) if (args.flags[flag] !== undefined) values[key] = args.flags[flag];
  if (args.flags.cbor) values.cbor = true;
  if (args.flags['no-sensor']) values.sensorPresent = false;
  if (args.flags['allow-direct']) values.allowDirect = true;
  if (args.flags['observe-203']) values.observe203 = true;
  const attach = args.flags.monitor;
  const image = args.flags['firmware-image'];
  return {
    values,
    help: Boolean(args.flags.help),
    monitor: !args.flags['no-monitor'],
    errors,
    ...(attach !== undefined ? { attach } : {}),
    ...(image !== undefined ? { image } : {}),
  };
}

export async function run(argv: string[], io: RunIo = {}): Promise<number> {
  const out = io.out ?? ((l: string) => void process.stdout.write(l + '\n'));
  const err = io.err ?? ((l: string) => void process.stderr.write(l + '\n'));
  const args = parseDeviceArgs(argv);
  if (args.help) {
    out(HELP.trimEnd());
    return 0;
  }
  if (args.errors.length) {
    err(`reef device: ${args.errors.join('; ')}`);
    err('try: reef device --help');
    return 2;
  }
  if (args.image !== undefined) {
    try {
      out(firmwareImage(args.image).trimEnd());
      return 0;
    } catch (e) {
      err(`reef device: ${(e as Error).message}`);
      return 2;
    }
  }
  const stop =
    io.until ??
    new Promise<void>((resolve) => {
      process.once('SIGINT', () => resolve());
      process.once('SIGTERM', () => resolve());
    });
  if (args.attach !== undefined) return attachMonitor(args.attach, out, err, stop);
  let config: DeviceConfig;
  try {
    config = loadDeviceConfig(args.values, io.env ?? process.env);
  } catch (e) {
    err(`reef device: ${isReefError(e) ? e.message : String(e)}`);
    return 2;
  }
  // The terminal is the serial monitor, attached at reset, unless --no-monitor.
  // The gateway's answer to each kit's announcements: say when it ignores a kit, and when it then accepts it.
  const onGateway = (mac: string, accepted: boolean): void =>
    accepted
      ? out(`${mac} accepted by the gateway`)
      : err(`${mac}: the gateway ignores this kit: MAC ${mac} is not provisioned, or it has no key or not its key (reef provision prints the key; give it with --key)`);
  // `auto`: a pty pair made here (socat), the kit on one end; the user is told the other.
  const ptys: { close(): void }[] = [];
  try {
    if (config.diag === 'auto') {
      const p = await autoPty('diag');
      ptys.push(p);
      config = { ...config, diag: p.kit };
      out(`diagnostic port: connect a terminal to ${p.user} at 115200 baud (e.g. screen ${p.user} 115200)`);
    }
    if (config.serMonPtr === 'auto') {
      const p = await autoPty('monitor');
      ptys.push(p);
      config = { ...config, serMonPtr: p.kit };
      out(`serial monitor: attach within ${config.monitorWindowMs / 1000} s of a reset with: reef device --monitor ${p.user}`);
    }
  } catch (e) {
    for (const p of ptys) p.close();
    err(`reef device: ${(e as Error).message}`);
    return 1;
  }
  const closePtys = (): void => {
    for (const p of ptys) p.close();
  };
  // With a diagnostic port or a state directory the one kit runs under a KitRunner (it reboots);
  // a terminal is the serial monitor unless --no-monitor or SER_MON_PTR names another line.
  const monitor = args.monitor && !config.serMonPtr ? { monitor: err } : {};
  let fleet: { kits: Kit[]; start(): Promise<void>; stop(): Promise<void> };
  try {
    if (config.count === 1 && (config.diag || config.stateDir)) {
      const runner = new KitRunner(config, { ...monitor, ...(config.gateway ? { onGateway } : {}) });
      fleet = {
        get kits() {
          return [runner.kit];
        },
        start: () => runner.start(),
        stop: () => runner.stop(),
      };
    } else fleet = new Fleet(config, { ...monitor, ...(config.gateway ? { onGateway } : {}) });
  } catch (e) {
    closePtys();
    err(`reef device: ${isReefError(e) ? e.message : (e as Error).message}`);
    return 2;
  }
  try {
    await fleet.start();
  } catch (e) {
    await fleet.stop().catch(() => undefined);
    closePtys();
    err(`reef device: cannot start: ${(e as Error).message}`);
    return 1;
  }
  if (config.diag) out(`diagnostic port on ${config.diag} (${115200} baud): type help`);
  for (const k of fleet.kits) {
    const a = k.address();
    out(`${k.mac} coap://${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}/${k.module.prefix}`);
  }
  // Who can reach these kits (seed §5: only through the gateway, unless the lab says otherwise).
  const gw = config.gateway ? `${config.gateway.address}:${config.gateway.port}` : '';
  if (config.allowDirect)
    out(`direct CoAP allowed (--allow-direct, lab use): any peer on the network can reach ${config.count > 1 ? 'these kits' : 'this kit'}; answers to direct peers are at most 3x their requests`);
  else if (gw) out(`reached only through the gateway ${gw} (coap-client -P coap://${gw} with a session: docs/coap.md); direct requests are dropped (--allow-direct for lab use)`);
  else err('reef device: no --gateway and no --allow-direct: nothing can reach these kits (give --gateway host:port, or --allow-direct for lab use)');
  await stop;
  await fleet.stop();
  closePtys();
  return 0;
}

/** Two linked ptys from socat (raw, no echo) under a private temporary directory. */
async function autoPty(name: string): Promise<{ kit: string; user: string; close(): void }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `reef-kit-${name}-`));
  const kit = path.join(dir, 'kit');
  const user = path.join(dir, name);
  const socat = spawn('socat', [`pty,raw,echo=0,link=${kit}`, `pty,raw,echo=0,link=${user}`], { stdio: 'ignore' });
  const close = (): void => {
    socat.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  };
  const failed = new Promise<never>((_, reject) => socat.once('error', (e) => reject(new Error(`socat is needed for "auto" ptys: ${e.message}`))));
  failed.catch(() => undefined);
  for (let i = 0; i < 250 && !(fs.existsSync(kit) && fs.existsSync(user)); i++) await Promise.race([new Promise((r) => setTimeout(r, 20)), failed]);
  if (!fs.existsSync(kit) || !fs.existsSync(user)) {
    close();
    throw new Error('socat did not create the pty pair');
  }
  return { kit, user, close };
}

/**
 * `reef device --monitor PATH`: the serial monitor of a kit whose SER_MON_PTR is the other end of
 * PATH. Sending a line is what "connecting" is on this line (seed §4.4): within the kit's window
 * after reset its log then arrives here; later, the kit keeps its output off.
 */
async function attachMonitor(path: string, out: (l: string) => void, err: (l: string) => void, stop: Promise<unknown>): Promise<number> {
  let line;
  try {
    line = openSerialPort(path);
  } catch (e) {
    err(`reef device: cannot open ${path}: ${(e as Error).message}`);
    return 1;
  }
  let buf = '';
  line.onData((d) => {
    buf += d.toString('utf8');
    const parts = buf.split(/\r?\n/);
    buf = parts.pop() ?? '';
    for (const p of parts) if (p.length) out(p);
  });
  line.write(Buffer.from('\r\n'));
  err(`reef device: attached to ${path}; the kit's log appears if it was reset within its monitor window`);
  await stop;
  line.close();
  return 0;
}

// Direct run: `npx tsx src/cli/device.ts --count 3`.
if (import.meta.url === `file://${process.argv[1]}`) {
  run(process.argv.slice(2)).then((code) => process.exit(code));
}
