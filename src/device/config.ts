// Device constants (seed §4.4, wire §2) as configuration: one object, validated once, every error
// reported together in one ReefError. Sources in order of precedence: explicit values (CLI flags or
// a test's overrides), then REEF_DEVICE_* variables from the env object the caller passes (this
// module never reads process.env itself), then the defaults below.
import { parseDuration } from '../core/duration.ts';
import { ReefError } from '../core/errors.ts';

export interface GatewayAddress {
  address: string;
  port: number;
}

export interface DeviceConfig {
  /** UDP address of the network module's CoAP port. */
  host: string;
  /** First kit's port (kit i gets port + i); 0 gives every kit an ephemeral port. */
  port: number;
  count: number;
  /** First kit's MAC, 16 lower-case hex (kit i gets MAC + i). */
  mac: string;
  /** Module firmware version "1.2.1000.<build>": decides the prefix (seed §9). */
  firmware: string;
  /** Application processor version shown by GET / of the bare prefix. */
  appVersion: string;
  gateway: GatewayAddress | undefined;
  /** LOG_LEVEL 0..7 (0 mutes; 7 traces every HDLC frame and CoAP message); names like LOG_DEBUG accepted. */
  logLevel: number;
  /** UART_TIMEOUT_IN_MS: HDLC response and inter-byte timeout. */
  uartTimeoutMs: number;
  /** COAP_MSG_MAX_AGE_IN_SECS: Max-Age of readings and notifications. */
  maxAgeSec: number;
  /** Observe notification period. */
  periodMs: number;
  /** Every n-th notification is CON (0: never). */
  conEvery: number;
  /** Observers per resource (wire §2: one; a new registration replaces the oldest). */
  observeLimit: number;
  /** Readings as CBOR {0:"temp",1:text} with content-format 60 (newer firmware). */
  cbor: boolean;
  announceIntervalMs: number;
  timeSyncIntervalMs: number;
  /** Serial-monitor window after reset (seed §4.4: 15 s). */
  monitorWindowMs: number;
  /** Base °C of the temperature model. */
  baseC: number;
  swingC: number;
  noiseC: number;
  /** Seed of the temperature model; 0 derives one from each kit's MAC. */
  seed: number;
  sensorPresent: boolean;
  unit: 'C' | 'F';
  /** CoAP ACK_TIMEOUT of the module's CON notifications (RFC 7252 §4.8). */
  ackTimeoutMs: number;
  maxRetransmit: number;
  /** HDLC over two serial/pty paths "module-side,sensor-side" instead of in process (UART_PTR). */
  serial: [string, string] | undefined;
  /** The firmware's UART_PTR: the same choice of the UART that carries HDLC, by the firmware's name. */
  uartPtr: [string, string] | undefined;
  /** SER_MON_PTR: the serial path of the serial monitor (else the terminal of `reef device`). */
  serMonPtr: string | undefined;
  /** The network module's diagnostic port (seed §4.4, §8): a serial/pty path, 115200 baud. */
  diag: string | undefined;
  /** Mesh domain of the kit's host name SSN<MAC>.<domain> (a system variable of the module). */
  meshDomain: string;
  /** Directory of the kits' preference files (`<mac>.json`, written by the console's `save`). */
  stateDir: string | undefined;
  /** The kit key `reef provision` printed (64 hex digits): signs announcements (docs/security.md). */
  key: string | undefined;
  /** A file of `<mac> <key>` lines, one per kit of a fleet (`#` comments allowed). */
  keyFile: string | undefined;
  /** Answer peers other than the gateway (lab use). Off: only the gateway reaches the kit (seed §5). */
  allowDirect: boolean;
  /** The sensor configuration file registering added sensors (src/device/sensors.ts). */
  sensors: string | undefined;
  /** Answer observe registrations 2.03 with Observe, as the Sensor API firmware (default 2.05, RFC 7641). */
  observe203: boolean;
}

