// The HDLC link state machines of the kit (wire §2): normal response mode, window 1, sequence
// numbers mod 8. The network module is the primary station: it sets the link up with SNRM, sends
// I-frames with P=1 and polls with RR P=1. The application processor is the secondary station: it
// speaks only when polled (F=1 on its one answer), answers UA with the parameter block to SNRM,
// DM to anything else while disconnected, and FRMR to a frame it cannot accept. Frames the
// secondary starts (observe notifications, upstream requests) wait in its queue; it pulses the
// wake line and the primary polls. Acknowledgement is carried in the next frame's N(R).
import { ByteStream } from './transport.ts';
import {
  decodeLinkParams,
  DEFAULT_ADDRESS,
  DEFAULT_MAX_INFO,
  encodeFrame,
  encodeLinkParams,
  FrameDecoder,
  frameKind,
  FRMR_W,
  FRMR_Y,
  FRMR_Z,
  HdlcFrame,
  iControl,
  LinkParams,
  nrOf,
  nsOf,
  pollFinal,
  PF,
  rrControl,
  U,
  DecoderCounters,
} from './frame.ts';

export interface LinkCounters extends DecoderCounters {
  sent: number;
  iSent: number;
  iReceived: number;
  duplicates: number;
  wrongAddress: number;
  dmSent: number;
  dmReceived: number;
  frmrSent: number;
  frmrReceived: number;
  retransmissions: number;
  timeouts: number;
  resets: number;
  unexpected: number;
}

function newCounters(d: DecoderCounters): LinkCounters {
  return Object.assign(d, {
    sent: 0,
    iSent: 0,
    iReceived: 0,
    duplicates: 0,
    wrongAddress: 0,
    dmSent: 0,
    dmReceived: 0,
    frmrSent: 0,
    frmrReceived: 0,
    retransmissions: 0,
    timeouts: 0,
    resets: 0,
    unexpected: 0,
  });
}

export type FrameTrace = (dir: 'tx' | 'rx', frame: HdlcFrame) => void;

/**
 * A one-shot timeout armed and disarmed on every frame without a timer of its own each time: one
 * node timer stays scheduled and, when it fires, either runs the callback (due), re-schedules
 * itself for the rest (re-armed meanwhile) or stops (disarmed). Same outcome as setTimeout and
 * clearTimeout per frame, at a fraction of the cost.
 */
export class Deadline {
  private timer: NodeJS.Timeout | undefined;
  private due = 0;
  private fn: (() => void) | undefined;

  constructor(private readonly ms: number) {}

  /** Calls `fn` once `ms` from now unless disarmed or re-armed first. */
  arm(fn: () => void): void {
    if (!this.fn) this.timer?.ref();
    this.fn = fn;
    this.due = performance.now() + this.ms;
    if (!this.timer) this.timer = setTimeout(this.check, this.ms);
  }

  /** A disarmed deadline's timer no longer keeps the process alive, as a cleared one would not. */
  disarm(): void {
    if (this.fn) this.timer?.unref();
    this.fn = undefined;
  }

  /** Disarms and drops the node timer (on close, so nothing keeps the process alive). */
  stop(): void {
    this.fn = undefined;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private readonly check = (): void => {
    this.timer = undefined;
    const fn = this.fn;
    if (!fn) return;
    const left = this.due - performance.now();
    if (left > 0.5) {
      this.timer = setTimeout(this.check, left);
      return;
    }
    this.fn = undefined;
    fn();
  };
}

export interface StationOptions {
  address?: number;
  maxInfo?: number;
  /** UART_TIMEOUT_IN_MS: the primary's response timeout; both stations' inter-byte timeout. */
  timeoutMs?: number;
  trace?: FrameTrace;
}

abstract class Station {
  readonly counters: LinkCounters;
  protected readonly decoder: FrameDecoder;
  protected readonly address: number;
  readonly maxInfo: number;
  protected readonly timeoutMs: number;
  protected readonly trace: FrameTrace | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  protected closed = false;
  /** Send and receive state variables V(S), V(R), mod 8 (window 1, wire §2). */
  protected vs = 0;
  protected vr = 0;
  /** Messages waiting to go; the head is the one in flight when inFlight is set. */
  protected readonly queue: Buffer[] = [];
  protected inFlight = false;

