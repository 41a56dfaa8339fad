// The kit's temperature: a seeded model so a fleet is varied but reproducible. A base temperature,
// a daily sine swing peaking mid-afternoon local to the kit, and bounded noise from a PRNG seeded
// per kit. A kit configured without a sensor reads 100.0 °C, as the original firmware did (wire §2).
import { mulberry32 } from '../core/random.ts';

export interface TemperatureModelOptions {
  seed: number;
  baseC?: number;
  /** Peak-to-mean amplitude of the daily swing, °C. */
  swingC?: number;
  /** Maximum absolute noise, °C. */
  noiseC?: number;
  /** Hour (0..24, UTC) of the daily maximum. */
  peakHourUtc?: number;
  sensorPresent?: boolean;
  /** Width of the per-kit spread of the base around baseC (default 4: ±2 °C); 0 keeps baseC. */
  spread?: number;
}

export const MISSING_SENSOR_C = 100.0;

/** A stable 32-bit seed from a string (FNV-1a), e.g. from a kit's MAC. */
export function seedFrom(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

export class TemperatureModel {
  private readonly rnd: () => number;
  readonly baseC: number;
  readonly swingC: number;
  readonly noiseC: number;
  readonly peakHourUtc: number;
  sensorPresent: boolean;

  constructor(o: TemperatureModelOptions) {
    this.rnd = mulberry32(o.seed);
    // Each kit gets its own base within ±2 °C of the configured one, from the seed.
    this.baseC = (o.baseC ?? 21) + (this.rnd() - 0.5) * (o.spread ?? 4);
    this.swingC = o.swingC ?? 3;
    this.noiseC = o.noiseC ?? 0.2;
    this.peakHourUtc = o.peakHourUtc ?? 15;
    this.sensorPresent = o.sensorPresent ?? true;
  }

  /** The reading in °C at epoch milliseconds t. */
  celsius(t: number): number {
    if (!this.sensorPresent) return MISSING_SENSOR_C;
    const hours = (t / 3_600_000) % 24;
    const daily = this.swingC * Math.cos(((hours - this.peakHourUtc) / 24) * 2 * Math.PI);
    const noise = (this.rnd() * 2 - 1) * this.noiseC;
    return this.baseC + daily + noise;
  }
}
