#!/usr/bin/env node
// `npm test`: every *.test.ts, by tier, run by node:test through tsx. A test's folder is its tier:
//   test/unit/<area>/         code and documents only: no socket, process, database or browser (seconds)
//   test/integration/<area>/  real sockets, SQLite, PostgreSQL, servers in the test's own process
//   test/e2e/<area>/          child processes: bin/reef.js, coap-client, mosquitto_*, socat, Chromium
// `--unit`, `--integration`, `--e2e` run those tiers only (npm run test:unit ...); other arguments
// narrow the run to files whose path contains one of them (`npm test -- gateway`).
// Files run in parallel, CONCURRENCY at a time: each takes free ports, its own data directory and
// its own PostgreSQL database (or cluster, test/helpers/pg-cluster.ts, when it restarts or kills
// one), and the netns test (e2e/coap/datagrams-full-buffer) has a loopback of its own.
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

/** The longest any one test or suite may take (the slowest file takes about a minute and a half on a loaded 2-core machine). */
const TEST_TIMEOUT_MS = 600_000;

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
// A test that hangs fails after TEST_TIMEOUT_MS instead of holding the run, and a file whose tests
// are done exits even if a handle stays open (Node's --test-timeout, --test-force-exit).
const argv = ['--test', `--test-concurrency=${CONCURRENCY}`, `--test-timeout=${TEST_TIMEOUT_MS}`, '--test-force-exit', '--test-reporter=spec', ...files];
const child = spawn(tsx, argv, { cwd: root, stdio: 'inherit' });
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
