// The datagram socket under a CoAP endpoint: node:dgram's, or the batched one for servers that
// carry many requests (native/udp-batch.c: recvmmsg/sendmmsg, one JavaScript call per batch of
// received datagrams, one system call per batch sent; on Linux a run of datagrams to one peer goes
// through the kernel as one packet, UDP GSO/GRO). The gateway uses the batched one, because
// it receives and sends two datagrams per proxied request and node:dgram's per-datagram cost was
// most of its own; so does the kit's network module (docs/performance.md). Clients use node:dgram.
// Both implement the one interface below, and behave alike: nothing above it depends on which one
// it got, so the gateway and the kit work (more slowly) where the addon was not built.
import dgram from 'node:dgram';
import dns from 'node:dns';
import { createRequire } from 'node:module';
import { isIP } from 'node:net';

export type OnDatagram = (buf: Buffer, address: string, port: number) => void;

export interface Datagrams {
  /** Which implementation this is (the gateway warns at start when it did not get the batched one). */
  readonly kind: 'dgram' | 'batched';
  /**
   * Where received datagrams and socket errors go; a later call replaces an earlier one. The batched
   * socket hands over every datagram of a batch in one turn: no promise continuation runs between
   * two of them (node:dgram's runs them between datagrams).
   */
  listen(onMessage: OnDatagram, onError: (e: Error) => void): void;
  /** Sends one datagram; never throws (a failure goes to onError, as node:dgram's does). */
  send(data: Buffer, port: number, address: string): void;
  /**
   * Datagrams the kernel could not take yet (the socket's send buffer was full: EAGAIN), kept in
   * order and sent once the socket is writable again: back-pressure, not loss.
   */
  queuedSends(): number;
  address(): { address: string; port: number };
  /**
   * Whether datagrams to one peer leave as one run through the kernel (UDP GSO) and arrive as one
   * (UDP GRO): the batched socket on Linux (native/udp-batch.c); a kernel that refuses runs turns
   * `segmentation` off for good.
   */
  offload(): { segmentation: boolean; coalescing: boolean };
  setRecvBufferSize(bytes: number): void;
  close(): Promise<void>;
  /**
   * The endpoint's Message ID counter, when the socket itself sends messages too (the batched
   * socket's forwarding fast path, linkForwarding()): one counter, so no two messages to a peer
   * share an ID sooner than the counter wraps.
   */
  readonly mids?: Int32Array;
}

export interface OpenOptions {
  host: string;
  port: number;
  /** The batched socket, when it is built; node:dgram otherwise. */
  batched?: boolean;
  /** The largest datagram the caller accepts: a longer one may arrive cut to one byte more. */
  maxMessageSize: number;
}

export async function openDatagrams(o: OpenOptions): Promise<Datagrams> {
  if (o.batched) {
    const native = batchBinding();
    // The addon binds IP literals only; a name (REEF_DEVICE_HOST=localhost) is resolved first, to
    // the IPv4 address node:dgram's udp4 socket would bind.
    if (native) return new BatchedDatagrams(native, isIP(o.host) ? o : { ...o, host: (await dns.promises.lookup(o.host, { family: 4 })).address });
  }
  return DgramDatagrams.open(o);
}

/**
 * The address lookup of node:dgram sockets: an IP literal (every peer address a datagram came
 * from) is its own answer, given at once, so a send goes out in the caller's turn instead of after
 * the asynchronous dns.lookup() node:dgram otherwise does for every datagram; names still resolve.
 */
function literalLookup(address: string, family: unknown, callback: (err: Error | null, address: string, family: number) => void): void {
  const v = isIP(address);
  if (v !== 0) return callback(null, address, v);
  dns.lookup(address, family as number, callback as (err: NodeJS.ErrnoException | null, address: string, family: number) => void);
}

class DgramDatagrams implements Datagrams {
  readonly kind = 'dgram';
  private closed = false;
  private onMessage: OnDatagram = () => undefined;
  private onError: (e: Error) => void = () => undefined;

  private constructor(private readonly socket: dgram.Socket) {
    socket.on('message', (buf, rinfo) => this.onMessage(buf, rinfo.address, rinfo.port));
    socket.on('error', (e) => this.onError(e));
  }

