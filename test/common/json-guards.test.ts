import assert from 'node:assert/strict';
import { test } from 'node:test';
import { asString, isObject } from '../../common/json-guards.ts';
import type { JsonObject, JsonValue } from '../../common/types.ts';

test('isObject: a mapping, never null or a list', () => {
  assert.deepEqual(
    [{}, { a: 1 }, null, [], 'x', 1, undefined].map((value) => isObject(value)),
    [true, true, false, false, false, false, false],
  );
  assert.equal(asString('x'), 'x');
  assert.equal(asString(1), undefined);
});

test('isObject narrows JSON to JsonObject, also as a .filter callback, and anything else to a record', () => {
  const json: JsonValue[] = [{ a: 1 }, null, [1], 'x'];
  const objects: JsonObject[] = json.filter(isObject);
  assert.deepEqual(objects, [{ a: 1 }]);
  const unknowns: unknown[] = [{ b: 2 }, 3];
  const records: Record<string, unknown>[] = unknowns.filter(isObject);
  assert.deepEqual(records, [{ b: 2 }]);
  const one: JsonValue | undefined = json[0];
  if (isObject(one)) {
    const narrowed: JsonObject = one;
    assert.equal(narrowed['a'], 1);
  }
});