  constructor(
    protected readonly stream: ByteStream,
    o: StationOptions,
  ) {
    this.address = o.address ?? DEFAULT_ADDRESS;
    this.maxInfo = o.maxInfo ?? DEFAULT_MAX_INFO;
    this.timeoutMs = o.timeoutMs ?? 2000;
    this.trace = o.trace;
    this.decoder = new FrameDecoder(this.maxInfo);
    this.counters = newCounters(this.decoder.counters);
    stream.onData((d) => this.onBytes(d));
  }

  private onBytes(d: Buffer): void {
    if (this.closed) return;
    const frames = this.decoder.push(d);
    // A partial frame left alone longer than the UART timeout is dropped (counted as truncated).
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    if (this.decoder.pending > 0) {
      this.idleTimer = setTimeout(() => {
        this.idleTimer = undefined;
        this.decoder.flush();
      }, this.timeoutMs);
      this.idleTimer.unref();
    }
    for (const f of frames) {
      if (f.dst !== this.address) {
        this.counters.wrongAddress++;
        continue;
      }
      this.trace?.('rx', f);
      this.onFrame(f);
    }
  }

  protected sendFrame(control: number, info?: Buffer): void {
    if (this.closed) return;
    const f: HdlcFrame = { dst: this.address, src: this.address, control, info: info ?? Buffer.alloc(0) };
    this.trace?.('tx', f);
    this.counters.sent++;
    this.stream.write(encodeFrame(f));
  }

  protected abstract onFrame(f: HdlcFrame): void;

  /**
   * N(R) of a received I or RR frame: it acknowledges our frame in flight (window 1), or, naming
   * the same frame again, asks for it once more (sent again on the next poll).
   */
  protected takeAcknowledgement(nr: number): void {
    if (!this.inFlight) return;
    this.inFlight = false;
    const acked = (this.vs + 1) & 7;
    if (nr === acked) {
      this.vs = acked;
      this.queue.shift();
    } else this.counters.retransmissions++;
  }

  /** An I-frame: delivered once when in sequence; a repeat (our acknowledgement was lost) is counted. */
  protected takeInformation(f: HdlcFrame, deliver: (info: Buffer) => void): void {
    if (nsOf(f.control) !== this.vr) {
      this.counters.duplicates++;
      return;
    }
    this.vr = (this.vr + 1) & 7;
    this.counters.iReceived++;
    try {
      deliver(f.info);
    } catch {
      // A handler fault must not break the link; the CoAP layer answers errors itself.
    }
  }

  close(): void {
    this.closed = true;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.stream.close();
  }
}

export interface SecondaryOptions extends StationOptions {
  /** One CoAP message arrived in an I-frame. May call send() synchronously: the answer then rides this poll's reply. */
  onMessage: (info: Buffer) => void;
  /** The wake line: pulsed when a frame is queued and the primary must poll. */
  wake: () => void;
  onLinkUp?: () => void;
  onLinkDown?: () => void;
}

/** The application processor's side. */
export class SecondaryStation extends Station {
  state: 'NDM' | 'NRM' | 'FRMR' = 'NDM';
  private frmrInfo: Buffer | undefined;
  private wakePending = false;
  /** Handling a frame with P=1: what is queued meanwhile rides this poll's reply, no wake needed. */
  private answering = false;

  constructor(
    stream: ByteStream,
    private readonly o: SecondaryOptions,
  ) {
    super(stream, o);
  }

  get queued(): number {
    return this.queue.length;
  }

  /** Queues one message for the primary and pulses the wake line. */
  send(info: Buffer): void {
    if (info.length > this.maxInfo) throw new RangeError(`message of ${info.length} bytes exceeds the ${this.maxInfo}-byte info field`);
    this.queue.push(info);
    this.pulse();
  }

