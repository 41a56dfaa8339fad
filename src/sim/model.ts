// The climate model of a Studio simulation: where each virtual device is, and what it reads at any
// instant. Every reading is a pure function of (simulation seed, device index, timestamp), so a
// resumed simulation, a re-run backfill or another node computes exactly the same values, and
// rewriting a timestamp replaces a reading with itself (the store's dedupe rule).
//
// Outdoor temperature = annual mean for the latitude
//                     + seasonal cycle (grows with latitude, opposite in the two hemispheres)
//                     + daily cycle by local solar time (from longitude; warmest mid-afternoon)
//                     + regional weather drift (smooth, days-long, shared by the simulation's area)
//                     + the device's own microclimate offset and slow drift
//                     + bounded sensor noise.
// Indoor: a heated room near 21 °C with a small daily cycle, drift and noise.
import type { Location } from '../core/types.ts';
import { deviceRandom, hash01 } from './prng.ts';

export type Area = { kind: 'circle'; center: Location; radiusKm: number } | { kind: 'bbox'; south: number; west: number; north: number; east: number };

export interface Profile {
  kind: 'outdoor' | 'indoor';
  /** Added to every device's base, °C. */
  offsetC: number;
  /** Amplitude of the daily cycle, °C: the afternoon is about this much above the daily mean. */
  dailySwingC: number;
  /** Amplitude of the weather drift, °C. */
  driftC: number;
  /** Largest sensor noise, °C (noise is bounded, triangular around 0). */
  noiseC: number;
}

export const PROFILES: Record<Profile['kind'], Profile> = {
  outdoor: { kind: 'outdoor', offsetC: 0, dailySwingC: 5, driftC: 3, noiseC: 0.2 },
  indoor: { kind: 'indoor', offsetC: 0, dailySwingC: 1, driftC: 0.5, noiseC: 0.05 },
};

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
const YEAR_DAYS = 365.2422;
const TAU = 2 * Math.PI;
const EARTH_RADIUS_KM = 6371.0088;
/** Local solar hour of the daily maximum. */
const PEAK_HOUR = 15;
/** Day of year (from 1 January) of the warmest day in the northern hemisphere. */
const WARMEST_DAY = 201;
/** Periods (days) and weights of the regional weather drift: incommensurate so it never repeats visibly. */
const WEATHER = [
  { days: 2.7, w: 0.5 },
  { days: 6.1, w: 0.35 },
  { days: 13.3, w: 0.25 },
] as const;

/** Annual mean near sea level: 27 °C at the equator, about 16 °C at 45°, 7 °C at 60°, −18 °C at the poles. */
export function annualMeanC(latitude: number): number {
  return 27 - 0.0055 * latitude * latitude;
}

/** Half the difference between the warmest and the coldest month: none at the equator, up to 15 °C. */
export function seasonalAmplitudeC(latitude: number): number {
  return Math.min(15, 0.25 * Math.abs(latitude));
}

/** Local solar time in hours [0, 24) at epoch ms t and the given longitude. */
export function solarHour(t: number, longitude: number): number {
  const h = (t / HOUR_MS + longitude / 15) % 24;
  return h < 0 ? h + 24 : h;
}

/** Distance in km between two points (haversine). */
export function distanceKm(a: Location, b: Location): number {
  const rad = Math.PI / 180;
  const dLat = (b.latitude - a.latitude) * rad;
  const dLon = (b.longitude - a.longitude) * rad;
  const s = Math.sin(dLat / 2) ** 2 + Math.cos(a.latitude * rad) * Math.cos(b.latitude * rad) * Math.sin(dLon / 2) ** 2;
  return 2 * EARTH_RADIUS_KM * Math.asin(Math.min(1, Math.sqrt(s)));
}

function round6(v: number): number {
  return Math.round(v * 1e6) / 1e6;
}

function wrapLongitude(lon: number): number {
  const w = ((((lon + 180) % 360) + 360) % 360) - 180;
  return w === -180 && lon > 0 ? 180 : w;
}

/** True when the point lies in the area (to the 6 decimals locations are kept at). */
export function inArea(area: Area, p: Location): boolean {
  if (area.kind === 'circle') return distanceKm(area.center, p) <= area.radiusKm + 0.001;
  if (p.latitude < area.south - 1e-6 || p.latitude > area.north + 1e-6) return false;
  if (area.west <= area.east) return p.longitude >= area.west - 1e-6 && p.longitude <= area.east + 1e-6;
  return p.longitude >= area.west - 1e-6 || p.longitude <= area.east + 1e-6; // crosses 180°
}

