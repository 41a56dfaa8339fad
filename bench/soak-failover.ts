// bench/soak.ts --failover: the PostgreSQL side (test/helpers/pg-cluster.ts: a primary and its
// synchronous standby of the bench's own) and how long each fault keeps uploads from succeeding.
// A primary fault is SIGKILL of the primary and `pg_ctl promote` of the standby at once; the dead
// one is then rebuilt as a synchronous standby of the new primary (pg_basebackup, then named in its
// synchronous_standby_names). Until that is done the new primary's commits are on it alone, so the
// next primary fault waits for it: killing it earlier would lose acknowledged uploads by design.
import { type PgCluster, type PgNode, replicationState, startPrimaryAndStandby } from '../test/helpers/pg-cluster.ts';

export interface PrimaryFault {
  /** When the SIGKILL was sent. */
  killedAt: number;
  /** When `pg_ctl promote -w` returned: the database's own part of the outage. */
  promotedAt: number;
}

export class Failover {
  private rejoining: Promise<void> | null = null;
  /** Seconds each rebuild of a dead primary as a synchronous standby took. */
  readonly rejoinSeconds: number[] = [];

  private constructor(
    readonly pgc: PgCluster,
    public primary: PgNode,
    public standby: PgNode,
  ) {}

  static async start(): Promise<Failover> {
    const pgc = await startPrimaryAndStandby();
    return new Failover(pgc, pgc.primary, pgc.standby);
  }

  /** Both hosts, as every node is given them. */
  url(): string {
    return `${this.pgc.url()}?target_session_attrs=read-write`;
  }

  /** What the primary's replication is now, in a few words. */
  async describe(): Promise<string> {
    const r = await replicationState(this.primary);
    const standbys = r.standbys.map((s) => `${s.state}/${s.syncState}`).join(', ') || 'none';
    return `synchronous_standby_names '${r.syncNames}', standbys ${standbys}`;
  }

  /** Whether the primary has a standby streaming as synchronous: what makes a 201 survive its death. */
  async protected(): Promise<boolean> {
    const r = await replicationState(this.primary);
    return r.syncNames !== '' && r.standbys.some((s) => s.state === 'streaming' && s.syncState === 'sync');
  }

  /**
   * Waits for the rebuild of the last dead primary, then answers the primary's replication, or
   * throws when it has no synchronous standby: a kill then would lose acknowledged uploads.
   */
  async ready(): Promise<string> {
    if (this.rejoining) await this.rejoining;
    const before = await this.describe();
    if (!(await this.protected())) throw new Error(`the primary has no synchronous standby (${before})`);
    return before;
  }

  /** SIGKILL of the primary, the standby promoted, the dead one rebuilt as its synchronous standby in the background. */
  async killPrimary(): Promise<PrimaryFault> {
    const dead = this.primary;
    const killedAt = Date.now();
    await this.pgc.kill(dead);
    await this.pgc.promote(this.standby);
    const promotedAt = Date.now();
    this.primary = this.standby;
    this.standby = dead;
    // A failed rebuild is reported by the next ready().
    this.rejoining = this.pgc.rejoin(dead, this.primary).then(() => void this.rejoinSeconds.push((Date.now() - promotedAt) / 1000));
    this.rejoining.catch(() => undefined);
    return { killedAt, promotedAt };
  }

  async stop(): Promise<void> {
    await this.rejoining?.catch(() => undefined);
    await this.pgc.stop();
  }
}

/**
 * Per fault: when every node first answered 201 to an upload it received after the fault began (an
 * upload sent earlier may have committed before the fault).
 */
export class Recovery {
  private readonly open: { at: number; firstOk: (number | null)[]; done: (s: number) => void }[] = [];

  constructor(private readonly nodes: number) {}

  /** An upload to `node`, sent at `startedAt`, answered 201 now. */
  ok(node: number, startedAt: number): void {
    const now = Date.now();
    for (const f of [...this.open]) {
      if (startedAt < f.at || f.firstOk[node] !== null) continue;
      f.firstOk[node] = now;
      if (f.firstOk.every((x) => x !== null)) {
        this.open.splice(this.open.indexOf(f), 1);
        f.done((Math.max(...(f.firstOk as number[])) - f.at) / 1000);
      }
    }
  }

  /** Seconds from `at` until every node has answered an upload sent since with 201; null past `capMs`. */
  since(at: number, capMs = 120_000): Promise<number | null> {
    return new Promise((resolve) => {
      const f = { at, firstOk: new Array<number | null>(this.nodes).fill(null), done: resolve };
      this.open.push(f);
      setTimeout(() => {
        const i = this.open.indexOf(f);
        if (i < 0) return;
        this.open.splice(i, 1);
        resolve(null);
      }, capMs).unref();
    });
  }
}