  private pulse(): void {
    if (this.state !== 'NRM' || this.wakePending || this.closed || this.answering) return;
    // Deferred, so an answer queued while handling a poll rides that poll's reply instead.
    this.wakePending = true;
    queueMicrotask(() => {
      this.wakePending = false;
      const waiting = this.queue.length - (this.inFlight ? 1 : 0);
      if (this.state === 'NRM' && waiting > 0 && !this.closed) this.o.wake();
    });
  }

  protected onFrame(f: HdlcFrame): void {
    const kind = frameKind(f.control);
    const p = pollFinal(f.control);
    if (kind === 'SNRM') {
      this.vs = 0;
      this.vr = 0;
      this.inFlight = false;
      this.frmrInfo = undefined;
      const wasUp = this.state === 'NRM';
      this.state = 'NRM';
      if (wasUp) this.counters.resets++;
      const params: LinkParams = { maxInfoTx: this.maxInfo, maxInfoRx: this.maxInfo, windowTx: 1, windowRx: 1 };
      this.sendFrame(U.UA | PF, encodeLinkParams(params));
      this.o.onLinkUp?.();
      this.pulse();
      return;
    }
    if (kind === 'DISC') {
      if (this.state === 'NDM') {
        this.counters.dmSent++;
        return this.sendFrame(U.DM | PF);
      }
      this.state = 'NDM';
      this.sendFrame(U.UA | PF);
      this.o.onLinkDown?.();
      return;
    }
    if (this.state === 'NDM') {
      // Before SNRM every command gets DM (wire §2).
      if (p) {
        this.counters.dmSent++;
        this.sendFrame(U.DM | PF);
      }
      return;
    }
    if (this.state === 'FRMR') {
      if (p) {
        this.counters.frmrSent++;
        this.sendFrame(U.FRMR | PF, this.frmrInfo);
      }
      return;
    }
    if (kind === 'I' || kind === 'RR') {
      const nr = nrOf(f.control);
      const acked = (this.vs + 1) & 7;
      if (nr !== this.vs && !(this.inFlight && nr === acked)) return this.reject(f.control, FRMR_Z);
      if (kind === 'I' && f.info.length > this.maxInfo) return this.reject(f.control, FRMR_Y);
      this.takeAcknowledgement(nr);
      if (kind === 'I') {
        this.answering = p;
        try {
          this.takeInformation(f, (info) => this.o.onMessage(info));
        } finally {
          this.answering = false;
        }
      }
      if (p) this.reply();
      return;
    }
    if (kind === 'UA' || kind === 'DM' || kind === 'FRMR') {
      // Responses are never commands; ignore.
      this.counters.unexpected++;
      return;
    }
    this.reject(f.control, FRMR_W);
  }

  private reply(): void {
    if (this.queue.length > 0) {
      this.inFlight = true;
      this.counters.iSent++;
      this.sendFrame(iControl(this.vs, this.vr, true), this.queue[0]);
      if (this.queue.length > 1) this.pulse();
    } else this.sendFrame(rrControl(this.vr, true));
  }

  private reject(control: number, why: number): void {
    this.state = 'FRMR';
    this.frmrInfo = Buffer.from([control, (this.vr << 5) | (this.vs << 1), why]);
    this.counters.frmrSent++;
    this.sendFrame(U.FRMR | PF, this.frmrInfo);
  }
}

export interface PrimaryOptions extends StationOptions {
  onMessage: (info: Buffer) => void;
  onLinkUp?: (params: LinkParams) => void;
  onLinkDown?: (why: string) => void;
  /** Response timeouts in a row before the link is reset with SNRM. */
  maxRetries?: number;
}

/** The network module's side. */
export class PrimaryStation extends Station {
  state: 'down' | 'setup' | 'up' = 'down';
  params: LinkParams | undefined;
  private pollWanted = false;
  private busy = false;
  private retries = 0;
  private readonly timer: Deadline;
  private readonly maxRetries: number;
  private upWaiters: Array<() => void> = [];

  constructor(
    stream: ByteStream,
    private readonly o: PrimaryOptions,
  ) {
    super(stream, o);
    this.maxRetries = o.maxRetries ?? 3;
    this.timer = new Deadline(this.timeoutMs);
  }

