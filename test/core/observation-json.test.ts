// The hand-written JSON of the hot read paths must equal JSON.stringify of the wire form exactly.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { toWireObservation, type ObservationRecord } from '../../src/core/types.ts';
import { latestJson, pageJson } from '../../src/core/observation-json.ts';

const records: ObservationRecord[] = [
  { ts: 0, temperature: null, extra: null },
  { ts: Date.UTC(2026, 0, 1, 12, 0, 0, 5), temperature: -0.0001, extra: null },
  { ts: 1_700_000_000_123, temperature: 21.5, extra: { humidity: 40, note: 'quote " backslash \\ ☃ \u2028', nested: { a: [1, null, true] } } },
  { ts: 1_700_000_000_124, temperature: 1e21, extra: {} },
  { ts: 1_700_000_000_125, temperature: null, extra: { tags: ['x'] } },
];

it('pageJson equals JSON.stringify of the wire observations', () => {
  assert.equal(pageJson(records), JSON.stringify({ observations: records.map(toWireObservation) }));
  assert.deepEqual(JSON.parse(pageJson([])), { observations: [] });
});

it('latestJson equals JSON.stringify of the observation groups', () => {
  const rows = records.map((observation, i) => ({ deviceId: `00000000-0000-4000-8000-00000000000${i}`, observation }));
  assert.equal(latestJson(rows), JSON.stringify(rows.map((r) => ({ deviceId: r.deviceId, observations: [toWireObservation(r.observation)] }))));
  assert.equal(latestJson([]), '[]');
});
