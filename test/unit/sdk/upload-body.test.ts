// The SDK writes upload bodies by hand for the common shape (src/sdk/upload-body.ts). What a user
// relies on: the service receives exactly the observations they gave — each timestamp as
// toISOString() writes it, every field and value as JSON.stringify sends it — whatever the shape.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { uploadBody } from '../../../src/sdk/upload-body.ts';
import type { UploadObservation } from '../../../src/sdk/types.ts';

const text = (b: Uint8Array) => new TextDecoder().decode(b);

/** What the SDK sent before: JSON.stringify with each Date or epoch-millisecond timestamp as toISOString(). */
const reference = (os: UploadObservation[]) =>
  JSON.parse(JSON.stringify({ observations: os.map((o) => ({ ...o, timestamp: typeof o.timestamp === 'string' ? o.timestamp : new Date(o.timestamp).toISOString() })) }));

it('every epoch-millisecond timestamp is sent as toISOString writes it, on day, year and range edges and at random', () => {
  let seed = 0x51ed_27a1;
  const rand = () => {
    seed = (Math.imul(seed ^ (seed >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) | 0;
    return (seed >>> 0) / 2 ** 32;
  };
  const edges = [0, 1, 999, 1000, 86_399_999, 86_400_000, 951_782_400_000 /* 2000-02-29 */, 253402300799999, 253402300800000, -1, -86_400_001, 8.64e15, -8.64e15, 1.5];
  const random = Array.from({ length: 20_000 }, () => Math.floor(rand() * 253402300800000));
  const all = [...edges, ...random];
  const sent = JSON.parse(text(uploadBody(all.map((ms) => ({ timestamp: ms, temperature: 1 }))))).observations as { timestamp: string }[];
  all.forEach((ms, i) => assert.equal(sent[i]!.timestamp, new Date(ms).toISOString(), String(ms)));
  assert.throws(() => uploadBody([{ timestamp: Number.NaN, temperature: 1 }]), RangeError);
  assert.throws(() => uploadBody([{ timestamp: 8.64e15 + 1, temperature: 1 }]), RangeError);
});

it('uploadBody sends what JSON.stringify would, for every shape', () => {
  const t = Date.UTC(2026, 10, 24, 21, 30, 5, 7);
  const shapes: UploadObservation[] = [
    { timestamp: t, temperature: 21.5 },
    { timestamp: new Date(t), temperature: -0 },
    { timestamp: '2026-11-24T21:30:05.007Z', temperature: 1e21 },
    { timestamp: 'not "a" time\\', temperature: 5e-324 },
    { timestamp: t + 1 },
    { temperature: 0.1 + 0.2, timestamp: t + 2 },
    { timestamp: t + 3, temperature: '72.50' },
    { timestamp: t + 4, temperature: Number.NaN },
    { timestamp: t + 5, temperature: Number.POSITIVE_INFINITY },
    { timestamp: t + 6, temperature: null as unknown as number },
    { timestamp: t + 7, temperature: 20, humidity: 40, tags: ['a', 'b'], note: 'é "q" \u2028' },
    { timestamp: new Date(-1), temperature: 3 },
    { timestamp: t + 8, temperature: undefined },
  ];
  assert.deepEqual(JSON.parse(text(uploadBody(shapes))), reference(shapes));
  assert.deepEqual(JSON.parse(text(uploadBody([]))), { observations: [] });
  // The common shape is written without JSON.stringify's object walk, in the order shown.
  assert.equal(text(uploadBody([{ timestamp: t, temperature: 21.5 }])), '{"observations":[{"timestamp":"2026-11-24T21:30:05.007Z","temperature":21.5}]}');
  // Large bodies and long free-form text grow the buffer; every row still arrives.
  const many: UploadObservation[] = Array.from({ length: 5000 }, (_, i) => (i % 7 ? { timestamp: t + i * 1000, temperature: i / 3 } : { timestamp: t + i * 1000, note: 'ü'.repeat(i % 50) + '"' }));
  assert.deepEqual(JSON.parse(text(uploadBody(many))), reference(many));
  assert.throws(() => uploadBody([{ timestamp: Number.NaN }]), RangeError);
});
