// One software dev kit: the network module (primary station, UDP side) and the application
// processor (secondary station, CoAP server) joined by an HDLC link over a byte stream (in process
// by default; two serial/pty paths optionally). start() is the reset: the serial-monitor window
// opens (seed §4.4: debug output only when a monitor attaches within it), the CoAP server starts
// when a monitor attaches or the window ends, and the module sets the link up with SNRM.
import { Peer } from '../coap/index.ts';
import fs from 'node:fs';
import { DeviceConfig, loadKitKeys, macPlus } from './config.ts';
import { describeFrame } from './hdlc/frame.ts';
import { FrameTrace, PrimaryStation, SecondaryStation } from './hdlc/link.ts';
import { ByteStream, duplexPair, openSerialPort } from './hdlc/transport.ts';
import { DeviceLog, LogSink } from './log.ts';
import { NetworkModule, prefixFor } from './module.ts';
import { Sensor } from './sensor.ts';
import { AddedSensorSpec, loadSensorConfig } from './sensors.ts';
import { seedFrom, TemperatureModel } from './temperature-model.ts';

export interface KitOptions {
  /** Index in a fleet: MAC + index, port + index (unless port 0). */
  index?: number;
  /** A serial monitor attached at reset (the terminal of `reef device`). */
  monitor?: LogSink;
  random?: () => number;
  /** This kit's key (a fleet reads its key file once); else from config.key / config.keyFile. */
  key?: Buffer;
  /** Told whether the gateway acknowledged the kit's announcements (`reef device` prints it). */
  onGateway?: (mac: string, accepted: boolean) => void;
  /** Added sensors (a fleet reads its file once); else from config.sensors. */
  sensors?: AddedSensorSpec[];
}

export class Kit {
  readonly mac: string;
  readonly log: DeviceLog;
  readonly sensor: Sensor;
  readonly module: NetworkModule;
  readonly primary: PrimaryStation;
  readonly secondary: SecondaryStation;
  readonly streams: [ByteStream, ByteStream];
  readonly addedSensors: AddedSensorSpec[];
  /**
   * Whether the monitor window of the last reset is open. A state, not a clock comparison: it is
   * closed by the very timer that ends the window, so once start() has returned without a monitor
   * a late one is refused whatever the clocks say (a stale event-loop clock can fire a timer a few
   * milliseconds before Date.now() says it is due).
   */
  private windowOpen = true;
  private windowTimer: NodeJS.Timeout | undefined;
  private monitorWaiter: (() => void) | undefined;
  /** The serial-monitor line was refused since the last reset (counted once however much it sends). */
  private lineRefused = false;
  /** SER_MON_PTR: the serial monitor's line, when it is a path rather than the terminal. */
  private readonly monitorLine: ByteStream | undefined;
  /** Monitors that tried to connect after the window, one per line per reset (their output stays off until the next reset). */
  monitorRefused = 0;

