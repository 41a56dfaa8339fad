// The network module (wire §2, seed §4.4, §9): the kit's UDP side. It listens for CoAP, strips the
// resource prefix its firmware version implies (`sensor` up to build 112738, `snsr` after), and
// passes each message over the HDLC link to the application processor, under a Message ID and
// token of its own so that answers, notifications, ACKs and RSTs find their way back to the right
// peer. Messages the application processor starts arrive by wake-and-poll; requests among them go
// upstream to the configured gateway (only logged without one). Its parts: gateway-link.ts (the
// gateway, announcements, dropping every other peer), peer-mappings.ts (client tokens ↔ local ones,
// notifications back to observers), direct-peers.ts (what a direct peer may be sent).
//
// Reach (seed §4.4, §5: direct-to-device CoAP is not supported): like a mesh node behind its border
// router, the module hears only its gateway — the address it announces to, from that port or the
// one the gateway's signed answer names — and drops every other datagram unanswered. `allowDirect`
// (lab use) lets anyone in; such a direct peer then never gets an answer larger than its request
// (RFC 7252 §11.3: no amplification toward a forged source) and cannot take the observe slot the
// gateway holds.
import {
  Deadlines,
  ACK,
  type Announcement,
  Code,
  CoapEndpoint,
  type CoapMessage,
  CON,
  describeMessage,
  emptyMessage,
  type EndpointOptions,
  type CoapOption,
  getUintOption,
  isRequestCode,
  NON,
  Option,
  parseMessage,
  type Peer,
  type ResponseSpec,
  RST,
  serializeMessage,
  type TransmissionParams,
  uintOption,
  uriPath,
  uriQuery,
} from '../coap/index.ts';
import { answerBudget, boundAnswer, fitBlock2 } from './direct-peers.ts';
import { GatewayLink } from './gateway-link.ts';
import { PeerMappings } from './peer-mappings.ts';
import type { PrimaryStation } from './hdlc/link.ts';
import type { DeviceLog } from './log.ts';

export { AMPLIFICATION_LIMIT } from './direct-peers.ts';

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

export class NetworkModule {
  readonly prefix: Prefix;
  private readonly prefixBytes: Buffer;
  endpoint!: CoapEndpoint;
  readonly stats = { forwarded: 0, wrongPrefix: 0, timeouts: 0, notifications: 0, upstream: 0, announcements: 0, tooLarge: 0, withheld: 0, observeRefused: 0 };
  private localMid = Math.floor(Math.random() * 0x10000);
  /** In-flight requests by local token (as a number: every local token is 4 bytes, no string made per request). */
  private readonly forwards = new Map<number, Forward>();
  /** Their deadlines, one timer for all (each given up is answered 5.04 by serve()). */
  private readonly deadlines = new Deadlines<Forward>((f) => {
    if (this.forwards.get(f.key) === f) this.forwards.delete(f.key);
    f.resolve(undefined);
  });
  /** The gateway: announcements, its address, and dropping every other peer. */
  private readonly gateway: GatewayLink;
  /** Client (peer, token) ↔ local token, and notifications back to observers. */
  private readonly maps: PeerMappings;

  constructor(private readonly o: ModuleOptions) {
    this.prefix = prefixFor(o.firmware);
    this.prefixBytes = Buffer.from(this.prefix);
    this.gateway = new GatewayLink({ ...o, prefix: this.prefix }, this.stats, () => this.endpoint);
    this.maps = new PeerMappings({ endpoint: () => this.endpoint, toLink: (m) => this.toLink(m), isGateway: (p) => this.gateway.is(p), log: o.log, stats: this.stats });
  }

  /** Whether the gateway acknowledged the last announcement (undefined before the first answer or silence). */
  get gatewayAccepted(): boolean | undefined {
    return this.gateway.accepted;
  }

  /** The port the gateway's requests come from, from its signed answer to an announcement. */
  get gatewayFrom(): number | undefined {
    return this.gateway.from;
  }

