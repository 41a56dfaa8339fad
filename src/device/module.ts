// The network module (wire §2, seed §4.4, §9): the kit's UDP side. It listens for CoAP, strips the
// resource prefix its firmware version implies (`sensor` up to build 112738, `snsr` after), and
// passes each message over the HDLC link to the application processor, under a Message ID and
// token of its own so that answers, notifications, ACKs and RSTs find their way back to the right
// peer. Messages the application processor starts arrive by wake-and-poll; requests among them go
// upstream to the configured gateway (only logged without one). It also announces the kit to the
// gateway (src/coap/announce.ts).
//
// Reach (seed §4.4, §5: direct-to-device CoAP is not supported): like a mesh node behind its border
// router, the module hears only its gateway — the address it announces to, from that port or the
// one the gateway's signed answer names — and drops every other datagram unanswered. `allowDirect`
// (lab use) lets anyone in; such a direct peer then never gets an answer larger than its request
// (RFC 7252 §11.3: no amplification toward a forged source) and cannot take the observe slot the
// gateway holds.
import dgram from 'node:dgram';
import {
  Deadlines,
  ACK,
  Announcement,
  announcementOptions,
  Code,
  CoapEndpoint,
  CoapMessage,
  CON,
  describeMessage,
  encodeAnnouncement,
  emptyMessage,
  EMPTY_BUFFER,
  encodedLength,
  EndpointOptions,
  blockSize,
  codeClass,
  CoapOption,
  decodeBlock,
  encodeBlock,
  getUintOption,
  isRequestCode,
  verifyAnnouncementAck,
  NON,
  Option,
  parseMessage,
  Peer,
  peerKey,
  ResponseSpec,
  RST,
  serializeMessage,
  signAnnouncement,
  szxForSize,
  TransmissionParams,
  uintOption,
  uriPath,
  uriQuery,
} from '../coap/index.ts';
import { PrimaryStation } from './hdlc/link.ts';
import { DeviceLog } from './log.ts';

export type Prefix = 'snsr' | 'sensor';

/** Firmware "1.2.1000.117958" → prefix (seed §9): `sensor` up to 1.2.1000.112738, `snsr` after. */
export function prefixFor(firmware: string): Prefix {
  const v = firmware.split('.').map(Number);
  const ref = [1, 2, 1000, 112738] as const;
  for (const [i, r] of ref.entries()) {
    if ((v[i] ?? 0) < r) return 'sensor';
    if ((v[i] ?? 0) > r) return 'snsr';
  }
  return 'sensor';
}

export interface ModuleOptions {
  mac: string;
  host: string;
  port: number;
  firmware: string;
  gateway?: Peer;
  link: PrimaryStation;
  log: DeviceLog;
  /** How long a forwarded request may wait for the application processor before 5.04. */
  forwardTimeoutMs: number;
  announceIntervalMs: number;
  /** Content-format of readings, for the announcement. */
  readingFormat: number;
  transmission?: Partial<TransmissionParams>;
  bootEpoch: number;
  /** The kit key: announcements are signed with it (src/coap/announce.ts); without one they are not, and the gateway ignores them. */
  key?: Buffer;
  /** Told after each announcement whether the gateway acknowledged it (accepted) or stayed silent. */
  onGateway?: (accepted: boolean) => void;
  /** Answer peers other than the gateway too (lab use; docs/device.md "Reach"). */
  allowDirect?: boolean;
  /** Added sensors, announced so the gateway bridges their readings too. */
  sensors?: { type: string; path: string }[];
}

interface Forward {
  key: number;
  resolve: (m: CoapMessage | undefined) => void;
  /** performance.now() past which the application processor's answer is given up (5.04); set by Deadlines. */
  due: number;
  lane: number;
  localMid: number;
}

