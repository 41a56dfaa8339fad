#!/usr/bin/env node
// `npm test`: every *.test.ts, by tier, run by node:test through tsx. A test's folder is its tier:
//   test/unit/<area>/         code and documents only: no socket, process, database or browser (seconds)
//   test/integration/<area>/  real sockets, SQLite, PostgreSQL, servers in the test's own process
//   test/e2e/<area>/          child processes: bin/reef.js, coap-client, mosquitto_*, socat, Chromium
// `--unit`, `--integration`, `--e2e` run those tiers only (npm run test:unit ...); other arguments
// narrow the run to files whose path contains one of them (`npm test -- gateway`).
// Files run in parallel, CONCURRENCY at a time (each takes free ports, its own data directory and
// its own PostgreSQL database); the few in SERIAL run after them, one at a time. One summary ends the
// output, counting both.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const TIERS = ['unit', 'integration', 'e2e'];

/**
 * Files at a time; REEF_TEST_CONCURRENCY overrides. Files wait on servers, child processes and
 * timers, so more files than cores; past 4 the suite is CPU-bound on the 2-core machine: 4 ran it
 * in 4m15s and 8 in 4m10s, the machine otherwise idle.
 */
const CONCURRENCY = Number(process.env.REEF_TEST_CONCURRENCY) || 4;

/** The longest any one test or suite may take (the slowest suite takes about 3.5 minutes on a loaded 2-core machine). */
const TEST_TIMEOUT_MS = 600_000;

/**
 * Files that run alone, after the parallel group, and why. No test takes a fixed port, and the netns
 * test (e2e/coap/datagrams-full-buffer) has its own loopback; but e2e/scale/fault restarts the shared
 * PostgreSQL cluster, which would fail every PostgreSQL test running beside it.
 */
const SERIAL = ['test/e2e/scale/fault.test.ts'];

const args = process.argv.slice(2);
const picked = TIERS.filter((t) => args.includes(`--${t}`));
const tiers = picked.length ? picked : TIERS;
const filters = args.filter((a) => !TIERS.includes(a.replace(/^--/, '')));

function walk(dir, out) {
  if (!fs.existsSync(dir)) return out;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (e.name === 'node_modules' || e.name.startsWith('.')) continue;
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (e.name.endsWith('.test.ts')) out.push(path.relative(root, p));
  }
  return out;
}

// A test file outside the three tiers would never run: refuse it instead of skipping it quietly.
const stray = [...walk(path.join(root, 'test'), []), ...walk(path.join(root, 'src'), [])].filter((f) => !TIERS.some((t) => f.startsWith(`test/${t}/`)));
if (stray.length) {
  console.error(`test files outside test/unit, test/integration and test/e2e (move each into its tier):\n  ${stray.join('\n  ')}`);
  process.exit(1);
}

// The slowest tier first (e2e, then integration, then unit): files start in this order, and a long
// browser or CLI file started last would end the run alone while the other slots stand idle.
const files = [...tiers]
  .reverse()
  .flatMap((t) => walk(path.join(root, 'test', t), []).sort())
  .filter((f) => !filters.length || filters.some((x) => f.includes(x)));
if (!files.length) {
  console.error('no test files matched');
  process.exit(1);
}

// The browser tests build web/dist when it is stale; build it once here, not in several files at once.
if (files.some((f) => f.startsWith('test/e2e/web/'))) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', "(await import('./test/e2e/web/harness.ts')).ensureWebBuilt()"], { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

const tsx = path.join(root, 'node_modules', '.bin', 'tsx');
const groups = [
  { files: files.filter((f) => !SERIAL.includes(f)), concurrency: CONCURRENCY },
  { files: files.filter((f) => SERIAL.includes(f)), concurrency: 1 },
].filter((g) => g.files.length);

/** Runs one group; resolves with its exit code and its summary counts (`ℹ tests 12` ...). */
function run(group, holdSummary) {
  return new Promise((resolve) => {
    // A test that hangs fails after TEST_TIMEOUT_MS instead of holding the run, and a file whose
    // tests are done exits even if a handle stays open (Node's --test-timeout, --test-force-exit).
    const argv = ['--test', `--test-concurrency=${group.concurrency}`, `--test-timeout=${TEST_TIMEOUT_MS}`, '--test-force-exit', '--test-reporter=spec', ...group.files];
    if (!holdSummary) {
      const child = spawn(tsx, argv, { cwd: root, stdio: 'inherit' });
      child.on('exit', (code, signal) => resolve({ code: code ?? (signal ? 1 : 0), counts: null }));
      return;
    }
    // Several groups: their summaries are held back and added up, so one summary ends the output.
    const child = spawn(tsx, argv, { cwd: root, stdio: ['inherit', 'pipe', 'inherit'], env: process.stdout.isTTY ? { ...process.env, FORCE_COLOR: '1' } : process.env });
    const counts = new Map();
    let rest = '';
    const line = (l) => {
      const m = /^(?:\x1b\[[0-9;]*m)?ℹ (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) ([\d.]+)/.exec(l);
      if (m) counts.set(m[1], Number(m[2]));
      else process.stdout.write(`${l}\n`);
    };
    child.stdout.on('data', (chunk) => {
      const lines = (rest + chunk).split('\n');
      rest = lines.pop();
      lines.forEach(line);
    });
    child.on('exit', (code, signal) => {
      if (rest) line(rest);
      resolve({ code: code ?? (signal ? 1 : 0), counts });
    });
  });
}

const several = groups.length > 1;
const results = [];
for (const g of groups) results.push(await run(g, several));
if (several) {
  const total = new Map();
  for (const { counts } of results) for (const [k, v] of counts) total.set(k, (total.get(k) ?? 0) + v);
  for (const k of ['tests', 'suites', 'pass', 'fail', 'cancelled', 'skipped', 'todo', 'duration_ms']) {
    if (total.has(k)) console.log(`ℹ ${k} ${k === 'duration_ms' ? total.get(k).toFixed(3) : total.get(k)}`);
  }
}
process.exit(results.some((r) => r.code !== 0) ? 1 : 0);
