import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseYaml } from '../../common/yaml-source.ts';

const SOURCE = [
  'top: 1', // 1
  'nested:', // 2
  '  list:', // 3
  '    - a', // 4
  '    - { k: "v" }', // 5
  '  empty:', // 6
  'flow: [x, [y, z]]', // 7
  '"a/b~c": 2', // 8
  'anchor: &base { p: 1 }', // 9
  'alias: *base', // 10
  'after: true', // 11
].join('\n');

test('every key and value is located by JSON pointer', () => {
  const { yaml, diagnostics } = parseYaml(SOURCE, 'f.yaml');
  assert.deepEqual(diagnostics, []);
  assert.ok(yaml);
  const at = (pointer: string, part?: 'key' | 'value') => {
    const { line, col } = yaml.locate(pointer, part);
    return `${line}:${col}`;
  };
  assert.equal(at('/top', 'key'), '1:1');
  assert.equal(at('/top'), '1:6');
  assert.equal(at('/nested/list/0'), '4:7');
  assert.equal(at('/nested/list/1/k', 'key'), '5:9');
  assert.equal(at('/nested/list/1/k'), '5:12', 'a quoted value starts at its quote');
  assert.equal(at('/nested/empty'), '6:3', 'an empty value is located at its key');
  assert.equal(at('/flow/1/1'), '7:15');
  assert.equal(at('/a~1b~0c', 'key'), '8:1');
  assert.equal(at('/alias'), '10:8');
  assert.equal(at('/after', 'key'), '11:1', 'an alias does not derail the walk');
  assert.equal(at('/nested/list/7'), '3:3', 'a missing node falls back to the nearest ancestor key');
  assert.equal(yaml.has('/nested/list/1/k'), true);
  assert.equal(yaml.has('/nested/nope'), false);
  assert.deepEqual(yaml.value, {
    top: 1,
    nested: { list: ['a', { k: 'v' }], empty: null },
    flow: ['x', ['y', 'z']],
    'a/b~c': 2,
    anchor: { p: 1 },
    alias: { p: 1 },
    after: true,
  });
});

test('an empty source is a null document; several documents are refused', () => {
  assert.equal(parseYaml('', 'f.yaml').yaml?.value, null);
  assert.equal(parseYaml('# only a comment\n', 'f.yaml').yaml?.value, null);
  const multi = parseYaml('a: 1\n---\nb: 2\n', 'f.yaml');
  assert.equal(multi.yaml, undefined);
  assert.match(multi.diagnostics[0]!.message, /single YAML document/);
});

test('YAML 1.2 core schema: dates stay strings, yes/no stay strings', () => {
  const { yaml } = parseYaml('d: 2027-01-01\nb: yes\nt: true\n', 'f.yaml');
  assert.deepEqual(yaml?.value, { d: '2027-01-01', b: 'yes', t: true });
});

test('a syntax error is a positioned diagnostic without the source line', () => {
  const { yaml, diagnostics } = parseYaml('ok: 1\nsecret: "unterminated\n', 'f.yaml');
  assert.equal(yaml, undefined);
  assert.equal(diagnostics.length, 1);
  assert.equal(diagnostics[0]!.file, 'f.yaml');
  assert.ok(diagnostics[0]!.line >= 2);
  assert.doesNotMatch(diagnostics[0]!.message, /unterminated\n|secret:/);
});
