#!/usr/bin/env node
// `npm test`: every *.test.ts under test/ and src/, run by node:test through tsx. Node 20's test
// runner takes no globs, so the files are listed here. Arguments narrow the run: `npm test -- gateway`
// runs only files whose path contains "gateway". `--unit` (npm run test:unit) runs the pure tests
// only: no server, socket, database, child process or browser, so they finish in seconds.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const unit = process.argv.includes('--unit');
const filters = process.argv.slice(2).filter((a) => a !== '--unit');

/** The pure tests: code and documents only. A new pure test file goes here. */
const UNIT = [
  'test/core/',
  'test/coap/codec.test.ts',
  'test/coap/deadlines.test.ts',
  'test/coap/memory.test.ts',
  'test/config/',
  'test/errors-doc.test.ts',
  'test/readme-config.test.ts',
  'test/architecture.test.ts',
  'test/wire-types.test.ts',
  'test/protocol-doc.test.ts',
  'test/sim/model.test.ts',
  'test/events/kinds.test.ts',
  'test/mqtt/units.test.ts',
];

function walk(dir, out) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (e.name === 'node_modules' || e.name.startsWith('.')) continue;
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (e.name.endsWith('.test.ts')) out.push(path.relative(root, p));
  }
  return out;
}

const files = ['test', 'src']
  .filter((d) => fs.existsSync(path.join(root, d)))
  .flatMap((d) => walk(path.join(root, d), []))
  .filter((f) => !unit || UNIT.some((u) => f.startsWith(u)))
  .filter((f) => !filters.length || filters.some((x) => f.includes(x)))
  .sort();

if (!files.length) {
  console.error('no test files matched');
  process.exit(1);
}
const tsx = path.join(root, 'node_modules', '.bin', 'tsx');
const child = spawn(tsx, ['--test', `--test-concurrency=${unit ? 2 : 1}`, '--test-reporter=spec', ...files], { cwd: root, stdio: 'inherit' });
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
