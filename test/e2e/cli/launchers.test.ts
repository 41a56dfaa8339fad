// The ways to start Reef — the installed `reef` command (bin/reef.js run by its #! line) and
// `npm start` / `npm run reef` — run node with the same options (bin/reef.js says why they matter).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { BIN } from '../../helpers/reef.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

it('bin/reef.js runs as a command through its #! line, and npm start passes node the same options', () => {
  const shebang = fs.readFileSync(BIN, 'utf8').split('\n')[0]!;
  const m = /^#!\/usr\/bin\/env -S node (.+)$/.exec(shebang);
  assert.ok(m, shebang);
  const flags = m[1]!;
  const scripts = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts as Record<string, string>;
  assert.equal(scripts.start, `node ${flags} --import tsx src/main.ts serve`);
  assert.equal(scripts.reef, `node ${flags} --import tsx src/main.ts`);
  // Executed as a file (not `node bin/reef.js`): the kernel reads the #! line, env splits it.
  const out = execFileSync(BIN, ['--help'], { encoding: 'utf8', cwd: ROOT });
  assert.match(out, /^Usage: reef <command>/);
  assert.match(out, /serve +Run the platform service/);
});