  get queued(): number {
    return this.queue.length;
  }

  /** Sets the link up (SNRM until UA); resolves when it is. */
  connect(): Promise<void> {
    if (this.state === 'up') return Promise.resolve();
    const p = new Promise<void>((resolve) => this.upWaiters.push(resolve));
    if (this.state === 'down') this.snrm();
    return p;
  }

  /** Queues a message for the secondary. */
  send(info: Buffer): void {
    if (info.length > (this.params?.maxInfoRx ?? this.maxInfo)) throw new RangeError(`message of ${info.length} bytes exceeds the info field`);
    this.queue.push(info);
    this.kick();
  }

  /** The wake line: the secondary has something; poll it with RR. */
  poll(): void {
    this.pollWanted = true;
    this.kick();
  }

  disconnect(): void {
    this.setTimer(undefined);
    this.state = 'down';
    this.busy = false;
    this.sendFrame(U.DISC | PF);
  }

  override close(): void {
    this.timer.stop();
    super.close();
  }

  private setTimer(fn: (() => void) | undefined): void {
    if (fn) this.timer.arm(fn);
    else this.timer.disarm();
  }

  private snrm(): void {
    if (this.closed) return;
    this.state = 'setup';
    this.busy = true;
    this.sendFrame(U.SNRM | PF);
    this.setTimer(() => {
      this.counters.timeouts++;
      this.snrm();
    });
  }

  private reset(why: string): void {
    this.counters.resets++;
    const wasUp = this.state === 'up';
    this.state = 'down';
    this.inFlight = false;
    if (wasUp) this.o.onLinkDown?.(why);
    this.snrm();
  }

  private kick(): void {
    if (this.busy || this.state !== 'up' || this.closed) return;
    if (this.queue.length > 0) {
      this.inFlight = true;
      this.counters.iSent++;
      this.sendFrame(iControl(this.vs, this.vr, true), this.queue[0]);
    } else if (this.pollWanted) {
      this.pollWanted = false;
      this.sendFrame(rrControl(this.vr, true));
    } else return;
    this.busy = true;
    this.setTimer(() => {
      this.counters.timeouts++;
      this.busy = false;
      if (++this.retries > this.maxRetries) return this.reset('no response from the secondary');
      // Resend: an unacknowledged I-frame goes again with the same N(S); otherwise poll again.
      if (this.inFlight) {
        this.counters.retransmissions++;
        this.inFlight = false;
      } else this.pollWanted = true;
      this.kick();
    });
  }

  protected onFrame(f: HdlcFrame): void {
    const kind = frameKind(f.control);
    if (kind === 'UA' && this.state === 'setup') {
      this.setTimer(undefined);
      try {
        this.params = f.info.length ? decodeLinkParams(f.info) : { maxInfoTx: 128, maxInfoRx: 128, windowTx: 1, windowRx: 1 };
      } catch {
        this.params = { maxInfoTx: 128, maxInfoRx: 128, windowTx: 1, windowRx: 1 };
      }
      this.state = 'up';
      this.vs = 0;
      this.vr = 0;
      this.inFlight = false;
      this.busy = false;
      this.retries = 0;
      this.o.onLinkUp?.(this.params);
      for (const w of this.upWaiters.splice(0)) w();
      return this.kick();
    }
    if (kind === 'DM') {
      this.counters.dmReceived++;
      if (this.state === 'down') return;
      this.setTimer(undefined);
      return this.reset('DM from the secondary');
    }
    if (kind === 'FRMR') {
      this.counters.frmrReceived++;
      if (this.state === 'down') return;
      this.setTimer(undefined);
      return this.reset('FRMR from the secondary');
    }
    if (this.state !== 'up' || (kind !== 'I' && kind !== 'RR')) {
      this.counters.unexpected++;
      return;
    }
    this.takeAcknowledgement(nrOf(f.control));
    if (kind === 'I') this.takeInformation(f, (info) => this.o.onMessage(info));
    if (pollFinal(f.control)) {
      this.setTimer(undefined);
      this.busy = false;
      this.retries = 0;
      this.kick();
    }
  }
}
