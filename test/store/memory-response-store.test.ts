// File mode's stored responses (store/memory-response-store.ts): the contract every adapter keeps (also run
// against Redis in redis-response-store.test.ts), and the bounds of the in-process one.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryResponses } from '../../store/memory-response-store.ts';
import { responseStoreContract } from './response-store-contract.ts';

responseStoreContract('memory', async () => ({ store: new MemoryResponses(), close: async () => {} }));

test('memory: a record expires after its ttl, with its items', () => {
  let now = 1_000;
  const store = new MemoryResponses({ now: () => now });
  const subject = { type: 'api_key', id: 'a' };
  store.putNow(subject, { id: 'resp_1', itemIds: ['msg_1'], record: '{"n":1}' }, 500);
  now = 1_499;
  assert.equal(store.getNow(subject, 'resp_1'), '{"n":1}');
  now = 1_500;
  assert.equal(store.getNow(subject, 'resp_1'), undefined);
  assert.equal(store.getByItemNow(subject, 'msg_1'), undefined);
  assert.deepEqual(store.size, { responses: 0, bytes: 0 });
});

test('memory: all records together stay under maxBytes, the oldest going first', () => {
  const store = new MemoryResponses({ maxBytes: 25 });
  const subject = { type: 'api_key', id: 'a' };
  const record = '0123456789';
  store.putNow(subject, { id: 'r1', itemIds: ['i1'], record }, 60_000);
  store.putNow(subject, { id: 'r2', itemIds: ['i2'], record }, 60_000);
  store.putNow(subject, { id: 'r3', itemIds: ['i3'], record }, 60_000);
  assert.equal(store.getNow(subject, 'r1'), undefined);
  assert.equal(store.getByItemNow(subject, 'i1'), undefined);
  assert.equal(store.getNow(subject, 'r2'), record);
  assert.equal(store.getNow(subject, 'r3'), record);
  assert.deepEqual(store.size, { responses: 2, bytes: 20 });
  // A record larger than the whole bound is not kept, and takes nothing else with it.
  store.putNow(subject, { id: 'big', itemIds: [], record: 'x'.repeat(26) }, 60_000);
  assert.equal(store.getNow(subject, 'big'), undefined);
  assert.equal(store.size.responses, 2);
});
