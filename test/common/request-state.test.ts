// A hook's per-request state lives on the request: each slot reads back what it set for that request only,
// and a request with state, even state that refers back to it, is freed by young-generation collections
// (with that state in a WeakMap keyed by the request, the request was promoted to the old generation).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { RequestState } from '../../common/request-state.ts';
import type { RequestContext } from '../../common/types.ts';

const request = (): RequestContext =>
  ({ hookSlot: undefined, hookValue: undefined, hookState: undefined }) as unknown as RequestContext;
/** Read through a call, which assertions do not narrow. */
const slots = (ctx: RequestContext) => ctx.hookState;

test('RequestState: per slot and per request; the first slot set needs no map, the second makes it', () => {
  const a = new RequestState<string>();
  const b = new RequestState<number>();
  const one = request();
  const two = request();
  assert.equal(a.get(one), undefined);
  assert.equal(slots(one), undefined);
  a.set(one, 'first');
  assert.equal(slots(one), undefined, 'the first slot is kept in place');
  b.set(one, 7);
  a.set(two, 'second');
  assert.equal(a.get(one), 'first');
  assert.equal(b.get(one), 7);
  assert.equal(a.get(two), 'second');
  assert.equal(b.get(two), undefined);
  a.set(one, 'again');
  assert.equal(a.get(one), 'again');
  assert.equal(b.get(one), 7);
  assert.equal(slots(one)?.size, 1, 'only the second slot is in the map');
  b.set(two, 9);
  assert.equal(a.get(two), 'second');
  assert.equal(b.get(two), 9);
  assert.equal(undefined, new RequestState<number>().get(two));
});

test('RequestState: requests with state that refers back to them die young', () => {
  v8.setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as (options?: { type: 'minor' | 'major' }) => void;
  const oldBytes = () =>
    v8
      .getHeapSpaceStatistics()
      .filter((s) => s.space_name === 'old_space' || s.space_name === 'large_object_space')
      .reduce((sum, s) => sum + s.space_used_size, 0);
  const slot = new RequestState<{ text: string; body: () => unknown }>();
  const requests = 2000;
  const made = () => {
    for (let i = 0; i < requests; i++) {
      const ctx = {
        hookSlot: undefined,
        hookValue: undefined,
        hookState: undefined,
        body: `request ${i} `.padEnd(1000, '.'),
      } as unknown as RequestContext;
      // As a translator's closures do: the state reaches its request.
      slot.set(ctx, { text: `state ${i} `.padEnd(200, '.'), body: () => ctx.body });
    }
  };
  made();
  gc();
  gc();
  const before = oldBytes();
  made();
  gc({ type: 'minor' });
  gc({ type: 'minor' });
  const promoted = oldBytes() - before;
  // Each request holds about 1.2 KB of strings: kept alive through the two collections, they would add
  // over 2 MB to the old generation.
  assert.ok(promoted < (requests * 1200) / 4, `old generation grew by ${promoted} bytes`);
});
