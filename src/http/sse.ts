// The one Server-Sent Events writer (WHATWG HTML "Server-sent events": `event:`/`data:` lines, a
// blank line ends a message, `:` lines are comments), used by every live stream: the solution's
// event stream and the gateway's HTTP bridge observe stream.
//
// A stream is a long-lived response, so the registry here bounds what streams can cost
// and how long they outlive their authority:
// - at most `maxPerAccount` open streams per account and `maxPerNode` in all; one more is refused
//   with TOO_MANY_STREAMS (429) before anything is written;
// - a reader that stops reading is disconnected, not buffered for: when a stream already has unsent
//   bytes and the next message would take them past `maxBufferedBytes`, the connection is closed.
//   Dropping messages silently would leave a plot wrong with no sign of it; a closed stream makes
//   EventSource (and the SDK) reconnect, and the reader re-reads what it missed by time range;
// - a message is serialized once and the same bytes are written to every stream that wants it;
// - every second the authority of every stream is checked again (token expiry, account disabled,
//   secret rotated); a stream that lost it gets a final `end` event naming why, and is closed.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ReefError, type ErrorCode } from '../core/errors.ts';
import type { Caller } from '../auth/accounts.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** The node's live event streams (every stream route starts its stream here). */
    streams: StreamRegistry;
  }
}

export interface StreamLimits {
  maxPerAccount: number;
  maxPerNode: number;
  maxBufferedBytes: number;
}

/** What the registry needs of the authenticator: is this caller's authority still good? */
export interface AuthorityCheck {
  recheck(caller: Caller): Promise<void>;
}

/** One message's bytes, built once and shared by every stream it goes to. */
export function sseFrame(event: string, data: unknown): Buffer {
  // JSON never contains a raw newline, so one `data:` line carries it (no line splitting needed).
  return Buffer.from(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

const KEEP_ALIVE = Buffer.from(': keep-alive\n\n');
const HEARTBEAT_MS = 15_000;
const SWEEP_MS = 1000;

export class SseStream {
  closed = false;
  private readonly closers: (() => void)[] = [];

  constructor(
    readonly caller: Caller,
    private readonly res: FastifyReply['raw'],
    private readonly limit: number,
    private readonly onSlow: () => void,
  ) {}

  /** Writes a prebuilt frame; a reader too far behind is disconnected instead. False when closed. */
  write(frame: Buffer): boolean {
    if (this.closed) return false;
    const pending = this.res.writableLength;
    if (pending > 0 && pending + frame.length > this.limit) {
      this.onSlow();
      this.destroy();
      return false;
    }
    this.res.write(frame);
    return true;
  }

  send(event: string, data: unknown): boolean {
    return this.write(sseFrame(event, data));
  }

  /** A last `end` event saying why, then the response ends. */
  end(reason: string, code?: ErrorCode): void {
    if (this.closed) return;
    this.send('end', code ? { reason, code } : { reason });
    this.closed = true;
    this.res.end();
    this.fire();
  }

  /** Runs `fn` once when the stream closes, for whatever reason. */
  onClose(fn: () => void): void {
    if (this.closed) fn();
    else this.closers.push(fn);
  }

  /** Called when the client went or the reader was too slow: free the connection now. */
  destroy(): void {
    if (this.closed) return;
    this.closed = true;
    this.res.destroy();
    this.fire();
  }

  private fire(): void {
    for (const fn of this.closers.splice(0)) {
      try {
        fn();
      } catch {
        // a closer's failure must not keep the others from running
      }
    }
  }
}

export class StreamRegistry {
  private readonly open = new Set<SseStream>();
  private readonly perAccount = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;
  private lastBeat = 0;
  /** Readers disconnected for falling behind, since start. */
  slowDisconnects = 0;

  constructor(
    private readonly limits: StreamLimits,
    private readonly auth: AuthorityCheck,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.open.size;
  }

  countFor(tenantId: string): number {
    return this.perAccount.get(tenantId) ?? 0;
  }

  /**
   * Takes over the reply and starts the event stream, or throws TOO_MANY_STREAMS before anything
   * is sent. `headers` are added to the response head (e.g. CORS, which a hijacked reply skips).
   */
  start(request: FastifyRequest, reply: FastifyReply, caller: Caller, headers: Record<string, string> = {}): SseStream {
    const tenantId = caller.account.tenantId;
    if (this.open.size >= this.limits.maxPerNode) {
      throw new ReefError('TOO_MANY_STREAMS', `this node already serves ${this.limits.maxPerNode} event streams; retry later`, { retryAfter: 5 });
    }
    if (this.countFor(tenantId) >= this.limits.maxPerAccount) {
      throw new ReefError('TOO_MANY_STREAMS', `this account already has ${this.limits.maxPerAccount} event streams open on this node; close one first`, { retryAfter: 5 });
    }
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      'x-request-id': String(request.id),
      ...headers,
    });
    const stream = new SseStream(caller, res, this.limits.maxBufferedBytes, () => this.slowDisconnects++);
    this.open.add(stream);
    this.perAccount.set(tenantId, this.countFor(tenantId) + 1);
    stream.onClose(() => {
      this.open.delete(stream);
      const n = this.countFor(tenantId) - 1;
      if (n > 0) this.perAccount.set(tenantId, n);
      else this.perAccount.delete(tenantId);
    });
    const gone = () => stream.destroy();
    request.raw.on('close', gone);
    res.on('close', gone);
    res.on('error', gone);
    res.write(': connected\n\n');
    this.ensureTimer();
    return stream;
  }

  /** Checks every stream's authority once; ends those that lost it. Also sends keep-alives. */
  async sweep(): Promise<void> {
    const now = this.now();
    const beat = now - this.lastBeat >= HEARTBEAT_MS;
    if (beat) this.lastBeat = now;
    await Promise.all(
      [...this.open].map(async (s) => {
        try {
          await this.auth.recheck(s.caller);
        } catch (e) {
          if (e instanceof ReefError && e.status === 401) return s.end(e.message, e.code);
          return; // a store outage is not a reason to cut live streams; the next sweep asks again
        }
        if (beat) s.write(KEEP_ALIVE);
      }),
    );
  }

  /** Ends every stream (shutdown). */
  closeAll(reason = 'the server is shutting down'): void {
    for (const s of [...this.open]) s.end(reason);
    this.stop();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private ensureTimer(): void {
    if (this.timer) return;
    let running = false;
    this.timer = setInterval(() => {
      if (running) return;
      if (!this.open.size) return this.stop();
      running = true;
      void this.sweep().finally(() => (running = false));
    }, SWEEP_MS);
    this.timer.unref();
  }
}