export const DEVICE_DEFAULTS: Readonly<DeviceConfig> = Object.freeze({
  host: '127.0.0.1',
  port: 4849,
  count: 1,
  mac: '0000000000000001',
  firmware: '1.2.1000.117958',
  appVersion: '1.0.0',
  gateway: undefined,
  logLevel: 5,
  uartTimeoutMs: 2000,
  maxAgeSec: 90,
  periodMs: 60_000,
  conEvery: 5,
  observeLimit: 1,
  cbor: false,
  announceIntervalMs: 60_000,
  timeSyncIntervalMs: 3_600_000,
  monitorWindowMs: 15_000,
  baseC: 21,
  swingC: 3,
  noiseC: 0.2,
  seed: 0,
  sensorPresent: true,
  unit: 'F',
  ackTimeoutMs: 2000,
  maxRetransmit: 4,
  serial: undefined,
  uartPtr: undefined,
  serMonPtr: undefined,
  diag: undefined,
  stateDir: undefined,
  meshDomain: 'mesh.reef.local',
  key: undefined,
  keyFile: undefined,
  allowDirect: false,
  sensors: undefined,
  observe203: false,
});

type Key = keyof DeviceConfig;
type Parser = (s: string) => unknown;

/**
 * LOG_LEVEL by name as the firmware's constants are written (seed §4.4: `LOG_DEBUG`), in syslog's
 * numbering (RFC 5424 §6.2.1), which the kit's levels follow: 0 mutes, 7 is the most verbose. The
 * kit's own short names (wire §2: EMRG..DEBG) and `LOG_NONE` are accepted too, in any case.
 */
export const LOG_LEVEL_NAMES: Record<string, number> = {
  LOG_NONE: 0,
  LOG_EMERG: 0,
  LOG_ALERT: 1,
  LOG_CRIT: 2,
  LOG_ERR: 3,
  LOG_WARNING: 4,
  LOG_NOTICE: 5,
  LOG_INFO: 6,
  LOG_DEBUG: 7,
};
const SHORT_LEVELS = ['EMRG', 'ALRT', 'CRIT', 'ERR', 'WARN', 'NOTE', 'INFO', 'DEBG'];

export function parseLogLevel(s: string): number {
  const t = s.trim().toUpperCase();
  if (/^\d+$/.test(t)) return Number(t);
  const named = LOG_LEVEL_NAMES[t] ?? LOG_LEVEL_NAMES[`LOG_${t}`];
  if (named !== undefined) return named;
  const short = SHORT_LEVELS.indexOf(t.replace(/^LOG_/, ''));
  return short >= 0 ? short : NaN;
}

function parseBool(s: string): boolean | undefined {
  if (/^(1|true|yes|on)$/i.test(s)) return true;
  if (/^(0|false|no|off)$/i.test(s)) return false;
  return undefined;
}

function parseHostPort(s: string): GatewayAddress | undefined | null {
  if (s === '' || s === 'none') return undefined;
  const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(s.trim());
  if (!m) return null;
  const [, host = '', port] = m;
  return { address: host === 'localhost' ? '127.0.0.1' : host, port: Number(port) };
}

