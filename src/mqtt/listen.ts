// The broker's listeners (docs/mqtt.md "TLS", "Limits and hostile input"): plain MQTT and, with a
// certificate, MQTT over TLS, each connection counted by the gate (connections.ts) before any TLS or
// MQTT work, then handed to the broker.
import net from 'node:net';
import tls from 'node:tls';
import type { Logger } from 'pino';
import type { ConnectionGate } from './connections.ts';

export interface Listening {
  host: string;
  port: number;
  /** The port asked for, when another one was taken instead. */
  wanted?: number;
}

export interface ListenOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** When `port` is taken, try the next ones (up to 9 more), then any free port. */
  portFallback: boolean;
  tlsPort: number;
  tlsPortFallback: boolean;
  /** Certificate and key of the TLS listener; null: no TLS listener. */
  tls: { cert: Buffer | string; key: Buffer | string } | null;
  /** The TLS handshake's deadline is the CONNECT deadline. */
  limits: { connectTimeoutMs: number };
}

/** The plain listener, then the TLS one if there is a certificate. */
export async function openListeners(o: ListenOptions, gate: ConnectionGate, handle: (socket: net.Socket) => void, log: Logger): Promise<{ server: net.Server; listening: Listening }[]> {
  const servers: { server: net.Server; listening: Listening }[] = [];
  const plain = net.createServer((socket) => {
    if (gate.admit(socket)) handle(socket);
  });
  servers.push({ server: plain, listening: await listen(plain, o.host, o.port, o.portFallback) });
  if (o.tls) {
    const secure = tls.createServer({ cert: o.tls.cert, key: o.tls.key, minVersion: 'TLSv1.2', handshakeTimeout: o.limits.connectTimeoutMs }, handle);
    // Counted (and refused past a cap) as accepted, before any TLS work.
    secure.on('connection', (raw: net.Socket) => gate.admit(raw));
    // A failed or timed-out handshake (a plain client on the TLS port, a scanner, a silent
    // connection) closes the connection: with this listener present Node leaves it open.
    secure.on('tlsClientError', (e, socket) => {
      log.debug({ err: e.message }, 'mqtt TLS handshake failed');
      socket.destroy();
    });
    servers.push({ server: secure, listening: await listen(secure, o.host, o.tlsPort, o.tlsPortFallback) });
  }
  for (const s of servers) s.server.on('error', (e) => log.warn({ err: e }, 'mqtt listener error'));
  return servers;
}

/**
 * Listens on `port`; when it is taken and `fallback` is set (the default port, not one the operator
 * chose), on the next free one of the following nine, else on any free port, and says so.
 */
async function listen(server: net.Server, host: string, port: number, fallback: boolean): Promise<Listening> {
  const tries = port === 0 || !fallback ? [port] : [...Array.from({ length: 10 }, (_, i) => port + i).filter((p) => p <= 65535), 0];
  for (const p of tries) {
    try {
      await new Promise<void>((resolve, reject) => {
        const onError = (e: Error) => reject(e);
        server.once('error', onError);
        server.listen({ host, port: p }, () => {
          server.off('error', onError);
          resolve();
        });
      });
      const a = server.address() as net.AddressInfo;
      return { host, port: a.port, ...(a.port !== port && port !== 0 ? { wanted: port } : {}) };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw e;
      if (!fallback || p === tries[tries.length - 1]) {
        throw new Error(`MQTT port ${port} on ${host} is taken (another broker?): set REEF_MQTT_PORT (--mqtt-port) to a free port, or REEF_MQTT=false`);
      }
    }
  }
  throw new Error('unreachable');
}