interface Mapping {
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

export class NetworkModule {
  readonly prefix: Prefix;
  private readonly prefixBytes: Buffer;
  endpoint!: CoapEndpoint;
  readonly stats = { forwarded: 0, wrongPrefix: 0, timeouts: 0, notifications: 0, upstream: 0, announcements: 0, tooLarge: 0, withheld: 0, observeRefused: 0 };
  private localMid = Math.floor(Math.random() * 0x10000);
  private localToken = Math.floor(Math.random() * 0xffffffff);
  /** In-flight requests by local token (as a number: every local token is 4 bytes, no string made per request). */
  private readonly forwards = new Map<number, Forward>();
  /** Their deadlines, one timer for all (each given up is answered 5.04 by serve()). */
  private readonly deadlines = new Deadlines<Forward>((f) => {
    if (this.forwards.get(f.key) === f) this.forwards.delete(f.key);
    f.resolve(undefined);
  });
  /** (peer, client token) → mapping; local token → mapping. */
  private readonly byClient = new Map<string, Mapping>();
  private readonly byLocal = new Map<number, Mapping>();
  /** Module-side MID of a NON notification → the AP's MID, to relay a RST (RFC 7641 §3.6). */
  private readonly nonRelay = new Map<string, number>();
  private announceTimer: NodeJS.Timeout | undefined;
  private announceSeq = 0;
  /** The address the gateway sees this module at (the bound one, or the route's source address when bound to any). */
  private announcedHost = '';
  /** Whether the gateway acknowledged the last announcement (undefined before the first answer or silence). */
  gatewayAccepted: boolean | undefined;
  /** Direct peers (allowDirect) that acknowledged a notification: they receive what is sent to them. */
  private readonly validated = new Set<string>();
  /** The port the gateway's requests come from, from its signed answer to an announcement. */
  gatewayFrom: number | undefined;
  /** Source addresses whose dropped datagrams were logged (see dropped()). */
  private readonly droppedFrom = new Set<string>();

  constructor(private readonly o: ModuleOptions) {
    this.prefix = prefixFor(o.firmware);
    this.prefixBytes = Buffer.from(this.prefix);
  }

  async start(): Promise<void> {
    const log = this.o.log;
    const opts: EndpointOptions & { port: number; host: string } = {
      host: this.o.host,
      port: this.o.port,
      onRefused: (reason, peer, action) => log.info(`udp ${peer.address}:${peer.port} refused (${action}): ${reason}`),
      accept: (peer) => this.o.allowDirect === true || this.isGateway(peer) || this.dropped(peer),
    };
    if (this.o.transmission) opts.transmission = this.o.transmission;
    if (log.on(7)) opts.trace = (dir, m, p) => log.debug(`udp ${dir} ${p.address}:${p.port} ${describeMessage(m)}`);
    // The batched socket (native/udp-batch.c: recvmmsg/sendmmsg), as the gateway's: on node:dgram a
    // request cost the kit one JavaScript callback, an address object and a system call per
    // datagram each way, a third of its CPU per request on machines where Node's UDP path is dear
    // (docs/performance.md). node:dgram when the addon is not built.
    this.endpoint = await CoapEndpoint.create({ ...opts, batched: true });
    this.endpoint.handle((req, peer) => this.onRequest(req, peer));
    this.endpoint.on('reset', (mid: number, peer: Peer) => this.onPeerReset(mid, peer));
    this.endpoint.on('error', (e: Error) => log.err(`udp error: ${e.message}`));
    if (this.o.gateway) {
      this.announcedHost = await sourceAddressToward(this.endpoint.address().address, this.o.gateway);
      this.announce();
      if (this.o.announceIntervalMs > 0) {
        this.announceTimer = setInterval(() => this.announce(), this.o.announceIntervalMs);
        this.announceTimer.unref();
      }
    }
  }

  address(): Peer {
    return this.endpoint.address();
  }

  /** The gateway: its address, from the port announcements go to or the one its signed answer named. */
  isGateway(peer: Peer): boolean {
    const gw = this.o.gateway;
    if (!gw || peer.address !== gw.address) return false;
    return peer.port === gw.port || peer.port === this.gatewayFrom;
  }

