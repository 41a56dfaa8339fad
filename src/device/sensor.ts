// The application processor: a CoAP server reached only through the HDLC link (wire §2). It sees
// paths with the module's prefix already stripped and routes on what follows. Resources:
//   GET  /                        2.05 "Reef Reference CoAP Server: <version>" (text)
//   GET  /.well-known/core        2.05 link format (RFC 6690), block-wise when over 128 bytes
//   GET  /arduino/temp?sens       2.05 the reading; Observe=0 registers, Observe=1 deregisters
//   GET  /arduino/temp?cfg        2.05 "<epoch>,<C|F>"
//   PUT  /arduino/temp?cfg=C|F    2.04 (the unit comes from the query; the payload is ignored)
//   PUT  /arduino/temp?cfg        5.01 (the value in the payload: the firmware does not implement it)
//   GET  /system/time, /sys/time  2.05 4-byte big-endian epoch, content-format 42
//   PUT  /system/time, /sys/time  2.04 with the 10-byte time TLV; 4.06 when malformed
//   GET  /sys/stats?mod=coap      2.05 the CoAP statistics, text `rx=..,tx=..,...`
//   GET  /<added uri>?sens        2.05 an added sensor's reading (src/device/sensors.ts); observable
// Any method on /arduino/temp without a query 4.05, an unknown query 5.01 (as the original), an
// unknown resource 4.04, other methods 4.05. It also starts messages of its own: notifications,
// the reboot event `PUT /sys/snsr?ev=rbt` at boot and the clock `PUT /sensor/arduino/time`.
import {
  ACK,
  BlockOptionError,
  classifyDatagram,
  Code,
  CoapMessage,
  CoapOption,
  CON,
  ContentFormat,
  decodeTimeTlv,
  describeMessage,
  emptyMessage,
  encodeBlock,
  encodeEpoch32,
  encodeReading,
  encodeTimeTlv,
  encodeUnitConfig,
  getUintOption,
  isRequestCode,
  isResponseCode,
  NON,
  Option,
  planBlock2,
  responseTo,
  RST,
  serializeMessage,
  stringOption,
  TempUnit,
  TimeTlvError,
  uintOption,
  uriPath,
  uriQuery,
  celsiusToFahrenheit,
} from '../coap/index.ts';
import { encodeSensorReading } from '../coap/index.ts';
import { DeviceLog } from './log.ts';
import { Observer, ObserverRegistry } from './observe.ts';
import type { AddedSensorSpec } from './sensors.ts';
import { TemperatureModel } from './temperature-model.ts';

export const SERVER_NAME = 'Reef Reference CoAP Server';
/** The application processor's preferred block size: the original's payload maximum, 128 bytes (SZX 3). */
export const SENSOR_BLOCK_SZX = 3;
const TEMP = 'arduino/temp';

export interface SensorOptions {
  /** Application version shown by GET / (the original showed "1.4.5"). */
  version: string;
  /** The module's prefix, so /.well-known/core lists paths as seen from outside. */
  prefix: string;
  cbor: boolean;
  maxAgeSec: number;
  periodMs: number;
  conEvery: number;
  observeLimit: number;
  /** How long a CON notification may go unacknowledged before its observer is dropped. */
  conTimeoutMs: number;
  timeSyncIntervalMs: number;
  unit: TempUnit;
  model: TemperatureModel;
  log: DeviceLog;
  random?: () => number;
  /** The host clock; the kit's own clock is this plus an offset set by PUT. */
  hostNow?: () => number;
  /** Sensors registered by the kit's sensor configuration, each with its value model. */
  added?: { spec: AddedSensorSpec; model: TemperatureModel }[];
  /** Answer an observe registration 2.03 with Observe, as the Sensor API firmware did (default 2.05, RFC 7641 §4.1). */
  observe203?: boolean;
}

export interface SensorStats {
  /** CoAP messages received from the link, and sent onto it. */
  rx: number;
  tx: number;
  requests: number;
  /** Responses by class. */
  ok: number;
  clientErrors: number;
  serverErrors: number;
  notifications: number;
  conNotifications: number;
  observersDropped: number;
  upstream: number;
}

