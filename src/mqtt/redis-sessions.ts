// The bounds of persistent sessions (src/mqtt/sessions.ts, docs/mqtt.md "QoS, retained messages and
// sessions") when the sessions live in Redis (src/mqtt/redis.ts): a message for a session may be
// queued by the node it was published on and acknowledged on another, and a session may outlive
// the node its client left, so the bookkeeping lives in Redis beside the sessions:
// - messages queued for a session: the length of its queue in aedes-persistence-redis
//   (`outgoing:<client id>`), and its payload bytes in `reef:mqtt:bytes:<client id>`, checked and
//   counted in one script. Messages being queued at the same moment on several nodes may pass the
//   bound by as many (Aedes runs at most 100 deliveries at once per node);
// - a message not queued for a connected client is not sent to it either: its connection is closed,
//   as in memory (a client that does not acknowledge is held to the same bound);
// - expiry: `reef:mqtt:sessions` orders every persistent session by when it may be forgotten. A
//   connected client's node pushes that time ahead every LEASE_MS / 2, so the session of a client
//   whose node died unseen is forgotten REEF_MQTT_SESSION_EXPIRY (+ at most LEASE_MS) later, by
//   whichever node sweeps first;
// - `reef:mqtt:away:<tenant id>`: the tenant's sessions whose client is away (the per-account cap).
import type { Aedes, Client } from 'aedes';
import type { Redis } from 'ioredis';
import { forgetSubscriptions, size, type Held, type Packetish, type Persistence, type SessionBook, type SessionLimits } from './sessions.ts';

/** How far ahead a connected client's node keeps its session's expiry. */
export const LEASE_MS = 60_000;
const SESSIONS = 'reef:mqtt:sessions';
/** Expired sessions forgotten per sweep (the rest at the next). */
const PER_SWEEP = 100;

// Key names of aedes-persistence-redis 12 (asyncPersistence.js): a session's queue of packet keys.
const outgoingKey = (id: string) => `outgoing:${encodeURIComponent(id)}`;
const packetKey = (brokerId: string, counter: number | string) => `packet:${brokerId}:${counter}`;
const bytesKey = (id: string) => `reef:mqtt:bytes:${encodeURIComponent(id)}`;
const awayKey = (tenantId: string) => `reef:mqtt:away:${tenantId}`;
/** The tenant of a broker-side client id (`<tenant id>/<client id>`, src/mqtt/broker.ts). */
const tenantOf = (id: string) => id.slice(0, Math.max(0, id.indexOf('/')));

/** KEYS: queue, bytes; ARGV: most messages, most bytes, this message's bytes. 1: queued, 0: refused. */
const ADMIT = `
local len = redis.call('LLEN', KEYS[1])
local b = 0
if len == 0 then redis.call('DEL', KEYS[2]) else b = tonumber(redis.call('GET', KEYS[2]) or '0') end
if len >= tonumber(ARGV[1]) or b + tonumber(ARGV[3]) > tonumber(ARGV[2]) then return 0 end
if tonumber(ARGV[3]) > 0 then redis.call('INCRBY', KEYS[2], ARGV[3]) end
return 1`;
/** KEYS: bytes; ARGV: bytes acknowledged. */
const RELEASE = `
if redis.call('DECRBY', KEYS[1], ARGV[1]) <= 0 then redis.call('DEL', KEYS[1]) end
return 0`;

interface Scripts {
  reefAdmit(queue: string, bytes: string, maxMessages: number, maxBytes: number, n: number): Promise<number>;
  reefRelease(bytes: string, n: number): Promise<number>;
}

interface QueuedPacket extends Packetish {
  cmd?: string;
  brokerId?: string;
  brokerCounter?: number | string;
}

export class RedisSessions implements SessionBook {
  readonly stats = { sessionDropped: 0, sessionsExpired: 0 };
  private p: Persistence | undefined;
  private readonly db: Redis & Scripts;
  private lastLease = -Infinity;

  constructor(
    db: Redis,
    private readonly limits: SessionLimits,
    private readonly now: () => number,
  ) {
    db.defineCommand('reefAdmit', { numberOfKeys: 2, lua: ADMIT });
    db.defineCommand('reefRelease', { numberOfKeys: 1, lua: RELEASE });
    this.db = db as Redis & Scripts;
  }

