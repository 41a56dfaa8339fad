// Shared set-up of the MQTT tests: a real Reef service with the broker on an ephemeral port (and,
// when asked, the CoAP gateway with software dev kits), real MQTT clients: the `mqtt` npm client and
// Debian's mosquitto_sub / mosquitto_pub (package mosquitto-clients).
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import type { Config } from '../../src/config/config.ts';
import { testConfig } from '../../src/config/config.ts';
import { mqttComponent, type MqttComponent } from '../../src/mqtt/component.ts';
import type { GatewayOptions } from '../../src/gateway/gateway.ts';
import type { BrokerOptions } from '../../src/mqtt/broker.ts';
import { startTestServer, type TestServer } from './server.ts';
import { startGateway, until, type GatewayHarness } from './gateway.ts';

export { until };

export interface MqttHarness {
  t: TestServer;
  mq: MqttComponent;
  /** The broker's plain TCP port on 127.0.0.1. */
  port: number;
  url: string;
  /** The gateway harness when the gateway was asked for. */
  gw?: GatewayHarness;
  close(): Promise<void>;
}

export async function startMqtt(
  opts: { config?: Partial<Config>; mqtt?: Partial<Config['mqtt']>; broker?: Partial<BrokerOptions>; gateway?: boolean; gatewayOptions?: Partial<GatewayOptions> } = {},
): Promise<MqttHarness> {
  const factory = mqttComponent(opts.broker ?? {});
  const mqttConfig = { ...testConfig({ dataDir: '/nonexistent' }).mqtt, port: 0, tlsPort: 0, ...(opts.mqtt ?? {}) };
  let t: TestServer;
  let gw: GatewayHarness | undefined;
  if (opts.gateway) {
    gw = await startGateway({ config: { ...(opts.config ?? {}), mqtt: mqttConfig }, extraComponents: [factory], ...(opts.gatewayOptions ? { options: opts.gatewayOptions } : {}) });
    t = gw.t;
  } else {
    t = await startTestServer({ ...(opts.config ?? {}), mqtt: mqttConfig }, [factory]);
  }
  const mq = factory.last!;
  const port = mq.broker.address().port;
  return {
    t,
    mq,
    port,
    url: `mqtt://127.0.0.1:${port}`,
    ...(gw ? { gw } : {}),
    close: () => (gw ? gw.close() : t.close()),
  };
}

/** The `mqtt` npm client, MQTT 3.1.1, no automatic reconnection (a refused CONNECT rejects). */
export function connect(h: { url: string }, password: string, extra: IClientOptions = {}): Promise<MqttClient> {
  return mqtt.connectAsync(h.url, { username: 'notused', password, protocolVersion: 4, reconnectPeriod: 0, connectTimeout: 10_000, ...extra });
}

/** The granted QoS of each filter; 128 where the broker refused it (the mqtt client rejects then). */
export async function grants(c: MqttClient, filters: string[] | Record<string, { qos: 0 | 1 | 2 }>): Promise<number[]> {
  try {
    return (await c.subscribeAsync(filters)).map((g) => g.qos);
  } catch (e) {
    const granted = (e as { packet?: { granted?: number[] } }).packet?.granted;
    if (!granted) throw e;
    return granted;
  }
}

/** Collects the messages a client receives. */
export function inbox(c: MqttClient): { topic: string; payload: Buffer; retain: boolean }[] {
  const got: { topic: string; payload: Buffer; retain: boolean }[] = [];
  c.on('message', (topic, payload, packet) => got.push({ topic, payload, retain: packet.retain }));
  return got;
}

/** Resolves when the client's connection is closed (by the broker). */
export function closed(c: MqttClient): Promise<void> {
  return new Promise((resolve) => {
    if (c.disconnected) return resolve();
    c.once('close', () => resolve());
  });
}

export interface MosquittoSub {
  /** Message lines as `-F` formats them. */
  lines: string[];
  /** SUBACK granted QoS values, from the debug output (128 = refused). */
  granted: number[];
  exit: Promise<number | null>;
  stderr: () => string;
  stop(): void;
}

/** mosquitto_sub with debug output (-d): SUBACK results and messages (`%t %x`: topic, hex payload). */
export function mosquittoSub(port: number, args: string[]): MosquittoSub {
  // stdbuf -oL: line-buffered stdout through the pipe (stdbuf execs mosquitto_sub, so the pid is its own).
  const p: ChildProcess = spawn('stdbuf', ['-oL', 'mosquitto_sub', '-h', '127.0.0.1', '-p', String(port), '-d', '-F', '%t %x', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const granted: number[] = [];
  let err = '';
  let buf = '';
  p.stdout!.setEncoding('utf8').on('data', (s: string) => {
    buf += s;
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      const sub = /^Subscribed \(mid: \d+\): (.*)$/.exec(line);
      if (sub) granted.push(...sub[1]!.split(', ').map(Number));
      else if (!line.startsWith('Client ') && line.trim()) lines.push(line);
    }
  });
  p.stderr!.setEncoding('utf8').on('data', (s: string) => (err += s));
  const exit = new Promise<number | null>((r) => p.once('exit', (code) => r(code)));
  return { lines, granted, exit, stderr: () => err, stop: () => p.kill('SIGTERM') };
}

/** mosquitto_pub; resolves with its exit code and output. */
export function mosquittoPub(port: number, args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile('mosquitto_pub', ['-h', '127.0.0.1', '-p', String(port), ...args], { encoding: 'utf8', timeout: 30_000 }, (e, stdout, stderr) => {
      resolve({ code: e ? ((e as { code?: number }).code ?? 1) : 0, out: stdout + stderr });
    });
  });
}
