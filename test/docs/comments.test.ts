// Comments point to the repository's own documents: none cites the interface specification or its
// conventions (they are not in the repository), every `*.md` a comment names exists, and a section a
// comment quotes after a docs/ file (`docs/billing.md "Webhooks"`) is a heading of that file. A source
// path a comment names (`proxy/server.ts`, or `outbox/status.ts` under its folder) exists, and a function
// it names with the file (`proxy/request-completion.ts finish()`, `(endReply(), proxy/...)`) is defined there.

import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import { type Comment, commentsOf } from '../support/source-comments.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const FOLDERS = [
  'common',
  'config',
  'proxy',
  'sidecar',
  'hooks',
  'billing',
  'store',
  'admin',
  'sim',
  'bench',
  'scripts',
  'examples',
  'bin',
  'deploy',
  'test',
];
const SOURCE = /\.(ts|mts|cts|js|mjs|cjs|ya?ml|conf|sh|service)$|(^|\/)(Containerfile|Dockerfile)$/;
const SKIP = new Set(['node_modules', 'results']);

const OUTSIDE = [/\bspec \d/i, /\bspec\s*§/i, /conventions\.md/i, /gateway-spec/i, /benchmark issue/i];

function sourceFiles(): string[] {
  const files: string[] = [];
  for (const folder of FOLDERS) {
    const dir = join(ROOT, folder);
    if (!existsSync(dir)) continue;
    for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
      const path = join(entry.parentPath, entry.name);
      const rel = relative(ROOT, path);
      if (!entry.isFile() || rel.split('/').some((part) => SKIP.has(part))) continue;
      if (SOURCE.test(rel)) files.push(rel);
    }
  }
  return files.sort();
}

const FILES = sourceFiles();

/** The repository file a comment's path names: itself, or the one file whose path ends with it. */
function resolveSource(path: string): string | undefined {
  if (existsSync(join(ROOT, path))) return path;
  const matches = FILES.filter((f) => f.endsWith(`/${path}`));
  return matches.length === 1 ? matches[0] : undefined;
}

/** Whether `file` defines `name`: a function, class, variable, or a method or property of one. */
function defines(file: string, name: string): boolean {
  const modifiers =
    '(?:(?:export|default|public|private|protected|static|async|override|readonly|abstract|get|set)\\s+)*';
  const declaration = new RegExp(`\\b(?:function\\*?|class|const|let|var|type|interface|enum)\\s+${name}\\b`);
  const member = new RegExp(`^[ \\t]*${modifiers}#?${name}\\s*[?!]?\\s*(?:<[^>\\n]*>)?\\s*[(:=]`, 'm');
  const source = readFileSync(join(ROOT, file), 'utf8');
  return declaration.test(source) || member.test(source);
}