  /**
   * A datagram from a peer that is not the gateway, dropped unanswered (Reach, above). The first from
   * each source address is logged at WARN with both addresses: a gateway whose requests leave from
   * another address than the one the kit announces to (bound to the wildcard, or to another
   * interface) is otherwise invisible, every request ending in its 5.04. Later ones, and sources past
   * the first DROPPED_SOURCES, only at DEBG: a flood of forged sources must not flood the log.
   */
  private dropped(peer: Peer): false {
    const gw = this.o.gateway;
    if (this.droppedFrom.has(peer.address) || this.droppedFrom.size >= DROPPED_SOURCES) {
      if (this.o.log.on(7)) this.o.log.debug(`udp ${peer.address}:${peer.port} dropped: not the gateway`);
      return false;
    }
    this.droppedFrom.add(peer.address);
    const ports = gw ? [gw.port, ...(this.gatewayFrom !== undefined && this.gatewayFrom !== gw.port ? [this.gatewayFrom] : [])].join(' or ') : '';
    this.o.log.warn(
      gw
        ? `dropped a datagram from ${peer.address}:${peer.port}: this kit answers only its gateway, ${gw.address} port ${ports}${peer.port === gw.port || peer.port === this.gatewayFrom ? ' (the gateway sends from another address than the one the kit announces to?)' : ''}; further datagrams from ${peer.address} are dropped silently`
        : `dropped a datagram from ${peer.address}:${peer.port}: this kit has no gateway and does not allow direct peers; further datagrams from ${peer.address} are dropped silently`,
    );
    return false;
  }

  async stop(): Promise<void> {
    if (this.announceTimer) clearInterval(this.announceTimer);
    this.deadlines.clear();
    for (const f of this.forwards.values()) f.resolve(undefined);
    this.forwards.clear();
    await this.endpoint?.close();
  }

