// ReadSlots: one account's expensive reads run a few at a time, wait in order past that, and are
// refused 429 TOO_MANY_READS past the waiting bound; other accounts are never held by them.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { isReefError } from '../../../src/core/errors.ts';
import { ReadSlots } from '../../../src/http/read-slots.ts';

/** A read that finishes when told to. */
function gate(): { promise: Promise<string>; open: (v: string) => void } {
  let open!: (v: string) => void;
  const promise = new Promise<string>((r) => (open = r));
  return { promise, open };
}

it('runs at most maxPerAccount reads of one account, the rest in order of arrival, and refuses past the waiting bound', async () => {
  const slots = new ReadSlots(2, 3);
  const started: number[] = [];
  const gates = Array.from({ length: 5 }, () => gate());
  const reads = gates.map((g, i) =>
    slots.run('A', () => {
      started.push(i);
      return g.promise;
    }),
  );
  // The sixth read of A finds two running and three waiting.
  await assert.rejects(
    slots.run('A', async () => 'never'),
    (e: unknown) => isReefError(e) && e.code === 'TOO_MANY_READS' && e.status === 429 && e.retryAfter === 1,
  );
  assert.equal(slots.refused, 1);
  // Another account is not held by A's reads.
  assert.equal(await slots.run('B', async () => 'b'), 'b');
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(started, [0, 1]);
  gates[1]!.open('1');
  await reads[1];
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(started, [0, 1, 2], 'the first waiting read takes the freed slot');
  for (const g of gates) g.open('x');
  await Promise.all(reads);
  assert.deepEqual(started, [0, 1, 2, 3, 4]);
  // All finished: A may run again.
  assert.equal(await slots.run('A', async () => 'again'), 'again');
});

it('a read that throws frees its slot', async () => {
  const slots = new ReadSlots(1, 0);
  await assert.rejects(slots.run('A', async () => Promise.reject(new Error('store down'))));
  assert.equal(await slots.run('A', async () => 'ok'), 'ok');
});
