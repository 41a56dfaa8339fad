// The network module's gateway (docs/device.md "Reach", "Announcement"): the kit announces itself
// to it (src/coap/announce.ts), learns from its signed answer the port its requests come from, and
// hears nobody else — every other datagram is dropped unanswered, the first from each source
// address logged at WARN so a gateway sending from an unexpected address shows at once.
import dgram from 'node:dgram';
import { type Announcement, announcementOptions, Code, type CoapEndpoint, encodeAnnouncement, type Peer, signAnnouncement, verifyAnnouncementAck } from '../coap/index.ts';
import type { DeviceLog } from './log.ts';

export interface GatewayLinkOptions {
  mac: string;
  firmware: string;
  prefix: Announcement['prefix'];
  gateway?: Peer;
  log: DeviceLog;
  announceIntervalMs: number;
  /** Content-format of readings, for the announcement. */
  readingFormat: number;
  bootEpoch: number;
  /** The kit key: announcements are signed with it; without one they are not, and the gateway ignores them. */
  key?: Buffer;
  /** Told after each announcement whether the gateway acknowledged it (accepted) or stayed silent. */
  onGateway?: (accepted: boolean) => void;
  /** Added sensors, announced so the gateway bridges their readings too. */
  sensors?: { type: string; path: string }[];
}

/** Source addresses a kit logs its dropped datagrams of at WARN, at most (see GatewayLink.dropped()). */
const DROPPED_SOURCES = 16;

export class GatewayLink {
  /** Whether the gateway acknowledged the last announcement (undefined before the first answer or silence). */
  accepted: boolean | undefined;
  /** The port the gateway's requests come from, from its signed answer to an announcement. */
  from: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private seq = 0;
  /** The address the gateway sees this module at (the bound one, or the route's source address when bound to any). */
  private announcedHost = '';
  /** Source addresses whose dropped datagrams were logged (see dropped()). */
  private readonly droppedFrom = new Set<string>();

  constructor(
    private readonly o: GatewayLinkOptions,
    private readonly stats: { announcements: number },
    private readonly endpoint: () => CoapEndpoint,
  ) {}