  /** The announcement this module sends (src/coap/announce.ts), signed when the kit has its key. */
  announcement(): Announcement {
    const a = this.address();
    const plain: Announcement = {
      v: 1,
      mac: this.o.mac,
      host: this.announcedHost || a.address,
      port: a.port,
      prefix: this.prefix,
      fw: this.o.firmware,
      cf: this.o.readingFormat,
      seq: this.announceSeq,
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
    this.announceSeq++;
    this.stats.announcements++;
    // A callback, not a promise: the signed answer names the port the gateway's requests come from,
    // and the gateway's first request (its readings bridge observing the kit) follows the answer at
    // once. The batched socket hands the module every datagram of a batch in one turn, before any
    // promise settles, so a request behind the answer in the same batch would be refused.
    this.endpoint.exchange(gw, { method: Code.POST, confirmable: false, options: announcementOptions(), payload, timeoutMs: 5000 }, (e, m) => {
      if (e || !m) return this.gatewayAnswered(false);
      if (m.code === Code.CHANGED && this.o.key) {
        const ack = verifyAnnouncementAck(m.payload, this.o.mac, ann.seq, this.o.key);
        if (ack && ack.from !== this.gatewayFrom) {
          this.gatewayFrom = ack.from;
          this.o.log.info(`gateway requests come from ${gw.address}:${ack.from}`);
        } else if (!ack) this.o.log.warn('the gateway answered without a valid signed ack: only its announcement port is answered');
      }
      this.gatewayAnswered(m.code === Code.CHANGED);
    });
  }

  private gatewayAnswered(accepted: boolean): void {
    const changed = this.gatewayAccepted !== accepted;
    this.gatewayAccepted = accepted;
    if (!changed) return;
    if (accepted) this.o.log.info(`gateway ${this.o.gateway!.address}:${this.o.gateway!.port} accepted kit ${this.o.mac}`);
    else
      this.o.log.warn(
        `the gateway ignores this kit: MAC ${this.o.mac} is not provisioned${this.o.key ? ' or its key is not this kit key' : ', or the kit has no key (reef provision prints it; give it with --key)'}`,
      );
    this.o.onGateway?.(accepted);
  }

  private nextLocalMid(): number {
    this.localMid = (this.localMid + 1) & 0xffff;
    return this.localMid;
  }

  private nextLocalToken(): number {
    this.localToken = (this.localToken + 1) >>> 0;
    return this.localToken;
  }

  /** The mapping of (peer, token), kept when `keep` (an observe registration) or already there; else a one-off. */
  private mapping(peer: Peer, token: Buffer, keep: boolean): Mapping {
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

  private unmap(m: Mapping): void {
    if (this.byLocal.get(m.localKey) !== m) return;
    this.byClient.delete(`${m.peer.address}|${m.peer.port}|${m.token.toString('hex')}`);
    this.byLocal.delete(m.localKey);
  }

  private toLink(m: CoapMessage): boolean {
    const bytes = serializeMessage(m);
    if (bytes.length > this.o.link.maxInfo) return false;
    if (this.o.log.on(7)) this.o.log.debug(`link tx ${describeMessage(m)}`);
    this.o.link.send(bytes);
    return true;
  }

  private async onRequest(req: CoapMessage, peer: Peer): Promise<ResponseSpec | undefined> {
    if (this.isGateway(peer)) return this.serve(req, peer, true);
    // A direct peer (only with allowDirect) may be a forged source address: it is never answered
    // more than AMPLIFICATION_LIMIT times the bytes it sent (RFC 7252 §11.3; the factor is QUIC's
    // limit before address validation, RFC 9000 §8.1). A GET is asked in blocks small enough to fit.
    const budget = AMPLIFICATION_LIMIT * encodedLength(req);
    const res = await this.serve(req, peer, false, budget);
    if (!res) return res;
    const size = encodedLength({ type: ACK, code: res.code, mid: 0, token: req.token, options: res.options ?? [], payload: res.payload ?? EMPTY_BUFFER });
    if (size <= budget) return res;
    const bare = size - (res.payload?.length ?? 0) - (res.payload?.length ? 1 : 0);
    if (codeClass(res.code) !== 2 && bare <= budget) {
      // An error's diagnostic is cut to fit, as the endpoint does for its own refusals.
      const room = budget - bare - 1;
      return { code: res.code, options: res.options ?? [], ...(room > 0 ? { payload: (res.payload ?? Buffer.alloc(0)).subarray(0, room) } : {}) };
    }
    this.stats.withheld++;
    this.o.log.note(`answer of ${size} bytes to direct peer ${peer.address}:${peer.port} withheld: larger than its ${budget}-byte request (RFC 7252 §11.3); ask through the gateway`);
    return undefined;
  }

  private async serve(req: CoapMessage, peer: Peer, fromGateway: boolean, budget = Infinity): Promise<ResponseSpec | undefined> {
    // Uri-Path segments are compared as bytes against the prefix; the forwarded request keeps the
    // client's own option values (the Uri-Path ones after the prefix), nothing is re-encoded.
    let first: Buffer | undefined;
    let second: Buffer | undefined;
    let segments = 0;
    for (const o of req.options) {
      if (o.number !== Option.URI_PATH) continue;
      if (segments === 0) first = o.value;
      else if (segments === 1) second = o.value;
      segments++;
    }
    let skipFirst: boolean;
    // Discovery lives at the well-known location (RFC 6690 §4), outside any prefix.
    if (segments === 2 && first!.equals(WELL_KNOWN) && second!.equals(CORE)) skipFirst = false;
    else if (first !== undefined && first.equals(this.prefixBytes)) skipFirst = true;
    else {
      this.stats.wrongPrefix++;
      return { code: Code.NOT_FOUND, payload: Buffer.from(`resources live under /${this.prefix}`) };
    }
    let observe = getUintOption(req, Option.OBSERVE);
    const map = this.mapping(peer, req.token, observe === 0);
    // The resource (path?query) names an observe slot; only observations need it.
    const mapped = this.byLocal.get(map.localKey) === map;
    const resource = mapped ? resourceOf(req, skipFirst) : '';
    if (mapped) map.resource = resource;
    const options: CoapOption[] = [];
    let pathSeen = false;
    for (const o of req.options) {
      const n = o.number;
      if (n === Option.URI_HOST || n === Option.URI_PORT) continue;
      if (n === Option.URI_PATH && skipFirst && !pathSeen) {
        pathSeen = true;
        continue;
      }
      if (n === Option.OBSERVE && observe === 0 && !fromGateway && this.gatewayObserves(resource)) {
        // The application processor has one observe slot per resource (wire §2); the gateway's
        // observation is what every user and the readings bridge rely on, so a direct peer does not
        // take it. It gets the current representation without Observe: not added (RFC 7641 §4.1).
        this.stats.observeRefused++;
        this.o.log.note(`observe registration of direct peer ${peer.address}:${peer.port} refused: the gateway holds the slot`);
        observe = undefined;
        continue;
      }
      options.push(o);
    }
    const fwdOptions = req.code === Code.GET && observe === undefined ? fitBlock2(options, budget - (4 + req.token.length + 1 + RESPONSE_OPTIONS_BYTES)) : options;
    const localMid = this.nextLocalMid();
    const fwd: CoapMessage = { type: req.type === CON ? CON : NON, code: req.code, mid: localMid, token: map.local, options: fwdOptions, payload: req.payload };
    const key = map.localKey;
    const answer = new Promise<CoapMessage | undefined>((resolve) => {
      const prior = this.forwards.get(key);
      if (prior) {
        this.forwards.delete(key);
        this.deadlines.remove(prior);
        prior.resolve(undefined);
      }
      const f: Forward = { key, resolve, due: 0, lane: 0, localMid };
      this.forwards.set(key, f);
      this.deadlines.add(f, this.o.forwardTimeoutMs);
    });
    if (!this.toLink(fwd)) {
      const f = this.forwards.get(key);
      if (f) this.deadlines.remove(f);
      this.forwards.delete(key);
      if (!map.observing) this.unmap(map);
      this.stats.tooLarge++;
      // The link's info field bounds a message (wire §2: 255 bytes).
      return { code: Code.REQUEST_ENTITY_TOO_LARGE, options: [uintOption(Option.SIZE1, this.o.link.maxInfo)] };
    }
    this.stats.forwarded++;
    const res = await answer;
    if (!res) {
      this.stats.timeouts++;
      if (!map.observing) this.unmap(map);
      return { code: Code.GATEWAY_TIMEOUT, payload: Buffer.from('the application processor did not answer') };
    }
    if (observe === 0 && getUintOption(res, Option.OBSERVE) !== undefined) map.observing = true;
    else if (observe === 1 || !map.observing) {
      map.observing = false;
      this.unmap(map);
    }
    if (res.code === Code.EMPTY) return undefined;
    return { code: res.code, options: res.options, payload: res.payload };
  }

  private gatewayObserves(resource: string): boolean {
    for (const m of this.byLocal.values()) if (m.observing && m.resource === resource && this.isGateway(m.peer)) return true;
    return false;
  }

  /** Everything the application processor sends over the link. */
  fromLink(bytes: Buffer): void {
    let m: CoapMessage;
    try {
      m = parseMessage(bytes);
    } catch (e) {
      this.o.log.warn(`link rx unparseable message: ${(e as Error).message}`);
      return;
    }
    if (this.o.log.on(7)) this.o.log.debug(`link rx ${describeMessage(m)}`);
    if (m.code === Code.EMPTY) return; // the AP never starts exchanges that need these
    if (isRequestCode(m.code)) return this.upstream(m);
    // Not one of our 4-byte local tokens: no forward or mapping has it.
    const key = m.token.length === 4 ? m.token.readUInt32BE(0) : -1;
    const f = this.forwards.get(key);
    if (f && (m.type !== ACK || m.mid === f.localMid)) {
      this.forwards.delete(key);
      this.deadlines.remove(f);
      f.resolve(m);
      return;
    }
    const map = this.byLocal.get(key);
    if (!map || !map.observing) {
      // Nobody wants it any more: reject so the AP drops the observer (RFC 7641 §3.6).
      if (m.type === CON || m.type === NON) this.toLink(emptyMessage(RST, m.mid));
      return;
    }
    this.notify(map, m);
  }

  private notify(map: Mapping, m: CoapMessage): void {
    this.stats.notifications++;
    const out: CoapMessage = { type: m.type, code: m.code, mid: this.endpoint.nextMid(), token: map.token, options: m.options, payload: m.payload };
    if (!this.isGateway(map.peer) && !this.validated.has(peerKey(map.peer))) return this.probe(map, m, out);
    if (m.type === CON) {
      void this.endpoint.sendCon(map.peer, out).then(({ result }) => {
        if (result === 'ack') this.toLink(emptyMessage(ACK, m.mid));
        else {
          // RST, or no ACK after MAX_RETRANSMIT: the observer is gone; tell the AP with a RST.
          this.o.log.note(`observer ${map.peer.address}:${map.peer.port} ${result === 'reset' ? 'reset' : 'timed out'}`);
          map.observing = false;
          this.unmap(map);
          this.toLink(emptyMessage(RST, m.mid));
        }
      });
    } else {
      const rkey = `${map.peer.address}|${map.peer.port}|${out.mid}`;
      this.nonRelay.set(rkey, m.mid);
      if (this.nonRelay.size > 256) this.nonRelay.delete(this.nonRelay.keys().next().value as string);
      this.endpoint.sendNon(map.peer, out);
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
    void this.endpoint.sendCon(map.peer, { ...out, type: CON }, { maxRetransmit: 0 }).then(({ result }) => {
      map.probing = false;
      if (result === 'ack') {
        if (this.validated.size >= 1024) this.validated.clear();
        this.validated.add(peerKey(map.peer));
        if (m.type === CON) this.toLink(emptyMessage(ACK, m.mid));
        return;
      }
      this.o.log.note(`direct observer ${map.peer.address}:${map.peer.port} did not acknowledge a notification: observation ended`);
      map.observing = false;
      this.unmap(map);
      // The AP remembers the MIDs of its notifications, NON ones too: a RST to it drops the observer.
      this.toLink(emptyMessage(RST, m.mid));
    });
  }

  private onPeerReset(mid: number, peer: Peer): void {
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
    this.toLink(emptyMessage(RST, apMid));
  }

  private upstream(m: CoapMessage): void {
    const gw = this.o.gateway;
    const path = '/' + uriPath(m).join('/');
    if (!gw) {
      this.o.log.info(`upstream ${describeMessage(m)} (no gateway configured: logged only)`);
      return;
    }
    this.stats.upstream++;
    this.endpoint.sendNon(gw, { ...m, type: NON, mid: this.endpoint.nextMid() });
    this.o.log.info(`upstream ${path} sent to ${gw.address}:${gw.port}`);
  }
}

const WELL_KNOWN = Buffer.from('.well-known');
const CORE = Buffer.from('core');

/** "path/after/prefix?query&items" of a request: the observe slot it names. */
function resourceOf(req: CoapMessage, skipFirst: boolean): string {
  const path = uriPath(req);
  return `${(skipFirst ? path.slice(1) : path).join('/')}?${uriQuery(req).join('&')}`;
}

/** Answers to a direct peer are at most this many times the size of its request (RFC 7252 §11.3). */
export const AMPLIFICATION_LIMIT = 3;
/** Room the options of a 2.05 take at most (Content-Format, Max-Age, Block2, Size2, ETag-less). */
const RESPONSE_OPTIONS_BYTES = 14;
/** The application processor's own block size (sensor.ts SENSOR_BLOCK_SZX: 128 bytes). */
const AP_BLOCK = 128;

/**
 * The request's options with a Block2 option whose blocks fit in `room` payload bytes (RFC 7959
 * §2.4: the client's own smaller size is kept). Unchanged when the kit's blocks fit anyway or no
 * block (16 bytes at least) can.
 */
function fitBlock2(options: CoapOption[], room: number): CoapOption[] {
  if (room >= AP_BLOCK || room < 16) return options;
  const fit = szxForSize(room);
  const asked = options.find((o) => o.number === Option.BLOCK2);
  let num = 0;
  let szx = fit;
  if (asked) {
    let b;
    try {
      b = decodeBlock(asked.value.length ? asked.value.readUIntBE(0, asked.value.length) : 0);
    } catch {
      return options; // SZX 7: the application processor answers 4.00
    }
    if (b.szx <= fit) return options;
    num = (b.num * blockSize(b.szx)) / blockSize(fit);
  }
  return [...options.filter((o) => o.number !== Option.BLOCK2), uintOption(Option.BLOCK2, encodeBlock({ num, more: false, szx }))];
}

/** Source addresses a kit logs its dropped datagrams of at WARN, at most (see NetworkModule.dropped()). */
const DROPPED_SOURCES = 16;

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
