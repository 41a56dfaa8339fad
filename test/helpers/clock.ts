// An injected clock for tests of time-based behaviour (token expiry and renewal, caches): it runs
// with real time, and `advance(ms)` jumps it ahead, so a test never sleeps to let time pass.
export interface TestClock {
  now(): number;
  advance(ms: number): void;
}

/** With `start`, the clock stands still at it until advanced (for code that reads it twice and must see one time). */
export function testClock(start?: number): TestClock {
  let offset = 0;
  return {
    now: () => (start === undefined ? Date.now() : start) + offset,
    advance(ms: number) {
      offset += ms;
    },
  };
}
