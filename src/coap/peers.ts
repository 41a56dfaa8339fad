// Peers as a CoAP endpoint sees them: an address and port, and one object per address and port
// (PeerTable), so the maps keyed by peer (the gateway's sessions, pending requests) hash a string
// made once, not one built per datagram.

export interface Peer {
  address: string;
  port: number;
}

/** A peer as the endpoint hands it out: one object per address and port, its key made once. */
interface KnownPeer extends Peer {
  readonly key: string;
}

export function peerKey(p: Peer): string {
  return (p as Partial<KnownPeer>).key ?? `${p.address}|${p.port}`;
}

export class PeerTable {
  private readonly peers = new Map<string, Map<number, KnownPeer>>();
  private count = 0;

  /** The same Peer object for every datagram of an address and port. Bounded: past 65,536 peers (forged sources) it starts again. */
  of(address: string, port: number): Peer {
    let ports = this.peers.get(address);
    if (ports === undefined) {
      if (this.count >= 65_536) {
        this.peers.clear();
        this.count = 0;
      }
      ports = new Map();
      this.peers.set(address, ports);
    }
    let p = ports.get(port);
    if (p === undefined) {
      p = { address, port, key: `${address}|${port}` };
      ports.set(port, p);
      this.count++;
    }
    return p;
  }
}
