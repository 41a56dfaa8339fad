// The one-timer deadline queue the CoAP endpoint gives its requests (src/coap/deadlines.ts).
import assert from 'node:assert/strict';
import { mock, test } from 'node:test';
import { Deadlines, type Timed } from '../../../src/coap/deadlines.ts';
import { testClock } from '../../helpers/clock.ts';

interface Item extends Timed {
  name: string;
}
const item = (name: string): Item => ({ name, due: 0, lane: 0 });

function queue() {
  const clock = testClock(0);
  const expired: string[] = [];
  const d = new Deadlines<Item>((i) => expired.push(i.name), clock.now);
  /** Moves the clock and the timers on together. */
  const pass = (ms: number) => {
    clock.advance(ms);
    mock.timers.tick(ms);
  };
  return { d, expired, pass };
}

test('items fall due in time order across durations, each once, and a removed one never', (t) => {
  mock.timers.enable({ apis: ['setTimeout'] });
  t.after(() => mock.timers.reset());
  const { d, expired, pass } = queue();
  const a = item('a');
  const b = item('b');
  const c = item('c');
  const e = item('e');
  d.add(a, 100);
  d.add(b, 30);
  d.add(c, 100);
  d.add(e, 30);
  d.remove(e);
  pass(29);
  assert.deepEqual(expired, []);
  pass(1);
  assert.deepEqual(expired, ['b']);
  // One added later with a shorter duration still falls due before the older, longer ones.
  const f = item('f');
  d.add(f, 10);
  pass(10);
  assert.deepEqual(expired, ['b', 'f']);
  pass(60);
  assert.deepEqual(expired, ['b', 'f', 'a', 'c']);
  pass(1000);
  assert.deepEqual(expired, ['b', 'f', 'a', 'c']);
});

test('an item added from expire() gets its own deadline; clear() forgets everything', (t) => {
  mock.timers.enable({ apis: ['setTimeout'] });
  t.after(() => mock.timers.reset());
  const clock = testClock(0);
  const expired: string[] = [];
  const d: Deadlines<Item> = new Deadlines<Item>((i) => {
    expired.push(i.name);
    if (i.name === 'first') d.add(item('again'), 50);
  }, clock.now);
  const pass = (ms: number) => {
    clock.advance(ms);
    mock.timers.tick(ms);
  };
  d.add(item('first'), 20);
  pass(20);
  assert.deepEqual(expired, ['first']);
  pass(50);
  assert.deepEqual(expired, ['first', 'again']);
  d.add(item('never'), 10);
  d.clear();
  pass(100);
  assert.deepEqual(expired, ['first', 'again']);
});
