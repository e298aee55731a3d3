import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { jsonDeeperThan } from '../../proxy/json-depth.ts';

const bytes = (text: string) => Buffer.from(text, 'utf8');

function depthOf(value: unknown): number {
  if (value === null || typeof value !== 'object') return 0;
  const children = Array.isArray(value) ? value : Object.values(value);
  return 1 + children.reduce((max: number, child) => Math.max(max, depthOf(child)), 0);
}

test('depth counts arrays and objects, not brackets inside strings or after escapes', () => {
  assert.equal(jsonDeeperThan(bytes('{"a":[[1]]}'), 3), false);
  assert.equal(jsonDeeperThan(bytes('{"a":[[1]]}'), 2), true);
  assert.equal(jsonDeeperThan(bytes('{"a":"[[[[[[[["}'), 1), false);
  assert.equal(jsonDeeperThan(bytes('{"a":"\\"[[[[[["}'), 1), false);
  assert.equal(
    jsonDeeperThan(bytes('{"a\\\\":[[1]]}'), 2),
    true,
    'an escaped backslash ends before the quote',
  );
  assert.equal(jsonDeeperThan(bytes(`${'['.repeat(100_000)}${']'.repeat(100_000)}`), 128), true);
});

test('agrees with the depth of the parsed value for any JSON', () => {
  fc.assert(
    fc.property(fc.jsonValue({ maxDepth: 12 }), fc.integer({ min: 0, max: 14 }), (value, max) => {
      const text = JSON.stringify(value);
      assert.equal(jsonDeeperThan(bytes(text), max), depthOf(value) > max);
    }),
    { numRuns: 500 },
  );
});