export class Sensor {
  readonly observers: ObserverRegistry;
  readonly stats: SensorStats = { rx: 0, tx: 0, requests: 0, ok: 0, clientErrors: 0, serverErrors: 0, notifications: 0, conNotifications: 0, observersDropped: 0, upstream: 0 };
  unit: TempUnit;
  private offsetMs = 0;
  private mid: number;
  private readonly random: () => number;
  private readonly hostNow: () => number;
  private out: ((msg: Buffer) => void) | undefined;
  private notifyTimer: NodeJS.Timeout | undefined;
  private syncTimer: NodeJS.Timeout | undefined;
  private booted = false;
  private readingCache: { epoch: number; cbor: boolean; unit: TempUnit; present: boolean; reading: { payload: Buffer; contentFormat: number } } | undefined;
  /** MIDs of our recent notifications → observer token, to act on ACK/RST relayed by the module. */
  private readonly sentMids = new Map<number, { token: Buffer; con: boolean; timer?: NodeJS.Timeout }>();

  constructor(private readonly o: SensorOptions) {
    this.random = o.random ?? Math.random;
    this.hostNow = o.hostNow ?? Date.now;
    this.mid = Math.floor(this.random() * 0x10000);
    this.unit = o.unit;
    this.observers = new ObserverRegistry(o.observeLimit, o.conEvery);
  }

  /** Connects the sensor's output to the HDLC link. */
  attach(send: (msg: Buffer) => void): void {
    this.out = send;
  }

  /** The kit's own clock, epoch ms. */
  now(): number {
    return this.hostNow() + this.offsetMs;
  }

  setClock(epochMs: number): void {
    this.offsetMs = epochMs - this.hostNow();
  }

  /** The link came up: at the first one, the reboot event; every time, the clock PUT (seed §4.4). */
  linkUp(): void {
    if (!this.booted) {
      this.booted = true;
      this.upstream(['sys', 'snsr'], ['ev=rbt'], Buffer.alloc(0));
    }
    this.sendClock();
    if (this.syncTimer) clearInterval(this.syncTimer);
    if (this.o.timeSyncIntervalMs > 0) {
      this.syncTimer = setInterval(() => this.sendClock(), this.o.timeSyncIntervalMs);
      this.syncTimer.unref();
    }
  }

  linkDown(): void {
    if (this.syncTimer) clearInterval(this.syncTimer);
    this.syncTimer = undefined;
  }

  stop(): void {
    this.linkDown();
    if (this.notifyTimer) clearInterval(this.notifyTimer);
    this.notifyTimer = undefined;
    for (const s of this.sentMids.values()) if (s.timer) clearTimeout(s.timer);
    this.sentMids.clear();
    this.observers.clear();
  }

  private nextMid(): number {
    this.mid = (this.mid + 1) & 0xffff;
    return this.mid;
  }

  private newToken(): Buffer {
    return Buffer.from([0, 0, 0, 0].map(() => Math.floor(this.random() * 256)));
  }

  private send(m: CoapMessage): void {
    this.stats.tx++;
    if (this.o.log.on(7)) this.o.log.debug(`coap tx ${describeMessage(m)}`);
    this.out?.(serializeMessage(m));
  }

  /** The clock PUT upstream: `/sensor/arduino/time` (seed §9 names it with `sensor`) with the time TLV. */
  sendClock(): void {
    this.upstream(['sensor', 'arduino', 'time'], [], encodeTimeTlv(this.now()), ContentFormat.OCTET_STREAM);
  }

  private upstream(path: string[], query: string[], payload: Buffer, cf?: number): void {
    this.stats.upstream++;
    const options: CoapOption[] = [...path.map((s) => stringOption(Option.URI_PATH, s)), ...query.map((q) => stringOption(Option.URI_QUERY, q))];
    if (cf !== undefined) options.push(uintOption(Option.CONTENT_FORMAT, cf));
    this.send({ type: NON, code: Code.PUT, mid: this.nextMid(), token: this.newToken(), options, payload });
  }

