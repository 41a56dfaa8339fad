// How many MQTT connections a node holds, and from whom (docs/mqtt.md "Limits and hostile input").
// Every connection costs a file descriptor from the moment it is accepted, before it has said who
// it is: unbounded, 21,000 connections of one client take all of a node's, and HTTP and the store
// can open none. The gate counts connections at accept, plain and TLS together, before any TLS or MQTT
// work: past `maxConnections` in all or `maxPerAddress` from one source address, the new
// connection is closed at once, and the clients already connected go on as before (the cap sits
// below the open-file limit, leaving descriptors for everything else).
import fs from 'node:fs';
import type { Socket } from 'node:net';

export interface GateLimits {
  maxConnections: number;
  maxPerAddress: number;
}

/** The process's soft limit of open files (Linux: /proc/self/limits); null where it cannot be read. */
export function openFileLimit(): number | null {
  try {
    const m = /^Max open files\s+(\d+)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/**
 * The node's cap as configured, lowered when the open-file limit would not leave room beside it
 * for HTTP, the store and the rest: a tenth of that limit, and at least 256 descriptors.
 */
export function connectionCap(configured: number, fileLimit: number | null): number {
  if (fileLimit === null) return configured;
  return Math.max(1, Math.min(configured, fileLimit - Math.max(256, Math.ceil(fileLimit / 10))));
}

export class ConnectionGate {
  readonly stats = { refusedNode: 0, refusedAddress: 0 };
  private total = 0;
  private readonly perAddress = new Map<string, number>();

  constructor(private readonly limits: GateLimits) {}

  /** The node's cap in force. */
  get cap(): number {
    return this.limits.maxConnections;
  }

  /** Counts a connection just accepted, or closes it when a cap is reached; true when admitted. */
  admit(socket: Socket): boolean {
    const address = socket.remoteAddress ?? 'unknown';
    const n = this.perAddress.get(address) ?? 0;
    if (this.total >= this.limits.maxConnections || n >= this.limits.maxPerAddress) {
      if (this.total >= this.limits.maxConnections) this.stats.refusedNode++;
      else this.stats.refusedAddress++;
      socket.destroy();
      return false;
    }
    this.total++;
    this.perAddress.set(address, n + 1);
    socket.once('close', () => {
      this.total--;
      const left = (this.perAddress.get(address) ?? 1) - 1;
      if (left > 0) this.perAddress.set(address, left);
      else this.perAddress.delete(address);
    });
    return true;
  }

  /** Connections open now. */
  get open(): number {
    return this.total;
  }
}
