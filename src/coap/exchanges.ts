// The client side of a CoAP endpoint: requests waiting for their response, matched by peer and
// token (RFC 7252 §5.3.2), piggy-backed or separate, each under an application deadline (one timer
// for all: deadlines.ts); and observations (RFC 7641 §3), which keep their token for the
// notifications that follow the first response.
import { Code, codeClass } from './codes.ts';
import { Deadlines } from './deadlines.ts';
import { type CoapMessage, type CoapOption, CON, getUintOption, NON, uintOption, uriOptions } from './message.ts';
import { Option } from './options.ts';
import { type Peer, peerKey } from './peers.ts';
import { PeerTokenMap, type TokenKey, tokenKey } from './peer-token-map.ts';
import type { DeliveryResult } from './retransmit.ts';
import type { DerivedTimes } from './timing.ts';

/** Called once with a request's response, or with the error that ended it. */
export type ExchangeCallback = (err: Error | undefined, res?: CoapMessage) => void;

export interface RequestOptions {
  method: number;
  /** Path and query, e.g. "/snsr/arduino/temp?sens". */
  uri?: string;
  options?: CoapOption[];
  payload?: Buffer;
  /** CON (default) or NON. */
  confirmable?: boolean;
  /** Application deadline for the response (default: EXCHANGE_LIFETIME for CON, NON_LIFETIME for NON). */
  timeoutMs?: number;
  token?: Buffer;
}

export class CoapTimeoutError extends Error {
  constructor(message = 'no response before the deadline') {
    super(message);
    this.name = 'CoapTimeoutError';
  }
}

export class CoapResetError extends Error {
  constructor(message = 'the peer answered RST') {
    super(message);
    this.name = 'CoapResetError';
  }
}

export interface Observation {
  token: Buffer;
  /** The registration's first response. */
  first: Promise<CoapMessage>;
  /** Proactive cancellation (RFC 7641 §3.6): GET with Observe=1 and the same token. */
  cancel(): Promise<CoapMessage | undefined>;
  /** Forget the token locally; the next notification is answered RST (reactive cancellation). */
  forget(): void;
}

interface Pending {
  /** Where it is among the pending: the peer's key and the token's (tokenKey). */
  peerKey: string;
  token: TokenKey;
  peer: Peer;
  done: ExchangeCallback;
  /** Its application deadline, which runs until the first response (Deadlines). */
  due: number;
  lane: number;
  /** Observe: keeps the token alive across notifications. */
  onNotify?: (m: CoapMessage) => void;
  answered: boolean;
}

/** What the exchanges send through: the endpoint (endpoint.ts). */
export interface ExchangeSender {
  readonly times: DerivedTimes;
  nextMid(): number;
  newToken(len?: number): Buffer;
  sendCon(peer: Peer, msg: CoapMessage): Promise<{ result: DeliveryResult; ack?: CoapMessage }>;
  sendNon(peer: Peer, msg: CoapMessage): void;
  request(peer: Peer, o: RequestOptions): Promise<CoapMessage>;
}

export class Exchanges {
  /** Requests waiting for a response, by peer and token (§5.3.2). */
  private readonly pending = new PeerTokenMap<Pending>();
  /** The application deadlines of requests waiting for their first response (one timer for all). */
  private readonly deadlines = new Deadlines<Pending>((p) => {
    if (this.pending.get(p.peerKey, p.token) === p) this.pending.delete(p.peerKey, p.token);
    p.done(new CoapTimeoutError());
  });

  constructor(private readonly ep: ExchangeSender) {}

