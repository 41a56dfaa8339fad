// Every protocol rule the code cites resolves inside the repository: each "seed §…", "wire §…" and
// "RFC NNNN §…" in src/, test/, web/src/, bench/ and docs/ has its section in docs/protocol.md,
// which states the rule in the project's own words (the same move as the errors-doc test).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');
const DOC = 'docs/protocol.md';

/** The citations in a text: "seed §1, §5; wire §3" gives seed §1, seed §5, wire §3. */
export function citations(text: string): string[] {
  const out: string[] = [];
  // "seed" and "wire" count only with a section ("a random seed" is no citation); an RFC counts alone too.
  const LIST = String.raw`(?:(?:,|;|\band\b|\s)*§ ?\d+(?:\.\d+)*)`;
  for (const m of text.matchAll(new RegExp(String.raw`\b(?:(seed|wire)(${LIST}+)|RFC ?(\d{4})(${LIST}*))`, 'g'))) {
    const doc = m[3] ? `RFC ${m[3]}` : m[1]!;
    const sections = [...(m[2] ?? m[4] ?? '').matchAll(/§ ?(\d+(?:\.\d+)*)/g)].map((s) => s[1]!);
    if (!sections.length) out.push(doc);
    for (const s of sections) out.push(`${doc} §${s}`);
  }
  return out;
}

function walk(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'dist' ? [] : walk(p);
    return /\.(ts|mjs|md)$/.test(e.name) ? [p] : [];
  });
}

/** The headings of docs/protocol.md that name a citation ("### RFC 7252 §5.9 Response codes"). */
function sections(md: string): Set<string> {
  const out = new Set<string>();
  for (const m of md.matchAll(/^#{2,4} ((?:seed|wire|RFC \d{4})(?: §\d+(?:\.\d+)*)?)\b/gm)) out.add(m[1]!);
  return out;
}

/** A cited subsection resolves to its own section or to the nearest enclosing one. */
function resolves(have: Set<string>, c: string): boolean {
  for (let k = c; ; k = k.replace(/(\.\d+|\s§\d+)$/, '')) {
    if (have.has(k)) return true;
    if (!/(\.\d+|\s§\d+)$/.test(k)) return false;
  }
}

test('the citation parser reads lists and bare documents', () => {
  assert.deepEqual(citations('(seed §1, §5, §6; wire §3) and RFC 7252 §5.9.3.4, RFC 7641, RFC7959 §2.1; a random seed'), [
    'seed §1',
    'seed §5',
    'seed §6',
    'wire §3',
    'RFC 7252 §5.9.3.4',
    'RFC 7641',
    'RFC 7959 §2.1',
  ]);
});

test('every seed, wire and RFC citation has its section in docs/protocol.md', () => {
  const have = sections(fs.readFileSync(path.join(ROOT, DOC), 'utf8'));
  const missing = new Map<string, string>();
  const files = ['src', 'test', 'web/src', 'bench', 'scripts', 'docs'].flatMap((d) => walk(path.join(ROOT, d))).concat(['README.md', 'CONTRIBUTING.md'].map((f) => path.join(ROOT, f)));
  let count = 0;
  for (const f of files) {
    const rel = path.relative(ROOT, f);
    if (rel === DOC || rel === 'test/unit/docs/protocol-doc.test.ts') continue;
    for (const c of citations(fs.readFileSync(f, 'utf8'))) {
      count++;
      if (!resolves(have, c) && !missing.has(c)) missing.set(c, rel);
    }
  }
  assert.ok(count > 100, `citations were found (${count})`);
  assert.deepEqual(
    [...missing].map(([c, f]) => `${c} (first in ${f})`),
    [],
  );
});
