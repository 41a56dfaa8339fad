// Leadership among nodes sharing one PostgreSQL: the leader is the node whose dedicated session
// holds the advisory lock LOCK_LEADER. PostgreSQL releases a session lock when the session ends, so
// when the leader dies (process killed, machine gone: TCP keepalive notices) another node's next
// pg_try_advisory_lock succeeds and its jobs start. The leader checks its session every poll; when
// the check fails it stops its jobs at once, before any other node can have taken over plus one
// poll, so two leaders overlap at most briefly — jobs are written to be idempotent (upserts).
// After a failover the session is made again on the new primary, whose lock is free.
import type pg from 'pg';
import { JobRunner } from './leader.ts';
import { LOCK_LEADER } from '../store/postgres/migrations.ts';

export interface PgLeadershipOptions {
  /** A client for the leader's session, not yet connected: the store's way of connecting (hosts.ts). */
  newClient: (config: pg.ClientConfig) => pg.Client;
  nodeId?: string;
  /** How often a follower tries for the lock and the leader checks its session. */
  pollMs?: number;
  onError?: (e: unknown, what: string) => void;
}

export class PgLeadership extends JobRunner {
  private client: pg.Client | null = null;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private busy = false;
  private readonly pollMs: number;

  constructor(private readonly opts: PgLeadershipOptions) {
    super(opts.nodeId, opts.onError);
    this.pollMs = opts.pollMs ?? 1000;
  }

  async start(): Promise<void> {
    await this.tick();
    this.timer = setInterval(() => void this.tick(), this.pollMs);
    this.timer.unref();
  }

  private async connect(): Promise<pg.Client> {
    const c = this.opts.newClient({ keepAlive: true, keepAliveInitialDelayMillis: 5000, application_name: 'reef-leader' });
    c.on('error', (e) => void this.lost(c, e));
    await c.connect();
    return c;
  }

  private async lost(c: pg.Client, e: unknown): Promise<void> {
    if (this.client !== c) return;
    this.client = null;
    c.end().catch(() => undefined);
    if (this.leader) this.opts.onError?.(e, 'leader session lost; stopping background jobs');
    await this.setLeader(false);
  }

  private async tick(): Promise<void> {
    if (this.busy || this.closed) return;
    this.busy = true;
    try {
      if (!this.client) this.client = await this.connect();
      const c = this.client;
      // Only on a writable host: a standby (or a primary gone read-only) takes advisory locks too,
      // and a node left on it would lead beside the one on the new primary. Losing the session
      // here sends the next connection to the writable host (hosts.ts).
      if (this.leader) {
        const r = await c.query("SELECT current_setting('transaction_read_only') AS ro");
        if (r.rows[0]?.ro !== 'off') throw new Error('the leader session is on a read-only host');
      } else {
        const r = await c.query("SELECT CASE WHEN current_setting('transaction_read_only') = 'off' THEN pg_try_advisory_lock($1) END AS got", [LOCK_LEADER.toString()]);
        const got = r.rows[0]?.got as boolean | null | undefined;
        if (got === null) throw new Error('the leader session is on a read-only host');
        if (got === true && !this.closed) await this.setLeader(true);
      }
    } catch (e) {
      if (this.client) await this.lost(this.client, e);
      else this.client = null;
    } finally {
      this.busy = false;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    while (this.busy) await new Promise((r) => setTimeout(r, 10));
    await this.setLeader(false);
    const c = this.client;
    this.client = null;
    // Ending the session releases the lock; the next node takes over on its next poll.
    if (c) await c.end().catch(() => undefined);
  }
}