  async start(): Promise<void> {
    const log = this.o.log;
    const opts: EndpointOptions & { port: number; host: string } = {
      host: this.o.host,
      port: this.o.port,
      onRefused: (reason, peer, action) => log.info(`udp ${peer.address}:${peer.port} refused (${action}): ${reason}`),
      accept: (peer) => this.o.allowDirect === true || this.gateway.is(peer) || this.gateway.dropped(peer),
    };
    if (this.o.transmission) opts.transmission = this.o.transmission;
    if (log.on(7)) opts.trace = (dir, m, p) => log.debug(`udp ${dir} ${p.address}:${p.port} ${describeMessage(m)}`);
    // The batched socket (native/udp-batch.c: recvmmsg/sendmmsg), as the gateway's: on node:dgram a
    // request cost the kit one JavaScript callback, an address object and a system call per
    // datagram each way, a third of its CPU per request on machines where Node's UDP path is dear
    // (docs/performance.md). node:dgram when the addon is not built.
    this.endpoint = await CoapEndpoint.create({ ...opts, batched: true });
    this.endpoint.handle((req, peer) => this.onRequest(req, peer));
    this.endpoint.on('reset', (mid: number, peer: Peer) => this.maps.onPeerReset(mid, peer));
    this.endpoint.on('error', (e: Error) => log.err(`udp error: ${e.message}`));
    await this.gateway.start();
  }

  address(): Peer {
    return this.endpoint.address();
  }

  /** The gateway: its address, from the port announcements go to or the one its signed answer named. */
  isGateway(peer: Peer): boolean {
    return this.gateway.is(peer);
  }

  async stop(): Promise<void> {
    this.gateway.stop();
    this.deadlines.clear();
    for (const f of this.forwards.values()) f.resolve(undefined);
    this.forwards.clear();
    await this.endpoint?.close();
  }

  /** The announcement this module sends (src/coap/announce.ts), signed when the kit has its key. */
  announcement(): Announcement {
    return this.gateway.announcement();
  }

  private nextLocalMid(): number {
    this.localMid = (this.localMid + 1) & 0xffff;
    return this.localMid;
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
    // limit before address validation, RFC 9000 §8.1). A GET is asked in blocks small enough to fit (direct-peers.ts).
    const budget = answerBudget(req);
    const res = await this.serve(req, peer, false, budget);
    if (!res) return res;
    const { answer, size } = boundAnswer(req, res, budget);
    if (answer) return answer;
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
    const map = this.maps.get(peer, req.token, observe === 0);
    // The resource (path?query) names an observe slot; only observations need it.
    const mapped = this.maps.kept(map);
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
      if (n === Option.OBSERVE && observe === 0 && !fromGateway && this.maps.gatewayObserves(resource)) {
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
    const fwdOptions = req.code === Code.GET && observe === undefined ? fitBlock2(req, options, budget) : options;
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
      if (!map.observing) this.maps.unmap(map);
      this.stats.tooLarge++;
      // The link's info field bounds a message (wire §2: 255 bytes).
      return { code: Code.REQUEST_ENTITY_TOO_LARGE, options: [uintOption(Option.SIZE1, this.o.link.maxInfo)] };
    }
    this.stats.forwarded++;
    const res = await answer;
    if (!res) {
      this.stats.timeouts++;
      if (!map.observing) this.maps.unmap(map);
      return { code: Code.GATEWAY_TIMEOUT, payload: Buffer.from('the application processor did not answer') };
    }
    if (observe === 0 && getUintOption(res, Option.OBSERVE) !== undefined) map.observing = true;
    else if (observe === 1 || !map.observing) {
      map.observing = false;
      this.maps.unmap(map);
    }
    if (res.code === Code.EMPTY) return undefined;
    return { code: res.code, options: res.options, payload: res.payload };
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
    const map = this.maps.byLocalKey(key);
    if (!map || !map.observing) {
      // Nobody wants it any more: reject so the AP drops the observer (RFC 7641 §3.6).
      if (m.type === CON || m.type === NON) this.toLink(emptyMessage(RST, m.mid));
      return;
    }
    this.maps.notify(map, m);
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
