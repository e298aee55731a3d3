// The report's ratio arithmetic: peers measured in the same interleaved rounds are compared round by
// round, so one slow round of the shared machine does not decide a target.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pairedRatio } from '../../bench/report.ts';

test('pairedRatio: the median of per-round ratios when both sides share the rounds', () => {
  // Round 2 was slow for everything: per round the billing peer keeps 95%, 95%, 96% of the gateway.
  const gateway = { requestsPerSec: 4000, rounds: [4000, 2000, 4200] };
  const billing = { requestsPerSec: 3800, rounds: [3800, 1900, 4032] };
  assert.equal(pairedRatio(billing, gateway)?.toFixed(3), '0.950');
  // Ratio of medians would have said 3800 / 4000 here too; with the slow round landing on one side only
  // it would not: the pairing keeps the peer's own round.
  const skewed = { requestsPerSec: 1900, rounds: [3900, 1900, 1800] };
  assert.equal(pairedRatio(skewed, gateway)?.toFixed(3), '0.950');
});

test('pairedRatio: failed rounds are left out; without shared rounds it falls back to the medians', () => {
  assert.equal(
    pairedRatio(
      { requestsPerSec: 100, rounds: [100, Number.NaN, 90] },
      { requestsPerSec: 50, rounds: [50, 60, 45] },
    ),
    2,
  );
  assert.equal(pairedRatio({ requestsPerSec: 300 }, { requestsPerSec: 100, rounds: [100, 90] }), 3);
  assert.equal(pairedRatio(undefined, { requestsPerSec: 100 }), undefined);
  assert.equal(pairedRatio({ requestsPerSec: 1 }, { requestsPerSec: 0 }), undefined);
});