  static async open(o: OpenOptions): Promise<DgramDatagrams> {
    const socket = dgram.createSocket({ type: o.host.includes(':') ? 'udp6' : 'udp4', lookup: literalLookup });
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(o.port, o.host, () => {
        socket.off('error', reject);
        resolve();
      });
    });
    return new DgramDatagrams(socket);
  }

  listen(onMessage: OnDatagram, onError: (e: Error) => void): void {
    this.onMessage = onMessage;
    this.onError = onError;
  }

  send(data: Buffer, port: number, address: string): void {
    if (this.closed) return;
    try {
      this.socket.send(data, port, address);
    } catch (e) {
      // node:dgram throws for a port or address it refuses before the kernel sees them.
      this.onError(e as Error);
    }
  }

  queuedSends(): number {
    // libuv keeps a send that met EAGAIN in its queue and retries it when the socket is writable.
    return this.socket.getSendQueueCount();
  }

  address(): { address: string; port: number } {
    const a = this.socket.address();
    return { address: a.address, port: a.port };
  }

  offload(): { segmentation: boolean; coalescing: boolean } {
    return { segmentation: false, coalescing: false };
  }

  setRecvBufferSize(bytes: number): void {
    this.socket.setRecvBufferSize(bytes);
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    return new Promise((resolve) => this.socket.close(() => resolve()));
  }
}

interface BatchBinding {
  META: number;
  /** Datagrams handed over in one call at most: the meta array holds this many. */
  BATCH: number;
  /** send()'s status besides 0 and an errno: the address is a name to resolve; the socket buffer is full. */
  NOT_LITERAL: number;
  BLOCKED: number;
  EINVAL: number;
  open(v6: boolean, host: string, port: number, slot: number, meta: Int32Array, status: Int32Array, onBatch: (buf: Buffer, n: number) => void, onWritable: () => void): unknown;
  send(sock: unknown, queue: (Buffer | number | string)[], from: number, to: number): number;
  address(sock: unknown): [string, number];
  offload(sock: unknown): [boolean, boolean];
  setRecvBufferSize(sock: unknown, bytes: number): void;
  close(sock: unknown, done: () => void): void;
  ntop6(meta: Int32Array, k: number): string;
  errname(errno: number): string;
  EV_TIMEOUT: number;
  EV_ANSWER: number;
  EV_TAP: number;
  fastLink(front: unknown, back: unknown, maxRequest: number, deadlineMs: number, nonLifetimeMs: number, onEvents: () => void, counters: Float64Array): void;
  fastInstall(
    front: unknown,
    clientAddress: string,
    clientPort: number,
    proxyUri: Buffer,
    kitAddress: string,
    kitPort: number,
    kitOptions: Buffer,
    ttlMs: number,
    mid: number,
    token: Buffer,
    tap: number,
  ): boolean;
  fastForget(front: unknown, clientAddress: string, clientPort: number): void;
  fastClear(front: unknown): void;
  fastTake(front: unknown, sweep: boolean): Buffer | null;
  EV_HEADER: number;
}

let binding: BatchBinding | null | undefined;
let bindingError: Error | undefined;

/** The compiled addon (`npm install` builds it: binding.gyp), or null when it is not there. */
function batchBinding(): BatchBinding | null {
  if (binding === undefined) {
    try {
      binding = createRequire(import.meta.url)('../../build/Release/udp_batch.node') as BatchBinding;
    } catch (e) {
      bindingError = e as Error;
      binding = null;
    }
  }
  return binding;
}

/** Why the batched socket is not available, when it is not (for the gateway's start-up log). */
export function batchedUnavailable(): string | undefined {
  return batchBinding() ? undefined : (bindingError?.message ?? 'not built');
}

class BatchedDatagrams implements Datagrams {
  readonly kind = 'batched';
  /** @internal the native socket, for linkForwarding() */
  readonly sock: unknown;
  private readonly meta: Int32Array;
  /** [0]: send()'s status; [1]: the Message ID counter, shared with the native side. */
  private readonly status = new Int32Array(2);
  readonly mids = this.status.subarray(1, 2);
  /** Datagrams to send, flattened: buffer, port, address; flushed once per turn. */
  private queue: (Buffer | number | string)[] = [];
  private flushing = false;
  private blocked = false;
  private closed = false;
  private closing: Promise<void> | undefined;
  private onMessage: OnDatagram = () => undefined;
  private onError: (e: Error) => void = () => undefined;
  /** IPv4 peer addresses as text, by their 32-bit value: built once per peer, not per datagram. */
  private readonly names = new Map<number, string>();
  private readonly flush = (): void => this.sendQueued();
  private readonly v6: boolean;

