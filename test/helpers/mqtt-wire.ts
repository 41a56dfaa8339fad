// MQTT 3.1.1 packets built byte by byte, and a raw TCP (or TLS) client that sends them and records
// what the broker answers: for tests that need what a well-behaved client library will not do
// (stop reading, never send PUBREL, keep-alive 0, an empty client id with clean session 0, a
// connection that stays silent).
import net from 'node:net';
import tls from 'node:tls';

/** A Remaining Length (MQTT 3.1.1 §2.2.3). */
export function varint(n: number): Buffer {
  const out: number[] = [];
  do {
    let b = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) b |= 0x80;
    out.push(b);
  } while (n > 0);
  return Buffer.from(out);
}
/** A UTF-8 string with its two-byte length (§1.5.3). */
export const str = (s: string) => Buffer.concat([Buffer.from([Buffer.byteLength(s) >> 8, Buffer.byteLength(s) & 0xff]), Buffer.from(s)]);
export const packet = (first: number, body: Buffer) => Buffer.concat([Buffer.from([first]), varint(body.length), body]);

export interface ConnectOptions {
  name?: string;
  level?: number;
  /** Connect flags; 0xc2: user name, password, clean session. */
  flags?: number;
  clientId?: string;
  /** Seconds (§3.1.2.10); 60 unless given. */
  keepAlive?: number;
}

export function connectPacket(password: string, o: ConnectOptions = {}): Buffer {
  const flags = o.flags ?? 0xc2;
  const props = o.level === 5 ? Buffer.from([0]) : Buffer.alloc(0); // MQTT 5 adds a properties length
  const k = o.keepAlive ?? 60;
  return packet(
    0x10,
    Buffer.concat([
      str(o.name ?? 'MQTT'),
      Buffer.from([o.level ?? 4, flags, k >> 8, k & 0xff]),
      props,
      str(o.clientId ?? `h${Math.random().toString(36).slice(2, 10)}`),
      str('notused'),
      str(password),
    ]),
  );
}
/** SUBSCRIBE (packet id 1) to one filter at `qos`. */
export const subscribePacket = (topic: string, first = 0x82, qos = 0) => packet(first, Buffer.concat([Buffer.from([0, 1]), str(topic), Buffer.from([qos])]));
/** PUBLISH at QoS 0 (`first` 0x30); at QoS 1 or 2 give `messageId`. */
export function publishPacket(topic: string, payload: Buffer, first = 0x30, messageId?: number): Buffer {
  const id = messageId === undefined ? Buffer.alloc(0) : Buffer.from([messageId >> 8, messageId & 0xff]);
  return packet(first, Buffer.concat([str(topic), id, payload]));
}

/** A raw connection to the broker: what it received, and whether (and how) it ended. */
export class RawClient {
  readonly socket: net.Socket;
  private readonly got: Buffer[] = [];
  /** Resolves when the connection is closed, by either side. */
  readonly closed: Promise<void>;
  /** Whether it is closed now. */
  isClosed = false;

  private constructor(socket: net.Socket, connectEvent: string) {
    this.socket = socket;
    socket.on('data', (b: Buffer) => this.got.push(b));
    socket.on('error', () => undefined);
    this.closed = new Promise((r) =>
      socket.once('close', () => {
        this.isClosed = true;
        r();
      }),
    );
    this.opened = new Promise((r) => {
      socket.once(connectEvent, () => r());
      socket.once('close', () => r());
    });
  }
  /** Resolves when the connection is open (or failed). */
  readonly opened: Promise<void>;

  /** Plain TCP from `localAddress` (any 127.0.0.0/8 address on Linux). */
  static tcp(port: number, localAddress = '127.0.0.1'): RawClient {
    return new RawClient(net.connect({ port, host: '127.0.0.1', localAddress }), 'connect');
  }

  /** TLS, trusting `ca`. */
  static tls(port: number, ca: string | Buffer): RawClient {
    return new RawClient(tls.connect({ port, host: '127.0.0.1', ca, servername: undefined, checkServerIdentity: () => undefined }), 'secureConnect');
  }

  /** Everything received so far. */
  get received(): Buffer {
    return Buffer.concat(this.got);
  }

  /** The CONNACK return code, once one arrived (§3.2.2.3); undefined before. */
  get connack(): number | undefined {
    const b = this.received;
    return b.length >= 4 && b[0] === 0x20 ? b[3] : undefined;
  }

  send(...chunks: Buffer[]): void {
    for (const c of chunks) if (!this.socket.destroyed) this.socket.write(c);
  }

  /** Stops reading: the kernel buffers fill and then the broker's writes queue up. */
  stall(): void {
    this.socket.pause();
  }

  end(): void {
    this.socket.destroy();
  }
}
