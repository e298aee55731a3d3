// The folder layering of docs/architecture.md "Layers" holds: `npm run lint:imports` passes on this tree,
// actually sees its imports, and fails, naming the rule and both files, when a file imports upward, and
// naming the folders when two folders import each other in a circle.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { after, test } from 'node:test';

const ROOT = join(import.meta.dirname, '..', '..');
const CRUISER_DIR = join(ROOT, 'node_modules', 'dependency-cruiser');
const CRUISER = join(
  CRUISER_DIR,
  JSON.parse(readFileSync(join(CRUISER_DIR, 'package.json'), 'utf8')).bin.depcruise as string,
);

/** The arguments of the `lint:imports` script, so the test runs exactly what `npm test` runs. */
function lintImportsArgs(): string[] {
  const scripts = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts;
  const [bin, ...args] = (scripts['lint:imports'] as string).trim().split(/\s+/);
  assert.equal(bin, 'depcruise');
  return args;
}

/** The folders the script cruises: the arguments that are neither an option nor an option's value. */
function cruisedFolders(args: string[]): string[] {
  return args.filter((arg, i) => !arg.startsWith('-') && !args[i - 1]?.startsWith('-'));
}

/** Runs the script's command in `cwd` with the project's config; `outputType` replaces the script's. */
function cruise(cwd: string, outputType?: string): { code: number | null; output: string } {
  const args = lintImportsArgs().map((arg, i, all) => {
    if (all[i - 1] === '--config') return join(ROOT, arg);
    if (all[i - 1] === '--output-type' && outputType !== undefined) return outputType;
    return arg;
  });
  const run = spawnSync(process.execPath, [CRUISER, ...args], { cwd, encoding: 'utf8', maxBuffer: 1 << 26 });
  if (run.error) throw run.error;
  return { code: run.status, output: `${run.stdout}${run.stderr}` };
}

interface CruiseResult {
  modules: { source: string; dependencies: { module: string; resolved: string }[] }[];
}

const RELATIVE_IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)'(\.{1,2}\/[^']+)'(\)\.)?/g;

/** The .ts and .js files under the cruised folders, relative to the root. */
function productFiles(folders: string[]): string[] {
  const files: string[] = [];
  for (const folder of folders) {
    for (const entry of readdirSync(join(ROOT, folder), { recursive: true, withFileTypes: true })) {
      const rel = relative(ROOT, join(entry.parentPath, entry.name));
      if (entry.isFile() && /\.(ts|js)$/.test(rel) && !rel.split('/').includes('node_modules'))
        files.push(rel);
    }
  }
  return files.sort();
}

const temps: string[] = [];
after(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

/** A temporary tree with the project's folders (all of them, as the script names them) and `files`. */
function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'import-boundaries-'));
  temps.push(dir);
  for (const folder of cruisedFolders(lintImportsArgs())) mkdirSync(join(dir, folder), { recursive: true });
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

const LEAF = 'export const leaf = 1;\n';
const importing = (specifier: string) => `import { leaf } from '${specifier}';\nexport const value = leaf;\n`;

// Downward imports, each allowed by the layering (test/ may import anything).
const LEGAL: Record<string, string> = {
  'common/c.ts': LEAF,
  'config/k.ts': importing('../common/c.ts'),
  'store/z.ts': importing('../config/k.ts'),
  'hooks/y.ts': `import type { leaf } from '../store/z.ts';\nexport const y: typeof leaf = 1;\n`,
  'proxy/b.ts': importing('../common/c.ts'),
  'billing/leaf.ts': importing('../store/z.ts'),
  'sidecar/leaf.ts': importing('../billing/leaf.ts'),
  'admin/leaf.ts': importing('../proxy/b.ts'),
  'admin/side.ts': importing('../sidecar/leaf.ts'),
  'sim/leaf.ts': importing('../hooks/y.ts'),
  'scripts/leaf.ts': importing('../sim/leaf.ts'),
  'bench/leaf.ts': importing('../billing/leaf.ts'),
  'bin/leaf.js': importing('../admin/leaf.ts'),
  'test/leaf.ts': importing('../bin/leaf.js'),
};
const LEGAL_EDGES = [
  'store/z.ts → config/k.ts',
  'sidecar/leaf.ts → billing/leaf.ts',
  'hooks/y.ts → store/z.ts',
  'scripts/leaf.ts → sim/leaf.ts',
  'bin/leaf.js → admin/leaf.ts',
];

