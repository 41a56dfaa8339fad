// The climate model and the reading grid on their own: determinism from a seed, locations inside
// the area, plausible values with a daily cycle by local solar time, and the grid's arithmetic.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { annualMeanC, bounds, deviceModel, distanceKm, inArea, PROFILES, solarHour, temperatureAt, type Area } from '../../../src/sim/model.ts';
import { hashString } from '../../../src/sim/prng.ts';
import { countIn, fleetCountIn, makeGrid, nextGridTime, phaseOf } from '../../../src/sim/schedule.ts';

const DAY = 86_400_000;
const lisbon: Area = { kind: 'circle', center: { latitude: 38.7223, longitude: -9.1393 }, radiusKm: 20 };

test('the same seed gives the same devices and the same readings; another seed does not', () => {
  const a = Array.from({ length: 50 }, (_, i) => deviceModel(hashString('s1'), i, lisbon, PROFILES.outdoor));
  const b = Array.from({ length: 50 }, (_, i) => deviceModel(hashString('s1'), i, lisbon, PROFILES.outdoor));
  const c = Array.from({ length: 50 }, (_, i) => deviceModel(hashString('s2'), i, lisbon, PROFILES.outdoor));
  assert.deepEqual(
    a.map((m) => m.location),
    b.map((m) => m.location),
  );
  assert.notDeepEqual(
    a.map((m) => m.location),
    c.map((m) => m.location),
  );
  const t0 = Date.UTC(2025, 5, 1);
  for (let k = 0; k < 100; k++) {
    const t = t0 + k * 10_000;
    assert.equal(temperatureAt(a[7]!, t), temperatureAt(b[7]!, t));
  }
  assert.notEqual(temperatureAt(a[7]!, t0), temperatureAt(c[7]!, t0));
  // Devices of one simulation differ from each other.
  assert.notDeepEqual(a[0]!.location, a[1]!.location);
});

test('every location lies inside the area: circles, boxes, and a box across 180°', () => {
  const areas: Area[] = [
    lisbon,
    { kind: 'circle', center: { latitude: 78.2, longitude: 15.6 }, radiusKm: 300 },
    { kind: 'circle', center: { latitude: -33.9, longitude: 179.9 }, radiusKm: 50 },
    { kind: 'bbox', south: 45.7, west: 5.9, north: 47.8, east: 10.5 },
    { kind: 'bbox', south: -20, west: 170, north: -10, east: -170 },
  ];
  for (const area of areas) {
    for (let i = 0; i < 2000; i++) {
      const m = deviceModel(hashString(`area-${JSON.stringify(area)}`), i, area, PROFILES.outdoor);
      assert.ok(inArea(area, m.location), `${JSON.stringify(m.location)} outside ${JSON.stringify(area)}`);
      assert.ok(m.location.latitude >= -90 && m.location.latitude <= 90);
      assert.ok(m.location.longitude >= -180 && m.location.longitude <= 180);
    }
  }
  // Spread over the area rather than bunched at the centre.
  const far = Array.from({ length: 1000 }, (_, i) => deviceModel(1, i, lisbon, PROFILES.outdoor)).filter((m) => distanceKm(lisbon.center, m.location) > 10);
  assert.ok(far.length > 600, `only ${far.length} of 1000 beyond half the radius`);
});