  /** One CoAP message from the link. */
  receive(bytes: Buffer): void {
    this.stats.rx++;
    const c = classifyDatagram(bytes);
    if (c.kind === 'ignore') return this.o.log.info(`coap dropped: ${c.reason}`);
    if (c.kind === 'reset') return this.send(emptyMessage(RST, c.mid));
    if (c.kind === 'respond') {
      return this.send({ type: ACK, code: c.code, mid: c.msg.mid, token: c.msg.token, options: [], payload: Buffer.from(c.diagnostic) });
    }
    const m = c.msg;
    if (this.o.log.on(7)) this.o.log.debug(`coap rx ${describeMessage(m)}`);
    if (m.code === Code.EMPTY) {
      if (m.type === CON) return this.send(emptyMessage(RST, m.mid));
      return this.onAckOrReset(m);
    }
    if (isResponseCode(m.code)) return; // answers to our upstream NONs: nothing to do
    if (!isRequestCode(m.code) && m.code !== 0) return;
    this.stats.requests++;
    const res = this.handle(m);
    const cls = res.code >> 5;
    if (cls === 2) this.stats.ok++;
    else if (cls === 4) this.stats.clientErrors++;
    else if (cls === 5) this.stats.serverErrors++;
    this.send(responseTo(m, res.code, () => this.nextMid(), res.options, res.payload));
  }

  private onAckOrReset(m: CoapMessage): void {
    const s = this.sentMids.get(m.mid);
    if (!s) return;
    this.sentMids.delete(m.mid);
    if (s.timer) clearTimeout(s.timer);
    if (m.type === RST) this.drop(s.token, 'RST to a notification');
  }

  private drop(token: Buffer, why: string): void {
    if (this.observers.remove(token)) {
      this.stats.observersDropped++;
      this.o.log.note(`observer ${token.toString('hex')} dropped: ${why}`);
    }
    this.syncNotifyTimer();
  }

  // ---- resources ------------------------------------------------------------------------------

  private handle(m: CoapMessage): { code: number; options?: CoapOption[]; payload?: Buffer } {
    const path = uriPath(m).join('/');
    const query = uriQuery(m);
    let res: { code: number; options?: CoapOption[]; payload?: Buffer };
    if (path === '') res = m.code === Code.GET ? text(`${SERVER_NAME}: ${this.o.version}`) : { code: Code.METHOD_NOT_ALLOWED };
    else if (path === '.well-known/core') res = m.code === Code.GET ? this.linkFormat() : { code: Code.METHOD_NOT_ALLOWED };
    else if (path === TEMP) res = this.temp(m, query);
    else if (path === 'system/time' || path === 'sys/time') res = this.time(m);
    else if (path === 'sys/stats') res = this.statsResource(m, query);
    else {
      const added = this.o.added?.find((a) => a.spec.path.join('/') === path);
      res = added ? this.addedSensor(m, query, added.spec) : { code: Code.NOT_FOUND };
    }
    return this.block2(m, res);
  }

  private block2(m: CoapMessage, res: { code: number; options?: CoapOption[]; payload?: Buffer }): { code: number; options?: CoapOption[]; payload?: Buffer } {
    const payload = res.payload;
    if (!payload || payload.length === 0 || res.code !== Code.CONTENT) return res;
    const requested = getUintOption(m, Option.BLOCK2);
    let plan;
    try {
      plan = planBlock2(payload, requested, SENSOR_BLOCK_SZX);
    } catch (e) {
      if (e instanceof BlockOptionError) return { code: Code.BAD_REQUEST, payload: Buffer.from(e.message) };
      throw e;
    }
    if (plan === 'out-of-range') return { code: Code.BAD_REQUEST, payload: Buffer.from('block out of range') };
    if (plan === undefined) return res;
    const options = [...(res.options ?? []), uintOption(Option.BLOCK2, encodeBlock(plan.block))];
    if (plan.block.num === 0) options.push(uintOption(Option.SIZE2, payload.length));
    return { code: res.code, options, payload: plan.chunk };
  }

