// biome-ignore-all lint/suspicious/noTemplateCurlyInString: the DSL's own templates are written ${...} inside plain strings
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type ArgNode, type DirectiveNode, parse } from '../../../hooks/dsl/parser.ts';
import { print } from '../../../hooks/dsl/printer.ts';

function diags(src: string): string[] {
  return parse('f.conf', src).diagnostics.map((d) => `${d.line}:${d.col}: ${d.message}`);
}

test('directives, arguments and blocks with the position of every node', () => {
  const { ast, diagnostics } = parse(
    'f.conf',
    'syntax "next-router/0.1";\nprovider "p" {\n  match api = "embeddings" stream = false { x 1 -2 true; }\n}\n',
  );
  assert.deepEqual(diagnostics, []);
  const [syntax, provider] = ast.directives;
  assert.equal(syntax!.name, 'syntax');
  assert.deepEqual(syntax!.loc, { line: 1, col: 1 });
  assert.deepEqual(syntax!.args[0], {
    kind: 'string',
    value: 'next-router/0.1',
    loc: { line: 1, col: 8 },
    cols: [...Array(15).keys()].map((k) => k + 9),
  });
  assert.equal(syntax!.block, undefined);
  assert.deepEqual(provider!.block?.loc, { line: 2, col: 14 });
  const match = provider!.block?.directives[0] as DirectiveNode;
  assert.deepEqual(match.loc, { line: 3, col: 3 });
  assert.deepEqual(
    match.args.map((a) => [a.kind, a.loc.col]),
    [
      ['word', 9],
      ['equals', 13],
      ['string', 15],
      ['word', 28],
      ['equals', 35],
      ['word', 37],
    ],
  );
  const x = match.block?.directives[0] as DirectiveNode;
  assert.deepEqual(
    x.args.map((a: ArgNode) => (a.kind === 'number' ? a.value : a.kind === 'word' ? a.value : a.kind)),
    [1, -2, 'true'],
  );
  assert.deepEqual(x.loc, { line: 3, col: 45 });
});

test('calls, arrays and object literals as values', () => {
  const { ast, diagnostics } = parse(
    'f.conf',
    'a template("/x/${request.model}") [1, "two", [true]] { "k": null, "o": { "n": 2 } };',
  );
  assert.deepEqual(diagnostics, []);
  const args = ast.directives[0]!.args;
  assert.deepEqual(
    args.map((a) => a.kind),
    ['call', 'array', 'object'],
  );
  assert.equal(ast.directives[0]!.block, undefined);
  const call = args[0];
  assert.ok(call!.kind === 'call' && call!.name === 'template' && call!.args[0]!.kind === 'string');
  const obj = args[2];
  assert.ok(obj!.kind === 'object');
  assert.deepEqual(
    obj!.entries.map((e) => e.key.value),
    ['k', 'o'],
  );
  assert.deepEqual(obj!.loc, { line: 1, col: 54 });
});

test('missing ";" before a block end and before the next directive', () => {
  assert.deepEqual(diags('a { b }'), ['1:6: expected ";" or "{" after directive "b"']);
  assert.deepEqual(diags('request {\n  set_header "a" "b"\n  del_header "c";\n}'), [
    '2:21: expected ";" or "{" after directive "set_header"',
  ]);
  assert.deepEqual(diags('syntax "x"\nprovider "p" { }'), [
    '1:11: expected ";" or "{" after directive "syntax"',
  ]);
});

test('unclosed and unbalanced blocks', () => {
  assert.deepEqual(diags('a {\n b;\n'), ['3:1: expected "}" to close the block opened at 1:3']);
  assert.deepEqual(diags('a;\n}\nb;'), ['2:1: unexpected "}" with no block to close']);
});

test('stray tokens are reported and parsing resumes at the next statement', () => {
  const r = parse('f.conf', '; "s";\n= x;\nok;\n[1;\nfine;');
  assert.deepEqual(
    r.diagnostics.map((d) => `${d.line}:${d.col}: ${d.message}`),
    [
      '1:1: expected a directive name, found ";"',
      '1:3: expected a directive name, found a string',
      '2:1: expected a directive name, found "="',
      '4:1: expected a directive name, found "["',
    ],
  );
  assert.deepEqual(
    r.ast.directives.map((d) => d.name),
    ['ok', 'fine'],
  );
});

test('bad values: unclosed lists, bad separators, bad object keys', () => {
  assert.deepEqual(diags('a [1, 2;\nb;'), ['1:8: expected "]" to close "[" at 1:3']);
  assert.deepEqual(diags('a f(1 2);'), ['1:7: expected "," or ")", found number 2']);
  assert.deepEqual(diags('a ) ;'), ['1:3: unexpected ")"']);
  // `{` not followed by `"key":` opens a block, so this is a block with a stray string in it.
  assert.deepEqual(diags('a { "k" 1 };'), [
    '1:5: expected a directive name, found a string',
    '1:12: expected a directive name, found ";"',
  ]);
  assert.deepEqual(diags('a { "k": 1 2 };'), ['1:12: expected "," or "}", found number 2']);
  assert.deepEqual(diags('a { "k": 1, 2 };'), ['1:13: expected a string key or "}", found number 2']);
});

test('nesting depth is limited instead of overflowing the stack', () => {
  const deep = `${'a {'.repeat(200)}${'}'.repeat(200)}`;
  const r = parse('f.conf', deep);
  assert.ok(r.diagnostics.some((d) => d.message === 'blocks are nested too deeply'));
  const arr = `a ${'['.repeat(500)}${']'.repeat(500)};`;
  assert.ok(parse('f.conf', arr).diagnostics.some((d) => d.message === 'values are nested too deeply'));
});

test('print gives canonical source that parses to the same tree', () => {
  const src =
    'syntax "next-router/0.1"; provider "p" { match api="x" { request { json_set "$.a" { "b": [1, -2.5, "\\n"] }; set_header "h" template("${request.id}"); } } }';
  const first = parse('f.conf', src);
  const text = print(first.ast);
  assert.equal(
    text,
    'syntax "next-router/0.1";\nprovider "p" {\n  match api = "x" {\n    request {\n      json_set "$.a" { "b": [1, -2.5, "\\n"] };\n      set_header "h" template("${request.id}");\n    }\n  }\n}\n',
  );
  assert.equal(print(parse('f.conf', text).ast), text);
});
