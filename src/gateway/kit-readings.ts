// Kit readings on their way out of the gateway (docs/coap.md "Readings into the platform"): each one
// of a sandbox kit is stored as an observation of its device (through ReadingWriter, in one write
// with the other kits' readings) and then handed raw to the payload sink (the MQTT bubble-up), which
// also sees the answers to clients' GETs of a temperature. Store first, then bubble: a subscriber
// that uploads the figure it got finds the reading stored, and its unit with it (docs/mqtt.md).
import type { Logger } from 'pino';
import { getUintOption, Option, type CoapMessage } from '../coap/index.ts';
import { SANDBOX, type DeviceRecord } from '../core/types.ts';
import type { ClockKeeper } from './clock.ts';
import type { KitDirectory } from './kits.ts';
import type { ReadingCounters, ReadingWriter } from './reading-writer.ts';
import { readingObservation, sensorObservation, sensorTypeOf, tryReading, trySensorReading, type KitPayloadSink } from './readings.ts';

/** The kit's temperature resource below its prefix. */
export const TEMP_PATH = ['arduino', 'temp'];

/** The kit's temperature resource (any prefix): its payloads are readings. */
export function isTempPath(path: string[]): boolean {
  return path.length >= 2 && path[path.length - 2] === TEMP_PATH[0] && path[path.length - 1] === TEMP_PATH[1];
}

export interface KitReadingsDeps {
  kits: KitDirectory;
  clock: ClockKeeper;
  payloads: KitPayloadSink | null;
  log: Logger;
  stats: ReadingCounters;
  /** A kit clock off by more than this is not trusted for a reading's time. */
  maxClockSkewMs: number;
  /** The device record of a MAC from the gateway's cache (undefined: not cached), and read when not. */
  cachedDevice(mac: string): DeviceRecord | null | undefined;
  device(mac: string): Promise<DeviceRecord | null>;
  writer: ReadingWriter;
}

export class KitReadings {
  constructor(private readonly d: KitReadingsDeps) {}

  /** Writes the readings already received (before the store may close). */
  flush(): Promise<void> {
    return this.d.writer.flush();
  }

  /**
   * Hands a reading payload, unchanged, to the payload sink, for the kit's owner (sandbox kits only):
   * the temperature's (`path`, sensor type `temp` or the CBOR wrapper's kind) or an added sensor's
   * (`sensor`, its type).
   */
  bubble(mac: string, m: CoapMessage, o: { path?: string[]; sensor?: string; device?: DeviceRecord | null }): void {
    const sink = this.d.payloads;
    if (!sink || m.payload.length === 0) return;
    const cf = getUintOption(m, Option.CONTENT_FORMAT);
    if (!(o.sensor ? trySensorReading(m.payload, cf) : tryReading(m.payload, cf ?? this.d.kits.get(mac)?.cf))) return;
    const sensorType = o.sensor ?? sensorTypeOf(m.payload, o.path ?? TEMP_PATH);
    // It becomes an MQTT topic level: no separators, wildcards or control characters.
    if (!/^[A-Za-z0-9_.-]{1,32}$/.test(sensorType)) return;
    if (o.device !== undefined) return this.hand(o.device, mac, sensorType, m.payload);
    // A fresh cached record is used at once: no promise (nor closure) per payload; every answer
    // to a client's GET of a temperature comes here when MQTT is on.
    const cached = this.d.cachedDevice(mac);
    if (cached !== undefined) return this.hand(cached, mac, sensorType, m.payload);
    void this.d.device(mac).then(
      (dev) => this.hand(dev, mac, sensorType, m.payload),
      (e: unknown) => this.d.log.warn({ err: e, mac }, 'gateway could not look up a kit'),
    );
  }

  /** bubble()'s last step: the payload to the sink, for a sandbox kit. */
  private hand(dev: DeviceRecord | null, mac: string, sensorType: string, payload: Buffer): void {
    if (!dev || dev.solution !== SANDBOX) return;
    try {
      this.d.payloads?.({ device: dev, mac, sensorType, payload });
    } catch (e) {
      this.d.log.warn({ err: e, mac }, 'gateway payload sink failed');
    }
  }

  /** A temperature reading (an answer or a notification of the readings bridge): stored, and handed to the sink. */
  temperature(mac: string, m: CoapMessage): void {
    const kit = this.d.kits.get(mac);
    const r = tryReading(m.payload, getUintOption(m, Option.CONTENT_FORMAT) ?? kit?.cf);
    if (!r) return;
    const at = this.d.writer.stamp(mac);
    this.d.clock.report(mac, r.epoch * 1000, 'reading', at);
    void this.d.device(mac).then(
      (d) => {
        if (!d || d.solution !== SANDBOX) return;
        // The raw payload bubbles up once the write is over, whether or not the store took the reading.
        const written = () => this.bubble(mac, m, { path: [kit?.prefix ?? 'snsr', ...TEMP_PATH], device: d });
        this.d.writer.queue({ device: d, record: readingObservation(r, at, mac, this.d.maxClockSkewMs), mac, written });
      },
      (e: unknown) => {
        this.d.stats.storeErrors++;
        this.d.log.warn({ err: e, mac: mac }, 'gateway could not store a reading');
      },
    );
  }

  /** An added sensor's notification (src/device/sensors.ts) stored as an observation with its own field. */
  sensor(mac: string, type: string, m: CoapMessage): void {
    const r = trySensorReading(m.payload, getUintOption(m, Option.CONTENT_FORMAT));
    if (!r) return;
    const at = this.d.writer.stamp(mac);
    void this.d.device(mac).then(
      (d) => {
        if (!d || d.solution !== SANDBOX) return;
        const written = () => this.bubble(mac, m, { sensor: type, device: d });
        this.d.writer.queue({ device: d, record: sensorObservation(type, r, at, mac), mac, sensor: type, written });
      },
      (e: unknown) => {
        this.d.stats.storeErrors++;
        this.d.log.warn({ err: e, mac: mac, sensor: type }, 'gateway could not store a sensor reading');
      },
    );
  }
}
