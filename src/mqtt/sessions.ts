// What persistent sessions (clean session = 0) may hold in a node's memory (docs/mqtt.md "QoS,
// retained messages and sessions"). Aedes keeps them in its in-memory persistence with no bound: a
// client that subscribed at QoS 1 and went away would collect every message for it until the node
// restarts, and a QoS 2 PUBLISH would keep its whole payload until its PUBREL. This module bounds that
// store, wrapping the persistence Aedes made (its methods, as Aedes calls them, with promises):
// - messages queued for one session: at most `sessionMessages` and `sessionBytes` of payload;
//   later ones are not queued for it (as Mosquitto's max_queued_messages drops them);
// - an incoming QoS 2 message is remembered by its packet id only (all its PUBREL needs: §4.3.3),
//   never with its payload, which was delivered when it arrived;
// - a session whose client stays away `sessionExpiryMs` is forgotten: subscriptions, queue,
//   incoming ids.
// With REEF_REDIS_URL the same bounds are kept in Redis for all nodes (src/mqtt/redis-sessions.ts):
// both keep the `SessionBook` below.
import type { Aedes, Client } from 'aedes';

export interface Held {
  messages: number;
  bytes: number;
}

/** What the broker asks of the persistent sessions' bookkeeping, in memory or in Redis. */
export interface SessionBook {
  readonly stats: { sessionDropped: number; sessionsExpired: number };
  /** Takes over Aedes' persistence (after `aedes.listen()`, which makes it). */
  attach(aedes: Aedes): void;
  /** A client connected: its session, if it had one, is no longer away. */
  connected(client: Client): void | Promise<void>;
  /** A client went away: its persistent session expires unless it comes back. */
  disconnected(client: Client, tenantId: string): void | Promise<void>;
  /** Whether a persistent session of this broker-side client id is stored while its client is away. */
  isAway(clientId: string): boolean | Promise<boolean>;
  /** Stored sessions of a tenant whose clients are away. */
  awayOf(tenantId: string): number | Promise<number>;
  /** What one session holds now (tests, stats). */
  held(clientId: string): Held | Promise<Held>;
  /** Forgets the sessions that expired; `connected` are this node's clients (called every second). */
  expire(connected: readonly Client[]): Promise<void>;
}

export interface SessionLimits {
  sessionMessages: number;
  sessionBytes: number;
  sessionExpiryMs: number;
}

export interface Packetish {
  payload?: Buffer | string;
  messageId?: number;
}

/** Aedes' persistence methods this module wraps (promise form: Aedes calls them without callbacks). */
export interface Persistence {
  outgoingEnqueue(sub: { clientId: string }, packet: Packetish): Promise<void>;
  outgoingEnqueueCombi(subs: { clientId: string }[], packet: Packetish): Promise<void>;
  outgoingClearMessageId(client: { id: string }, packet: Packetish): Promise<Packetish | undefined>;
  outgoingStream(client: { id: string }): AsyncIterable<Packetish>;
  incomingStorePacket(client: { id: string }, packet: Packetish): Promise<void>;
  cleanSubscriptions(client: { id: string }): Promise<unknown>;
  cleanIncoming(client: { id: string }): Promise<void>;
}

export const size = (p: Packetish) => (p.payload === undefined ? 0 : typeof p.payload === 'string' ? Buffer.byteLength(p.payload) : p.payload.length);

export class SessionStore implements SessionBook {
  readonly stats = { sessionDropped: 0, sessionsExpired: 0 };
  /** Messages and payload bytes queued per (broker-side) client id. */
  private readonly queues = new Map<string, { messages: number; bytes: number }>();
  /** Persistent sessions whose client is away: when they expire, and whose they are. */
  private readonly away = new Map<string, { tenantId: string; until: number }>();
  private readonly awayPerTenant = new Map<string, number>();

  constructor(
    private readonly limits: SessionLimits,
    private readonly now: () => number,
  ) {}

