// The gateway's side of the forwarding fast path (native/coap-forward.c): the routes it installs
// and what the native side hands back. The full path (gateway.ts) stays the one that decides: once
// a client's request it forwarded itself, having checked the session, the account, the target and
// the tenant's kit, has been answered, it may offer the same client's next requests of that
// Proxy-Uri to the fast path, for no longer than what it checked stays cached (the device record
// and the account, one second; the session's own end). Only the plainest request is offered: NON,
// GET, Proxy-Uri its only option, no payload, from a client that observes nothing through the
// gateway (a request with an observation's token ends it, RFC 7641 §3.6, which only the full path
// knows). A route may carry a tap: its successful answers, once relayed, are also handed to
// JavaScript (the temperature's go to MQTT, bubble()). A session that ends, a client that starts
// observing, a kit that moves or restarts: their routes go at once. docs/coap.md, "The forwarding
// fast path", says what a client sees; docs/benchmarks.md, what it saves.
import type { Logger } from 'pino';
import {
  classifyDatagram,
  Code,
  codeClass,
  CoapTimeoutError,
  EMPTY_BUFFER,
  FORWARD_COUNTERS,
  isResponseCode,
  linkForwarding,
  NON,
  parseMessage,
  serializeMessage,
  type CoapEndpoint,
  type CoapMessage,
  type CoapOption,
  type Forwarder,
  type Peer,
  type ResponseSpec,
} from '../coap/index.ts';
import { refuse } from './answers.ts';

/** How often forwards past their deadline are looked for (a 5.04 comes at most this much late). */
const SWEEP_MS = 100;

export interface FastPathDeps {
  front: CoapEndpoint;
  back: CoapEndpoint;
  deadlineMs: number;
  /** The kit's answer as the client's (the full path's relayed(): counts kit errors). */
  relayed(m: CoapMessage): ResponseSpec;
  /** The answer to a failed forward (5.04 for a timeout), from the error catalogue. */
  upstreamError(e: unknown): ResponseSpec;
  log: Logger;
}

/** The fast path's counts: forwarded to kits, answers relayed (of them kit errors), 5.04s, duplicates dropped, answers handed to JavaScript, in flight. */
export type FastPathStats = Record<keyof typeof FORWARD_COUNTERS, number>;

/** The gateway's counters the fast path adds to (each read adds the native side's count). */
export interface CountedStats {
  requests: number;
  forwarded: number;
  kitErrors: number;
}

export class FastPath {
  private readonly sweeper: NodeJS.Timeout;
  /** Encoded Uri-* options by the (cached, shared) options array they were made from. */
  private readonly encoded = new WeakMap<CoapOption[], Buffer>();
  /** Taps by id (index + 1) and by key: one per kit resource tapped, kept while the gateway runs. */
  private readonly taps: ((m: CoapMessage) => void)[] = [];
  private readonly tapIds = new Map<string, number>();

  private constructor(
    private readonly fwd: Forwarder,
    private readonly d: FastPathDeps,
  ) {
    this.sweeper = setInterval(() => this.drain(true), SWEEP_MS);
    this.sweeper.unref();
  }

  /** The fast path over the gateway's two endpoints; null when they are not both batched sockets. */
  static link(d: FastPathDeps): FastPath | null {
    let self: FastPath | null = null;
    const fwd = linkForwarding(d.front.socket, d.back.socket, { maxRequest: d.front.maxMessageSize, deadlineMs: d.deadlineMs, nonLifetimeMs: d.front.times.nonLifetimeMs }, () => self?.drain(false));
    if (!fwd) return null;
    self = new FastPath(fwd, d);
    return self;
  }