  /** Starts announcing (when the kit has a gateway). */
  async start(): Promise<void> {
    if (!this.o.gateway) return;
    this.announcedHost = await sourceAddressToward(this.endpoint().address().address, this.o.gateway);
    this.announce();
    if (this.o.announceIntervalMs > 0) {
      this.timer = setInterval(() => this.announce(), this.o.announceIntervalMs);
      this.timer.unref();
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** The gateway: its address, from the port announcements go to or the one its signed answer named. */
  is(peer: Peer): boolean {
    const gw = this.o.gateway;
    if (!gw || peer.address !== gw.address) return false;
    return peer.port === gw.port || peer.port === this.from;
  }

  /**
   * A datagram from a peer that is not the gateway, dropped unanswered (Reach, above). The first from
   * each source address is logged at WARN with both addresses: a gateway whose requests leave from
   * another address than the one the kit announces to (bound to the wildcard, or to another
   * interface) is otherwise invisible, every request ending in its 5.04. Later ones, and sources past
   * the first DROPPED_SOURCES, only at DEBG: a flood of forged sources must not flood the log.
   */
  dropped(peer: Peer): false {
    const gw = this.o.gateway;
    if (this.droppedFrom.has(peer.address) || this.droppedFrom.size >= DROPPED_SOURCES) {
      if (this.o.log.on(7)) this.o.log.debug(`udp ${peer.address}:${peer.port} dropped: not the gateway`);
      return false;
    }
    this.droppedFrom.add(peer.address);
    const ports = gw ? [gw.port, ...(this.from !== undefined && this.from !== gw.port ? [this.from] : [])].join(' or ') : '';
    this.o.log.warn(
      gw
        ? `dropped a datagram from ${peer.address}:${peer.port}: this kit answers only its gateway, ${gw.address} port ${ports}${peer.port === gw.port || peer.port === this.from ? ' (the gateway sends from another address than the one the kit announces to?)' : ''}; further datagrams from ${peer.address} are dropped silently`
        : `dropped a datagram from ${peer.address}:${peer.port}: this kit has no gateway and does not allow direct peers; further datagrams from ${peer.address} are dropped silently`,
    );
    return false;
  }

  /** The announcement this module sends (src/coap/announce.ts), signed when the kit has its key. */
  announcement(): Announcement {
    const a = this.endpoint().address();
    const plain: Announcement = {
      v: 1,
      mac: this.o.mac,
      host: this.announcedHost || a.address,
      port: a.port,
      prefix: this.o.prefix,
      fw: this.o.firmware,
      cf: this.o.readingFormat,
      seq: this.seq,
      boot: Math.floor(this.o.bootEpoch / 1000),
      period: Math.max(1, Math.round(this.o.announceIntervalMs / 1000)),
      ...(this.o.sensors?.length ? { sensors: this.o.sensors } : {}),
    };
    return this.o.key ? signAnnouncement(plain, this.o.key) : plain;
  }

  /**
   * A NON `POST /kits`. The gateway answers an announcement it accepted with 2.04 and stays silent
   * otherwise (an unknown MAC, a wrong key and garbage look the same from outside), so silence past
   * NON_LIFETIME-ish seconds means: not provisioned, or not this key.
   */
  private announce(): void {
    const gw = this.o.gateway;
    if (!gw) return;
    const ann = this.announcement();
    const payload = encodeAnnouncement(ann);
    this.seq++;
    this.stats.announcements++;
    // A callback, not a promise: the signed answer names the port the gateway's requests come from,
    // and the gateway's first request (its readings bridge observing the kit) follows the answer at
    // once. The batched socket hands the module every datagram of a batch in one turn, before any
    // promise settles, so a request behind the answer in the same batch would be refused.
    this.endpoint().exchange(gw, { method: Code.POST, confirmable: false, options: announcementOptions(), payload, timeoutMs: 5000 }, (e, m) => {
      if (e || !m) return this.answered(false);
      if (m.code === Code.CHANGED && this.o.key) {
        const ack = verifyAnnouncementAck(m.payload, this.o.mac, ann.seq, this.o.key);
        if (ack && ack.from !== this.from) {
          this.from = ack.from;
          this.o.log.info(`gateway requests come from ${gw.address}:${ack.from}`);
        } else if (!ack) this.o.log.warn('the gateway answered without a valid signed ack: only its announcement port is answered');
      }
      this.answered(m.code === Code.CHANGED);
    });
  }

  private answered(accepted: boolean): void {
    const changed = this.accepted !== accepted;
    this.accepted = accepted;
    if (!changed) return;
    if (accepted) this.o.log.info(`gateway ${this.o.gateway!.address}:${this.o.gateway!.port} accepted kit ${this.o.mac}`);
    else
      this.o.log.warn(
        `the gateway ignores this kit: MAC ${this.o.mac} is not provisioned${this.o.key ? ' or its key is not this kit key' : ', or the kit has no key (reef provision prints it; give it with --key)'}`,
      );
    this.o.onGateway?.(accepted);
  }
}

/**
 * The source address datagrams from `bound` toward `to` carry: `bound` itself, or, when bound to
 * any address, the one the routing table picks (a connected UDP socket reports it). Signed
 * announcements name a concrete address, because the gateway accepts one only from where it says.
 */
async function sourceAddressToward(bound: string, to: Peer): Promise<string> {
  if (bound !== '0.0.0.0' && bound !== '::') return bound;
  const s = dgram.createSocket(to.address.includes(':') ? 'udp6' : 'udp4');
  try {
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.connect(to.port, to.address, () => resolve());
    });
    return s.address().address;
  } catch {
    return bound;
  } finally {
    s.close();
  }
}