// One upward (or otherwise forbidden) import per rule: [rule, from, to, the from file's text].
const FORBIDDEN: [string, string, string, string][] = [
  ['common-is-the-ground-floor', 'common/a.ts', 'proxy/b.ts', importing('../proxy/b.ts')],
  ['store-never-imports-hooks', 'store/x.ts', 'hooks/y.ts', importing('../hooks/y.ts')],
  ['config-stays-below-store-and-hooks', 'config/s.ts', 'store/z.ts', importing('../store/z.ts')],
  ['store-and-hooks-stay-below-billing', 'hooks/h.ts', 'billing/leaf.ts', importing('../billing/leaf.ts')],
  ['billing-stays-below-the-programs', 'billing/s.ts', 'proxy/b.ts', `await import('../proxy/b.ts');\n`],
  ['gateway-never-imports-sidecar', 'proxy/g.ts', 'sidecar/leaf.ts', importing('../sidecar/leaf.ts')],
  ['sidecar-never-imports-gateway', 'sidecar/g.ts', 'proxy/b.ts', importing('../proxy/b.ts')],
  ['programs-stay-below-admin', 'proxy/s.ts', 'admin/leaf.ts', importing('../admin/leaf.ts')],
  ['admin-stays-below-entry-points', 'admin/s.ts', 'bench/leaf.ts', importing('../bench/leaf.ts')],
  ['entry-points-import-only-sim', 'sim/s.ts', 'scripts/leaf.ts', importing('../scripts/leaf.ts')],
  ['product-never-imports-test', 'proxy/t.ts', 'test/leaf.ts', importing('../test/leaf.ts')],
  ['folder-not-in-a-layer', 'proxy/u.ts', 'tools/leaf.ts', importing('../tools/leaf.ts')],
  ['no-circular', 'examples/p.ts', 'examples/q.ts', importing('./q.ts')],
  ['not-to-unresolvable', 'admin/v.ts', './missing.ts', importing('./missing.ts')],
];
const FORBIDDEN_FILES: Record<string, string> = {
  ...Object.fromEntries(FORBIDDEN.map(([, from, , text]) => [from, text])),
  'tools/leaf.ts': LEAF,
  'examples/q.ts': importing('./p.ts'),
};

// Two folders that import each other through different files: no module circle, a folder one.
const FOLDER_LOOP: Record<string, string> = {
  'hooks/m/a.ts': importing('../n/b.ts'),
  'hooks/n/b.ts': LEAF,
  'hooks/n/c.ts': importing('../m/d.ts'),
  'hooks/m/d.ts': LEAF,
};

test('lint:imports passes on the real tree', () => {
  const { code, output } = cruise(ROOT);
  assert.equal(code, 0, output);
});

