// Leadership: background jobs (simulations, store upkeep) run on one node at a time. Jobs register
// once with run(); the Leadership starts them when this node becomes the leader and stops them when
// it stops leading, so a job never asks who leads. One node (SQLite, or a single process) always
// leads; on PostgreSQL the leader holds an advisory lock (src/jobs/pg-leader.ts) and another
// node takes over when it dies.
import os from 'node:os';
import { randomBytes } from 'node:crypto';

export interface Job {
  name: string;
  start(): void | Promise<void>;
  stop(): void | Promise<void>;
}

export interface Leadership {
  /** This node's name in logs and job state: host/pid/random. */
  readonly nodeId: string;
  isLeader(): boolean;
  /** Starts the job whenever this node leads and stops it when it no longer does; returns "unregister". */
  run(job: Job): () => Promise<void>;
  /** Told on every change of leadership. */
  onChange(fn: (leader: boolean) => void): () => void;
  start(): Promise<void>;
  /** Stops every running job and gives up leadership. */
  close(): Promise<void>;
}

export function makeNodeId(): string {
  return `${os.hostname()}/${process.pid}/${randomBytes(3).toString('hex')}`;
}

/** Shared bookkeeping: the registered jobs and starting/stopping them on a change. */
export abstract class JobRunner implements Leadership {
  readonly nodeId: string;
  protected leader = false;
  private readonly jobs = new Set<Job>();
  private readonly running = new Set<Job>();
  private readonly listeners = new Set<(leader: boolean) => void>();
  private change: Promise<void> = Promise.resolve();

  constructor(
    nodeId?: string,
    protected readonly onError: (e: unknown, what: string) => void = () => undefined,
  ) {
    this.nodeId = nodeId ?? makeNodeId();
  }

  isLeader(): boolean {
    return this.leader;
  }

  run(job: Job): () => Promise<void> {
    this.jobs.add(job);
    if (this.leader) this.change = this.change.then(() => this.startJob(job));
    return async () => {
      this.jobs.delete(job);
      await (this.change = this.change.then(() => this.stopJob(job)));
    };
  }

  onChange(fn: (leader: boolean) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private async startJob(job: Job): Promise<void> {
    if (this.running.has(job) || !this.leader) return;
    this.running.add(job);
    try {
      await job.start();
    } catch (e) {
      this.onError(e, `starting job ${job.name} failed`);
    }
  }

  private async stopJob(job: Job): Promise<void> {
    if (!this.running.delete(job)) return;
    try {
      await job.stop();
    } catch (e) {
      this.onError(e, `stopping job ${job.name} failed`);
    }
  }

  /** Changes leadership; jobs start or stop in order, one change after another. */
  protected setLeader(leader: boolean): Promise<void> {
    if (leader === this.leader) return this.change;
    this.leader = leader;
    for (const fn of this.listeners) {
      try {
        fn(leader);
      } catch (e) {
        this.onError(e, 'leadership listener failed');
      }
    }
    this.change = this.change.then(async () => {
      if (this.leader) for (const j of this.jobs) await this.startJob(j);
      else for (const j of [...this.running]) await this.stopJob(j);
    });
    return this.change;
  }

  abstract start(): Promise<void>;
  abstract close(): Promise<void>;
}

/** One process is the whole service: it always leads. */
export class LocalLeadership extends JobRunner {
  async start(): Promise<void> {
    await this.setLeader(true);
  }
  async close(): Promise<void> {
    await this.setLeader(false);
  }
}
