// Which MQTT state a node's broker runs on (docs/mqtt.md "Several nodes"): its memory, or with
// REEF_REDIS_URL the state the nodes share in Redis (redis.ts). Each state is served by an Aedes
// instance of its own, a "generation" built by the broker (broker.ts `build`). A lost Redis moves
// the node to a fresh in-memory generation at once, and Redis answering again moves it back: new
// connections go to the new generation, and the clients of the old one are disconnected (without
// their wills: they are not gone) to reconnect to it. A node stays up and serving throughout.
import type { Aedes, Client } from 'aedes';
import type { Logger } from 'pino';
import type { RedisLink, SharedEngines } from './redis.ts';
import type { SessionBook } from './sessions.ts';

/** One Aedes instance and the state it runs on. */
export interface Generation {
  aedes: Aedes;
  stored: SessionBook;
  /** The Redis engines, or null: this node's memory. */
  engines: SharedEngines | null;
  /** Being replaced: its clients are disconnected without their wills (they come back to the next one). */
  retiring: boolean;
}

/** Clients connected to a generation (Aedes keeps this map; its types do not declare it). */
export function connectedClients(gen: Generation): Client[] {
  return Object.values((gen.aedes as unknown as { clients: Record<string, Client> }).clients);
}

interface WillStore {
  streamWill(brokers: object): AsyncIterable<{ clientId: string; brokerId: string }>;
  delWill(c: { id: string; brokerId: string }): Promise<unknown>;
}

export class StateKeeper {
  gen!: Generation;
  private redis: RedisLink | null = null;
  private stopping = false;
  /** Ids of this node's Redis generations lost with Redis: their wills are not those of dead clients. */
  private readonly lostIds = new Set<string>();

  constructor(
    private readonly log: Logger,
    private readonly build: (engines: SharedEngines | null) => Promise<Generation>,
    /** Counts a move to memory for Redis lost or unreachable. */
    private readonly lost: () => void,
  ) {}

  /** The first generation: on Redis if a URL is given and it answers, else in memory (and Redis awaited). */
  async start(redisUrl: string | null, packetTtlSeconds: number): Promise<void> {
    let engines: SharedEngines | null = null;
    if (redisUrl) {
      const { RedisLink, redisUrlForLog } = await import('./redis.ts');
      this.redis = new RedisLink(redisUrl, this.log, packetTtlSeconds);
      try {
        engines = await this.redis.open();
        this.log.info({ redis: redisUrlForLog(redisUrl) }, 'MQTT state in Redis, shared by the nodes');
      } catch (err) {
        // A node starts, and serves MQTT from memory, whether Redis is there or not.
        this.lost();
        this.log.warn({ err, redis: redisUrlForLog(redisUrl) }, 'Redis is unreachable: MQTT state stays in this node\'s memory until it answers (docs/mqtt.md "Several nodes")');
      }
    }
    this.gen = await this.build(engines);
    if (this.redis && !engines) void this.recover();
  }

  /**
   * Redis was lost: new connections go to a fresh in-memory state at once, and the clients of the
   * Redis one are disconnected (they reconnect to it). Logged once per outage, not per message.
   */
  async degrade(gen: Generation, why: string): Promise<void> {
    if (gen !== this.gen || this.stopping) return;
    this.lost();
    this.lostIds.add(gen.aedes.id);
    this.log.warn({ why }, 'Redis is lost: MQTT state moves to this node\'s memory until Redis answers again; clients are reconnected (docs/mqtt.md "Several nodes")');
    const next = await this.build(null);
    this.gen = next;
    this.retire(gen);
    if (this.stopping) return this.retire(next);
    void this.recover();
  }

  /** Waits for Redis to answer again, then moves new connections back to it and reconnects the in-memory clients. */
  private async recover(): Promise<void> {
    const redis = this.redis;
    if (!redis) return;
    while (!this.stopping && (await redis.reachable()) && !this.stopping) {
      let engines: SharedEngines | null = null;
      try {
        engines = await redis.open();
        const next = await this.build(engines);
        if (this.stopping) return this.retire(next);
        const old = this.gen;
        this.gen = next;
        this.retire(old);
        this.log.info('Redis answers again: MQTT state is in Redis, shared by the nodes; clients are reconnected');
        await this.dropLostWills(engines.persistence as WillStore);
        return;
      } catch (err) {
        engines?.destroy();
        this.log.debug({ err }, 'Redis answered but the MQTT state could not be opened; waiting again');
      }
    }
  }

  /**
   * Deletes the wills this node left in Redis under the generations it lost with Redis: their clients
   * were reconnected, not gone, and another node would otherwise send them once those generations'
   * heartbeats stop (Aedes sends the wills of a node it has not heard for three heartbeats).
   */
  private async dropLostWills(p: WillStore): Promise<void> {
    try {
      for await (const will of p.streamWill({})) if (this.lostIds.has(will.brokerId)) await p.delWill({ id: will.clientId, brokerId: will.brokerId });
    } catch (err) {
      this.log.debug({ err }, 'mqtt could not drop the wills of a lost state');
    }
  }

  /** Disconnects a replaced generation's clients (without their wills) and closes it. */
  private retire(gen: Generation): void {
    gen.retiring = true;
    for (const c of connectedClients(gen)) c.close();
    gen.aedes.close(() => void gen.engines?.close());
    // Redis gone: nothing would answer the goodbyes.
    if (gen.engines && gen.engines !== this.gen.engines) gen.engines.destroy();
  }

  /** Closes the generation in use (its clients' wills are sent, as at any stop) and stops waiting for Redis. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.redis?.stop();
    const gen = this.gen;
    await new Promise<void>((r) => gen.aedes.close(() => r()));
    await gen.engines?.close();
  }
}
