// biome-ignore-all lint/suspicious/noTemplateCurlyInString: the DSL's own templates are written ${...} inside plain strings
// Property tests: whatever the input, parsing and compiling never throw and every diagnostic points at
// a real position of the input; printing a parsed tree and parsing it again gives the same tree.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { compileProviderSource, defaultRegistries } from '../../../hooks/dsl/index.ts';
import { parse } from '../../../hooks/dsl/parser.ts';
import { print } from '../../../hooks/dsl/printer.ts';
import type { DslDiagnostic } from '../../../hooks/dsl/types.ts';

const DIR = fileURLToPath(new URL('../../../deploy/config/providers/', import.meta.url));
const SHIPPED = readdirSync(DIR)
  .filter((f) => f.endsWith('.conf'))
  .map((f) => ({ name: f, source: readFileSync(join(DIR, f), 'utf8') }));
const opts = { registries: defaultRegistries(), env: {} };

const TOKENS = [
  'syntax',
  'provider',
  'defaults',
  'match',
  'api',
  'stream',
  'true',
  'false',
  'null',
  'hook',
  'upstream_config',
  'base_url',
  'auth',
  'auth_bearer',
  'auth_header_key',
  'request',
  'set_header',
  'json_set',
  'req_map',
  'upstream',
  'set_path',
  'set_query',
  'response',
  'sse_parse',
  'resp_map',
  'metrics',
  'usage_extract',
  'usage_path',
  'template',
  '"next-router/0.1"',
  '"p"',
  '"chat.completions"',
  '"$.a.b[0]"',
  '"${request.id}"',
  '"\\u00e9"',
  '"unterminated',
  '{',
  '}',
  ';',
  '=',
  '(',
  ')',
  '[',
  ']',
  ',',
  ':',
  '0',
  '-1.5',
  '12ab',
  '#c\n',
  '// c\n',
  '/* c */',
  '/* open',
  '\n',
  ' ',
  '\t',
  '@',
  '\u00e9',
  '😀',
  '\\',
];

function assertPositionsValid(source: string, diagnostics: readonly DslDiagnostic[]): void {
  const lines = source.split('\n');
  for (const d of diagnostics) {
    assert.ok(
      Number.isInteger(d.line) && d.line >= 1 && d.line <= lines.length,
      `line ${d.line} of ${lines.length}`,
    );
    // A column may point one past the last character (a missing ";" at the end of a line).
    assert.ok(
      Number.isInteger(d.col) && d.col >= 1 && d.col <= lines[d.line - 1]!.length + 1,
      `col ${d.col}`,
    );
    assert.equal(typeof d.message, 'string');
    assert.ok(d.message.length > 0);
  }
}

function check(source: string): void {
  const r = compileProviderSource('/x/p.conf', source, opts);
  assertPositionsValid(source, r.diagnostics);
  assert.equal(r.provider === undefined, r.diagnostics.length > 0);
}

test('random token soup never throws and yields valid positions', () => {
  fc.assert(
    fc.property(
      fc.array(fc.constantFrom(...TOKENS), { maxLength: 80 }),
      fc.array(fc.constantFrom(' ', '', '\n')),
      (toks, seps) => {
        check(toks.map((t, k) => t + (seps[k] ?? ' ')).join(''));
      },
    ),
    { numRuns: 2000 },
  );
});

test('arbitrary strings never throw and yield valid positions', () => {
  fc.assert(
    fc.property(fc.string({ unit: 'binary', maxLength: 300 }), (s) => check(s)),
    { numRuns: 2000 },
  );
});

test('mutated shipped files never throw and yield valid positions', () => {
  const mutation = fc.record({
    file: fc.integer({ min: 0, max: SHIPPED.length - 1 }),
    at: fc.nat(),
    del: fc.integer({ min: 0, max: 20 }),
    insert: fc.oneof(fc.constantFrom(...TOKENS), fc.string({ maxLength: 5 })),
  });
  fc.assert(
    fc.property(fc.array(mutation, { minLength: 1, maxLength: 4 }), (muts) => {
      let source = SHIPPED[muts[0]!.file]!.source;
      for (const m of muts) {
        const at = m.at % (source.length + 1);
        source = source.slice(0, at) + m.insert + source.slice(at + m.del);
      }
      check(source);
    }),
    { numRuns: 1500 },
  );
});

test('print(parse(x)) parses back to the same tree (positions aside), and printing is idempotent', () => {
  const strip = (v: unknown): unknown =>
    JSON.parse(JSON.stringify(v, (k, val) => (k === 'loc' || k === 'cols' ? undefined : val)));
  const sources = fc.oneof(
    fc.constantFrom(...SHIPPED.map((s) => s.source)),
    fc.array(fc.constantFrom(...TOKENS), { maxLength: 60 }).map((t) => t.join(' ')),
  );
  fc.assert(
    fc.property(sources, (source) => {
      const first = parse('a', source);
      const printed = print(first.ast);
      const second = parse('a', printed);
      assert.deepEqual(second.diagnostics, []);
      assert.deepEqual(strip(second.ast), strip(first.ast));
      assert.equal(print(second.ast), printed);
    }),
    { numRuns: 1500 },
  );
});

test('every shipped file survives the print round trip and still compiles', () => {
  for (const { name, source } of SHIPPED) {
    const printed = print(parse(name, source).ast);
    const r = compileProviderSource(join(DIR, name), printed, opts);
    assert.deepEqual(r.diagnostics, [], name);
    const original = compileProviderSource(join(DIR, name), source, opts);
    const noLoc = (v: unknown) => JSON.parse(JSON.stringify(v, (k, val) => (k === 'loc' ? undefined : val)));
    assert.deepEqual(noLoc(r.provider), noLoc(original.provider), name);
  }
});
