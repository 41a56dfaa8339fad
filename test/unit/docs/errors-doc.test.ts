// docs/errors.md and the catalogue in src/core/errors.ts must list the same codes with the same
// HTTP status and CoAP code: the documentation is what clients program against.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { it } from 'node:test';
import { ERRORS, type ErrorSpec } from '../../../src/core/errors.ts';

it('docs/errors.md documents every error code with its statuses, and nothing else', () => {
  const md = fs.readFileSync(new URL('../../../docs/errors.md', import.meta.url), 'utf8');
  const rows = [...md.matchAll(/^\| `([A-Z_]+)` \| (\d{3}) \| ([\d.]+|—) \|/gm)].map((m) => ({ code: m[1]!, status: Number(m[2]), coap: m[3] === '—' ? undefined : m[3] }));
  const documented = new Map(rows.map((r) => [r.code, r]));
  assert.equal(documented.size, rows.length, 'a code is documented twice');
  for (const [code, spec] of Object.entries(ERRORS) as [string, ErrorSpec][]) {
    const row = documented.get(code);
    assert.ok(row, `${code} is missing from docs/errors.md`);
    assert.equal(row.status, spec.status, `${code}: HTTP status differs`);
    assert.equal(row.coap, spec.coap, `${code}: CoAP code differs`);
  }
  for (const code of documented.keys()) assert.ok(code in ERRORS, `${code} is documented but not in the catalogue`);
});