const SOURCE_PATH = /(?<![\w/.-])((?:[\w-]+\/)+[\w.-]+\.(?:ts|js|mjs|cjs))\b/g;
/** `file.ts name()`, and `(name(), file.ts)`. */
const FILE_THEN_NAME = /(?<![\w/.-])((?:[\w-]+\/)*[\w.-]+\.(?:ts|js)) (#?[\w.]+)\(\)/g;
const NAME_THEN_FILE = /\((#?[\w.]+)\(\), ((?:[\w-]+\/)*[\w.-]+\.(?:ts|js))\)/g;

function sourceProblems(text: string): string[] {
  const problems: string[] = [];
  for (const m of text.matchAll(SOURCE_PATH)) {
    if (resolveSource(m[1]!) === undefined) problems.push(`names ${m[1]}, which is not in the repository`);
  }
  const cited = [
    ...[...text.matchAll(FILE_THEN_NAME)].map((m) => [m[1]!, m[2]!] as const),
    ...[...text.matchAll(NAME_THEN_FILE)].map((m) => [m[2]!, m[1]!] as const),
  ];
  for (const [path, qualified] of cited) {
    const file = resolveSource(path);
    const name = qualified.split('.').at(-1)!.replace(/^#/, '');
    if (file !== undefined && !defines(file, name))
      problems.push(`names ${name}() in ${path}, which does not define it`);
  }
  return problems;
}

function headingsOf(doc: string): Set<string> {
  const headings = new Set<string>();
  for (const line of readFileSync(join(ROOT, doc), 'utf8').split('\n')) {
    const m = /^#{1,6}\s+(.*?)\s*$/.exec(line);
    if (m === null) continue;
    const heading = m[1]!;
    headings.add(heading);
    // A quote may leave out a trailing parenthesis: "Kubernetes" for "Kubernetes (`deploy/k8s/`)".
    headings.add(heading.replace(/ \(.*\)$/, ''));
  }
  return headings;
}

/** What is wrong with one comment's references, if anything. */
function problemsOf(comment: Comment): string[] {
  const problems: string[] = [];
  for (const pattern of OUTSIDE) {
    if (pattern.test(comment.text)) problems.push(`cites a document outside the repository (${pattern})`);
  }
  for (const word of comment.text.split(/\s+/)) {
    if (word.includes('://')) continue;
    const m = /([\w./-]+\.md)\b/.exec(word);
    if (m === null) continue;
    const name = m[1]!.replace(/^\.\//, '');
    if (!existsSync(join(ROOT, name)) && !existsSync(join(ROOT, 'docs', name))) {
      problems.push(`names ${name}, which is not in the repository`);
    }
  }
  problems.push(...sourceProblems(comment.text));
  for (const m of comment.text.matchAll(/\b(docs\/[\w-]+\.md) "([^"]+)"/g)) {
    const doc = m[1]!;
    const section = m[2]!;
    if (existsSync(join(ROOT, doc)) && !headingsOf(doc).has(section)) {
      problems.push(`quotes section "${section}", which is not a heading of ${doc}`);
    }
  }
  return problems;
}

test('the scanner finds comments and skips string, template and regex literals', () => {
  const found = commentsOf(
    'x.ts',
    [
      "const a = 'spec 2.3 // not a comment';",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text of a template literal
      'const b = `${a} // not one either ${`${a}`}`; // one',
      'const c = /\\/\\/ no/.test(a) ? 1 / 2 : 3; /* two',
      '   lines */ const d = 4;',
    ].join('\n'),
  );
  assert.deepEqual(found, [
    { line: 2, text: ' one' },
    { line: 3, text: ' two' },
    { line: 4, text: '   lines ' },
  ]);
  assert.deepEqual(commentsOf('a.yaml', 'key: "#x" # spec 2.5\n# whole line'), [
    { line: 1, text: ' spec 2.5' },
    { line: 2, text: ' whole line' },
  ]);
});

test('the checks catch what they are for', () => {
  assert.equal(problemsOf({ line: 1, text: ' the usage event (spec 2.3)' }).length, 1);
  assert.equal(problemsOf({ line: 1, text: ' see conventions.md "Billing webhooks"' }).length, 2);
  assert.equal(problemsOf({ line: 1, text: ' see docs/billing.md "No such section"' }).length, 1);
  assert.equal(problemsOf({ line: 1, text: ' see ARCHITECTURE.md' }).length, 1);
  assert.deepEqual(problemsOf({ line: 1, text: ' see docs/billing.md "Webhooks" and README.md' }), []);
  assert.equal(problemsOf({ line: 1, text: ' see proxy/no-such-file.ts' }).length, 1);
  assert.equal(problemsOf({ line: 1, text: ' runs first (proxy/server.ts finish())' }).length, 1);
  assert.equal(problemsOf({ line: 1, text: ' waits (recorded(), proxy/server.ts)' }).length, 1);
  assert.deepEqual(
    problemsOf({
      line: 1,
      text: ' (proxy/request-completion.ts finish()) and (RequestCompletion.endReply(), proxy/request-completion.ts)',
    }),
    [],
  );
  assert.deepEqual(
    problemsOf({ line: 1, text: ' (recorded(), proxy/runtime.ts) after outbox/status.ts' }),
    [],
  );
});

test('no source or test comment cites a document that is not in the repository', () => {
  const files = FILES;
  assert.ok(files.includes('proxy/server.ts') && files.includes('deploy/config/pricing.yaml'));
  const problems: string[] = [];
  for (const file of files) {
    const source = readFileSync(join(ROOT, file), 'utf8');
    for (const comment of commentsOf(file, source)) {
      for (const problem of problemsOf(comment)) problems.push(`${file}:${comment.line}: ${problem}`);
    }
  }
  assert.deepEqual(problems, []);
});