  /** Registers an observation (RFC 7641 §3.1): GET with Observe=0; onNotify sees every later notification. */
  observe(peer: Peer, o: Omit<RequestOptions, 'method'> & { method?: number }, onNotify: (m: CoapMessage) => void): Observation {
    const token = o.token ?? this.ep.newToken();
    const options = [...(o.options ?? []).filter((x) => x.number !== Option.OBSERVE), uintOption(Option.OBSERVE, 0)];
    const promise = new Promise<CoapMessage>((resolve, reject) => this.start(peer, { ...o, method: o.method ?? Code.GET, token, options }, (e, m) => (e ? reject(e) : resolve(m!)), onNotify));
    const pk = peerKey(peer);
    const tk = tokenKey(token);
    const forget = (): void => {
      const p = this.pending.get(pk, tk);
      if (!p) return;
      this.deadlines.remove(p);
      this.pending.delete(pk, tk);
    };
    return {
      token,
      first: promise,
      forget,
      cancel: async () => {
        forget();
        const opts = [...(o.options ?? []).filter((x) => x.number !== Option.OBSERVE), uintOption(Option.OBSERVE, 1)];
        try {
          return await this.ep.request(peer, { ...o, method: o.method ?? Code.GET, token, options: opts });
        } catch {
          return undefined;
        }
      },
    };
  }

  /** Sends a request; `done` is called once with its (first) response or the error that ended it. */
  start(peer: Peer, o: RequestOptions, done: ExchangeCallback, onNotify?: (m: CoapMessage) => void): void {
    const token = o.token ?? this.ep.newToken();
    const confirmable = o.confirmable ?? true;
    const msg: CoapMessage = {
      type: confirmable ? CON : NON,
      code: o.method,
      mid: this.ep.nextMid(),
      token,
      // Never written to afterwards, so a caller's array is used as it is (a proxy's cached Uri-* options).
      options: o.uri !== undefined ? [...uriOptions(o.uri), ...(o.options ?? [])] : (o.options ?? []),
      payload: o.payload ?? Buffer.alloc(0),
    };
    const pk = peerKey(peer);
    const tk = tokenKey(token);
    const p: Pending = { peerKey: pk, token: tk, peer, done, due: 0, lane: 0, answered: false };
    if (onNotify) p.onNotify = onNotify;
    const prior = this.pending.get(pk, tk);
    this.pending.set(pk, tk, p);
    if (prior) {
      this.deadlines.remove(prior);
      prior.done(new CoapResetError('superseded by a request with the same token'));
    }
    const times = this.ep.times;
    this.deadlines.add(p, o.timeoutMs ?? (confirmable ? times.exchangeLifetimeMs : times.nonLifetimeMs));
    if (confirmable) {
      void this.ep.sendCon(peer, msg).then(({ result }) => {
        const p = this.pending.get(pk, tk);
        if (!p || p.answered) return;
        if (result === 'reset') this.fail(p, new CoapResetError());
        else if (result === 'timeout') this.fail(p, new CoapTimeoutError('no ACK after MAX_RETRANSMIT retransmissions'));
      });
    } else {
      this.ep.sendNon(peer, msg);
    }
  }

  private fail(p: Pending, e: Error): void {
    this.deadlines.remove(p);
    this.pending.delete(p.peerKey, p.token);
    p.done(e);
  }

  /** Ends every waiting request with `e` (the endpoint closes). */
  failAll(e: () => Error): void {
    for (const p of this.pending.values()) this.fail(p, e());
    this.deadlines.clear();
  }

  /** A response from `peer`: to the request or observation waiting for its token; false when none waits. */
  deliver(m: CoapMessage, peer: Peer): boolean {
    const pk = peerKey(peer);
    const tk = tokenKey(m.token);
    const p = this.pending.get(pk, tk);
    if (!p) return false;
    if (p.onNotify && p.answered) {
      p.onNotify(m);
      return true;
    }
    p.answered = true;
    this.deadlines.remove(p);
    // An observation stays registered while responses carry Observe and are successful (RFC 7641 §3.2).
    if (!(p.onNotify && getUintOption(m, Option.OBSERVE) !== undefined && codeClass(m.code) === 2)) this.pending.delete(pk, tk);
    p.done(undefined, m);
    return true;
  }
}
