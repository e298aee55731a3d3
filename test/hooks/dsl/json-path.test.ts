import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { JsonObject } from '../../../common/types.ts';
import {
  compileJsonPath,
  jsonDelete,
  jsonDeleteCopy,
  jsonGet,
  jsonSet,
  jsonSetCopy,
  parseJsonPath,
} from '../../../hooks/dsl/json-path.ts';

test('compileJsonPath: dots, indexes and quoted keys', () => {
  assert.deepEqual(compileJsonPath('$'), []);
  assert.deepEqual(compileJsonPath('$.a.b[0].c'), ['a', 'b', 0, 'c']);
  assert.deepEqual(compileJsonPath('$["x.y"][\'z\'][12]'), ['x.y', 'z', 12]);
  assert.deepEqual(compileJsonPath('$.stream_options.include_usage'), ['stream_options', 'include_usage']);
});

test('parseJsonPath reports the offset of the first problem', () => {
  assert.deepEqual(parseJsonPath('a.b'), { ok: false, message: 'JSON path must start with "$"', index: 0 });
  assert.deepEqual(parseJsonPath('$.a..b'), { ok: false, message: 'empty key after "."', index: 3 });
  assert.equal((parseJsonPath('$.a[x]') as { index: number }).index, 3);
  assert.equal((parseJsonPath('$.a["x]') as { index: number }).index, 3);
  assert.equal((parseJsonPath('$x') as { index: number }).index, 1);
  assert.throws(() => compileJsonPath('$.'), /empty key/);
});

test('jsonGet reads own properties only', () => {
  const doc: JsonObject = { a: { b: [10, { c: 'x' }] } };
  assert.equal(jsonGet(doc, ['a', 'b', 1, 'c']), 'x');
  assert.equal(jsonGet(doc, ['a', 'b', 5]), undefined);
  assert.equal(jsonGet(doc, ['a', 'missing', 'c']), undefined);
  assert.equal(jsonGet(doc, ['constructor']), undefined);
  assert.equal(jsonGet(doc, ['a', 'b', 'length']), undefined);
});

test('jsonSet creates objects and arrays as needed and replaces wrong types', () => {
  const doc: JsonObject = { model: 'm', stream_options: 'bogus' };
  jsonSet(doc, ['stream_options', 'include_usage'], true);
  jsonSet(doc, ['a', 'list', 2, 'x'], 1);
  assert.deepEqual(doc, {
    model: 'm',
    stream_options: { include_usage: true },
    a: { list: [null, null, { x: 1 }] },
  });
  jsonSet(doc, ['model'], 'n');
  assert.equal(doc.model, 'n');
  assert.throws(() => jsonSet(doc, [], 1), /root/);
});

test('jsonSet with __proto__ writes a plain own property and never a prototype', () => {
  const doc: JsonObject = {};
  jsonSet(doc, ['__proto__', 'polluted'], true);
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
  assert.equal(Object.getPrototypeOf(doc), Object.prototype);
  assert.deepEqual(jsonGet(doc, ['__proto__', 'polluted']), true);
});

test('jsonDelete removes keys and splices array items', () => {
  const doc: JsonObject = { a: { b: 1, c: 2 }, l: [1, 2, 3] };
  assert.equal(jsonDelete(doc, ['a', 'b']), true);
  assert.equal(jsonDelete(doc, ['a', 'b']), false);
  assert.equal(jsonDelete(doc, ['l', 1]), true);
  assert.equal(jsonDelete(doc, ['l', 9]), false);
  assert.equal(jsonDelete(doc, ['x', 'y']), false);
  assert.equal(jsonDelete(doc, []), false);
  assert.deepEqual(doc, { a: { c: 2 }, l: [1, 3] });
});

test('jsonSetCopy and jsonDeleteCopy leave the original intact and share what is off the path', () => {
  const doc: JsonObject = { a: { list: ['x'] }, other: { big: true }, drop: { k: 1 } };
  const snapshot = structuredClone(doc);
  const set = jsonSetCopy(doc, ['a', 'list', 1], 'y');
  assert.deepEqual(set.a, { list: ['x', 'y'] });
  assert.deepEqual(jsonSetCopy(doc, ['extra', 0], 'x').extra, ['x']);
  assert.equal(set.other, doc.other);
  const del = jsonDeleteCopy(doc, ['drop', 'k']);
  assert.deepEqual(del.drop, {});
  assert.equal(jsonDeleteCopy(doc, ['drop', 'missing']), doc);
  assert.deepEqual(doc, snapshot);
  const polluted = jsonSetCopy({}, ['__proto__', 'polluted'], true);
  assert.equal(Object.getPrototypeOf(polluted), Object.prototype);
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
});
