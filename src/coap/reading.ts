// Reading payloads of the kit (wire §2): text `<epoch seconds>,<value with 2 decimals>,<F|C>`, e.g.
// `1553212345,72.50,F`, optionally wrapped by newer firmware in the CBOR map {0: "temp", 1: "<text>"}
// sent with content-format 60. The unit configuration reads `<epoch>,<F|C>`.
import { CborError, decodeCbor, encodeCbor } from './cbor.ts';
import { ContentFormat } from './options.ts';

export type TempUnit = 'C' | 'F';

export interface Reading {
  /** Seconds since the epoch, as the kit's clock has it. */
  epoch: number;
  value: number;
  unit: TempUnit;
}

export class ReadingFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReadingFormatError';
  }
}

export function encodeReadingText(r: Reading): string {
  return `${Math.floor(r.epoch)},${r.value.toFixed(2)},${r.unit}`;
}

const READING = /^(\d{1,12}),(-?\d+(?:\.\d+)?),([CF])$/;

export function decodeReadingText(s: string): Reading {
  const m = READING.exec(s.trim());
  if (!m) throw new ReadingFormatError(`not a reading: ${JSON.stringify(s.slice(0, 64))}`);
  return { epoch: Number(m[1]), value: Number(m[2]), unit: m[3] as TempUnit };
}

/** The CBOR wrapper {0: "temp", 1: text}: bytes start A2 00 64 "temp" 01. */
export function wrapCbor(text: string, kind = 'temp'): Buffer {
  return encodeCbor(
    new Map<number, string>([
      [0, kind],
      [1, text],
    ]),
  );
}

/** Unwraps {0: kind, 1: text}; throws ReadingFormatError for anything else. */
export function unwrapCbor(payload: Uint8Array): { kind: string; text: string } {
  let v;
  try {
    v = decodeCbor(payload);
  } catch (e) {
    throw new ReadingFormatError(`bad CBOR reading: ${(e as CborError).message}`);
  }
  if (!(v instanceof Map) || typeof v.get(0) !== 'string' || typeof v.get(1) !== 'string') {
    throw new ReadingFormatError('CBOR reading is not a map {0: kind, 1: text}');
  }
  return { kind: v.get(0) as string, text: v.get(1) as string };
}

export interface EncodedPayload {
  payload: Buffer;
  contentFormat: number;
}

/** A reading as the kit sends it: text (content-format 0) or the CBOR wrapper (content-format 60). */
export function encodeReading(r: Reading, cbor: boolean): EncodedPayload {
  const text = encodeReadingText(r);
  return cbor ? { payload: wrapCbor(text), contentFormat: ContentFormat.CBOR } : { payload: Buffer.from(text, 'utf8'), contentFormat: ContentFormat.TEXT_PLAIN };
}

/**
 * Decodes a reading in either form. The content-format decides when given; without one (or with
 * the legacy format 2 that older firmware used for both forms) a leading 0xA2 means CBOR.
 */
export function decodeReading(payload: Uint8Array, contentFormat?: number): Reading {
  const cbor = contentFormat === ContentFormat.CBOR || ((contentFormat === undefined || contentFormat === ContentFormat.LEGACY_KIT) && payload[0] === 0xa2);
  const text = cbor ? unwrapCbor(payload).text : Buffer.from(payload).toString('utf8');
  return decodeReadingText(text);
}

/** The unit configuration answer `<epoch>,<F|C>`. */
export function encodeUnitConfig(epoch: number, unit: TempUnit): string {
  return `${Math.floor(epoch)},${unit}`;
}

export function decodeUnitConfig(s: string): { epoch: number; unit: TempUnit } {
  const m = /^(\d{1,12}),([CF])$/.exec(s.trim());
  if (!m) throw new ReadingFormatError(`not a unit configuration: ${JSON.stringify(s.slice(0, 64))}`);
  return { epoch: Number(m[1]), unit: m[2] as TempUnit };
}

export function celsiusToFahrenheit(c: number): number {
  return (c * 9) / 5 + 32;
}

export function fahrenheitToCelsius(f: number): number {
  return ((f - 32) * 5) / 9;
}

/**
 * A reading of an added sensor (seed §4.4: "a resource URI of an added sensor must be registered in
 * the server's configuration header"): the temperature's form with the sensor's own unit,
 * `<epoch seconds>,<value>,<unit>` (e.g. `1553212345,45.2,%`), or in CBOR {0: "<type>", 1: text}.
 */
export interface SensorReading {
  epoch: number;
  value: number;
  unit: string;
}

/** A unit of an added sensor: 1..8 printable characters, no comma or space (`%`, `lx`, `V`, `hPa`). */
export const SENSOR_UNIT = /^[^\s,]{1,8}$/;

export function encodeSensorReading(r: SensorReading, decimals: number, cbor: boolean, type: string): EncodedPayload {
  const text = `${Math.floor(r.epoch)},${r.value.toFixed(decimals)},${r.unit}`;
  return cbor ? { payload: wrapCbor(text, type), contentFormat: ContentFormat.CBOR } : { payload: Buffer.from(text, 'utf8'), contentFormat: ContentFormat.TEXT_PLAIN };
}

const SENSOR_READING = /^(\d{1,12}),(-?\d+(?:\.\d+)?),([^\s,]{1,8})$/;

/** Decodes an added sensor's reading in either form; throws ReadingFormatError otherwise. */
export function decodeSensorReading(payload: Uint8Array, contentFormat?: number): SensorReading {
  const cbor = contentFormat === ContentFormat.CBOR || ((contentFormat === undefined || contentFormat === ContentFormat.LEGACY_KIT) && payload[0] === 0xa2);
  const text = (cbor ? unwrapCbor(payload).text : Buffer.from(payload).toString('utf8')).trim();
  const m = SENSOR_READING.exec(text);
  if (!m) throw new ReadingFormatError(`not a sensor reading: ${JSON.stringify(text.slice(0, 64))}`);
  return { epoch: Number(m[1]), value: Number(m[2]), unit: m[3]! };
}
