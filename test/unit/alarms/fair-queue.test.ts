// The evaluator's queue (src/alarms/fair-queue.ts): groups' batches take turns, so one tenant's
// burst does not delay another's evaluation; each group keeps its order; a barrier task (a rule
// change, a silence check) runs after everything queued before it and before everything after it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FairQueue } from '../../../src/alarms/fair-queue.ts';

const ran: string[] = [];
/** Runs every queued task; the names in the order they ran. */
function drain(q: FairQueue): string[] {
  for (let t = q.shift(); t; t = q.shift()) t();
  return ran.splice(0);
}
const task = (name: string) => () => void ran.push(name);

describe('FairQueue', () => {
  it("a group's burst takes turns with another group's batch", () => {
    const q = new FairQueue();
    for (let i = 0; i < 100; i++) q.push(task(`hostile${i}`), 'g-hostile');
    q.push(task('victim0'), 'g-victim');
    q.push(task('victim1'), 'g-victim');
    assert.equal(q.length, 102);
    const order = drain(q);
    assert.deepEqual(order.slice(0, 4), ['hostile0', 'victim0', 'hostile1', 'victim1']);
    assert.deepEqual(
      order.filter((n) => n.startsWith('hostile')),
      Array.from({ length: 100 }, (_, i) => `hostile${i}`),
      'one group keeps its order',
    );
    assert.equal(q.length, 0);
  });

  it('a barrier runs after everything queued before it and before everything after it', () => {
    const q = new FairQueue();
    q.push(task('a1'), 'a');
    q.push(task('a2'), 'a');
    q.push(task('b1'), 'b');
    q.push(task('rule change'));
    q.push(task('b2'), 'b');
    q.push(task('a3'), 'a');
    assert.deepEqual(drain(q), ['a1', 'b1', 'a2', 'rule change', 'b2', 'a3']);
  });
});