  constructor(
    private readonly native: BatchBinding,
    o: OpenOptions,
  ) {
    this.v6 = o.host.includes(':');
    this.meta = new Int32Array(native.BATCH * native.META);
    const slot = Math.max(1500, o.maxMessageSize + 1);
    this.sock = native.open(
      this.v6,
      o.host,
      o.port,
      slot,
      this.meta,
      this.status,
      (buf, n) => this.received(buf, n),
      () => {
        this.blocked = false;
        this.sendQueued();
      },
    );
  }

  listen(onMessage: OnDatagram, onError: (e: Error) => void): void {
    this.onMessage = onMessage;
    this.onError = onError;
  }

  private received(buf: Buffer, n: number): void {
    const m = this.meta;
    const W = this.native.META;
    for (let i = 0; i < n; i++) {
      const k = i * W;
      const off = m[k]!;
      const address = m[k + 3] === 4 ? this.ipv4(m[k + 4]!) : this.native.ntop6(m, k + 4);
      this.onMessage(buf.subarray(off, off + m[k + 1]!), address, m[k + 2]!);
    }
  }

  private ipv4(word: number): string {
    let s = this.names.get(word);
    if (s === undefined) {
      // The word is the address as a number: a.b.c.d is (a << 24) | (b << 16) | (c << 8) | d.
      s = `${word >>> 24}.${(word >>> 16) & 255}.${(word >>> 8) & 255}.${word & 255}`;
      if (this.names.size >= 65_536) this.names.clear();
      this.names.set(word, s);
    }
    return s;
  }

  send(data: Buffer, port: number, address: string): void {
    if (this.closed) return;
    this.queue.push(data, port, address);
    if (!this.flushing && !this.blocked) {
      this.flushing = true;
      // After the current turn (every answer to a batch of received datagrams), in one call.
      process.nextTick(this.flush);
    }
  }

  private sendQueued(): void {
    this.flushing = false;
    if (this.closed || this.blocked) return;
    const q = this.queue;
    const count = q.length / 3;
    let from = 0;
    while (from < count) {
      const at = this.native.send(this.sock, q, from, count);
      const status = this.status[0]!;
      if (status === 0) {
        from = at;
        continue;
      }
      if (status === this.native.BLOCKED) {
        // The socket buffer is full: the rest waits for the writable callback, in order.
        this.blocked = true;
        this.queue = q.slice(at * 3);
        return;
      }
      const data = q[at * 3] as Buffer;
      const port = q[at * 3 + 1] as number;
      const address = q[at * 3 + 2] as string;
      if (status === this.native.NOT_LITERAL) this.resolveAndSend(data, port, address);
      else this.onError(sendError(this.native, status, address, port));
      from = at + 1;
    }
    // What onError's listener sent meanwhile stays for the flush its send() scheduled.
    const rest = q.length > count * 3 ? q.slice(count * 3) : undefined;
    q.length = 0;
    if (rest) q.push(...rest);
  }

  /** A peer given by name: resolved (as node:dgram does), then queued like any other datagram. */
  private resolveAndSend(data: Buffer, port: number, name: string): void {
    dns.lookup(name, { family: this.v6 ? 0 : 4 }, (err, address) => {
      if (err) this.onError(err);
      // An address this socket cannot use (a scoped IPv6 one, an IPv6 one on an IPv4 socket)
      // resolves to itself: refused once, not looked up again for ever.
      else if (address === name || isIP(address) === 0) this.onError(sendError(this.native, this.native.EINVAL, name, port));
      else this.send(data, port, address);
    });
  }

  queuedSends(): number {
    return this.blocked ? this.queue.length / 3 : 0;
  }

  address(): { address: string; port: number } {
    const [address, port] = this.native.address(this.sock);
    return { address, port };
  }

  offload(): { segmentation: boolean; coalescing: boolean } {
    const [segmentation, coalescing] = this.native.offload(this.sock);
    return { segmentation, coalescing };
  }

  setRecvBufferSize(bytes: number): void {
    this.native.setRecvBufferSize(this.sock, bytes);
  }

  close(): Promise<void> {
    if (this.closed) return this.closing ?? Promise.resolve();
    this.closed = true;
    this.queue = [];
    // Resolved once the descriptor is closed, so the port can be bound again at once.
    this.closing = new Promise((resolve) => this.native.close(this.sock, resolve));
    return this.closing;
  }
}

function sendError(native: BatchBinding, errno: number, address: string, port: number): Error {
  const code = native.errname(errno);
  const e = new Error(`send ${code} ${address}:${port}`) as NodeJS.ErrnoException;
  e.code = code;
  e.errno = -errno;
  e.syscall = 'send';
  return e;
}