/** Every setting: its environment name and how its text is read. */
export const DEVICE_SETTINGS: Record<Key, { env: string; parse: Parser }> = {
  host: { env: 'REEF_DEVICE_HOST', parse: (s) => s },
  port: { env: 'REEF_DEVICE_PORT', parse: Number },
  count: { env: 'REEF_DEVICE_COUNT', parse: Number },
  mac: { env: 'REEF_DEVICE_MAC', parse: (s) => s.replace(/[:-]/g, '').toLowerCase() },
  firmware: { env: 'REEF_DEVICE_FIRMWARE', parse: (s) => s },
  appVersion: { env: 'REEF_DEVICE_APP_VERSION', parse: (s) => s },
  gateway: { env: 'REEF_DEVICE_GATEWAY', parse: parseHostPort },
  logLevel: { env: 'REEF_DEVICE_LOG_LEVEL', parse: parseLogLevel },
  uartTimeoutMs: { env: 'REEF_DEVICE_UART_TIMEOUT_IN_MS', parse: (s) => parseDuration(s, 'ms') },
  maxAgeSec: { env: 'REEF_DEVICE_COAP_MSG_MAX_AGE_IN_SECS', parse: Number },
  periodMs: { env: 'REEF_DEVICE_PERIOD', parse: (s) => parseDuration(s, 's') },
  conEvery: { env: 'REEF_DEVICE_CON_EVERY', parse: Number },
  observeLimit: { env: 'REEF_DEVICE_OBSERVE_LIMIT', parse: Number },
  cbor: { env: 'REEF_DEVICE_CBOR', parse: parseBool },
  announceIntervalMs: { env: 'REEF_DEVICE_ANNOUNCE_INTERVAL', parse: (s) => parseDuration(s, 's') },
  timeSyncIntervalMs: { env: 'REEF_DEVICE_TIME_SYNC_INTERVAL', parse: (s) => parseDuration(s, 's') },
  monitorWindowMs: { env: 'REEF_DEVICE_MONITOR_WINDOW', parse: (s) => parseDuration(s, 's') },
  baseC: { env: 'REEF_DEVICE_BASE_C', parse: Number },
  swingC: { env: 'REEF_DEVICE_SWING_C', parse: Number },
  noiseC: { env: 'REEF_DEVICE_NOISE_C', parse: Number },
  seed: { env: 'REEF_DEVICE_SEED', parse: Number },
  sensorPresent: { env: 'REEF_DEVICE_SENSOR_PRESENT', parse: parseBool },
  unit: { env: 'REEF_DEVICE_UNIT', parse: (s) => s.toUpperCase() },
  ackTimeoutMs: { env: 'REEF_DEVICE_ACK_TIMEOUT', parse: (s) => parseDuration(s, 'ms') },
  maxRetransmit: { env: 'REEF_DEVICE_MAX_RETRANSMIT', parse: Number },
  serial: { env: 'REEF_DEVICE_SERIAL', parse: (s) => (s === '' ? undefined : s.split(',')) },
  uartPtr: { env: 'REEF_DEVICE_UART_PTR', parse: (s) => (s === '' ? undefined : s.split(',')) },
  serMonPtr: { env: 'REEF_DEVICE_SER_MON_PTR', parse: (s) => (s === '' ? undefined : s) },
  diag: { env: 'REEF_DEVICE_DIAG', parse: (s) => (s === '' ? undefined : s) },
  stateDir: { env: 'REEF_DEVICE_STATE_DIR', parse: (s) => (s === '' ? undefined : s) },
  meshDomain: { env: 'REEF_DEVICE_MESH_DOMAIN', parse: (s) => s.trim().toLowerCase() },
  key: { env: 'REEF_DEVICE_KEY', parse: (s) => (s === '' ? undefined : s.trim().toLowerCase()) },
  keyFile: { env: 'REEF_DEVICE_KEY_FILE', parse: (s) => (s === '' ? undefined : s) },
  allowDirect: { env: 'REEF_DEVICE_ALLOW_DIRECT', parse: parseBool },
  sensors: { env: 'REEF_DEVICE_SENSORS', parse: (s) => (s === '' ? undefined : s) },
  observe203: { env: 'REEF_DEVICE_OBSERVE_203', parse: parseBool },
};

const int = (v: unknown, min: number, max: number): boolean => typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;
const num = (v: unknown, min: number, max: number): boolean => typeof v === 'number' && Number.isFinite(v) && v >= min && v <= max;

