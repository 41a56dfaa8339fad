// The gateway's observe relay (RFC 7641 as an intermediary, §3.1/§4 on each side): observations of
// the same kit resource share one upstream observation, since a kit keeps one observer per
// resource. Clients (CoAP clients through the proxy, the HTTP bridge's SSE streams) and the
// readings bridge subscribe to it; each notification goes to every subscriber with the relay's own
// sequence number; an error or a notification without Observe ends it for all (§3.2). The
// readings bridge's upstream is kept alive (re-registered with backoff) while the kit is reachable.
import type { Logger } from 'pino';
import {
  CON,
  CoapEndpoint,
  CoapMessage,
  codeClass,
  codeToString,
  getUintOption,
  NON,
  Option,
  peerKey,
  stringOption,
  uintOption,
  type CoapOption,
  type Observation as CoapObservation,
  type Peer,
  type ResponseSpec,
} from '../coap/index.ts';
import { ReefError } from '../core/errors.ts';
import { refuse, relayed } from './answers.ts';
import { kitPath, type KitDirectory, type KitEntry } from './kits.ts';

/** Who receives an upstream observation's notifications. */
export interface Subscriber {
  /** Called with each notification (options as the kit sent them, Observe replaced by `seq`). */
  notify(m: CoapMessage, seq: number): void;
  /** The observation ended: the kit ended it, the upstream was lost, or the gateway stopped. */
  ended(why: string): void;
  /** A CoAP client's subscription: its session, address and token. */
  session?: string;
  peer?: Peer;
  token?: string;
  /** MID of the last NON notification sent to the client, so its RST can be matched. */
  lastMid?: number;
}

export interface Upstream {
  key: string;
  mac: string;
  path: string[];
  query: string[];
  accept: number | undefined;
  obs: CoapObservation | undefined;
  first: Promise<CoapMessage> | undefined;
  state: 'registering' | 'active' | 'failed' | 'ended';
  latest: { msg: CoapMessage; at: number } | undefined;
  lastNotified: number;
  seq: number;
  subscribers: Set<Subscriber>;
  bridge: boolean;
  /** The added sensor (type name) a bridge upstream observes, when it is not the temperature. */
  sensor?: string;
  retry: NodeJS.Timeout | undefined;
  retryMs: number;
}

export interface RelayStats {
  forwarded: number;
  kitErrors: number;
  notificationsIn: number;
  notificationsRelayed: number;
}

export interface ObserveRelayDeps {
  kits: KitDirectory;
  log: Logger;
  /** The gateway's counters, shared. */
  stats: RelayStats;
  /** The client-facing endpoint and the kit-facing one (both exist once the gateway started). */
  front(): CoapEndpoint;
  back(): CoapEndpoint;
  stopping(): boolean;
  /** Every live notification of a readings-bridge upstream (the readings path stores it); `sensor` names an added sensor. */
  onBridgeNotification(mac: string, m: CoapMessage, sensor?: string): void;
  /** Every live notification of any other upstream (clients' observations), with its kit-side path. */
  onClientNotification?(mac: string, path: string[], m: CoapMessage): void;
  /** The answer to a failed exchange with a kit (counted and logged by the gateway). */
  upstreamError(e: unknown): ResponseSpec;
  deadlineMs: number;
  confirmableUpstream: boolean;
}

export class ObserveRelay {
  private readonly upstreams = new Map<string, Upstream>();
  /** CoAP clients' subscriptions by (address, port, token), so a request ends its token's subscription cheaply. */
  private readonly clientSubs = new Map<string, { up: Upstream; sub: Subscriber }>();

  constructor(private readonly d: ObserveRelayDeps) {}

  /** Upstream observations and their subscribers (for operators and tests). */
  list(): { mac: string; path: string; subscribers: number; bridge: boolean; state: string }[] {
    return [...this.upstreams.values()].map((u) => ({
      mac: u.mac,
      path: '/' + u.path.join('/') + (u.query.length ? '?' + u.query.join('&') : ''),
      subscribers: u.subscribers.size,
      bridge: u.bridge,
      state: u.state,
    }));
  }