  constructor(
    readonly config: DeviceConfig,
    o: KitOptions = {},
  ) {
    const i = o.index ?? 0;
    this.mac = macPlus(config.mac, i);
    this.log = new DeviceLog(config.logLevel, config.count > 1 ? `[${this.mac}] ` : '');
    if (o.monitor) this.log.sink = o.monitor;
    if (config.serMonPtr) {
      // A monitor "connects" when it sends anything on the line (the software analogue of the USB
      // port's DTR): within the window after reset the log goes to that line; after it, nothing.
      const line = openSerialPort(config.serMonPtr);
      this.monitorLine = line;
      line.onData(() => {
        if (this.log.sink) return;
        if (this.attachMonitor((l) => line.write(Buffer.from(l + '\r\n')))) this.log.note(`serial monitor attached on ${config.serMonPtr}`);
        else if (!this.lineRefused) {
          this.lineRefused = true;
          this.monitorRefused++;
        }
      });
    }
    const trace =
      (side: string): FrameTrace =>
      (dir, f) => {
        if (this.log.on(7)) this.log.debug(`hdlc ${side} ${dir} ${describeFrame(f)}`);
      };
    this.streams = config.serial ? [openSerialPort(config.serial[0]), openSerialPort(config.serial[1])] : duplexPair();
    const bootEpoch = Date.now();
    const added = o.sensors ?? (config.sensors ? loadSensorConfig(config.sensors, (f) => fs.readFileSync(f, 'utf8')) : []);
    this.addedSensors = added;
    this.sensor = new Sensor({
      version: config.appVersion,
      prefix: prefixFor(config.firmware),
      cbor: config.cbor,
      maxAgeSec: config.maxAgeSec,
      periodMs: config.periodMs,
      conEvery: config.conEvery,
      observeLimit: config.observeLimit,
      // A CON notification crosses the link and then the module's CoAP retransmissions.
      conTimeoutMs: config.ackTimeoutMs * (2 ** (config.maxRetransmit + 1) - 1) * 1.5 + 2 * config.uartTimeoutMs,
      timeSyncIntervalMs: config.timeSyncIntervalMs,
      unit: config.unit,
      model: new TemperatureModel({ seed: config.seed || seedFrom(this.mac), baseC: config.baseC, swingC: config.swingC, noiseC: config.noiseC, sensorPresent: config.sensorPresent }),
      log: this.log,
      ...(o.random ? { random: o.random } : {}),
      added: added.map((spec) => ({
        spec,
        model: new TemperatureModel({ seed: seedFrom(`${this.mac}/${spec.type}`), baseC: spec.base, swingC: spec.swing, noiseC: spec.noise, spread: 0 }),
      })),
      observe203: config.observe203,
    });
    this.secondary = new SecondaryStation(this.streams[1], {
      timeoutMs: config.uartTimeoutMs,
      trace: trace('ap'),
      onMessage: (b) => this.sensor.receive(b),
      wake: () => this.primary.poll(),
      onLinkUp: () => this.sensor.linkUp(),
      onLinkDown: () => this.sensor.linkDown(),
    });
    this.sensor.attach((b) => this.secondary.send(b));
    this.primary = new PrimaryStation(this.streams[0], {
      timeoutMs: config.uartTimeoutMs,
      trace: trace('module'),
      onMessage: (b) => this.module.fromLink(b),
      onLinkUp: (p) => this.log.info(`hdlc link up (max info ${p.maxInfoTx}/${p.maxInfoRx}, window ${p.windowTx})`),
      onLinkDown: (why) => this.log.warn(`hdlc link down: ${why}`),
    });
    this.module = new NetworkModule({
      mac: this.mac,
      host: config.host,
      port: config.port === 0 ? 0 : config.port + i,
      firmware: config.firmware,
      ...(config.gateway ? { gateway: config.gateway } : {}),
      link: this.primary,
      log: this.log,
      forwardTimeoutMs: config.uartTimeoutMs * 4,
      announceIntervalMs: config.announceIntervalMs,
      readingFormat: config.cbor ? 60 : 0,
      transmission: { ackTimeoutMs: config.ackTimeoutMs, maxRetransmit: config.maxRetransmit },
      bootEpoch,
      ...withKey(o.key ?? loadKitKeys(config, (f) => fs.readFileSync(f, 'utf8')).get(this.mac)),
      onGateway: (accepted) => o.onGateway?.(this.mac, accepted),
      allowDirect: config.allowDirect,
      sensors: added.map((a) => ({ type: a.type, path: a.path.join('/') })),
    });
  }

  /**
   * Attaches a serial monitor. Within the window after reset the kit's log goes to it; after the
   * window it is refused (returns false) and output stays off until the next reset (seed §4.4).
   */
  attachMonitor(sink: LogSink): boolean {
    if (!this.windowOpen) return false;
    this.log.sink = sink;
    this.monitorWaiter?.();
    return true;
  }

  /** Reset: waits for a monitor or the window, then starts the CoAP server and the link. */
  async start(): Promise<void> {
    this.lineRefused = false;
    if (this.windowTimer) clearTimeout(this.windowTimer);
    this.windowOpen = this.config.monitorWindowMs > 0;
    const windowEnds = new Promise<void>((resolve) => {
      if (!this.windowOpen) return resolve();
      this.windowTimer = setTimeout(() => {
        this.windowTimer = undefined;
        this.windowOpen = false;
        resolve();
      }, this.config.monitorWindowMs);
    });
    if (!this.log.sink && this.windowOpen) {
      // The CoAP server starts when a monitor attaches or the window ends, whichever is first; a
      // monitor attached early leaves the window open for its whole length (a second one may come).
      await Promise.race([windowEnds, new Promise<void>((resolve) => (this.monitorWaiter = resolve))]);
      this.monitorWaiter = undefined;
    }
    await this.module.start();
    await this.primary.connect();
    const at = `${this.address().address}:${this.address().port} (prefix /${this.module.prefix}, firmware ${this.config.firmware})`;
    // With a gateway the kit is "up" only once the gateway accepts it (the module says which).
    if (this.config.gateway) this.log.note(`kit ${this.mac} started on ${at}; announcing to the gateway ${this.config.gateway.address}:${this.config.gateway.port}`);
    else this.log.note(`kit ${this.mac} up on ${at}`);
  }

  address(): Peer {
    return this.module.address();
  }

  async stop(): Promise<void> {
    if (this.windowTimer) clearTimeout(this.windowTimer);
    this.windowTimer = undefined;
    this.monitorLine?.close();
    this.sensor.stop();
    await this.module.stop();
    this.primary.close();
    this.secondary.close();
  }
}

function withKey(key: Buffer | undefined): { key?: Buffer } {
  return key ? { key } : {};
}
