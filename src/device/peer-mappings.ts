// The network module's mappings (docs/device.md "Network module"): each request crosses the link
// under a token of the module's own, and answers, notifications, ACKs and RSTs find their way back
// to the client's peer and token through its mapping, kept while the client observes. Notifications
// are relayed to their observers here: CON ones with the endpoint's retransmission, NON ones with
// their MID remembered so a RST to one ends the observation at the application processor too
// (RFC 7641 §3.6); a direct peer is sent one unretransmitted CON notification to validate it first.
import { ACK, type CoapEndpoint, type CoapMessage, CON, emptyMessage, type Peer, peerKey, RST } from '../coap/index.ts';
import type { DeviceLog } from './log.ts';

export interface Mapping {
  peer: Peer;
  token: Buffer;
  /** The local token the AP sees: 4 bytes, and the same as a number (the maps' key). */
  local: Buffer;
  localKey: number;
  observing: boolean;
  /** The resource (path?query) the mapping's latest request named: one observe slot each. */
  resource: string;
  /** A CON notification to a not yet validated direct peer is awaiting its ACK. */
  probing?: boolean;
}

export interface PeerMappingsDeps {
  endpoint(): CoapEndpoint;
  /** Sends a message to the application processor; false when it does not fit the link. */
  toLink(m: CoapMessage): boolean;
  isGateway(peer: Peer): boolean;
  log: DeviceLog;
  stats: { notifications: number };
}

export class PeerMappings {
  private localToken = Math.floor(Math.random() * 0xffffffff);
  /** (peer, client token) → mapping; local token → mapping. */
  private readonly byClient = new Map<string, Mapping>();
  private readonly byLocal = new Map<number, Mapping>();
  /** Module-side MID of a NON notification → the AP's MID, to relay a RST (RFC 7641 §3.6). */
  private readonly nonRelay = new Map<string, number>();
  /** Direct peers (allowDirect) that acknowledged a notification: they receive what is sent to them. */
  private readonly validated = new Set<string>();

  constructor(private readonly d: PeerMappingsDeps) {}

  /** The kept mapping of a local token (an observation's). */
  byLocalKey(key: number): Mapping | undefined {
    return this.byLocal.get(key);
  }

  /** Whether the mapping is kept (an observation's), not a one-off. */
  kept(m: Mapping): boolean {
    return this.byLocal.get(m.localKey) === m;
  }

  /** The mapping of (peer, token), kept when `keep` (an observe registration) or already there; else a one-off. */
  get(peer: Peer, token: Buffer, keep: boolean): Mapping {
    const key = this.byClient.size > 0 || keep ? `${peer.address}|${peer.port}|${token.toString('hex')}` : '';
    let m = key ? this.byClient.get(key) : undefined;
    if (!m) {
      const localKey = this.nextLocalToken();
      // allocUnsafe: a slice of Node's shared pool, not an ArrayBuffer of its own; every byte is written.
      const local = Buffer.allocUnsafe(4);
      local.writeUInt32BE(localKey);
      m = { peer, token, local, localKey, observing: false, resource: '' };
      if (keep) {
        this.byClient.set(key, m);
        this.byLocal.set(localKey, m);
      }
    }
    return m;
  }

  /** Forgets a kept mapping (its client no longer observes). */
  unmap(m: Mapping): void {
    if (this.byLocal.get(m.localKey) !== m) return;
    this.byClient.delete(`${m.peer.address}|${m.peer.port}|${m.token.toString('hex')}`);
    this.byLocal.delete(m.localKey);
  }

  /** Whether the gateway observes this resource (it holds the application processor's one slot, wire §2). */
  gatewayObserves(resource: string): boolean {
    for (const m of this.byLocal.values()) if (m.observing && m.resource === resource && this.d.isGateway(m.peer)) return true;
    return false;
  }

  /** A notification from the application processor, to its observer. */
  notify(map: Mapping, m: CoapMessage): void {
    this.d.stats.notifications++;
    const out: CoapMessage = { type: m.type, code: m.code, mid: this.d.endpoint().nextMid(), token: map.token, options: m.options, payload: m.payload };
    if (!this.d.isGateway(map.peer) && !this.validated.has(peerKey(map.peer))) return this.probe(map, m, out);
    if (m.type === CON) {
      void this.d
        .endpoint()
        .sendCon(map.peer, out)
        .then(({ result }) => {
          if (result === 'ack') this.d.toLink(emptyMessage(ACK, m.mid));
          else {
            // RST, or no ACK after MAX_RETRANSMIT: the observer is gone; tell the AP with a RST.
            this.d.log.note(`observer ${map.peer.address}:${map.peer.port} ${result === 'reset' ? 'reset' : 'timed out'}`);
            map.observing = false;
            this.unmap(map);
            this.d.toLink(emptyMessage(RST, m.mid));
          }
        });
    } else {
      const rkey = `${map.peer.address}|${map.peer.port}|${out.mid}`;
      this.nonRelay.set(rkey, m.mid);
      if (this.nonRelay.size > 256) this.nonRelay.delete(this.nonRelay.keys().next().value as string);
      this.d.endpoint().sendNon(map.peer, out);
    }
  }

  /**
   * A notification for a direct peer that has not yet shown it receives what is sent to it (its
   * address may be forged): sent CON, once, without retransmission, and nothing else meanwhile.
   * Its ACK validates the peer (later notifications go as usual); silence or RST ends the
   * observation. So a forged registration draws its answer and one notification, within the 3x
   * budget (RFC 7252 §11.3; the address validation of RFC 9000 §8.1 in CoAP terms).
   */
  private probe(map: Mapping, m: CoapMessage, out: CoapMessage): void {
    if (map.probing) return; // one unacknowledged datagram at a time toward an unvalidated peer
    map.probing = true;
    void this.d
      .endpoint()
      .sendCon(map.peer, { ...out, type: CON }, { maxRetransmit: 0 })
      .then(({ result }) => {
        map.probing = false;
        if (result === 'ack') {
          if (this.validated.size >= 1024) this.validated.clear();
          this.validated.add(peerKey(map.peer));
          if (m.type === CON) this.d.toLink(emptyMessage(ACK, m.mid));
          return;
        }
        this.d.log.note(`direct observer ${map.peer.address}:${map.peer.port} did not acknowledge a notification: observation ended`);
        map.observing = false;
        this.unmap(map);
        // The AP remembers the MIDs of its notifications, NON ones too: a RST to it drops the observer.
        this.d.toLink(emptyMessage(RST, m.mid));
      });
  }

  /** A RST from a peer to a NON notification we relayed: its observations end, at the application processor too. */
  onPeerReset(mid: number, peer: Peer): void {
    const rkey = `${peer.address}|${peer.port}|${mid}`;
    const apMid = this.nonRelay.get(rkey);
    if (apMid === undefined) return;
    this.nonRelay.delete(rkey);
    for (const map of this.byLocal.values()) {
      if (map.peer.address === peer.address && map.peer.port === peer.port && map.observing) {
        // The RST names the notification by MID only; all of this peer's observations of the
        // resource end (there is one resource to observe).
        map.observing = false;
        this.unmap(map);
      }
    }
    this.d.toLink(emptyMessage(RST, apMid));
  }

  private nextLocalToken(): number {
    this.localToken = (this.localToken + 1) >>> 0;
    return this.localToken;
  }
}
