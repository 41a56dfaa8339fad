// What an endpoint remembers of the messages it received, to know a duplicate (RFC 7252 §4.5): for
// each (peer, Message ID), the message's token, until when it is remembered, and for a CON the
// answer it got. A busy endpoint (the gateway: two messages per proxied request) remembers tens of
// thousands of messages for EXCHANGE_LIFETIME; as JavaScript objects and string keys in a Map they
// all lived through V8's young-generation collections and were copied by each (docs/performance.md,
// "CoAP: memory without per-datagram objects"). Here they are numbers in typed arrays with one open-addressing index: a
// message remembered allocates nothing.
//
// The newest `max` messages are remembered, in a ring that starts small and doubles until `max`
// (an idle kit's endpoint stays small); the oldest is forgotten when a new one needs its slot.
// The few NON messages an endpoint sent and may see a RST to are kept apart, in a RecentMap.

/** Where a remembered message is: its arrival number, valid while that slot still holds it. */
export type MemoryRef = number;

const NOTHING = -1;

export class MessageMemory {
  private cap: number;
  /** Messages remembered so far; the next one's arrival number. */
  private count = 0;
  private keys: Float64Array;
  private seqs: Float64Array;
  private expires: Float64Array;
  private tokenLength: Uint8Array;
  private tokenHigh: Int32Array;
  private tokenLow: Int32Array;
  private replies: (Buffer | undefined)[];
  /** Open addressing, linear probing: slot + 1 of the entry, 0 for none. */
  private index: Int32Array;
  private mask: number;
  /** A small number per peer address, so a (peer, MID) key is one exact number. */
  private readonly addresses = new Map<string, number>();

  constructor(private readonly max: number) {
    this.cap = Math.min(256, max);
    this.keys = new Float64Array(this.cap).fill(NOTHING);
    this.seqs = new Float64Array(this.cap).fill(NOTHING);
    this.expires = new Float64Array(this.cap);
    this.tokenLength = new Uint8Array(this.cap);
    this.tokenHigh = new Int32Array(this.cap);
    this.tokenLow = new Int32Array(this.cap);
    this.replies = new Array<Buffer | undefined>(this.cap).fill(undefined);
    this.index = new Int32Array(indexSize(this.cap));
    this.mask = this.index.length - 1;
  }

  /** The key of a (peer, Message ID): an exact integer, as address numbers stay below 2^16 (65,536 addresses, then it starts again). */
  key(address: string, port: number, mid: number): number {
    let a = this.addresses.get(address);
    if (a === undefined) {
      // A flood of forged source addresses: start numbering again, and forget what was keyed by
      // the old numbers (a duplicate arriving just then is taken for a new message).
      if (this.addresses.size >= 1 << 16) this.clear();
      a = this.addresses.size;
      this.addresses.set(address, a);
    }
    return (a * 65536 + port) * 65536 + mid;
  }

  /** The remembered message of this key and token not yet expired at `now`, or NOTHING. */
  find(key: number, token: Buffer, now: number): MemoryRef {
    const slot = this.lookup(key);
    if (slot < 0 || this.expires[slot]! <= now) return NOTHING;
    const n = token.length;
    if (this.tokenLength[slot] !== n || this.tokenHigh[slot] !== high(token, n) || this.tokenLow[slot] !== low(token, n)) return NOTHING;
    return this.seqs[slot]!;
  }

  /** Remembers a message until `expires` (replacing an earlier one of the same key). */
  remember(key: number, token: Buffer, expires: number): MemoryRef {
    const old = this.lookup(key);
    if (old >= 0) {
      this.unindex(key);
      this.keys[old] = NOTHING;
      this.replies[old] = undefined;
    }
    if (this.count === this.cap && this.cap < this.max) this.grow();
    const seq = this.count++;
    // Until the ring first wraps, slot = seq; growing happens only then, so slots never move.
    const slot = seq % this.cap;
    const evicted = this.keys[slot]!;
    if (evicted !== NOTHING) this.unindex(evicted);
    const n = token.length;
    this.keys[slot] = key;
    this.seqs[slot] = seq;
    this.expires[slot] = expires;
    this.tokenLength[slot] = n;
    this.tokenHigh[slot] = high(token, n);
    this.tokenLow[slot] = low(token, n);
    this.replies[slot] = undefined;
    this.insert(key, slot);
    return seq;
  }

  /** The answer kept for a remembered CON. */
  reply(ref: MemoryRef): Buffer | undefined {
    const slot = ref % this.cap;
    return this.seqs[slot] === ref ? this.replies[slot] : undefined;
  }

  /** Keeps the answer to a remembered CON (nothing if it has been forgotten meanwhile). */
  setReply(ref: MemoryRef, data: Buffer): void {
    const slot = ref % this.cap;
    if (this.seqs[slot] === ref) this.replies[slot] = data;
  }

