// The project's files describe the project as it is, not how it was made: no diary references
// (a numbered session, sitting or pass; "tried and reverted"), no citations of issues that are not
// in the repository, and no links to the benchmark diary docs/performance.md replaced. Figures
// live in docs/performance.md's table, rules next to the code they govern. This test reads every
// text file under src/, test/, bench/, docs/, web/, native/, bin/ and scripts/, and CONTRIBUTING.md
// and README.md, and reports file:line of each hit. Its own file is skipped: it has to spell the
// patterns out.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';

const self = fileURLToPath(import.meta.url);
let root = path.dirname(self);
while (!fs.existsSync(path.join(root, 'package.json'))) root = path.dirname(root);

const LOW = ['first', 'second', 'third'];
const UNITS = ['fourth', 'fifth', 'sixth', 'seventh', 'eighth', 'ninth'];
const TEENS = ['tenth', 'eleventh', 'twelfth', 'thirteenth', 'fourteenth', 'fifteenth', 'sixteenth', 'seventeenth', 'eighteenth', 'nineteenth'];
const TENS = ['twentieth', 'thirtieth', ...['twenty', 'thirty'].flatMap((t) => [...LOW, ...UNITS].map((u) => `${t}[- ]${u}`))];
/** Ordinals from the fourth on: rare in prose except to number when something happened. */
const HIGH = [...UNITS, ...TEENS, ...TENS].join('|');
const ANY = `${LOW.join('|')}|${HIGH}|\\d+(?:st|nd|rd|th)`;

/** Each pattern with what it stands for, as the failure message says it. */
const RULES: [RegExp, string][] = [
  [new RegExp(`\\b(?:${ANY})\\b(?:[ -][a-z]+)?\\s+(?:sessions?|sittings?|pass(?:es)?|landings?)\\b`, 'i'), 'a numbered session, sitting or pass'],
  [new RegExp(`\\b(?:${HIGH}|\\d+(?:st|nd|rd|th))\\s+(?:runs?|rounds?)\\b`, 'i'), 'a numbered run or round'],
  [new RegExp(`\\b(?:${[...TEENS.slice(1), ...TENS].join('|')})\\b`, 'i'), 'an ordinal naming when something was written or measured'],
  [new RegExp(`(?:^|[(;]\\s*)(?:the )?(?:${HIGH})\\b\\s*[(:,]`, 'i'), 'a dated entry ("fifteenth (machine): …")'],
  [/\bsittings?\b/i, 'a sitting'],
  [/\byour own section\b/i, '"your own section"'],
  [/\btried(?:,| and) (?:not kept|reverted)\b|\breverted in [0-9a-f]{7}/i, 'an account of what was tried'],
  [/\b(?:I|we) tried\b/, 'an account of what was tried'],
  [/\bissues? \d+(?:\.\d+)?/i, 'a citation of an issue not in the repository'],
  [/\bbenchmarks\.md\b/, 'a link to the removed benchmark diary (docs/performance.md replaces it)'],
];

const TEXT = /\.(?:ts|mts|mjs|cjs|js|json|md|c|h|html|css|sql|txt|yml|yaml)$/;

function walk(dir: string, out: string[]): string[] {
  if (!fs.existsSync(dir)) return out;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (e.name === 'node_modules' || e.name === 'dist' || e.name === 'build' || e.name.startsWith('.')) continue;
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (TEXT.test(e.name) && p !== self) out.push(p);
  }
  return out;
}

it('no file speaks of how the project was made, nor cites issues not in the repository', () => {
  const files = [...['src', 'test', 'bench', 'docs', 'web', 'native', 'bin', 'scripts'].flatMap((d) => walk(path.join(root, d), [])), path.join(root, 'CONTRIBUTING.md'), path.join(root, 'README.md')];
  const hits: string[] = [];
  for (const file of files) {
    if (!fs.existsSync(file)) continue;
    const lines = fs.readFileSync(file, 'utf8').split('\n');
    lines.forEach((line, i) => {
      for (const [re, what] of RULES) {
        const m = re.exec(line);
        if (m) hits.push(`${path.relative(root, file)}:${i + 1}: ${what}: "${m[0].trim()}"`);
      }
    });
  }
  assert.deepEqual(hits, [], `diary references found:\n${hits.join('\n')}`);
});