  /** Ends every upstream (the gateway is stopping). */
  endAll(why: string): void {
    for (const up of [...this.upstreams.values()]) this.endUpstream(up, why, true);
  }

  private upstreamKey(mac: string, path: string[], query: string[], accept: number | undefined): string {
    return `${mac}|${path.join('/')}|${query.join('&')}|${accept ?? ''}`;
  }

  /** The shared upstream observation of a kit resource, started when new. */
  upstream(kit: KitEntry, path: string[], query: string[], accept: number | undefined): Upstream {
    const p = kitPath(kit, path);
    const key = this.upstreamKey(kit.mac, p, query, accept);
    let up = this.upstreams.get(key);
    if (up && up.state !== 'ended') {
      if (up.state === 'failed') this.register(up);
      return up;
    }
    up = {
      key,
      mac: kit.mac,
      path: p,
      query,
      accept,
      obs: undefined,
      first: undefined,
      state: 'registering',
      latest: undefined,
      lastNotified: 0,
      seq: 1,
      subscribers: new Set(),
      bridge: false,
      retry: undefined,
      retryMs: 1000,
    };
    this.upstreams.set(key, up);
    this.register(up);
    return up;
  }

  /** (Re-)registers an upstream observation with the kit; subscribers stay attached. */
  register(up: Upstream): void {
    if (this.d.stopping()) return;
    if (up.retry) clearTimeout(up.retry);
    up.retry = undefined;
    up.obs?.forget();
    const kit = this.d.kits.get(up.mac);
    if (!kit) {
      up.state = 'failed';
      up.first = Promise.reject(new ReefError('KIT_OFFLINE', 'the kit has not announced itself to the gateway'));
      up.first.catch(() => undefined);
      return;
    }
    up.state = 'registering';
    const options: CoapOption[] = [...up.path.map((s) => stringOption(Option.URI_PATH, s)), ...up.query.map((q) => stringOption(Option.URI_QUERY, q))];
    if (up.accept !== undefined) options.push(uintOption(Option.ACCEPT, up.accept));
    this.d.stats.forwarded++;
    const obs = this.d.back().observe(kit.peer, { options, confirmable: this.d.confirmableUpstream, timeoutMs: this.d.deadlineMs }, (m) => {
      if (up.obs === obs) this.notification(up, m);
    });
    up.obs = obs;
    up.first = obs.first.then(
      (m) => {
        if (up.obs !== obs) return m;
        if (codeClass(m.code) === 2 && getUintOption(m, Option.OBSERVE) !== undefined) {
          up.state = 'active';
          up.retryMs = 1000;
          this.remember(up, m);
        } else if (up.bridge && codeClass(m.code) === 5) {
          // A kit still booting answers 5.xx (its module's 5.04): the bridge tries again.
          this.registrationFailed(up, new Error(`the kit answered ${codeToString(m.code)}`));
        } else {
          // The kit answered without registering (an error, or a resource that is not observable).
          up.state = 'ended';
          this.upstreams.delete(up.key);
          obs.forget();
        }
        return m;
      },
      (e: unknown) => {
        if (up.obs === obs) this.registrationFailed(up, e);
        throw e;
      },
    );
    up.first.catch(() => undefined);
  }

  /** A kit that restarted or moved lost its observers: every upstream of it registers again. */
  kitRestarted(mac: string): void {
    for (const up of this.upstreams.values()) if (up.mac === mac && up.state !== 'ended') this.register(up);
  }

  private registrationFailed(up: Upstream, e: unknown): void {
    up.state = 'failed';
    up.obs?.forget();
    up.obs = undefined;
    this.d.log.debug({ mac: up.mac, err: e }, 'gateway upstream observation failed');
    if (!up.bridge) {
      // Nobody retries for the clients: they are told the observation ended (RFC 7641 §3.2).
      if (up.subscribers.size > 0 && up.latest) this.endUpstream(up, 'the kit did not answer the re-registration', false);
      return;
    }
    if (!this.d.stopping()) {
      // The bridge keeps trying while the kit is known; an announcement also restarts it.
      up.retry = setTimeout(() => {
        if (this.d.kits.get(up.mac)) this.register(up);
      }, up.retryMs);
      up.retry.unref();
      up.retryMs = Math.min(up.retryMs * 2, 60_000);
    }
  }

