// The two hot read responses (latest of all, a device's page) written as JSON text straight from
// store records: no intermediate wire objects, no generic serialiser walking free-form fields.
// The result is byte-for-byte what JSON.stringify of the wire form gives (test/core/observation-json.test.ts).
import { isoUtc } from './time.ts';
import type { ObservationRecord } from './types.ts';

export function observationJson(r: ObservationRecord): string {
  return observationJsonText(r.ts, r.temperature, r.extra ? JSON.stringify(r.extra) : null);
}

/**
 * One observation from its stored parts, the free fields as the JSON text the stores keep
 * (JSON.stringify of the object): a page read from the store is rendered without parsing them.
 */
export function observationJsonText(ts: number, temperature: number | null, extra: string | null): string {
  let s = '{"timestamp":"' + isoUtc(ts) + '"';
  if (temperature !== null) s += ',"temperature":' + JSON.stringify(temperature);
  // Free fields never include timestamp or temperature (parseBatch keeps those apart).
  if (extra !== null && extra.length > 2) s += ',' + extra.slice(1, -1);
  return s + '}';
}

export function latestJson(rows: { deviceId: string; observation: ObservationRecord }[]): string {
  const parts = new Array<string>(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i]!;
    parts[i] = '{"deviceId":"' + r.deviceId + '","observations":[' + observationJson(r.observation) + ']}';
  }
  return '[' + parts.join(',') + ']';
}

/** Rows of several devices, consecutive rows of one device in one group (a solution-wide page). */
export function groupedJson(rows: { deviceId: string; observation: ObservationRecord }[]): string {
  const parts: string[] = [];
  let i = 0;
  while (i < rows.length) {
    const id = rows[i]!.deviceId;
    const obs: string[] = [];
    for (; i < rows.length && rows[i]!.deviceId === id; i++) obs.push(observationJson(rows[i]!.observation));
    parts.push('{"deviceId":"' + id + '","observations":[' + obs.join(',') + ']}');
  }
  return '[' + parts.join(',') + ']';
}

export function pageJson(rows: ObservationRecord[]): string {
  return '{"observations":[' + rows.map(observationJson).join(',') + ']}';
}
