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
  private readonly sock: unknown;
  private readonly meta: Int32Array;
  /** send()'s status, written by the native side. */
  private readonly status = new Int32Array(1);
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