test('lint:imports reads every product file and sees each relative import, dynamic and type-only too', () => {
  const { output } = cruise(ROOT, 'json');
  const modules = (JSON.parse(output) as CruiseResult).modules;
  const edges = new Set(modules.flatMap((m) => m.dependencies.map((d) => `${m.source} → ${d.resolved}`)));
  assert.ok(edges.has('proxy/server.ts → common/errors.ts'), 'a value import');
  assert.ok(edges.has('common/config-diagnostics.ts → common/config-types.ts'), 'an `import type`');
  assert.ok(edges.has('bin/sidecar-main.ts → common/internal-notify.ts'), 'a dynamic import()');
  assert.ok(edges.has('bin/router.js → proxy/cli.ts'), 'a .js entry point importing .ts');

  // A parser that cannot read TypeScript skips .ts files or drops imports without an error, and the rules
  // then pass; so every file is cruised and every relative specifier in its text is one of its edges.
  const folders = cruisedFolders(lintImportsArgs());
  const bySource = new Map(modules.map((m) => [m.source, new Set(m.dependencies.map((d) => d.module))]));
  const unseen: string[] = [];
  let specifiers = 0;
  for (const file of productFiles(folders)) {
    const seen = bySource.get(file);
    if (seen === undefined) {
      unseen.push(`${file} (not cruised)`);
      continue;
    }
    for (const m of readFileSync(join(ROOT, file), 'utf8').matchAll(RELATIVE_IMPORT)) {
      // `import('./x.ts').T` in a type position is not an import the checker reports.
      if (m[2] !== undefined) continue;
      specifiers++;
      if (!seen.has(m[1]!)) unseen.push(`${file} → ${m[1]}`);
    }
  }
  assert.deepEqual(unseen, []);
  assert.ok(specifiers > 300, `only ${specifiers} relative imports found`);
});

test('an upward import fails lint:imports, naming the rule and both files', () => {
  const dir = tree({ ...LEGAL, ...FORBIDDEN_FILES, ...FOLDER_LOOP });
  const { code, output } = cruise(dir);
  assert.notEqual(code, 0, output);
  // err-long wraps long lines: compare with whitespace collapsed.
  const flat = output.replace(/\s+/g, ' ');
  assert.ok(flat.includes('error common-is-the-ground-floor: common/a.ts → proxy/b.ts'), output);
  assert.ok(flat.includes('move the shared piece into common/ instead of importing upward'), 'the fix');
  assert.ok(flat.includes('error store-never-imports-hooks: store/x.ts → hooks/y.ts'), output);
  for (const [rule, from, to] of FORBIDDEN) {
    assert.ok(
      flat.includes(`error ${rule}: ${from} → ${to}`),
      `${rule} did not fire for ${from}:\n${output}`,
    );
  }
  assert.ok(flat.includes('error no-folder-circular: hooks/m → hooks/n → hooks/m'), output);
  assert.ok(flat.includes('error no-folder-circular: hooks/n → hooks/m → hooks/n'), output);
  // An upward import also closes a circle of folders with the downward ones, reported as such.
  assert.ok(flat.includes('error no-folder-circular: common → proxy → common'), output);
  const folderCircles = flat.match(/error no-folder-circular: /g)?.length ?? 0;
  assert.match(
    flat,
    new RegExp(`x ${FORBIDDEN.length + 1 + folderCircles} dependency violations`),
    'q.ts → p.ts closes the circle too, and nothing else is reported',
  );
  // The legal imports in the same tree are not reported.
  for (const edge of LEGAL_EDGES) assert.ok(!output.includes(edge), `${edge} reported:\n${output}`);
});

test('two folders importing each other fail lint:imports, though no module imports itself', () => {
  const dir = tree({ ...LEGAL, ...FOLDER_LOOP });
  const { code, output } = cruise(dir);
  assert.notEqual(code, 0, output);
  const flat = output.replace(/\s+/g, ' ');
  assert.ok(flat.includes('error no-folder-circular: hooks/m → hooks/n → hooks/m'), output);
  assert.ok(flat.includes('move what they share into a folder below both, or into one of them'), 'the fix');
  assert.ok(!flat.includes('error no-circular'), output);
  // Once from each folder of the circle.
  assert.match(flat, / x 2 dependency violations/, output);
});

test('downward imports pass lint:imports, and the checker sees them', () => {
  const dir = tree(LEGAL);
  const checked = cruise(dir);
  assert.equal(checked.code, 0, checked.output);
  const { output } = cruise(dir, 'text');
  for (const edge of LEGAL_EDGES) assert.ok(output.includes(edge), `${edge} not seen:\n${output}`);
});