  private linkFormat(): { code: number; options: CoapOption[]; payload: Buffer } {
    const p = `/${this.o.prefix}`;
    const cf = this.o.cbor ? ContentFormat.CBOR : ContentFormat.TEXT_PLAIN;
    const links = [
      `<${p}>;title="${SERVER_NAME}"`,
      `<${p}/arduino/temp>;rt="temperature";if="sensor";obs;ct=${cf}`,
      `<${p}/system/time>;rt="clock";ct=42`,
      `<${p}/sys/time>;rt="clock";ct=42`,
      `<${p}/sys/stats>;rt="stats";ct=0`,
      ...(this.o.added ?? []).map(
        ({ spec }) => `<${p}/${spec.path.join('/')}>;rt="${spec.type}";if="sensor";obs;ct=${this.addedCbor(spec, this.o.cbor) ? ContentFormat.CBOR : ContentFormat.TEXT_PLAIN}`,
      ),
    ].join(',');
    return { code: Code.CONTENT, options: [uintOption(Option.CONTENT_FORMAT, ContentFormat.LINK_FORMAT)], payload: Buffer.from(links) };
  }

  /** The representation an observer of `resource` gets: the temperature or an added sensor's reading. */
  private representation(resource: string, cbor: boolean): { payload: Buffer; contentFormat: number } {
    if (resource === TEMP) return this.readingFor(cbor);
    const added = this.o.added?.find((a) => a.spec.path.join('/') === resource);
    return added ? this.addedReading(added.spec, cbor) : this.readingFor(cbor);
  }

  private addedCbor(spec: AddedSensorSpec, cbor: boolean): boolean {
    return spec.payload === 'kit' ? cbor : spec.payload === 'cbor';
  }

  private addedReading(spec: AddedSensorSpec, cbor: boolean): { payload: Buffer; contentFormat: number } {
    const now = this.now();
    const model = this.o.added!.find((a) => a.spec === spec)!.model;
    const value = Math.min(spec.max, Math.max(spec.min, model.celsius(now)));
    return encodeSensorReading({ epoch: Math.floor(now / 1000), value, unit: spec.unit }, spec.decimals, cbor, spec.type);
  }

  /** GET <uri>?sens of an added sensor: its reading; Observe=0/1 (un)registers as for the temperature. */
  private addedSensor(m: CoapMessage, query: string[], spec: AddedSensorSpec): { code: number; options?: CoapOption[]; payload?: Buffer } {
    if (query.length === 0) return { code: Code.METHOD_NOT_ALLOWED };
    if (query[0] !== 'sens') return { code: Code.NOT_IMPLEMENTED };
    if (m.code !== Code.GET) return { code: Code.METHOD_NOT_ALLOWED };
    const accept = getUintOption(m, Option.ACCEPT);
    let cbor = this.addedCbor(spec, this.o.cbor);
    if (accept === ContentFormat.CBOR) cbor = true;
    else if (accept === ContentFormat.TEXT_PLAIN) cbor = false;
    else if (accept !== undefined) return { code: Code.NOT_ACCEPTABLE };
    return this.observable(m, spec.path.join('/'), cbor, this.addedReading(spec, cbor));
  }

  /** A reading answer, registering or deregistering an observer of `resource` (RFC 7641 §4.1). */
  private observable(m: CoapMessage, resource: string, cbor: boolean, r: { payload: Buffer; contentFormat: number }): { code: number; options?: CoapOption[]; payload?: Buffer } {
    const options: CoapOption[] = [constUint(Option.CONTENT_FORMAT, r.contentFormat), constUint(Option.MAX_AGE, this.o.maxAgeSec)];
    const obs = getUintOption(m, Option.OBSERVE);
    if (obs === 0) {
      const displaced = this.observers.add({ token: m.token, resource, cbor, registeredAt: this.now(), sent: 0 });
      for (const d of displaced) this.o.log.note(`observer ${d.token.toString('hex')} replaced by ${m.token.toString('hex')}`);
      this.o.log.info(`observer ${m.token.toString('hex')} registered on /${resource}`);
      options.push(uintOption(Option.OBSERVE, this.observers.nextSeq()));
      this.syncNotifyTimer();
      // The Sensor API firmware answered a registration 2.03 with Observe (wire §2); an option.
      if (this.o.observe203) return { code: Code.VALID, options: options.filter((o) => o.number === Option.OBSERVE) };
    } else if (obs === 1) {
      if (this.observers.remove(m.token, resource)) this.o.log.info(`observer ${m.token.toString('hex')} deregistered`);
      this.syncNotifyTimer();
    }
    return { code: Code.CONTENT, options, payload: r.payload };
  }

