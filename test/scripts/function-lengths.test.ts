import assert from 'node:assert/strict';
import { test } from 'node:test';
import { longFunctions } from '../../scripts/function-lengths.ts';

test('no function of the product is longer than 200 lines', () => {
  assert.deepEqual(longFunctions(200), []);
});

test('the check finds long functions (it would see one)', () => {
  assert.ok(longFunctions(60).length > 0);
});