  private remember(up: Upstream, m: CoapMessage): void {
    up.latest = { msg: m, at: Date.now() };
    up.lastNotified = up.latest.at;
    if (up.bridge) this.d.onBridgeNotification(up.mac, m, up.sensor);
    else this.d.onClientNotification?.(up.mac, up.path, m);
  }

  private notification(up: Upstream, m: CoapMessage): void {
    this.d.stats.notificationsIn++;
    const live = codeClass(m.code) === 2 && getUintOption(m, Option.OBSERVE) !== undefined;
    up.seq = (up.seq + 1) & 0xffffff;
    if (live) this.remember(up, m);
    for (const sub of [...up.subscribers]) {
      this.d.stats.notificationsRelayed++;
      try {
        sub.notify(m, up.seq);
      } catch (e) {
        this.d.log.warn({ err: e }, 'gateway subscriber failed');
      }
    }
    if (!live) {
      // RFC 7641 §3.2: a notification with an error code or without Observe ends the observation;
      // the subscribers have just been given it, so they are not told a second time.
      for (const s of up.subscribers) this.unindex(s);
      up.subscribers.clear();
      this.endUpstream(up, `the kit ended the observation (${codeToString(m.code)})`, false);
    }
  }

  /** Attaches a subscriber to the shared observation of a kit resource; resolves with the first response. */
  async subscribe(kit: KitEntry, path: string[], query: string[], accept: number | undefined, sub: Subscriber): Promise<{ msg: CoapMessage; seq: number | undefined }> {
    const up = this.upstream(kit, path, query, accept);
    up.subscribers.add(sub);
    if (sub.peer && sub.token !== undefined) {
      this.clientSubs.set(`${peerKey(sub.peer)}|${sub.token}`, { up, sub });
    }
    let first: CoapMessage;
    try {
      first = await up.first!;
    } catch (e) {
      this.unsubscribe(up, sub);
      throw e;
    }
    if (!up.subscribers.has(sub)) return { msg: first, seq: undefined };
    if (up.state !== 'active') {
      this.unsubscribe(up, sub);
      return { msg: first, seq: undefined };
    }
    const latest = up.latest?.msg ?? first;
    return { msg: this.aged(latest, up.latest?.at), seq: up.seq };
  }

  /** RFC 7252 §5.6.1: a representation served from the gateway's copy carries its remaining Max-Age. */
  private aged(m: CoapMessage, at: number | undefined): CoapMessage {
    const maxAge = getUintOption(m, Option.MAX_AGE);
    if (maxAge === undefined || at === undefined) return m;
    const left = Math.max(0, maxAge - Math.floor((Date.now() - at) / 1000));
    return { ...m, options: [...m.options.filter((o) => o.number !== Option.MAX_AGE), uintOption(Option.MAX_AGE, left)] };
  }

  unsubscribe(up: Upstream, sub: Subscriber): void {
    this.unindex(sub);
    if (!up.subscribers.delete(sub)) return;
    this.maybeRelease(up);
  }

  private unindex(sub: Subscriber): void {
    if (!sub.peer || sub.token === undefined) return;
    const k = `${peerKey(sub.peer)}|${sub.token}`;
    if (this.clientSubs.get(k)?.sub !== sub) return;
    this.clientSubs.delete(k);
  }

  /** Finds and removes a subscriber anywhere (by its handle). */
  release(sub: Subscriber): void {
    for (const up of this.upstreams.values()) if (up.subscribers.has(sub)) return this.unsubscribe(up, sub);
  }

  /** A session ended: its clients' subscriptions end with it. */
  sessionEnded(sessionKey: string): void {
    for (const up of [...this.upstreams.values()]) {
      for (const sub of [...up.subscribers]) if (sub.session === sessionKey) this.unsubscribe(up, sub);
    }
  }

  private maybeRelease(up: Upstream): void {
    if (up.subscribers.size > 0 || up.bridge || up.state === 'ended') return;
    this.endUpstream(up, 'no observers left', true);
  }