  /** GET /sys/stats?mod=coap: the CoAP statistics of the application processor, as the firmware's. */
  private statsResource(m: CoapMessage, query: string[]): { code: number; options?: CoapOption[]; payload?: Buffer } {
    if (m.code !== Code.GET) return { code: Code.METHOD_NOT_ALLOWED };
    if (query.length === 0) return { code: Code.BAD_REQUEST, payload: Buffer.from('name a module: ?mod=coap') };
    if (query[0] !== 'mod=coap') return { code: Code.NOT_IMPLEMENTED };
    const s = this.stats;
    return text(
      `rx=${s.rx},tx=${s.tx},req=${s.requests},2xx=${s.ok},4xx=${s.clientErrors},5xx=${s.serverErrors},ntf=${s.notifications},con=${s.conNotifications},obs=${this.observers.size},obsdrop=${s.observersDropped},up=${s.upstream}`,
    );
  }

  /**
   * The temperature reading now. The sensor is sampled at most once per second of the kit's clock
   * (a reading carries whole seconds): every request and notification within the same second, for
   * the same unit and format, gets that sample's payload, rendered once.
   */
  private readingFor(cbor: boolean): { payload: Buffer; contentFormat: number } {
    const now = this.now();
    const epoch = Math.floor(now / 1000);
    const present = this.o.model.sensorPresent;
    const hit = this.readingCache;
    if (hit && hit.epoch === epoch && hit.cbor === cbor && hit.unit === this.unit && hit.present === present) return hit.reading;
    const c = this.o.model.celsius(now);
    const value = this.unit === 'F' ? celsiusToFahrenheit(c) : c;
    const reading = encodeReading({ epoch, value, unit: this.unit }, cbor);
    this.readingCache = { epoch, cbor, unit: this.unit, present, reading };
    return reading;
  }

  private temp(m: CoapMessage, query: string[]): { code: number; options?: CoapOption[]; payload?: Buffer } {
    const q = query[0];
    if (q === undefined) return { code: Code.METHOD_NOT_ALLOWED };
    if (q === 'sens') {
      if (m.code !== Code.GET) return { code: Code.METHOD_NOT_ALLOWED };
      const accept = getUintOption(m, Option.ACCEPT);
      let cbor = this.o.cbor;
      if (accept === ContentFormat.CBOR) cbor = true;
      else if (accept === ContentFormat.TEXT_PLAIN) cbor = false;
      else if (accept !== undefined) return { code: Code.NOT_ACCEPTABLE };
      return this.observable(m, TEMP, cbor, this.readingFor(cbor));
    }
    if (q === 'cfg') {
      // The original firmware takes the unit only from the query: a PUT with the value in the
      // payload is not implemented there, 5.01.
      if (m.code === Code.PUT) return { code: Code.NOT_IMPLEMENTED, payload: Buffer.from('use ?cfg=C or ?cfg=F') };
      if (m.code !== Code.GET) return { code: Code.METHOD_NOT_ALLOWED };
      return text(encodeUnitConfig(Math.floor(this.now() / 1000), this.unit));
    }
    if (q === 'cfg=C' || q === 'cfg=F') {
      if (m.code !== Code.PUT) return { code: Code.METHOD_NOT_ALLOWED };
      this.unit = q === 'cfg=C' ? 'C' : 'F';
      this.o.log.info(`unit set to ${this.unit}`);
      return { code: Code.CHANGED };
    }
    if (q.startsWith('cfg=')) return { code: Code.BAD_REQUEST, payload: Buffer.from('unit must be C or F') };
    return { code: Code.NOT_IMPLEMENTED };
  }

