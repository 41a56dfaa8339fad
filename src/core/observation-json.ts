// The two hot read responses (latest of all, a device's page) written as JSON text straight from
// store records: no intermediate wire objects, no generic serialiser walking free-form fields.
// The result is byte-for-byte what JSON.stringify of the wire form gives (test/core/observation-json.test.ts).
import { isoUtc } from './time.ts';
import type { ObservationRecord } from './types.ts';

export function observationJson(r: ObservationRecord): string {
  let s = '{"timestamp":"' + isoUtc(r.ts) + '"';
  if (r.temperature !== null) s += ',"temperature":' + JSON.stringify(r.temperature);
  if (r.extra) {
    // Free fields never include timestamp or temperature (parseBatch keeps those apart).
    const inner = JSON.stringify(r.extra);
    if (inner.length > 2) s += ',' + inner.slice(1, -1);
  }
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
