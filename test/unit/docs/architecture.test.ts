// The layering rule a newcomer reads first ("dependencies point inward", docs/architecture.md) kept
// true: every import under src/ and web/src/ (static, dynamic and type-only alike, read from
// TypeScript's own syntax tree) is checked against the table in docs/architecture.md — the same
// move as the errors-doc and README-config tests.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import ts from 'typescript';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');

interface Rule {
  part: string;
  allowed: Set<string>;
  packages: 'none' | 'builtins' | 'any';
}

/** The table of docs/architecture.md "Dependencies point inward". */
export function parseTable(md: string): Map<string, Rule> {
  const section = md.slice(md.indexOf('## Dependencies point inward'));
  const rows = [...section.matchAll(/^\| `([^`]+)` \| ([^|]+) \| ([^|]+) \|$/gm)];
  const parts = rows.map((r) => r[1]!);
  const rules = new Map<string, Rule>();
  for (const [, part, may, pk] of rows) {
    const named = [...may!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
    // "every part but X and Y": all rows less the exceptions.
    const allowed = may!.startsWith('every part but') ? parts.filter((p) => p !== part && !named.includes(p)) : named;
    const packages = pk!.startsWith('none') ? 'none' : pk!.startsWith('node built-ins') ? 'builtins' : 'any';
    rules.set(part!, { part: part!, allowed: new Set(allowed), packages });
  }
  return rules;
}

/** The part a file (relative to the repository, with /) belongs to: the longest row that contains it. */
function partOf(rules: Map<string, Rule>, rel: string): string | null {
  let best: string | null = null;
  for (const p of rules.keys()) {
    if ((rel === p || rel.startsWith(p + '/')) && (!best || p.length > best.length)) best = p;
  }
  return best;
}

export interface SourceFile {
  /** Relative to the repository, with /. */
  file: string;
  imports: string[];
}

/** Every edge the table forbids, as readable lines (empty when the tree keeps the rule). */
export function violations(rules: Map<string, Rule>, files: SourceFile[]): string[] {
  const out: string[] = [];
  for (const { file, imports } of files) {
    const from = partOf(rules, file);
    if (!from) {
      out.push(`${file}: in no part of the table`);
      continue;
    }
    const rule = rules.get(from)!;
    for (const spec of imports) {
      if (spec.startsWith('.')) {
        const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), spec));
        const to = partOf(rules, target);
        if (!to) out.push(`${file} → ${spec}: outside every part`);
        else if (to !== from && !rule.allowed.has(to)) out.push(`${file} → ${target}: ${from} may not import ${to}`);
      } else if (rule.packages === 'none' || (rule.packages === 'builtins' && !spec.startsWith('node:'))) {
        out.push(`${file} → '${spec}': ${from} may use ${rule.packages === 'none' ? 'no package' : 'only node built-ins'}`);
      }
    }
  }
  return out;
}

function walk(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'dist' ? [] : walk(p);
    return /\.(ts|tsx|mts)$/.test(e.name) && !e.name.endsWith('.d.ts') ? [p] : [];
  });
}

/**
 * The module specifiers a file names, and which of them load at run time when the file loads:
 * static imports and re-exports that are not type-only (a dynamic import() loads later, on demand;
 * a type-only import is erased).
 */
function importsOf(file: string, text: string): { static: string[]; all: string[] } {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const all: string[] = [];
  const stat: string[] = [];
  const visit = (n: ts.Node): void => {
    if ((ts.isImportDeclaration(n) || ts.isExportDeclaration(n)) && n.moduleSpecifier && ts.isStringLiteral(n.moduleSpecifier)) {
      const spec = n.moduleSpecifier.text;
      all.push(spec);
      let typeOnly = false;
      if (ts.isImportDeclaration(n)) {
        const c = n.importClause;
        const named = c?.namedBindings && ts.isNamedImports(c.namedBindings) ? c.namedBindings.elements : null;
        typeOnly = !!c && (c.isTypeOnly || (!c.name && !!named && named.length > 0 && named.every((e) => e.isTypeOnly)));
      } else {
        typeOnly = n.isTypeOnly;
      }
      if (!typeOnly) stat.push(spec);
    } else if (ts.isCallExpression(n) && n.expression.kind === ts.SyntaxKind.ImportKeyword && n.arguments[0] && ts.isStringLiteralLike(n.arguments[0])) {
      all.push(n.arguments[0].text);
    } else if (ts.isImportTypeNode(n) && ts.isLiteralTypeNode(n.argument) && ts.isStringLiteral(n.argument.literal)) {
      all.push(n.argument.literal.text);
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return { static: stat, all };
}

function readTree(): (SourceFile & { staticImports: string[] })[] {
  return ['src', 'web/src'].flatMap((d) =>
    walk(path.join(ROOT, d)).map((abs) => {
      const { static: s, all } = importsOf(abs, fs.readFileSync(abs, 'utf8'));
      return { file: path.relative(ROOT, abs).split(path.sep).join('/'), imports: all, staticImports: s };
    }),
  );
}

const rules = parseTable(fs.readFileSync(path.join(ROOT, 'docs/architecture.md'), 'utf8'));

describe('architecture: dependencies point inward (docs/architecture.md)', () => {
  it('the table names the parts and its rules read as intended', () => {
    for (const p of ['src/core', 'src/sdk', 'src/device', 'src/http', 'src/gateway', 'src/sim', 'src/app', 'src/server.ts', 'src/cli', 'web/src']) assert.ok(rules.has(p), `${p} has a row`);
    assert.equal(rules.get('src/core')!.allowed.size, 0);
    assert.equal(rules.get('src/sdk')!.packages, 'none');
    assert.ok(!rules.get('src/server.ts')!.allowed.has('src/cli'));
    assert.ok(rules.get('src/cli')!.allowed.has('src/server.ts'));
  });

  it('the checker catches a forbidden edge, a stray file and a package where none may be', () => {
    const bad = violations(rules, [
      { file: 'src/http/routes/x.ts', imports: ['../../gateway/gateway.ts'] },
      { file: 'src/gateway/component.ts', imports: ['../server.ts'] },
      { file: 'src/device/kit.ts', imports: ['../service/devices.ts', 'pg'] },
      { file: 'src/sdk/client.ts', imports: ['node:http'] },
      { file: 'src/nowhere/x.ts', imports: [] },
      { file: 'web/src/main.ts', imports: ['../../src/core/types.ts'] },
    ]);
    assert.equal(bad.length, 7, bad.join('\n'));
    assert.deepEqual(violations(rules, [{ file: 'src/gateway/routes.ts', imports: ['../service/devices.ts', './gateway.ts', 'fastify'] }]), []);
  });

  const tree = readTree();

  it('every import under src/ and web/src/ is an edge the table allows', () => {
    assert.ok(tree.length > 50, 'the tree was read');
    assert.deepEqual(violations(rules, tree), []);
  });

  it('nothing reachable by static imports from main.ts or server.ts loads the PostgreSQL driver', () => {
    const byFile = new Map(tree.map((f) => [f.file, f]));
    const seen = new Set<string>();
    const todo = ['src/main.ts', 'src/server.ts'];
    const loadsPg: string[] = [];
    while (todo.length) {
      const file = todo.pop()!;
      if (seen.has(file)) continue;
      seen.add(file);
      const f = byFile.get(file);
      assert.ok(f, `${file} exists`);
      for (const spec of f.staticImports) {
        if (spec === 'pg' || spec.startsWith('pg-')) loadsPg.push(file);
        else if (spec.startsWith('.')) todo.push(path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)));
      }
    }
    assert.ok(seen.has('src/app/backend.ts'), 'the walk reaches the backend chooser');
    assert.deepEqual(loadsPg, []);
  });
});
