// Values by (peer, token): the endpoint's requests waiting for a response (RFC 7252 §5.3.2: a
// response matches by token and by the endpoint it came from) and the gateway's forwards in flight.
// A map per peer, by the token as a number when it has 4 bytes (the endpoint's own tokens), so no
// key string is built per request or per response.

export type TokenKey = number | string;

/** A token as a map key: a 4-byte one as a 32-bit integer, any other as hex (the two never equal). */
export function tokenKey(t: Buffer): TokenKey {
  return t.length === 4 ? t.readInt32BE(0) : t.toString('hex');
}

export class PeerTokenMap<V> {
  private readonly byPeer = new Map<string, Map<TokenKey, V>>();
  /** Peers held when the emptied maps are next dropped: twice what the last pass kept, so each pass is paid for by as many new peers. */
  private pruneAt = 4096;

  get(peer: string, token: TokenKey): V | undefined {
    return this.byPeer.get(peer)?.get(token);
  }

  set(peer: string, token: TokenKey, v: V): void {
    let mine = this.byPeer.get(peer);
    if (mine === undefined) {
      // Peers come and go (clients' ephemeral ports): the emptied maps are dropped now and then.
      if (this.byPeer.size >= this.pruneAt) {
        for (const [k, m] of this.byPeer) if (m.size === 0) this.byPeer.delete(k);
        this.pruneAt = Math.max(4096, 2 * this.byPeer.size);
      }
      mine = new Map();
      this.byPeer.set(peer, mine);
    }
    mine.set(token, v);
  }

  delete(peer: string, token: TokenKey): void {
    this.byPeer.get(peer)?.delete(token);
  }

  values(): V[] {
    return [...this.byPeer.values()].flatMap((m) => [...m.values()]);
  }
}