/** Checks a whole config; returns every problem found. */
export function deviceConfigProblems(c: Record<Key, unknown>): string[] {
  const p: string[] = [];
  const need = (ok: boolean, key: Key, what: string): void => {
    if (!ok) p.push(`${key} (${DEVICE_SETTINGS[key].env}) ${what}`);
  };
  need(typeof c.host === 'string' && c.host.length > 0, 'host', 'must be a host address');
  need(int(c.port, 0, 65535), 'port', 'must be a port number 0..65535');
  need(int(c.count, 1, 100_000), 'count', 'must be an integer 1..100000');
  need(typeof c.mac === 'string' && /^[0-9a-f]{16}$/.test(c.mac), 'mac', 'must be 16 hexadecimal characters');
  need(typeof c.firmware === 'string' && /^\d+\.\d+\.\d+\.\d+$/.test(c.firmware), 'firmware', 'must look like 1.2.1000.117958');
  need(typeof c.appVersion === 'string' && c.appVersion.length > 0 && c.appVersion.length <= 32, 'appVersion', 'must be 1..32 characters');
  need(c.gateway === undefined || (typeof c.gateway === 'object' && c.gateway !== null && int((c.gateway as GatewayAddress).port, 1, 65535)), 'gateway', 'must be host:port');
  need(int(c.logLevel, 0, 7), 'logLevel', `must be 0..7 or a name (${Object.keys(LOG_LEVEL_NAMES).join(', ')})`);
  need(int(c.uartTimeoutMs, 1, 600_000), 'uartTimeoutMs', 'must be 1 ms..600 s');
  need(int(c.maxAgeSec, 0, 0xffffffff), 'maxAgeSec', 'must be 0..4294967295 seconds');
  need(int(c.periodMs, 10, 86_400_000), 'periodMs', 'must be a duration 10 ms..24 h');
  need(int(c.conEvery, 0, 1000), 'conEvery', 'must be 0..1000');
  need(int(c.observeLimit, 1, 64), 'observeLimit', 'must be 1..64');
  need(typeof c.cbor === 'boolean', 'cbor', 'must be true or false');
  need(typeof c.allowDirect === 'boolean', 'allowDirect', 'must be true or false');
  need(typeof c.observe203 === 'boolean', 'observe203', 'must be true or false');
  need(c.sensors === undefined || (typeof c.sensors === 'string' && c.sensors.length > 0), 'sensors', 'must be a path');
  need(int(c.announceIntervalMs, 0, 86_400_000), 'announceIntervalMs', 'must be a duration up to 24 h (0 disables repeats)');
  need(int(c.timeSyncIntervalMs, 0, 86_400_000 * 7), 'timeSyncIntervalMs', 'must be a duration up to 7 d (0 disables repeats)');
  need(int(c.monitorWindowMs, 0, 600_000), 'monitorWindowMs', 'must be a duration up to 600 s');
  need(num(c.baseC, -60, 90), 'baseC', 'must be -60..90 °C');
  need(num(c.swingC, 0, 50), 'swingC', 'must be 0..50 °C');
  need(num(c.noiseC, 0, 10), 'noiseC', 'must be 0..10 °C');
  need(int(c.seed, 0, 0xffffffff), 'seed', 'must be an integer 0..4294967295');
  need(typeof c.sensorPresent === 'boolean', 'sensorPresent', 'must be true or false');
  need(c.unit === 'C' || c.unit === 'F', 'unit', 'must be C or F');
  need(int(c.ackTimeoutMs, 1, 600_000), 'ackTimeoutMs', 'must be 1 ms..600 s');
  need(int(c.maxRetransmit, 0, 20), 'maxRetransmit', 'must be 0..20');
  need(c.key === undefined || (typeof c.key === 'string' && /^[0-9a-f]{64}$/.test(c.key)), 'key', 'must be the 64 hex digits `reef provision` printed');
  need(c.key === undefined || c.count === 1, 'key', 'is for one kit: give a fleet its keys with --key-file');
  need(c.keyFile === undefined || (typeof c.keyFile === 'string' && c.keyFile.length > 0), 'keyFile', 'must be a path');
  need(
    c.serial === undefined || (Array.isArray(c.serial) && c.serial.length === 2 && c.serial.every((s) => typeof s === 'string' && s.length > 0)),
    'serial',
    'must be two paths "module-side,sensor-side"',
  );
  need(
    c.uartPtr === undefined || (Array.isArray(c.uartPtr) && c.uartPtr.length === 2 && c.uartPtr.every((s) => typeof s === 'string' && s.length > 0)),
    'uartPtr',
    'must be two paths "module-side,sensor-side"',
  );
  need(c.uartPtr === undefined || c.serial === undefined || String(c.uartPtr) === String(c.serial), 'uartPtr', 'names other paths than serial: give one of them');
  need(
    typeof c.meshDomain === 'string' && /^[a-z0-9]([a-z0-9-]{0,62}\.)*[a-z0-9-]{1,63}$/.test(c.meshDomain) && c.meshDomain.length <= 200,
    'meshDomain',
    'must be a domain name like mesh.reef.local',
  );
  for (const k of ['serMonPtr', 'diag', 'stateDir'] as const) need(c[k] === undefined || (typeof c[k] === 'string' && (c[k] as string).length > 0), k, 'must be a path');
  need((c.diag === undefined && c.serMonPtr === undefined) || c.count === 1, 'diag', 'and serMonPtr serve one kit: run one kit per console');
  return p;
}

