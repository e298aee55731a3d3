import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backoffDelay, jitteredDelay } from '../../common/backoff.ts';

test('backoffDelay doubles from the base for each attempt and stops at the cap', () => {
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6].map((n) => backoffDelay(n, 100, 1000)),
    [100, 200, 400, 800, 1000, 1000],
  );
  assert.equal(backoffDelay(0, 100, 1000), 100, 'attempt 0 counts as the first');
  assert.equal(backoffDelay(10_000, 1, Number.MAX_SAFE_INTEGER), 2 ** 30, 'the exponent is bounded');
});

test('jitteredDelay is uniform below the backoff: 0 at random 0, just under it at random near 1', () => {
  assert.equal(
    jitteredDelay(3, 100, 1000, () => 0),
    0,
  );
  assert.equal(
    jitteredDelay(3, 100, 1000, () => 0.999_999),
    399,
  );
  assert.equal(
    jitteredDelay(9, 100, 1000, () => 0.5),
    500,
  );
});
