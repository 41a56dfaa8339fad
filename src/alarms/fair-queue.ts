// The evaluator's work queue, fair across groups (docs/alarms.md "Evaluation, precisely"): a
// tenant's burst of batches must not delay another tenant's evaluation, so observation batches wait
// in one queue per group and the groups take turns (round-robin). Other tasks (rule changes, silence
// checks, cleared alarms) are barriers: everything queued before one runs before it, everything
// queued after it runs after it, so a rule change applies from exactly where it was queued, and one
// group's batches keep their order.

export type Task = () => Promise<void> | void;

interface Turns {
  groups: Map<string, Task[]>;
  /** Groups in turn order; `next` is the index of the next one served. */
  order: string[];
  next: number;
}

export class FairQueue {
  private readonly segments: (Task | Turns)[] = [];
  private size = 0;

  get length(): number {
    return this.size;
  }

  /** A batch of a group (taking turns with other groups), or, with no group, a barrier task. */
  push(task: Task, group?: string): void {
    this.size++;
    if (group === undefined) {
      this.segments.push(task);
      return;
    }
    let last = this.segments[this.segments.length - 1];
    if (last === undefined || typeof last === 'function') {
      last = { groups: new Map(), order: [], next: 0 };
      this.segments.push(last);
    }
    const q = last.groups.get(group);
    if (q) q.push(task);
    else {
      last.groups.set(group, [task]);
      last.order.push(group);
    }
  }

  shift(): Task | undefined {
    const head = this.segments[0];
    if (head === undefined) return undefined;
    this.size--;
    if (typeof head === 'function') {
      this.segments.shift();
      return head;
    }
    const at = head.next % head.order.length;
    const group = head.order[at]!;
    const q = head.groups.get(group)!;
    const task = q.shift()!;
    if (q.length) head.next = at + 1;
    else {
      head.groups.delete(group);
      head.order.splice(at, 1);
      head.next = at;
      if (!head.order.length) this.segments.shift();
    }
    return task;
  }
}

/**
 * Work on the event loop in slices: store calls on SQLite are synchronous, so a burst of raises or
 * a large silence check gives other requests a turn after every YIELD_AFTER_MS of work.
 */
const YIELD_AFTER_MS = 5;

export class Slicer {
  private last = performance.now();
  /** True when the next tick gives the event loop a turn. */
  get due(): boolean {
    return performance.now() - this.last >= YIELD_AFTER_MS;
  }
  async tick(): Promise<void> {
    if (!this.due) return;
    await new Promise<void>((r) => setImmediate(r));
    this.last = performance.now();
  }
}