/**
 * Builds the device configuration. `values` are typed overrides (tests) or text (CLI flags, read
 * like the environment); `env` is the caller's environment object.
 */
export function loadDeviceConfig(values: Partial<Record<Key, unknown>> = {}, env: Record<string, string | undefined> = {}): DeviceConfig {
  const out: Record<string, unknown> = { ...DEVICE_DEFAULTS };
  const bad: string[] = [];
  for (const key of Object.keys(DEVICE_SETTINGS) as Key[]) {
    const s = DEVICE_SETTINGS[key];
    const fromEnv = env[s.env];
    let v: unknown = key in values && values[key] !== undefined ? values[key] : fromEnv;
    if (v === undefined) continue;
    if (typeof v === 'string') {
      v = s.parse(v);
      if (
        v === null ||
        (typeof v === 'number' && Number.isNaN(v)) ||
        (v === undefined && !['gateway', 'serial', 'key', 'keyFile', 'sensors', 'uartPtr', 'serMonPtr', 'diag', 'stateDir'].includes(key))
      ) {
        bad.push(`${key} (${s.env}) is not readable: ${JSON.stringify(key in values ? values[key] : fromEnv)}`);
        continue;
      }
    }
    out[key] = v;
  }
  const problems = [...bad, ...deviceConfigProblems(out as Record<Key, unknown>).filter((p) => !bad.some((b) => b.startsWith(p.split(' ')[0] + ' ')))];
  if (problems.length) throw new ReefError('VALIDATION_FAILED', `device configuration invalid: ${problems.join('; ')}`, { field: problems.length === 1 ? problems[0]!.split(' ')[0] : 'device' });
  // UART_PTR is the firmware's name for the choice `serial` makes: one setting, two names.
  if (out.uartPtr !== undefined) out.serial = out.uartPtr;
  return out as unknown as DeviceConfig;
}

/** MAC + i as 16 lower-case hex. */
export function macPlus(mac: string, i: number): string {
  return ((BigInt('0x' + mac) + BigInt(i)) & 0xffffffffffffffffn).toString(16).padStart(16, '0');
}

/**
 * The kit keys of a configuration by MAC: `key` for the one kit, or every `<mac> <key>` line of
 * `keyFile`. Throws a ReefError naming the bad line; a kit without a key announces unsigned (the
 * gateway ignores it, and the kit says so).
 */
export function loadKitKeys(c: DeviceConfig, readFile: (path: string) => string): Map<string, Buffer> {
  const keys = new Map<string, Buffer>();
  if (c.key !== undefined) keys.set(c.mac, Buffer.from(c.key, 'hex'));
  if (c.keyFile === undefined) return keys;
  let text: string;
  try {
    text = readFile(c.keyFile);
  } catch (e) {
    throw new ReefError('VALIDATION_FAILED', `keyFile (REEF_DEVICE_KEY_FILE) cannot be read: ${(e as Error).message}`, { field: 'keyFile' });
  }
  text.split(/\r?\n/).forEach((line, i) => {
    const t = line.replace(/#.*/, '').trim();
    if (!t) return;
    const m = /^([0-9a-fA-F:-]{16,23})\s+([0-9a-fA-F]{64})$/.exec(t);
    const mac = m?.[1]?.replace(/[:-]/g, '').toLowerCase();
    if (!m || !mac || !/^[0-9a-f]{16}$/.test(mac)) {
      throw new ReefError('VALIDATION_FAILED', `keyFile line ${i + 1} must be "<16-hex MAC> <64-hex key>"`, { field: 'keyFile' });
    }
    keys.set(mac, Buffer.from(m[2]!, 'hex'));
  });
  return keys;
}