/** A point of the area drawn uniformly (by surface for a circle) from `rnd`. */
export function randomLocation(area: Area, rnd: () => number): Location {
  if (area.kind === 'circle') {
    // Uniform over the spherical cap (so also right near the poles), slightly inside the radius
    // so the rounding to 6 decimals never lands outside it.
    const rad = Math.PI / 180;
    const maxAngle = Math.min(Math.PI, (area.radiusKm * 0.9999) / EARTH_RADIUS_KM);
    const delta = Math.acos(1 - rnd() * (1 - Math.cos(maxAngle)));
    const theta = TAU * rnd();
    const phi1 = area.center.latitude * rad;
    const sinPhi2 = Math.sin(phi1) * Math.cos(delta) + Math.cos(phi1) * Math.sin(delta) * Math.cos(theta);
    const phi2 = Math.asin(Math.max(-1, Math.min(1, sinPhi2)));
    const dLon = Math.atan2(Math.sin(theta) * Math.sin(delta) * Math.cos(phi1), Math.cos(delta) - Math.sin(phi1) * sinPhi2);
    return { latitude: round6(phi2 / rad), longitude: round6(wrapLongitude(area.center.longitude + dLon / rad)) };
  }
  const width = area.west <= area.east ? area.east - area.west : area.east + 360 - area.west;
  const latitude = area.south + (area.north - area.south) * rnd();
  const longitude = wrapLongitude(area.west + width * rnd());
  return { latitude: Math.min(area.north, Math.max(area.south, round6(latitude))), longitude: round6(longitude) };
}

/** Everything fixed about one virtual device, drawn once from (seed, index). */
export interface VirtualDeviceModel {
  index: number;
  location: Location;
  /** Annual mean plus microclimate and profile offset. */
  baseC: number;
  seasonalC: number;
  dailyC: number;
  /** Longitude in hours, for local solar time. */
  lonHours: number;
  driftC: number;
  driftPeriodMs: number;
  driftPhase: number;
  noiseC: number;
  noiseKey: number;
  /** The simulation's regional weather: amplitudes (already weighted) and phases. */
  weather: { w: number; periodMs: number; phase: number }[];
}

/** Regional weather phases: from the simulation seed alone, so every device of an area shares it. */
function regionalWeather(seed: number, driftC: number): VirtualDeviceModel['weather'] {
  return WEATHER.map((c, k) => ({ w: c.w * driftC, periodMs: c.days * DAY_MS, phase: TAU * hash01(seed, 0x5eed, k) }));
}

export function deviceModel(seed: number, index: number, area: Area, profile: Profile): VirtualDeviceModel {
  const rnd = deviceRandom(seed, index);
  const location = randomLocation(area, rnd);
  const outdoor = profile.kind === 'outdoor';
  const micro = (rnd() - 0.5) * (outdoor ? 2 : 1);
  const base = outdoor ? annualMeanC(location.latitude) : 21;
  return {
    index,
    location,
    baseC: base + micro + profile.offsetC,
    seasonalC: outdoor ? seasonalAmplitudeC(location.latitude) * (location.latitude >= 0 ? 1 : -1) : 0,
    dailyC: profile.dailySwingC * (0.8 + 0.4 * rnd()),
    lonHours: location.longitude / 15,
    driftC: profile.driftC * 0.25,
    driftPeriodMs: (1.5 + 2.5 * rnd()) * DAY_MS,
    driftPhase: TAU * rnd(),
    noiseC: profile.noiseC,
    noiseKey: Math.floor(rnd() * 4294967296),
    weather: regionalWeather(seed, outdoor ? profile.driftC * 0.9 : profile.driftC * 0.75),
  };
}

/** The reading of device `d` at epoch ms `t`, in °C rounded to 2 decimals. Pure. */
export function temperatureAt(d: VirtualDeviceModel, t: number): number {
  const days = t / DAY_MS;
  // The year starts on 1 January 1970 at day 0, so days modulo a year is the day of the year.
  const seasonal = d.seasonalC * Math.cos((TAU * (days - WARMEST_DAY)) / YEAR_DAYS);
  let hour = (t / HOUR_MS + d.lonHours) % 24;
  if (hour < 0) hour += 24;
  const daily = d.dailyC * Math.cos((TAU * (hour - PEAK_HOUR)) / 24);
  let weather = 0;
  for (const c of d.weather) weather += c.w * Math.sin((TAU * t) / c.periodMs + c.phase);
  const drift = d.driftC * Math.sin((TAU * t) / d.driftPeriodMs + d.driftPhase);
  const noise = (hash01(d.noiseKey, t >>> 0, Math.floor(t / 4294967296)) + hash01(d.noiseKey ^ 0x2545f491, t >>> 0, d.index) - 1) * d.noiseC;
  // `+ 0` turns a rounded -0 into 0: JSON has no -0, so a stored reading would differ from the model.
  return Math.round((d.baseC + seasonal + daily + weather + drift + noise) * 100) / 100 + 0;
}

/** The widest band a device's readings can fall in (for checks and the docs). */
export function bounds(d: VirtualDeviceModel): { min: number; max: number } {
  const w = d.weather.reduce((s, c) => s + Math.abs(c.w), 0);
  const spread = Math.abs(d.seasonalC) + d.dailyC + w + d.driftC + d.noiseC + 0.01;
  return { min: d.baseC - spread, max: d.baseC + spread };
}