  /**
   * `peer`'s requests with exactly this Proxy-Uri go to `kit` with `kitOptions` (its Uri-Path and
   * Uri-Query) for `ttlMs`; `mid` and `token` are the request the full path just forwarded. `tap`
   * sees each successful answer too (its key names the kit resource: one tap per key).
   */
  offer(peer: Peer, proxyUri: Buffer, kit: Peer, kitOptions: CoapOption[], ttlMs: number, mid: number, token: Buffer, tap?: { key: string; fn: (m: CoapMessage) => void }): void {
    let opts = this.encoded.get(kitOptions);
    if (opts === undefined) {
      // The options as a message encodes them, from option number 0: what follows its header.
      opts = serializeMessage({ type: NON, code: Code.GET, mid: 0, token: EMPTY_BUFFER, options: kitOptions, payload: EMPTY_BUFFER }).subarray(4);
      this.encoded.set(kitOptions, opts);
    }
    let tapId = 0;
    if (tap) {
      tapId = this.tapIds.get(tap.key) ?? 0;
      if (tapId === 0) {
        this.taps.push(tap.fn);
        tapId = this.taps.length;
        this.tapIds.set(tap.key, tapId);
      }
    }
    this.fwd.install(peer, proxyUri, kit, opts, ttlMs, mid, token, tapId);
  }

  /** The client's routes go (its session ended, it observes). */
  forget(peer: Peer): void {
    this.fwd.forget(peer);
  }

  /** Every route goes (a kit moved or restarted: its address or its state changed). */
  clear(): void {
    this.fwd.clear();
  }

  /** Makes the gateway's counters include the fast path's forwards, answers and timeouts. */
  countInto(stats: CountedStats): void {
    const c = this.fwd.counters;
    // Timeouts are counted where they are answered (the gateway's upstreamError()).
    const add: [keyof CountedStats, number][] = [
      ['requests', FORWARD_COUNTERS.forwarded],
      ['forwarded', FORWARD_COUNTERS.forwarded],
      ['kitErrors', FORWARD_COUNTERS.kitErrors],
    ];
    for (const [name, k] of add) {
      let own = stats[name];
      Object.defineProperty(stats, name, {
        enumerable: true,
        get: () => own + c[k]!,
        set: (v: number) => {
          own = v - c[k]!;
        },
      });
    }
  }

  /** What the fast path has done since the gateway started (forwards in flight: now). */
  snapshot(): FastPathStats {
    const c = this.fwd.counters;
    const out = {} as FastPathStats;
    for (const [name, k] of Object.entries(FORWARD_COUNTERS) as [keyof FastPathStats, number][]) out[name] = c[k]!;
    return out;
  }

  stop(): void {
    clearInterval(this.sweeper);
  }

  /** Answers what the native side handed back: answers it does not relay itself, taps, and with `sweep` 5.04 past the deadline. */
  private drain(sweep: boolean): void {
    let events;
    try {
      events = this.fwd.take(sweep);
    } catch (e) {
      // The sockets are closing; nothing is left to answer.
      this.d.log.debug({ err: e }, 'gateway fast path: nothing to take');
      return;
    }
    for (const e of events) {
      if (e.kind === 'tap') {
        this.tap(e.tap, parseMessage(e.datagram));
        continue;
      }
      let spec: ResponseSpec;
      let relayed: CoapMessage | undefined;
      if (e.kind === 'timeout') {
        spec = this.d.upstreamError(new CoapTimeoutError());
      } else {
        // An answer with options relayed only after the endpoint's own checks (RFC 7252 §5.4.1):
        // an elective one it does not know is dropped, a critical one makes the answer unreadable.
        const c = classifyDatagram(e.datagram, this.d.back.recognizedOptions);
        if (c.kind === 'message' && isResponseCode(c.msg.code)) relayed = c.msg;
        spec = relayed ? this.d.relayed(relayed) : refuse('BAD_GATEWAY', "the kit's answer could not be read");
      }
      const msg: CoapMessage = { type: NON, code: spec.code, mid: this.d.front.nextMid(), token: e.token, options: spec.options ?? [], payload: spec.payload ?? EMPTY_BUFFER };
      this.d.front.sendNon(e.client, msg);
      if (relayed && codeClass(relayed.code) === 2) this.tap(e.tap, relayed);
    }
  }

  private tap(id: number, m: CoapMessage): void {
    const fn = this.taps[id - 1];
    if (!fn) return;
    try {
      fn(m);
    } catch (e) {
      this.d.log.warn({ err: e }, 'gateway fast path: a tap failed');
    }
  }
}
