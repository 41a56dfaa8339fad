// The seam for running simulations on one node at a time. A multi-node deployment (PostgreSQL)
// elects a leader; only the leader runs simulations, and a node that loses leadership stops its
// runs (without marking them stopped) so the new leader resumes them from the stored progress.
// A single node (SQLite) is always the leader.

export interface Leadership {
  isLeader(): boolean;
  /** Called with the new value whenever leadership is gained or lost; returns the unsubscribe function. */
  onChange(fn: (leader: boolean) => void): () => void;
}

export const SOLE_LEADER: Leadership = {
  isLeader: () => true,
  onChange: () => () => {},
};

/** Leadership that can be handed over by hand: for tests of a hand-over and for embedding. */
export class ManualLeadership implements Leadership {
  private listeners = new Set<(leader: boolean) => void>();
  constructor(private leader = true) {}
  isLeader(): boolean {
    return this.leader;
  }
  set(leader: boolean): void {
    if (leader === this.leader) return;
    this.leader = leader;
    for (const fn of this.listeners) fn(leader);
  }
  onChange(fn: (leader: boolean) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }
}
