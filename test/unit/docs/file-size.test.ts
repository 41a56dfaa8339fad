// "Files stay under ~600 lines" (CONTRIBUTING.md "Code": one module per concern) kept true: every
// source file under src/ has at most 600 lines, and the failure lists each one over, with its count,
// so it is split along a seam of its own before it grows further.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');
const LIMIT = 600;

function walk(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? walk(p) : [p];
  });
}

/** Lines as `wc -l` counts them: a last line without its newline counts too. */
export function lineCount(text: string): number {
  if (text.length === 0) return 0;
  return text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
}

describe('file size', () => {
  it('counts lines as wc -l does', () => {
    assert.equal(lineCount(''), 0);
    assert.equal(lineCount('a\n'), 1);
    assert.equal(lineCount('a\nb'), 2);
    assert.equal(lineCount('a\n\nb\n'), 3);
  });

  it(`every file under src/ has at most ${LIMIT} lines`, () => {
    const files = walk(path.join(ROOT, 'src'));
    assert.ok(
      files.some((f) => f.endsWith(path.join('src', 'server.ts'))),
      'the walk reaches src/',
    );
    const over = files
      .map((f) => ({ file: path.relative(ROOT, f), lines: lineCount(fs.readFileSync(f, 'utf8')) }))
      .filter((x) => x.lines > LIMIT)
      .sort((a, b) => b.lines - a.lines);
    assert.deepEqual(
      over.map((x) => `${x.file}: ${x.lines} lines`),
      [],
      `split these along a seam (CONTRIBUTING.md "Code"): one module per concern, named for what it does`,
    );
  });
});