  /** Takes over Aedes' persistence (after `aedes.listen()`, which makes it). */
  attach(aedes: Aedes): void {
    const p = (aedes as unknown as { persistence: Persistence }).persistence;
    this.p = p;
    const enqueue = p.outgoingEnqueue.bind(p);
    const enqueueCombi = p.outgoingEnqueueCombi.bind(p);
    const clear = p.outgoingClearMessageId.bind(p);
    const storeIncoming = p.incomingStorePacket.bind(p);
    // A message not queued for a connected client makes Aedes' delivery to it fail, which closes
    // that connection: a client that does not acknowledge is held to the same bound.
    p.outgoingEnqueue = (sub, packet) => (this.admit(sub.clientId, packet) ? enqueue(sub, packet) : Promise.resolve());
    p.outgoingEnqueueCombi = (subs, packet) => {
      const kept = subs.filter((s) => this.admit(s.clientId, packet));
      return kept.length ? enqueueCombi(kept, packet) : Promise.resolve();
    };
    p.outgoingClearMessageId = async (client, packet) => {
      const gone = await clear(client, packet);
      if (gone) this.release(client.id, gone);
      return gone;
    };
    p.incomingStorePacket = (client, packet) => storeIncoming(client, { ...packet, payload: Buffer.alloc(0) });
  }

  private p: Persistence | undefined;

  private admit(clientId: string, packet: Packetish): boolean {
    const q = this.queues.get(clientId) ?? { messages: 0, bytes: 0 };
    const n = size(packet);
    if (q.messages + 1 > this.limits.sessionMessages || q.bytes + n > this.limits.sessionBytes) {
      this.stats.sessionDropped++;
      return false;
    }
    q.messages++;
    q.bytes += n;
    this.queues.set(clientId, q);
    return true;
  }

  private release(clientId: string, packet: Packetish): void {
    const q = this.queues.get(clientId);
    if (!q) return;
    q.messages--;
    q.bytes -= size(packet);
    if (q.messages <= 0) this.queues.delete(clientId);
  }

  /** What one session holds now (tests, stats). */
  held(clientId: string): Held {
    return { ...(this.queues.get(clientId) ?? { messages: 0, bytes: 0 }) };
  }

  /** A client of a persistent session connected: its session is no longer away. */
  connected(client: Client): void {
    this.back(client.id);
  }

  /** A client of a persistent session went away: its session expires unless it comes back. */
  disconnected(client: Client, tenantId: string): void {
    if (client.clean || this.away.has(client.id)) return;
    this.away.set(client.id, { tenantId, until: this.now() + this.limits.sessionExpiryMs });
    this.awayPerTenant.set(tenantId, (this.awayPerTenant.get(tenantId) ?? 0) + 1);
  }

  private back(clientId: string): void {
    const s = this.away.get(clientId);
    if (!s) return;
    this.away.delete(clientId);
    const n = (this.awayPerTenant.get(s.tenantId) ?? 1) - 1;
    if (n > 0) this.awayPerTenant.set(s.tenantId, n);
    else this.awayPerTenant.delete(s.tenantId);
  }

  /** Whether a session of this broker-side client id is stored while its client is away. */
  isAway(clientId: string): boolean {
    return this.away.has(clientId);
  }

  /** Stored sessions of a tenant whose clients are away. */
  awayOf(tenantId: string): number {
    return this.awayPerTenant.get(tenantId) ?? 0;
  }

  /** Forgets the sessions that expired (called by the broker's one-second sweep). */
  async expire(_connected: readonly Client[] = []): Promise<void> {
    const now = this.now();
    for (const [id, s] of this.away) {
      if (s.until > now) continue;
      this.back(id);
      await this.forget(id);
      this.stats.sessionsExpired++;
    }
  }

  private async forget(id: string): Promise<void> {
    const p = this.p;
    if (!p) return;
    const c = { id };
    await forgetSubscriptions(p, id);
    const queued: Packetish[] = [];
    for await (const packet of p.outgoingStream(c)) queued.push(packet);
    for (const packet of queued) await p.outgoingClearMessageId(c, packet);
    this.queues.delete(id);
  }
}

/** An expired session's subscriptions and half-received QoS 2 messages, dropped (both session books; each drops its queue its own way). */
export async function forgetSubscriptions(p: Persistence, id: string): Promise<void> {
  const c = { id };
  await p.cleanSubscriptions(c);
  await p.cleanIncoming(c);
}
