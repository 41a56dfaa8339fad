// The hostile-input suite's bookkeeping: every probe is counted as tried and classified
// as correct (the answer the spec demands), wrong (a clear answer, but not the right one), a 5xx
// caused by input, or a leak (another tenant's data, or an effect on another tenant's data). Each
// suite file prints one line per probe class and asserts: leaks 0, 5xx from input 0, all correct.
import assert from 'node:assert/strict';

export type Outcome = 'correct' | 'wrong' | '5xx' | 'leak';

export interface Tally {
  readonly name: string;
  tried: number;
  correct: number;
  wrong: number;
  serverErrors: number;
  leaks: number;
  /** The first few probes that were not correct, to read in the assertion message. */
  readonly failures: string[];
  record(outcome: Outcome, detail?: string): void;
  /** Records a probe by its HTTP-like status: 5xx counts as a server error, else correct when it is expected. */
  status(got: number, expected: number | readonly number[], detail?: string): void;
  /** One line, `security: <name>: tried N, correct N, wrong N, 5xx N, leaks N`. */
  line(): string;
}

export function tally(name: string): Tally {
  const t: Tally = {
    name,
    tried: 0,
    correct: 0,
    wrong: 0,
    serverErrors: 0,
    leaks: 0,
    failures: [],
    record(outcome, detail) {
      t.tried++;
      if (outcome === 'correct') t.correct++;
      else {
        if (outcome === 'wrong') t.wrong++;
        else if (outcome === '5xx') t.serverErrors++;
        else t.leaks++;
        if (t.failures.length < 10) t.failures.push(`${outcome}: ${detail ?? '(no detail)'}`);
      }
    },
    status(got, expected, detail) {
      const ok = typeof expected === 'number' ? got === expected : expected.includes(got);
      t.record(got >= 500 && !ok ? '5xx' : ok ? 'correct' : 'wrong', `${detail ?? ''} → ${got}, expected ${String(expected)}`);
    },
    line: () => `security: ${name}: tried ${t.tried}, correct ${t.correct}, wrong ${t.wrong}, 5xx ${t.serverErrors}, leaks ${t.leaks}`,
  };
  return t;
}

/** Prints the tally's line and fails unless every probe was tried and answered correctly. */
export function assertClean(t: Tally): void {
  console.log(t.line());
  assert.ok(t.tried > 0, `${t.name}: no probe was tried`);
  assert.equal(t.leaks, 0, `${t.name}: leaks\n${t.failures.join('\n')}`);
  assert.equal(t.serverErrors, 0, `${t.name}: 5xx from input\n${t.failures.join('\n')}`);
  assert.equal(t.correct, t.tried, `${t.name}: wrong answers\n${t.failures.join('\n')}`);
}