test('values are plausible for the place and the season: a warm equator, cold poles', () => {
  const places = [
    { area: { kind: 'circle', center: { latitude: 0.3, longitude: 32.6 }, radiusKm: 10 } as Area, min: 12, max: 42 },
    { area: lisbon, min: -5, max: 42 },
    { area: { kind: 'circle', center: { latitude: 78.2, longitude: 15.6 }, radiusKm: 10 } as Area, min: -50, max: 22 },
  ];
  for (const { area, min, max } of places) {
    for (let i = 0; i < 20; i++) {
      const m = deviceModel(99, i, area, PROFILES.outdoor);
      const b = bounds(m);
      for (let t = Date.UTC(2025, 0, 1); t < Date.UTC(2026, 0, 1); t += 3 * 3_600_000 + 17_000) {
        const v = temperatureAt(m, t);
        assert.ok(v >= min && v <= max, `${v} °C at ${JSON.stringify(m.location)} on ${new Date(t).toISOString()}`);
        assert.ok(v >= b.min && v <= b.max);
        assert.equal(Math.round(v * 100) / 100, v);
      }
    }
  }
  assert.ok(annualMeanC(0) > annualMeanC(45) && annualMeanC(45) > annualMeanC(70));
  // Northern summer is warmer than northern winter, and the other way round in the south.
  const north = deviceModel(5, 0, { kind: 'circle', center: { latitude: 50, longitude: 10 }, radiusKm: 1 }, PROFILES.outdoor);
  const south = deviceModel(5, 0, { kind: 'circle', center: { latitude: -50, longitude: 10 }, radiusKm: 1 }, PROFILES.outdoor);
  const mean = (m: typeof north, from: number) => {
    let s = 0;
    for (let k = 0; k < 30 * 24; k++) s += temperatureAt(m, from + k * 3_600_000);
    return s / (30 * 24);
  };
  assert.ok(mean(north, Date.UTC(2025, 6, 1)) > mean(north, Date.UTC(2025, 0, 1)) + 10);
  assert.ok(mean(south, Date.UTC(2025, 0, 1)) > mean(south, Date.UTC(2025, 6, 1)) + 10);
  // Indoors stays near room temperature wherever the device is.
  const room = deviceModel(5, 3, { kind: 'circle', center: { latitude: 70, longitude: 10 }, radiusKm: 1 }, PROFILES.indoor);
  for (let t = Date.UTC(2025, 0, 1); t < Date.UTC(2025, 2, 1); t += 3_600_000) {
    const v = temperatureAt(room, t);
    assert.ok(v > 17 && v < 25, `indoor ${v}`);
  }
});

test('the daily cycle follows local solar time: afternoons warmer than nights, shifted by longitude', () => {
  const afternoonMinusNight = (lon: number) => {
    const area: Area = { kind: 'circle', center: { latitude: 40, longitude: lon }, radiusKm: 1 };
    let diff = 0;
    for (let i = 0; i < 10; i++) {
      const m = deviceModel(hashString('daily'), i, area, PROFILES.outdoor);
      for (let d = 0; d < 14; d++) {
        const midnightUtc = Date.UTC(2025, 3, 1) + d * DAY;
        // Local solar 15:00 and 03:00 at this longitude.
        const at = (h: number) => midnightUtc + ((((h - lon / 15) % 24) + 24) % 24) * 3_600_000;
        assert.ok(Math.abs(solarHour(at(15), m.location.longitude) - 15) < 0.1);
        diff += temperatureAt(m, at(15)) - temperatureAt(m, at(3));
      }
    }
    return diff / 140;
  };
  for (const lon of [-120, 0, 139.7]) {
    const d = afternoonMinusNight(lon);
    assert.ok(d > 5, `afternoon only ${d.toFixed(2)} °C warmer at longitude ${lon}`);
  }
  // At the same UTC instant, places 180° apart are in opposite phases of the day.
  const west = deviceModel(1, 0, { kind: 'circle', center: { latitude: 0, longitude: -90 }, radiusKm: 1 }, { ...PROFILES.outdoor, driftC: 0, noiseC: 0 });
  const east = deviceModel(1, 0, { kind: 'circle', center: { latitude: 0, longitude: 90 }, radiusKm: 1 }, { ...PROFILES.outdoor, driftC: 0, noiseC: 0 });
  const t = Date.UTC(2025, 3, 1, 21); // 15:00 solar at 90°W, 03:00 at 90°E
  assert.ok(temperatureAt(west, t) - west.baseC > 0 && temperatureAt(east, t) - east.baseC < 0);
});

test('the grid: devices spread over one-second slots, counts without double counting', () => {
  const g = makeGrid(10_000, 10_000);
  assert.equal(g.slots, 10);
  assert.deepEqual(
    [0, 1, 9].map((s) => phaseOf(g, s)),
    [0, 1000, 9000],
  );
  assert.equal(nextGridTime(g, 20_000), 20_000);
  assert.equal(nextGridTime(g, 20_001), 21_000);
  assert.equal(nextGridTime(g, 29_500), 30_000);
  // An hour is 360 readings of every device, however the hour is cut.
  const hour = fleetCountIn(g, 1_000_123, 1_000_123 + 3_600_000);
  assert.equal(hour, 360 * 10_000);
  const cut = 1_000_123 + 1_234_567;
  assert.equal(fleetCountIn(g, 1_000_123, cut) + fleetCountIn(g, cut, 1_000_123 + 3_600_000), hour);
  assert.equal(countIn(g, 3000, 0, 10_000), 1);
  assert.equal(fleetCountIn(g, 0, 3_600_000, new Set([1, 2, 3])), 360 * 9_997);
  const small = makeGrid(3, 100);
  assert.equal(small.slots, 1);
  assert.equal(fleetCountIn(small, 0, 1000), 30);
});
