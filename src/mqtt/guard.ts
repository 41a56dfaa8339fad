// A size guard in front of the MQTT parser. mqtt-packet (under Aedes) buffers a whole packet before
// it looks at it, and a packet may announce up to 256 MiB (MQTT 3.1.1 §2.2.3), so one client could
// make the broker hold that much. The guard reads only the fixed header of each packet as it
// streams past (control byte, Remaining Length) and cuts the connection the moment a packet
// announces more than allowed, before its body arrives. The first packet (CONNECT, §3.1) has a
// small allowance of its own: nobody unauthenticated gets the large one.
//
// It also bounds what the broker holds for a client that does not read (docs/mqtt.md "Limits and
// hostile input"). Aedes waits for a socket's 'drain' before it calls a delivery back, and its
// message emitter runs by default at most `concurrency` (100) deliveries at once for all clients:
// left alone, one stalled subscriber holds every tenant's deliveries until Aedes' 60 s drain
// timeout. Here a write is called back at once and lands in the socket's own buffer, and a client
// whose unsent bytes or packets would pass the bounds is disconnected (as a slow event-stream
// reader is, docs/security.md), so no socket ever holds back another's delivery and a stalled one
// costs at most its bound.
import { Duplex } from 'node:stream';
import type { Socket } from 'node:net';

/**
 * Aedes' delivery window (its `concurrency`): 0, none. The guard never makes a delivery wait, so a
 * window only queues messages, and mqemitter takes a queued message whose deliveries end at once
 * (its subscriber gone) inside the last one's call: a few thousand overflow the stack and end the
 * process (mcollina/mqemitter#204).
 */
export const MESSAGE_WINDOW = 0;

export interface GuardLimits {
  /** Largest Remaining Length of the first packet (CONNECT). */
  firstPacket: number;
  /** Largest Remaining Length of any later packet. */
  packet: number;
  /** Unsent packets the socket may hold for the client. */
  queuedPackets: number;
  /** Unsent bytes the socket may hold for the client (one packet larger than this passes an empty queue). */
  queuedBytes: number;
}

export class SlowReader extends Error {
  constructor(
    readonly packets: number,
    readonly bytes: number,
  ) {
    super(`the client did not read: ${packets} packets (${bytes} bytes) unsent`);
    this.name = 'SlowReader';
  }
}

export class PacketTooLarge extends Error {
  constructor(
    readonly announced: number,
    readonly limit: number,
  ) {
    super(`an MQTT packet announced ${announced} bytes; the limit is ${limit}`);
    this.name = 'PacketTooLarge';
  }
}

/** Tracks packet boundaries in a byte stream and tells when a packet is too large or malformed. */
export class FrameTracker {
  private state: 'header' | 'length' | 'body' = 'header';
  private length = 0;
  private mult = 1;
  private lengthBytes = 0;
  private left = 0;
  private packets = 0;

  constructor(private readonly limits: Pick<GuardLimits, 'firstPacket' | 'packet'>) {}

  /**
   * How many packets end in `chunk`. Throws PacketTooLarge or an Error for a malformed Remaining
   * Length (§2.2.3: at most 4 bytes).
   */
  feed(chunk: Buffer): number {
    let i = 0;
    let ended = 0;
    while (i < chunk.length) {
      if (this.state === 'body') {
        const n = Math.min(this.left, chunk.length - i);
        this.left -= n;
        i += n;
        if (this.left === 0) {
          this.state = 'header';
          ended++;
        }
        continue;
      }
      const b = chunk[i++]!;
      if (this.state === 'header') {
        this.state = 'length';
        this.length = 0;
        this.mult = 1;
        this.lengthBytes = 0;
        continue;
      }
      this.length += (b & 0x7f) * this.mult;
      this.mult *= 128;
      if (++this.lengthBytes > 4) throw new Error('malformed MQTT Remaining Length');
      if (b & 0x80) continue;
      const limit = this.packets === 0 ? this.limits.firstPacket : this.limits.packet;
      if (this.length > limit) throw new PacketTooLarge(this.length, limit);
      this.packets++;
      this.left = this.length;
      this.state = this.left > 0 ? 'body' : 'header';
      if (this.left === 0) ended++;
    }
    return ended;
  }
}

/**
 * The socket as Aedes sees it: reads pass through the tracker, writes go straight to the socket
 * and are called back at once (the socket buffers them, within the queue bounds), and either
 * side's end or failure ends both. `onRefused` hears of a packet too large and of a client cut
 * for not reading (SlowReader).
 */
export function guardSocket(socket: Socket, limits: GuardLimits, onRefused: (e: Error) => void): Duplex & { remoteAddress: string | undefined } {
  const tracker = new FrameTracker(limits);
  const sent = new FrameTracker({ firstPacket: Number.POSITIVE_INFINITY, packet: Number.POSITIVE_INFINITY });
  let unsentPackets = 0;
  const d = new Duplex({
    // Never 'full' for Aedes: the bound is the check below, not its wait for 'drain'.
    writableHighWaterMark: 1 << 30,
    read() {
      socket.resume();
    },
    write(chunk: Buffer, _enc, cb) {
      if (socket.destroyed) return cb();
      const ends = sent.feed(chunk);
      const unsent = socket.writableLength;
      if (unsentPackets + ends > limits.queuedPackets || (unsent > 0 && unsent + chunk.length > limits.queuedBytes)) {
        onRefused(new SlowReader(unsentPackets, unsent));
        // A reset, not a FIN queued behind the unsent data: the kernel drops that data too. (A TLS
        // socket has no TCP handle of its own to reset: it is destroyed.)
        try {
          socket.resetAndDestroy();
        } catch {
          socket.destroy();
        }
        d.destroy();
        return cb();
      }
      unsentPackets += ends;
      socket.write(chunk, () => {
        unsentPackets -= ends;
      });
      cb();
    },
    final(cb) {
      socket.end(cb);
    },
    destroy(err, cb) {
      socket.destroy();
      cb(err);
    },
  });
  socket.on('data', (chunk: Buffer) => {
    try {
      tracker.feed(chunk);
    } catch (e) {
      onRefused(e as Error);
      socket.destroy();
      d.destroy();
      return;
    }
    if (!d.push(chunk)) socket.pause();
  });
  socket.on('end', () => d.push(null));
  socket.on('error', (e) => d.destroy(e));
  socket.on('close', () => d.destroy());
  socket.setNoDelay(true);
  // Who is on the other end, for authentication (the login throttle) and logs.
  return Object.assign(d, { remoteAddress: socket.remoteAddress });
}
