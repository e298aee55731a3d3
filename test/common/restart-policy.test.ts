// The restart policy's numbers, on the policy itself: crash times in, decisions out, no timers.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { givesUp, keptCrashes, RESTART_POLICY, restartDelayMs } from '../../common/restart-policy.ts';

const T0 = 1_000_000;

/** The delay decided after each crash of one process crashing at these times. */
function delaysFor(times: readonly number[]): number[] {
  const crashes: number[] = [];
  return times.map((now) => {
    crashes.push(now);
    return restartDelayMs(crashes, now);
  });
}

test('the first four crashes within a minute restart at once; then 0.5 s doubling up to 5 s', () => {
  const times = Array.from({ length: 12 }, (_, i) => T0 + i * 100);
  assert.deepEqual(delaysFor(times), [0, 0, 0, 0, 500, 1000, 2000, 4000, 5000, 5000, 5000, 5000]);
});

test('two kills 3 s apart restart at once, each time', () => {
  assert.deepEqual(delaysFor([T0, T0 + 3000]), [0, 0]);
});

test('crashes older than 60 s no longer count: a process that settled is restarted at once again', () => {
  const crashes = [T0, T0 + 1, T0 + 2, T0 + 3];
  // A fifth crash 60 s after the first: that one has left the window, so four crashes count.
  assert.equal(restartDelayMs([...crashes, T0 + 60_000], T0 + 60_000), 0);
  // One millisecond earlier it still counts.
  assert.equal(restartDelayMs([...crashes, T0 + 59_999], T0 + 59_999), 500);
  // A long crash loop's delay stays at the cap.
  const loop = Array.from({ length: 200 }, (_, i) => T0 + i);
  assert.equal(restartDelayMs(loop, T0 + 199), RESTART_POLICY.maxDelayMs);
});

test('a process crashing every 5 s forever is restarted after 5 s at most', () => {
  const times = Array.from({ length: 100 }, (_, i) => T0 + i * 5000);
  const delays = delaysFor(times);
  assert.ok(delays.every((d) => d <= 5000));
  assert.equal(delays.at(-1), 5000);
});

test('the primary gives up after 20 crashes in 10 minutes, and only with no worker serving', () => {
  const nineteen = Array.from({ length: 19 }, (_, i) => T0 + i * 1000);
  const now = T0 + 19_000;
  assert.equal(givesUp(nineteen, now, false), false);
  const twenty = [...nineteen, now];
  assert.equal(givesUp(twenty, now, false), true);
  assert.equal(givesUp(twenty, now, true), false, 'a worker serves: the others are restarted on');
  // Spread over more than 10 minutes: the oldest no longer count.
  const spread = Array.from({ length: 20 }, (_, i) => T0 + i * 31_600);
  assert.equal(givesUp(spread, T0 + 19 * 31_600, false), false);
  // The window ends at `now`, its start excluded.
  const edge = [T0, ...Array.from({ length: 19 }, (_, i) => T0 + 600_000 - i)];
  assert.equal(givesUp(edge, T0 + 600_000, false), false);
  assert.equal(givesUp(edge, T0 + 599_999, false), false, 'later crashes are not counted either');
  assert.equal(givesUp([T0 + 1, ...edge.slice(1)], T0 + 600_000, false), true);
});

test('a supervisor keeps the crashes of the longest window only', () => {
  const crashes = [T0, T0 + 1, T0 + 2, T0 + 600_001];
  assert.deepEqual(keptCrashes(crashes, T0 + 600_001), [T0 + 2, T0 + 600_001]);
  assert.deepEqual(keptCrashes(crashes, T0 + 1_200_001), []);
});
