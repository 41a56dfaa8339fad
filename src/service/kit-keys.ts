// Per-kit keys (docs/security.md "Kits"): the secret a dev kit proves itself with when it announces
// itself to the gateway (src/coap/announce.ts). A kit key is never stored: it is derived as
//   HMAC-SHA256(master, "reef-kit-key|<mac>|<epoch>")
// from one master key kept in the store (beside the token signing keys, so every node of a
// deployment derives the same keys) and a per-MAC epoch. Issuing a key (at provisioning, or
// `reef provision --rekey`) bumps the epoch, so the key printed before stops working at once on every
// node; a MAC deleted and provisioned again never gets its old key back. Kits provisioned before
// kit keys existed have no epoch and therefore no key until one is issued.
import { createHmac, randomBytes } from 'node:crypto';
import type { Store } from '../store/store.ts';

const MASTER = 'kit-keys/master';
const EPOCH = 'kit-keys/epoch/';

async function master(store: Store): Promise<Buffer> {
  const have = await store.getState(MASTER);
  if (have !== null) return Buffer.from(have, 'base64url');
  await store.setState(MASTER, randomBytes(32).toString('base64url'));
  // Two nodes starting at once may both write: both then use what the store kept.
  return Buffer.from((await store.getState(MASTER))!, 'base64url');
}

function derive(m: Buffer, mac: string, epoch: number): Buffer {
  return createHmac('sha256', m).update(`reef-kit-key|${mac}|${epoch}`).digest();
}

/** The current key of a kit, or null when none was ever issued for the MAC. */
export async function kitKey(store: Store, mac: string): Promise<Buffer | null> {
  const e = await store.getState(EPOCH + mac);
  if (e === null) return null;
  return derive(await master(store), mac, Number(e));
}

/** Issues a new key for the MAC (the previous one stops working) and returns it, as 64 hex digits. */
export async function issueKitKey(store: Store, mac: string): Promise<string> {
  const e = await store.getState(EPOCH + mac);
  const next = (e === null ? 0 : Number(e)) + 1;
  await store.setState(EPOCH + mac, String(next));
  return derive(await master(store), mac, next).toString('hex');
}

/**
 * The gateway's view of kit keys: cached per MAC for `ttlMs`, so an announcement costs no store read
 * in the steady state, and a key issued on another node or by the CLI is picked up within the TTL.
 */
export class KitKeyCache {
  private readonly cache = new Map<string, { key: Buffer | null; at: number }>();

  constructor(
    private readonly store: Store,
    private readonly ttlMs = 30_000,
    private readonly now: () => number = Date.now,
  ) {}

  async get(mac: string): Promise<Buffer | null> {
    const t = this.now();
    const hit = this.cache.get(mac);
    if (hit && t - hit.at < this.ttlMs) return hit.key;
    const key = await kitKey(this.store, mac);
    if (this.cache.size > 100_000) this.cache.clear();
    this.cache.set(mac, { key, at: t });
    return key;
  }

  /** Forgets a MAC's key (after a rekey on this node). */
  forget(mac: string): void {
    this.cache.delete(mac);
  }
}
