// An injected clock for tests of time-based behaviour (token expiry and renewal, caches): it runs
// with real time, and `advance(ms)` jumps it ahead, so a test never sleeps to let time pass.
export interface TestClock {
  now(): number;
  advance(ms: number): void;
}

export function testClock(): TestClock {
  let offset = 0;
  return {
    now: () => Date.now() + offset,
    advance(ms: number) {
      offset += ms;
    },
  };
}
