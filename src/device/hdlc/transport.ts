// The byte stream HDLC runs over (the UART of the kit). In process by default: a pair of ends,
// each delivering what the other writes on a later microtask, in order, like a wire. Optionally a
// real serial device or pty path (a tty gets raw mode), or a pair of FIFOs.
import fs from 'node:fs';
import tty from 'node:tty';
import net from 'node:net';
import { Readable, Writable } from 'node:stream';

export interface ByteStream {
  write(data: Buffer): void;
  /** One listener; bytes arrive in order, in chunks of any size. */
  onData(cb: (data: Buffer) => void): void;
  close(): void;
}

class PairEnd implements ByteStream {
  peer!: PairEnd;
  private listener: ((d: Buffer) => void) | undefined;
  private closed = false;
  private queue: Buffer[] = [];
  private scheduled = false;
  /** Tests tap the line to inject or observe bytes. */
  tap: ((d: Buffer) => void) | undefined;

  write(data: Buffer): void {
    if (this.closed) return;
    this.tap?.(data);
    this.peer.enqueue(data);
  }

  private enqueue(data: Buffer): void {
    if (this.closed) return;
    this.queue.push(data);
    if (this.scheduled) return;
    this.scheduled = true;
    queueMicrotask(() => {
      this.scheduled = false;
      const q = this.queue;
      this.queue = [];
      for (const d of q) if (!this.closed) this.listener?.(d);
    });
  }

  onData(cb: (data: Buffer) => void): void {
    this.listener = cb;
  }

  close(): void {
    this.closed = true;
    this.queue = [];
  }
}

/** Two connected in-process ends: what one writes the other reads. */
export function duplexPair(): [ByteStream & { tap?: (d: Buffer) => void }, ByteStream & { tap?: (d: Buffer) => void }] {
  const a = new PairEnd();
  const b = new PairEnd();
  a.peer = b;
  b.peer = a;
  return [a, b];
}

class NodeStreamPort implements ByteStream {
  private listener: ((d: Buffer) => void) | undefined;
  constructor(
    private readonly input: Readable,
    private readonly output: Writable,
    private readonly cleanup: () => void,
  ) {
    input.on('data', (d: Buffer) => this.listener?.(d));
    input.on('error', () => undefined);
    output.on('error', () => undefined);
  }
  write(data: Buffer): void {
    this.output.write(data);
  }
  onData(cb: (data: Buffer) => void): void {
    this.listener = cb;
  }
  close(): void {
    this.input.destroy();
    this.output.destroy();
    this.cleanup();
  }
}

/**
 * Opens a serial device or pty (one path, read and written), or a pair of paths (reading one,
 * writing the other, e.g. two FIFOs). A tty is put in raw mode so no byte of a frame is translated
 * (type-3 frames are not stuffed, so any translation would corrupt them).
 */
export function openSerialPort(path: string | { read: string; write: string }): ByteStream {
  if (typeof path === 'string') {
    const fd = fs.openSync(path, fs.constants.O_RDWR | fs.constants.O_NOCTTY);
    if (tty.isatty(fd)) {
      const input = new tty.ReadStream(fd);
      input.setRawMode(true);
      const output = new tty.WriteStream(fd);
      return new NodeStreamPort(input, output, () => undefined);
    }
    const sock = new net.Socket({ fd, readable: true, writable: true });
    return new NodeStreamPort(sock, sock, () => undefined);
  }
  // The read side opens without blocking (a FIFO's open waits for a writer otherwise), and the
  // write side read-write so it does not wait for the reader either.
  const rfd = fs.openSync(path.read, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  const wfd = fs.openSync(path.write, fs.constants.O_RDWR);
  const input = new net.Socket({ fd: rfd, readable: true, writable: false });
  const output = new net.Socket({ fd: wfd, readable: false, writable: true });
  return new NodeStreamPort(input, output, () => undefined);
}