  attach(aedes: Aedes): void {
    const p = (aedes as unknown as { persistence: Persistence & { outgoingUpdate(client: { id: string }, packet: QueuedPacket): Promise<void> } }).persistence;
    this.p = p;
    const enqueueCombi = p.outgoingEnqueueCombi.bind(p);
    const clear = p.outgoingClearMessageId.bind(p);
    const update = p.outgoingUpdate.bind(p);
    const storeIncoming = p.incomingStorePacket.bind(p);
    const cleanSubscriptions = p.cleanSubscriptions.bind(p);
    p.outgoingEnqueue = (sub, packet) => p.outgoingEnqueueCombi([sub], packet);
    p.outgoingEnqueueCombi = async (subs, packet) => {
      const admitted = await Promise.all(subs.map((s) => this.admit(s.clientId, packet)));
      const kept = subs.filter((_, i) => admitted[i]);
      if (kept.length) await enqueueCombi(kept, packet);
    };
    // A PUBLISH about to be sent to a connected persistent client must be in its queue; one the
    // bound kept out makes the delivery fail, which closes that connection (as in memory).
    p.outgoingUpdate = async (client, packet) => {
      if (packet.cmd === 'publish' && packet.brokerId !== undefined && packet.brokerCounter !== undefined) {
        const at = await this.db.lpos(outgoingKey(client.id), packetKey(packet.brokerId, packet.brokerCounter));
        if (at === null) throw new Error('not queued: the session holds as many messages as it may');
      }
      return update(client, packet);
    };
    p.outgoingClearMessageId = async (client, packet) => {
      const gone = await clear(client, packet);
      if (gone) {
        const n = size(gone);
        if (n > 0) await this.db.reefRelease(bytesKey(client.id), n);
      }
      return gone;
    };
    // §4.3.3: an incoming QoS 2 message is remembered by its packet id only (as in memory).
    p.incomingStorePacket = (client, packet) => storeIncoming(client, { ...packet, payload: Buffer.alloc(0) });
    // A clean session (or an expired one) drops its queue: its byte count goes with it.
    p.cleanSubscriptions = async (client) => {
      const r = await cleanSubscriptions(client);
      await this.db.del(bytesKey(client.id));
      return r;
    };
  }

  private async admit(clientId: string, packet: Packetish): Promise<boolean> {
    const ok = (await this.db.reefAdmit(outgoingKey(clientId), bytesKey(clientId), this.limits.sessionMessages, this.limits.sessionBytes, size(packet))) === 1;
    if (!ok) this.stats.sessionDropped++;
    return ok;
  }

  async held(clientId: string): Promise<Held> {
    const [messages, bytes] = await Promise.all([this.db.llen(outgoingKey(clientId)), this.db.get(bytesKey(clientId))]);
    return { messages, bytes: messages ? Number(bytes ?? 0) : 0 };
  }

  async connected(client: Client): Promise<void> {
    const m = this.db.multi().srem(awayKey(tenantOf(client.id)), client.id);
    if (client.clean) m.zrem(SESSIONS, client.id);
    else m.zadd(SESSIONS, this.now() + this.limits.sessionExpiryMs + LEASE_MS, client.id);
    await m.exec();
  }

  async disconnected(client: Client, tenantId: string): Promise<void> {
    if (client.clean) return;
    await this.db
      .multi()
      .zadd(SESSIONS, this.now() + this.limits.sessionExpiryMs, client.id)
      .sadd(awayKey(tenantId), client.id)
      .exec();
  }

  /** Whether a session is stored: its client away, or connected to some node (taking it over resumes it too). */
  async isAway(clientId: string): Promise<boolean> {
    return (await this.db.zscore(SESSIONS, clientId)) !== null;
  }

  awayOf(tenantId: string): Promise<number> {
    return this.db.scard(awayKey(tenantId));
  }

  async expire(connected: readonly Client[]): Promise<void> {
    const now = this.now();
    const here = new Set<string>();
    for (const c of connected) if (!c.clean) here.add(c.id);
    if (now - this.lastLease >= LEASE_MS / 2 && here.size) {
      // This node's persistent clients: their sessions are not away, and not forgotten while connected.
      const m = this.db.multi();
      for (const id of here) m.zadd(SESSIONS, now + this.limits.sessionExpiryMs + LEASE_MS, id).srem(awayKey(tenantOf(id)), id);
      await m.exec();
      this.lastLease = now;
    }
    const due = await this.db.zrangebyscore(SESSIONS, '-inf', now, 'LIMIT', 0, PER_SWEEP);
    for (const id of due) {
      if (here.has(id)) continue;
      // The node whose ZREM removes it forgets it; another node sweeping at once finds it gone.
      if ((await this.db.zrem(SESSIONS, id)) !== 1) continue;
      await this.db.srem(awayKey(tenantOf(id)), id);
      await this.forget(id);
      this.stats.sessionsExpired++;
    }
  }

  private async forget(id: string): Promise<void> {
    if (!this.p) return;
    await forgetSubscriptions(this.p, id);
    await this.db.del(outgoingKey(id), bytesKey(id));
  }
}