  private clear(): void {
    this.addresses.clear();
    this.keys.fill(NOTHING);
    this.seqs.fill(NOTHING);
    this.replies.fill(undefined);
    this.index.fill(0);
  }

  private grow(): void {
    const cap = Math.min(this.cap * 2, this.max);
    const keys = new Float64Array(cap).fill(NOTHING);
    keys.set(this.keys);
    const seqs = new Float64Array(cap).fill(NOTHING);
    seqs.set(this.seqs);
    const expires = new Float64Array(cap);
    expires.set(this.expires);
    const tokenLength = new Uint8Array(cap);
    tokenLength.set(this.tokenLength);
    const tokenHigh = new Int32Array(cap);
    tokenHigh.set(this.tokenHigh);
    const tokenLow = new Int32Array(cap);
    tokenLow.set(this.tokenLow);
    this.keys = keys;
    this.seqs = seqs;
    this.expires = expires;
    this.tokenLength = tokenLength;
    this.tokenHigh = tokenHigh;
    this.tokenLow = tokenLow;
    for (let i = this.cap; i < cap; i++) this.replies.push(undefined);
    this.cap = cap;
    this.index = new Int32Array(indexSize(cap));
    this.mask = this.index.length - 1;
    for (let slot = 0; slot < this.count; slot++) if (keys[slot] !== NOTHING) this.insert(keys[slot]!, slot);
  }

  private lookup(key: number): number {
    for (let i = hash(key) & this.mask; ; i = (i + 1) & this.mask) {
      const e = this.index[i]!;
      if (e === 0) return NOTHING;
      if (this.keys[e - 1] === key) return e - 1;
    }
  }

  private insert(key: number, slot: number): void {
    let i = hash(key) & this.mask;
    while (this.index[i] !== 0) i = (i + 1) & this.mask;
    this.index[i] = slot + 1;
  }

  /** Removes a key from the index, moving later entries of its probe run back (no tombstones). */
  private unindex(key: number): void {
    const mask = this.mask;
    let i = hash(key) & mask;
    for (;;) {
      const e = this.index[i]!;
      if (e === 0) return;
      if (this.keys[e - 1] === key) break;
      i = (i + 1) & mask;
    }
    let hole = i;
    for (let j = (hole + 1) & mask; ; j = (j + 1) & mask) {
      const e = this.index[j]!;
      if (e === 0) break;
      const home = hash(this.keys[e - 1]!) & mask;
      // The entry at j may fill the hole unless its home lies cyclically in (hole, j].
      if ((j > hole && (home <= hole || home > j)) || (j < hole && home <= hole && home > j)) {
        this.index[hole] = e;
        hole = j;
      }
    }
    this.index[hole] = 0;
  }
}

/** A power of two at least twice the entries, so probe runs stay short and always end. */
function indexSize(cap: number): number {
  return 2 ** Math.ceil(Math.log2(cap * 2));
}

function hash(key: number): number {
  const lo = key >>> 0;
  const hi = (key / 4294967296) >>> 0;
  let h = Math.imul(lo ^ Math.imul(hi, 0x85ebca6b), 0x9e3779b1);
  h ^= h >>> 15;
  return h;
}

/** A token's first four bytes (tokens are 0 to 8 bytes, RFC 7252 §3). */
function high(t: Buffer, n: number): number {
  return n === 0 ? 0 : n <= 4 ? t.readUIntBE(0, n) | 0 : t.readInt32BE(0);
}

function low(t: Buffer, n: number): number {
  return n <= 4 ? 0 : t.readUIntBE(4, n - 4) | 0;
}

/**
 * What an endpoint remembers for a while of the NON messages it sent (received ones: MessageMemory): the newest `capacity`
 * entries at least, twice that at most, in two generations of maps, the older dropped whole when
 * the newer reaches `capacity`. O(1)
 * per message, where evicting the oldest entry of one Map one at a time walks the deleted slots V8
 * keeps at its front. Entries carry their own expiry, checked by the reader.
 */
export class RecentMap<V> {
  private current = new Map<string, V>();
  private previous = new Map<string, V>();
  constructor(private readonly capacity: number) {}

  get(key: string): V | undefined {
    return this.current.get(key) ?? this.previous.get(key);
  }

  set(key: string, value: V): void {
    // An older entry of the key left in `previous` is shadowed by this one (get() looks here first)
    // and dropped with it; removing it would cost a second hash lookup for every message.
    this.current.set(key, value);
    if (this.current.size >= this.capacity) {
      this.previous = this.current;
      this.current = new Map();
    }
  }

  delete(key: string): void {
    this.current.delete(key);
    this.previous.delete(key);
  }
}
