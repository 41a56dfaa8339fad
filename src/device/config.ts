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
  /** LOG_LEVEL 0..7 (0 mutes; 7 traces every HDLC frame and CoAP message). */
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
  /** HDLC over two serial/pty paths "module-side,sensor-side" instead of in process. */
  serial: [string, string] | undefined;
  /** The kit key `reef provision` printed (64 hex digits): signs announcements (docs/security.md). */
  key: string | undefined;
  /** A file of `<mac> <key>` lines, one per kit of a fleet (`#` comments allowed). */
  keyFile: string | undefined;
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
  key: undefined,
  keyFile: undefined,
});

type Key = keyof DeviceConfig;
type Parser = (s: string) => unknown;

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
  logLevel: { env: 'REEF_DEVICE_LOG_LEVEL', parse: Number },
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
  key: { env: 'REEF_DEVICE_KEY', parse: (s) => (s === '' ? undefined : s.trim().toLowerCase()) },
  keyFile: { env: 'REEF_DEVICE_KEY_FILE', parse: (s) => (s === '' ? undefined : s) },
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
  need(int(c.logLevel, 0, 7), 'logLevel', 'must be 0..7');
  need(int(c.uartTimeoutMs, 1, 600_000), 'uartTimeoutMs', 'must be 1 ms..600 s');
  need(int(c.maxAgeSec, 0, 0xffffffff), 'maxAgeSec', 'must be 0..4294967295 seconds');
  need(int(c.periodMs, 10, 86_400_000), 'periodMs', 'must be a duration 10 ms..24 h');
  need(int(c.conEvery, 0, 1000), 'conEvery', 'must be 0..1000');
  need(int(c.observeLimit, 1, 64), 'observeLimit', 'must be 1..64');
  need(typeof c.cbor === 'boolean', 'cbor', 'must be true or false');
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
      if (v === null || (typeof v === 'number' && Number.isNaN(v)) || (v === undefined && !['gateway', 'serial', 'key', 'keyFile'].includes(key))) {
        bad.push(`${key} (${s.env}) is not readable: ${JSON.stringify(key in values ? values[key] : fromEnv)}`);
        continue;
      }
    }
    out[key] = v;
  }
  const problems = [...bad, ...deviceConfigProblems(out as Record<Key, unknown>).filter((p) => !bad.some((b) => b.startsWith(p.split(' ')[0] + ' ')))];
  if (problems.length) throw new ReefError('VALIDATION_FAILED', `device configuration invalid: ${problems.join('; ')}`, { field: problems.length === 1 ? problems[0]!.split(' ')[0] : 'device' });
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
