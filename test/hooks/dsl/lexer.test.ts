import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tokenize } from '../../../hooks/dsl/lexer.ts';

function kinds(src: string): string[] {
  return tokenize(src).tokens.map((t) => `${t.kind}:${t.text}@${t.pos.line}:${t.pos.col}`);
}

test('tokens carry 1-based line and column', () => {
  assert.deepEqual(kinds('a {\n  b = "x";\n}'), [
    'word:a@1:1',
    '{:{@1:3',
    'word:b@2:3',
    '=:=@2:5',
    'string:x@2:7',
    ';:;@2:10',
    '}:}@3:1',
    'eof:@3:2',
  ]);
});

test('comments of all three kinds are skipped, block comments keep line counting right', () => {
  const { tokens, errors } = tokenize('# one\n// two\n/* three\n four */ x');
  assert.deepEqual(errors, []);
  assert.equal(tokens[0]!.text, 'x');
  assert.deepEqual(tokens[0]!.pos, { line: 4, col: 10 });
});

test('string escapes decode and map each character back to its source column', () => {
  const { tokens, errors } = tokenize('"a\\"b\\\\c\\n\\u0041\\$"');
  assert.deepEqual(errors, []);
  assert.equal(tokens[0]!.text, 'a"b\\c\nA$');
  assert.deepEqual(tokens[0]!.cols, [2, 3, 5, 6, 8, 9, 11, 17]);
});

test('numbers: integers, negatives, decimals, exponents', () => {
  const { tokens, errors } = tokenize('0 5000 -3 1.5 2e3');
  assert.deepEqual(errors, []);
  assert.deepEqual(
    tokens.filter((t) => t.kind === 'number').map((t) => t.text),
    ['0', '5000', '-3', '1.5', '2e3'],
  );
});

test('lexical errors are reported with positions and lexing continues', () => {
  const { tokens, errors } = tokenize('a @ "x\\q" 12ab\n"open\n/* never');
  assert.deepEqual(
    errors.map((e) => `${e.pos.line}:${e.pos.col}: ${e.message}`),
    [
      '1:3: unexpected character "@"',
      '1:7: invalid escape "\\q"',
      '1:11: invalid number "12ab"',
      '2:1: unterminated string',
      '3:1: unterminated comment',
    ],
  );
  assert.equal(tokens[0]!.text, 'a');
  assert.equal(tokens.at(-1)?.kind, 'eof');
});
