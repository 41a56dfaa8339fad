// Client secrets at rest: scrypt (RFC 7914) with a per-secret salt, compared in constant time.
// The stored form carries its parameters so they can be raised later without a migration.
import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';

const N = 16384;
const R = 8;
const P = 1;
const KEYLEN = 32;

function scrypt(secret: string, salt: Buffer, keylen: number, opts: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => scryptCb(secret, salt, keylen, opts, (e, k) => (e ? reject(e) : resolve(k))));
}

/** A new client secret: 32 random bytes, base64url (43 characters). */
export function generateSecret(): string {
  return randomBytes(32).toString('base64url');
}

export async function hashSecret(secret: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(secret, salt, KEYLEN, { N, r: R, p: P, maxmem: 64 * 1024 * 1024 });
  return `scrypt$${N}$${R}$${P}$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

// A fixed hash to compare against when the client id is unknown, so a wrong id costs the same time
// as a wrong secret and response timing does not reveal which client ids exist.
let dummyHash: Promise<string> | null = null;
export function dummySecretHash(): Promise<string> {
  dummyHash ??= hashSecret(generateSecret());
  return dummyHash;
}

export async function verifySecret(secret: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [, n, r, p, saltB64, keyB64] = parts as [string, string, string, string, string, string];
  const expected = Buffer.from(keyB64, 'base64url');
  const got = await scrypt(secret, Buffer.from(saltB64, 'base64url'), expected.length, {
    N: Number(n), r: Number(r), p: Number(p), maxmem: 64 * 1024 * 1024,
  });
  return got.length === expected.length && timingSafeEqual(got, expected);
}
