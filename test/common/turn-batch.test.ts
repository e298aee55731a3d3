import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createTurnBatch } from '../../common/turn-batch.ts';

test('items added in one event-loop turn are flushed together, once, before settled() resolves', async () => {
  const flushes: number[][] = [];
  const batch = createTurnBatch<number>((items) => flushes.push(items));
  assert.equal(batch.settled(), undefined, 'nothing waiting');
  for (let i = 0; i < 5; i++) batch.add(i);
  const settled = batch.settled();
  assert.ok(settled instanceof Promise);
  assert.equal(batch.settled(), settled, 'one promise per turn');
  assert.deepEqual(flushes, [], 'not flushed synchronously');
  await Promise.resolve();
  assert.deepEqual(flushes, [], 'not flushed by a microtask either (replies of other callbacks join it)');
  await settled;
  assert.deepEqual(flushes, [[0, 1, 2, 3, 4]]);
  assert.equal(batch.settled(), undefined);

  // The next turn starts a new batch.
  batch.add(5);
  await batch.settled();
  assert.deepEqual(flushes, [[0, 1, 2, 3, 4], [5]]);
});

test('items added from separate I/O callbacks of one turn share a flush', async () => {
  const flushes: string[][] = [];
  const batch = createTurnBatch<string>((items) => flushes.push(items));
  // Like replies completing in one poll phase: two callbacks of one phase (immediates queued together
  // run in one check phase; two 0 ms timers could straddle a millisecond and run in two turns).
  await new Promise<void>((resolve) => {
    setImmediate(() => batch.add('a'));
    setImmediate(() => {
      batch.add('b');
      resolve();
    });
  });
  await batch.settled();
  assert.deepEqual(flushes, [['a', 'b']]);
});
