// The gateway's per-source log rate limit (src/gateway/log-limit.ts), on an injected clock: one line
// per source per interval, the next one carrying how many were suppressed, and a bounded number of
// sources so forged addresses cannot flood the log either.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LogLimiter } from '../../../src/gateway/log-limit.ts';
import { testClock } from '../../helpers/clock.ts';

describe('LogLimiter', () => {
  it('logs the first line of a source, suppresses the rest for a minute, then logs one with the count', () => {
    const clock = testClock(1_000_000);
    const l = new LogLimiter(60_000, clock.now);
    assert.equal(l.take('127.0.0.9'), 0);
    for (let i = 0; i < 5; i++) assert.equal(l.take('127.0.0.9'), undefined);
    clock.advance(59_999);
    assert.equal(l.take('127.0.0.9'), undefined);
    clock.advance(1);
    assert.equal(l.take('127.0.0.9'), 6, 'six suppressed since the last line');
    assert.equal(l.take('127.0.0.9'), undefined);
    clock.advance(60_000);
    assert.equal(l.take('127.0.0.9'), 1);
  });

  it('limits each source on its own', () => {
    const clock = testClock(0);
    const l = new LogLimiter(60_000, clock.now);
    assert.equal(l.take('a'), 0);
    assert.equal(l.take('b'), 0);
    assert.equal(l.take('a'), undefined);
    assert.equal(l.take('b'), undefined);
  });

  it('with its sources full, suppresses new ones until an interval is over', () => {
    const clock = testClock(0);
    const l = new LogLimiter(60_000, clock.now, 3);
    for (const s of ['a', 'b', 'c']) assert.equal(l.take(s), 0);
    assert.equal(l.take('d'), undefined);
    clock.advance(60_000);
    assert.equal(l.take('d'), 0);
  });
});