  private time(m: CoapMessage): { code: number; options?: CoapOption[]; payload?: Buffer } {
    if (m.code === Code.GET) {
      const accept = getUintOption(m, Option.ACCEPT);
      if (accept === ContentFormat.TEXT_PLAIN) return text(String(Math.floor(this.now() / 1000)));
      if (accept !== undefined && accept !== ContentFormat.OCTET_STREAM) return { code: Code.NOT_ACCEPTABLE };
      return { code: Code.CONTENT, options: [uintOption(Option.CONTENT_FORMAT, ContentFormat.OCTET_STREAM)], payload: encodeEpoch32(this.now()) };
    }
    if (m.code === Code.PUT) {
      try {
        this.setClock(decodeTimeTlv(m.payload));
      } catch (e) {
        if (e instanceof TimeTlvError) return { code: Code.NOT_ACCEPTABLE, payload: Buffer.from(e.message) };
        throw e;
      }
      this.o.log.info(`clock set to ${new Date(this.now()).toISOString()}`);
      return { code: Code.CHANGED };
    }
    return { code: Code.METHOD_NOT_ALLOWED };
  }

  // ---- notifications --------------------------------------------------------------------------

  private syncNotifyTimer(): void {
    const want = this.observers.size > 0;
    if (want && !this.notifyTimer) {
      this.notifyTimer = setInterval(() => this.notifyAll(), this.o.periodMs);
    } else if (!want && this.notifyTimer) {
      clearInterval(this.notifyTimer);
      this.notifyTimer = undefined;
    }
  }

  /** Sends one notification to every observer (also usable on demand, e.g. on a unit change). */
  notifyAll(): void {
    for (const ob of this.observers.list()) this.notify(ob);
  }

  private notify(ob: Observer): void {
    const r = this.representation(ob.resource, ob.cbor);
    const con = this.observers.confirmable(ob);
    const mid = this.nextMid();
    this.stats.notifications++;
    if (con) this.stats.conNotifications++;
    const rec: { token: Buffer; con: boolean; timer?: NodeJS.Timeout } = { token: ob.token, con };
    if (con) {
      rec.timer = setTimeout(() => {
        this.sentMids.delete(mid);
        this.drop(ob.token, 'CON notification not acknowledged');
      }, this.o.conTimeoutMs);
    }
    this.sentMids.set(mid, rec);
    // Remember only recent MIDs: a RST to an old NON notification still finds the observer below.
    if (this.sentMids.size > 64) {
      for (const [k, v] of this.sentMids) {
        if (this.sentMids.size <= 64) break;
        if (v.timer) continue;
        this.sentMids.delete(k);
      }
    }
    this.send({
      type: con ? CON : NON,
      code: Code.CONTENT,
      mid,
      token: ob.token,
      options: [uintOption(Option.OBSERVE, this.observers.nextSeq()), uintOption(Option.CONTENT_FORMAT, r.contentFormat), uintOption(Option.MAX_AGE, this.o.maxAgeSec)],
      payload: r.payload,
    });
  }
}

/** Option objects of constant uint values, made once: every reading answer carries the same few. */
const UINT_OPTIONS = new Map<number, CoapOption>();
function constUint(n: number, v: number): CoapOption {
  const key = n * 0x1_0000_0000 + v;
  let o = UINT_OPTIONS.get(key);
  if (!o) {
    o = uintOption(n, v);
    if (UINT_OPTIONS.size < 256) UINT_OPTIONS.set(key, o);
  }
  return o;
}

function text(s: string): { code: number; options: CoapOption[]; payload: Buffer } {
  return { code: Code.CONTENT, options: [uintOption(Option.CONTENT_FORMAT, ContentFormat.TEXT_PLAIN)], payload: Buffer.from(s) };
}
