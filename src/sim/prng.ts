// Seeded randomness for simulations. Two kinds: a sequential generator (mulberry32) for drawing a
// device's fixed traits once, and stateless hashing (value = f(seed, device, t)) for anything that
// depends on time, so a reading can be recomputed at any timestamp — after a restart, on another
// node — and come out bit-for-bit the same.
import { mulberry32 } from '../core/random.ts';

export { mulberry32 };

/** A 32-bit hash of a string (FNV-1a followed by a murmur3 finaliser to spread short seeds). */
export function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return fmix32(h);
}

/** murmur3's 32-bit finaliser: a bijection with good avalanche. */
export function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** A stateless hash of up to three integers to [0, 1). */
export function hash01(a: number, b: number, c = 0): number {
  let h = fmix32((a ^ 0x9e3779b9) >>> 0);
  h = fmix32((h ^ Math.imul(b | 0, 0x85ebca6b)) >>> 0);
  h = fmix32((h ^ Math.imul(c | 0, 0xc2b2ae35)) >>> 0);
  return h / 4294967296;
}

/** The generator of one device's traits: a function of (simulation seed, device index) only. */
export function deviceRandom(seed: number, index: number): () => number {
  return mulberry32(fmix32((seed ^ Math.imul(index + 1, 0x9e3779b9)) >>> 0));
}
