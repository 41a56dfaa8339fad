// The README's configuration table must list every setting the service reads, with its default.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { it } from 'node:test';
import { SETTINGS } from '../../../src/config/config.ts';

it('README documents every REEF_* setting with its flag and default', () => {
  const readme = fs.readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
  for (const s of SETTINGS) {
    const row = readme.split('\n').find((l) => l.startsWith(`| \`${s.env}\` |`));
    assert.ok(row, `${s.env} is missing from the README`);
    assert.ok(row.includes(`\`--${s.flag}\``), `${s.env}: flag --${s.flag} not in its row`);
    assert.ok(row.includes(s.def ? `\`${s.def}\`` : 'unset'), `${s.env}: default ${s.def || 'unset'} not in its row`);
  }
});