  private endUpstream(up: Upstream, why: string, cancel: boolean): void {
    if (up.state === 'ended' && !this.upstreams.has(up.key)) return;
    up.state = 'ended';
    if (up.retry) clearTimeout(up.retry);
    if (this.upstreams.get(up.key) === up) this.upstreams.delete(up.key);
    const obs = up.obs;
    up.obs = undefined;
    if (obs) {
      // RFC 7641 §3.6: proactive cancellation, so the kit stops sending into the mesh.
      if (cancel && !this.d.stopping()) void obs.cancel();
      else obs.forget();
    }
    const subs = [...up.subscribers];
    up.subscribers.clear();
    for (const s of subs) this.unindex(s);
    for (const s of subs) {
      try {
        s.ended(why);
      } catch {
        // a subscriber's failure must not stop the others being told
      }
    }
  }

  /** A CoAP client's GET with Observe: 0 through the proxy, answered with the first (or latest) representation. */
  async observeForClient(kit: KitEntry, sessionKey: string, peer: Peer, req: CoapMessage, path: string[], query: string[]): Promise<ResponseSpec> {
    const token = req.token.toString('hex');
    // RFC 7641 §4.1: a registration with the same token replaces the client's earlier one.
    this.dropClient(peer, req.token, 'replaced');
    const con = req.type === CON;
    const front = this.d.front();
    const sub: Subscriber = {
      session: sessionKey,
      peer,
      token,
      notify: (m, seq) => {
        const live = codeClass(m.code) === 2 && getUintOption(m, Option.OBSERVE) !== undefined;
        const spec = this.relayed(m, live ? seq : undefined);
        const msg: CoapMessage = { type: con ? CON : NON, code: spec.code, mid: front.nextMid(), token: req.token, options: spec.options ?? [], payload: spec.payload ?? Buffer.alloc(0) };
        if (con) {
          void front.sendCon(peer, msg).then(({ result }) => {
            // RFC 7641 §4.5: a CON notification answered RST or never acknowledged ends the subscription.
            if (result !== 'ack') this.release(sub);
          });
        } else {
          sub.lastMid = msg.mid;
          front.sendNon(peer, msg);
        }
      },
      ended: (why) => {
        if (this.d.stopping()) return;
        // RFC 7641 §3.2: an error response without Observe tells the client its observation ended.
        const spec = refuse('OBSERVATION_ENDED', why, 64);
        const msg: CoapMessage = { type: con ? CON : NON, code: spec.code, mid: front.nextMid(), token: req.token, options: spec.options ?? [], payload: spec.payload ?? Buffer.alloc(0) };
        if (con) void front.sendCon(peer, msg);
        else front.sendNon(peer, msg);
      },
    };
    const accept = getUintOption(req, Option.ACCEPT);
    try {
      const { msg, seq } = await this.subscribe(kit, path, query, accept, sub);
      return this.relayed(msg, seq);
    } catch (e) {
      return this.d.upstreamError(e);
    }
  }

  /** The kit's response as the client's, counted when it is an error. */
  relayed(m: CoapMessage, seq?: number): ResponseSpec {
    if (codeClass(m.code) !== 2) this.d.stats.kitErrors++;
    return relayed(m, seq);
  }

  /** Ends the subscription of a client's token (deregistration, a new request with the token, RST). */
  dropClient(peer: Peer, t: Buffer, why: string): void {
    if (this.clientSubs.size === 0) return;
    const token = t.toString('hex');
    const hit = this.clientSubs.get(`${peerKey(peer)}|${token}`);
    if (!hit) return;
    this.d.log.debug({ peer: peerKey(peer), token, why }, 'gateway observer removed');
    this.unsubscribe(hit.up, hit.sub);
  }

  /** A RST from a client to one of our NON notifications (RFC 7641 §3.6). */
  clientReset(mid: number, peer: Peer): void {
    const pk = peerKey(peer);
    for (const up of [...this.upstreams.values()]) {
      for (const sub of [...up.subscribers]) {
        if (sub.peer && peerKey(sub.peer) === pk && sub.lastMid === mid) this.unsubscribe(up, sub);
      }
    }
  }
}
