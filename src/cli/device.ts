// `reef device`: runs one or many software dev kits (docs/device.md). Prints one line per kit
// (MAC, address), then runs until SIGINT/SIGTERM and shuts down cleanly.
import { isReefError } from '../core/errors.ts';
import { DeviceConfig, loadDeviceConfig } from '../device/config.ts';
import { Fleet } from '../device/fleet.ts';
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
  -h, --help            this text
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
};

export interface RunIo {
  out?: (line: string) => void;
  err?: (line: string) => void;
  env?: Record<string, string | undefined>;
  /** Resolves when the command should stop (tests); defaults to SIGINT/SIGTERM. */
  until?: Promise<unknown>;
}

export function parseDeviceArgs(argv: string[]): { values: Partial<Record<keyof DeviceConfig, unknown>>; help: boolean; monitor: boolean; errors: string[] } {
  const values: Partial<Record<keyof DeviceConfig, unknown>> = {};
  let args;
  try {
    args = parseArgs(argv, { values: Object.keys(FLAGS), booleans: ['cbor', 'no-sensor', 'no-monitor'] });
  } catch (e) {
    if (e instanceof UsageError) return { values, help: false, monitor: true, errors: [e.message] };
    throw e;
  }
  const errors = args.positional.map((p) => `unexpected argument ${JSON.stringify(p)}`);
  for (const [flag, key] of Object.entries(FLAGS)) if (args.flags[flag] !== undefined) values[key] = args.flags[flag];
  if (args.flags.cbor) values.cbor = true;
  if (args.flags['no-sensor']) values.sensorPresent = false;
  return { values, help: Boolean(args.flags.help), monitor: !args.flags['no-monitor'], errors };
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
  let fleet: Fleet;
  try {
    fleet = new Fleet(config, { ...(args.monitor ? { monitor: err } : {}), ...(config.gateway ? { onGateway } : {}) });
  } catch (e) {
    err(`reef device: ${isReefError(e) ? e.message : (e as Error).message}`);
    return 2;
  }
  try {
    await fleet.start();
  } catch (e) {
    err(`reef device: cannot start: ${(e as Error).message}`);
    return 1;
  }
  for (const k of fleet.kits) {
    const a = k.address();
    out(`${k.mac} coap://${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}/${k.module.prefix}`);
  }
  const stop =
    io.until ??
    new Promise<void>((resolve) => {
      process.once('SIGINT', () => resolve());
      process.once('SIGTERM', () => resolve());
    });
  await stop;
  await fleet.stop();
  return 0;
}

// Direct run: `npx tsx src/cli/device.ts --count 3`.
if (import.meta.url === `file://${process.argv[1]}`) {
  run(process.argv.slice(2)).then((code) => process.exit(code));
}
