// Connection limits of the HTTP(S) listener (docs/security.md "Connections"). Every open socket
// holds a file descriptor, and a process has a fixed number of them: tens of thousands of silent
// connections used to take them all, and HTTP, logins and MQTT were refused alike. So:
// - one source address holds at most `perAddress` connections; one more is closed at once;
// - the listener holds at most `total`; at the cap the oldest connection that has not yet sent a
//   complete request is closed to make room (a silent flood gives way to a client that talks),
//   and when every connection has sent one, the new connection is closed instead;
// - silent and slow connections are reaped by Node's headers timeout (src/http/app.ts).
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

declare module 'fastify' {
  interface FastifyInstance {
    /** The listener's connection counts (src/http/app.ts attaches it). */
    connections: ConnectionGuard;
  }
}

export interface ConnectionLimits {
  /** Connections one source address may hold open; 0: no limit (e.g. behind a proxy). */
  perAddress: number;
  /** Connections the listener holds open in all. */
  total: number;
}

export class ConnectionGuard {
  private readonly byAddress = new Map<string, number>();
  /** Connections that have not completed a request yet, oldest first, by "address port". */
  private readonly fresh = new Map<string, Socket>();
  /** Connections open now. */
  open = 0;
  /** Connections closed at once because their address (or the listener) was at its cap. */
  refused = 0;
  /** Silent connections closed to make room for a new one. */
  shed = 0;

  constructor(private readonly limits: ConnectionLimits) {}

  /** Counts the server's connections from now on. For HTTPS, the raw TCP socket (before the handshake). */
  attach(server: Server): void {
    server.on('connection', (socket: Socket) => this.admit(socket));
    server.on('request', (req: { socket: Socket }) => {
      if (this.fresh.size) this.fresh.delete(key(req.socket, req.socket.remoteAddress ?? ''));
    });
  }

  private admit(socket: Socket): void {
    const address = socket.remoteAddress ?? '';
    const mine = this.byAddress.get(address) ?? 0;
    if (this.limits.perAddress > 0 && mine >= this.limits.perAddress) return this.refuse(socket);
    if (this.open >= this.limits.total) {
      const oldest = this.fresh.entries().next();
      if (oldest.done) return this.refuse(socket);
      this.fresh.delete(oldest.value[0]);
      this.shed++;
      oldest.value[1].destroy();
      // Its 'close' comes later; counted out now, so a burst cannot pass the cap meanwhile.
      this.release(oldest.value[1]);
    }
    this.open++;
    this.byAddress.set(address, mine + 1);
    const k = key(socket, address);
    this.fresh.set(k, socket);
    counted.set(socket, address);
    socket.once('close', () => {
      this.fresh.delete(k);
      this.release(socket);
    });
  }

  private release(socket: Socket): void {
    // The address as counted: a closed socket no longer tells its remote address.
    const address = counted.get(socket);
    if (address === undefined) return;
    counted.delete(socket);
    this.open--;
    const n = (this.byAddress.get(address) ?? 1) - 1;
    if (n > 0) this.byAddress.set(address, n);
    else this.byAddress.delete(address);
  }

  private refuse(socket: Socket): void {
    this.refused++;
    socket.destroy();
  }
}

/** Sockets counted in `open` (each released once, by whichever comes first: shedding or close). */
const counted = new WeakMap<Socket, string>();

function key(socket: Socket, address: string): string {
  return `${address} ${socket.remotePort}`;
}
