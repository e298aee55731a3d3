// What every ResponseStore adapter (common/response-store-types.ts) answers: the memory one and the
// Redis one run the same cases.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ResponseStore } from '../../common/response-store-types.ts';

export function responseStoreContract(
  name: string,
  open: () => Promise<{ store: ResponseStore; close(): Promise<void> }>,
): void {
  const a = { type: 'api_key', id: 'client-a' };
  const b = { type: 'api_key', id: 'client-b' };

  test(`${name}: a record is read by its id and by each of its items, by its subject only`, async () => {
    const { store, close } = await open();
    try {
      const record = JSON.stringify({ response: { id: 'resp_1' }, input: [] });
      await store.put(a, { id: 'resp_1', itemIds: ['msg_1', 'fc_1'], record }, 60_000);
      assert.equal(await store.get(a, 'resp_1'), record);
      assert.equal(await store.getByItem(a, 'msg_1'), record);
      assert.equal(await store.getByItem(a, 'fc_1'), record);
      assert.equal(await store.get(b, 'resp_1'), undefined);
      assert.equal(await store.getByItem(b, 'msg_1'), undefined);
      assert.equal(await store.get(a, 'resp_2'), undefined);
      assert.equal(await store.getByItem(a, 'msg_2'), undefined);
    } finally {
      await close();
    }
  });

  test(`${name}: delete removes the subject's record only, and says whether there was one`, async () => {
    const { store, close } = await open();
    try {
      await store.put(a, { id: 'resp_d', itemIds: ['msg_d'], record: '{"a":1}' }, 60_000);
      await store.put(b, { id: 'resp_d', itemIds: ['msg_d'], record: '{"b":1}' }, 60_000);
      assert.equal(await store.delete(b, 'resp_none'), false);
      assert.equal(await store.delete(a, 'resp_d'), true);
      assert.equal(await store.delete(a, 'resp_d'), false);
      assert.equal(await store.get(a, 'resp_d'), undefined);
      assert.equal(await store.getByItem(a, 'msg_d'), undefined);
      assert.equal(await store.get(b, 'resp_d'), '{"b":1}');
    } finally {
      await close();
    }
  });

  test(`${name}: a record of the same id replaces the earlier one`, async () => {
    const { store, close } = await open();
    try {
      await store.put(a, { id: 'resp_r', itemIds: ['msg_r'], record: '{"v":1}' }, 60_000);
      await store.put(a, { id: 'resp_r', itemIds: ['msg_r'], record: '{"v":2}' }, 60_000);
      assert.equal(await store.get(a, 'resp_r'), '{"v":2}');
      assert.equal(await store.getByItem(a, 'msg_r'), '{"v":2}');
    } finally {
      await close();
    }
  });
}
