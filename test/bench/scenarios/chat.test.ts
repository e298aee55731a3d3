// The chat scenario's rounds alternate the peers' order, so that no peer always runs right after
// another one's load.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { inRoundOrder } from '../../../bench/scenarios/chat.ts';

test('inRoundOrder: as listed in even rounds, reversed in odd ones, the list itself untouched', () => {
  const peers = ['gateway', 'gateway-billing', 'gateway-traced'] as const;
  assert.deepEqual(inRoundOrder(peers, 0), peers);
  assert.deepEqual(inRoundOrder(peers, 1), ['gateway-traced', 'gateway-billing', 'gateway']);
  assert.deepEqual(inRoundOrder(peers, 2), peers);
  assert.deepEqual(peers, ['gateway', 'gateway-billing', 'gateway-traced']);
  // Over any even number of rounds each peer runs first as often as last.
  const first = new Map<string, number>();
  for (let round = 0; round < 8; round++) {
    const order = inRoundOrder(peers, round);
    first.set(order[0]!, (first.get(order[0]!) ?? 0) + 1);
  }
  assert.deepEqual(
    [...first],
    [
      ['gateway', 4],
      ['gateway-traced', 4],
    ],
  );
});
