// Kit readings into the platform (wire §3: "each dev-kit reading was posted as an observation of that
// device in sandbox"). The unit rule (docs/api.md "Temperature units"): the gateway stores °C. A kit
// set to Fahrenheit reports °F; its value is converted, (F − 32) × 5/9 rounded to 4 decimals
// (seed §2: up to four fractional digits), and the kit's own figures are kept in the free fields
// `rawValue` and `rawUnit`.
// The timestamp is the kit's own reading time (its epoch second), as the original clients that
// upload kit readings themselves use it: the same reading then lands on the same (device, time) key
// and an upload of it replaces the bridged one instead of doubling it, in °C as well
// (src/service/kit-units.ts). A kit clock off by more than the gateway's skew tolerance is not
// trusted: that reading is stored at its receipt time with the kit's epoch kept as `kitEpoch`, and
// the clock keeper sets the kit right.
import { decodeReading, decodeSensorReading, unwrapCbor, type Reading, type SensorReading } from '../coap/index.ts';
import type { DeviceRecord, ObservationRecord } from '../core/types.ts';
// The one °F → °C conversion every writer of a kit's series uses (docs/api.md "Temperature units").
import { toCelsius } from '../service/kit-units.ts';

/** A kit payload as the gateway received it, for whoever wants the raw bytes (the MQTT bubble-up). */
export interface KitPayload {
  /** The kit's device (in its owner's sandbox). */
  device: DeviceRecord;
  mac: string;
  /** `temp` for the temperature resource, an added sensor's type for its resource (a CBOR reading may name its own kind). */
  sensorType: string;
  /** The kit's bytes, unchanged. */
  payload: Buffer;
}

/**
 * Where the gateway hands every reading payload it receives. Injected by the composition root, so
 * the gateway knows nothing of who listens (the MQTT broker, through the event bus).
 */
export type KitPayloadSink = (p: KitPayload) => void;

/** The sensor type of a temperature payload: the CBOR wrapper's kind, else the resource's last path segment. */
export function sensorTypeOf(payload: Buffer, path: string[]): string {
  if (payload[0] === 0xa2) {
    try {
      const kind = unwrapCbor(payload).kind;
      // It becomes an MQTT topic level: no separators, wildcards or control characters.
      if (/^[A-Za-z0-9_.-]{1,32}$/.test(kind)) return kind;
    } catch {
      // not the wrapper: the resource names it
    }
  }
  return path[path.length - 1] ?? 'temp';
}

/**
 * A decoded reading as the observation the platform stores: at the kit's reading time when the
 * kit's clock is within `trustMs` (+1 s, since the epoch is whole seconds) of the receipt time.
 */
export function readingObservation(r: Reading, receivedAt: number, mac: string, trustMs = 10_000): ObservationRecord {
  const kitMs = r.epoch * 1000;
  const trusted = Math.abs(kitMs - receivedAt) <= trustMs + 1000;
  const extra: Record<string, unknown> = { unit: 'C', rawValue: r.value, rawUnit: r.unit, mac, source: 'gateway' };
  if (!trusted) extra.kitEpoch = r.epoch;
  return { ts: trusted ? kitMs : receivedAt, temperature: toCelsius(r.value, r.unit), extra };
}

/** Decodes a notification payload; undefined when it is not a reading. */
export function tryReading(payload: Buffer, contentFormat: number | undefined): Reading | undefined {
  if (payload.length === 0) return undefined;
  try {
    return decodeReading(payload, contentFormat);
  } catch {
    return undefined;
  }
}

/**
 * An added sensor's reading (docs/device.md "Added sensors") as an observation: its value under its
 * sensor type name (`humidity: 45.2`), its unit as `<type>Unit`, and `sensor: <type>` so that a
 * consumer (the MQTT bridge: topic per sensor type) knows which sensor spoke. No temperature.
 */
export function sensorObservation(type: string, r: SensorReading, receivedAt: number, mac: string): ObservationRecord {
  return {
    ts: receivedAt,
    temperature: null,
    extra: { [type]: r.value, [`${type}Unit`]: r.unit, sensor: type, kitEpoch: r.epoch, mac, source: 'gateway' },
  };
}

/** Decodes an added sensor's notification payload; undefined when it is not a reading. */
export function trySensorReading(payload: Buffer, contentFormat: number | undefined): SensorReading | undefined {
  if (payload.length === 0) return undefined;
  try {
    return decodeSensorReading(payload, contentFormat);
  } catch {
    return undefined;
  }
}