/**
 * What the fast path hands back (linkForwarding()): a forward with no answer by the deadline
 * ('timeout'), the kit's answer for JavaScript to relay ('answer'), both for the client and token
 * named; and a copy of a successful answer it relayed itself on a route installed with a tap ('tap').
 */
export type ForwardEvent =
  | { kind: 'timeout'; client: { address: string; port: number }; token: Buffer; tap: number }
  | { kind: 'answer'; client: { address: string; port: number }; token: Buffer; datagram: Buffer; tap: number }
  | { kind: 'tap'; datagram: Buffer; tap: number };

/** What the fast path counted, as indexes into Forwarder.counters (written by the native side). */
export const FORWARD_COUNTERS = { forwarded: 0, relayed: 1, kitErrors: 2, timeouts: 3, duplicates: 4, handedOver: 5, inFlight: 6 } as const;

/**
 * The forwarding fast path between a proxy's two batched sockets (native/coap-forward.c says what
 * it takes): routes installed here carry a client's NON GET of one Proxy-Uri to a kit and its
 * answer back without JavaScript, until they expire or are removed.
 */
export interface Forwarder {
  /**
   * Routes `client`'s requests with exactly these Proxy-Uri bytes to `kit` with `kitOptions` (the
   * encoded Uri-Path/Uri-Query options, from option number 0) for `ttlMs`; `mid` and `token` are
   * those of the request just forwarded by JavaScript (a duplicate of it is then dropped); `tap`,
   * when not 0, marks the events of its answers.
   */
  install(client: { address: string; port: number }, proxyUri: Buffer, kit: { address: string; port: number }, kitOptions: Buffer, ttlMs: number, mid: number, token: Buffer, tap: number): boolean;
  forget(client: { address: string; port: number }): void;
  clear(): void;
  /** What is waiting (answers to relay, taps), and with `sweep` forwards past their deadline too (a walk of the whole table: for a timer, not every wake-up); empties the list. */
  take(sweep: boolean): ForwardEvent[];
  /** Running counts, by FORWARD_COUNTERS (in flight: now). */
  readonly counters: Float64Array;
}

/**
 * Links two batched sockets, `front` facing clients and `back` facing kits; null when either is
 * not the batched socket. `onEvents` is told when take() has answers waiting (timeouts are found by
 * calling take(true)). Closing either socket ends the link.
 */
export function linkForwarding(front: Datagrams, back: Datagrams, o: { maxRequest: number; deadlineMs: number; nonLifetimeMs: number }, onEvents: () => void): Forwarder | null {
  const native = batchBinding();
  if (!native || !(front instanceof BatchedDatagrams) || !(back instanceof BatchedDatagrams)) return null;
  const f = front.sock;
  const counters = new Float64Array(7);
  native.fastLink(f, back.sock, o.maxRequest, o.deadlineMs, o.nonLifetimeMs, onEvents, counters);
  return {
    counters,
    install: (client, proxyUri, kit, kitOptions, ttlMs, mid, token, tap) => native.fastInstall(f, client.address, client.port, proxyUri, kit.address, kit.port, kitOptions, ttlMs, mid, token, tap),
    forget: (client) => native.fastForget(f, client.address, client.port),
    clear: () => native.fastClear(f),
    take: (sweep) => {
      const b = native.fastTake(f, sweep);
      const out: ForwardEvent[] = [];
      if (!b) return out;
      // Each event: a header of EV_HEADER bytes, then its datagram (native/coap-forward.c, js_take).
      for (let at = 0; at < b.length; ) {
        const kind = b[at]!;
        const tap = b.readInt32BE(at + 8);
        const len = b.readUInt32BE(at + 12);
        const data = b.subarray(at + native.EV_HEADER, at + native.EV_HEADER + len);
        if (kind === native.EV_TAP) out.push({ kind: 'tap', datagram: data, tap });
        else {
          const client = { address: b.toString('latin1', at + 24, at + 24 + b[at + 2]!), port: b.readUInt16BE(at + 4) };
          const token = Buffer.from(b.subarray(at + 16, at + 16 + b[at + 1]!));
          out.push(kind === native.EV_TIMEOUT ? { kind: 'timeout', client, token, tap } : { kind: 'answer', client, token, datagram: data, tap });
        }
        at += native.EV_HEADER + len;
      }
      return out;
    },
  };
}
