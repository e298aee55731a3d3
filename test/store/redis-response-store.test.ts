// Stored responses in Redis (store/redis-response-store.ts), against a real redis-server: the adapter
// contract, the key layout under the subject's hash tag, and the ttl on every key.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { openRedisStores } from '../../store/redis-store.ts';
import { type RedisServer, startRedis, testStoreConfig } from '../support/redis.ts';
import { responseStoreContract } from './response-store-contract.ts';

let redis: RedisServer;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.close();
});

async function open() {
  const config = testStoreConfig(redis.url);
  const stores = await openRedisStores(config);
  const store = stores.state.responses;
  assert.ok(store !== undefined);
  return { store, prefix: config.keyPrefix, close: () => stores.close() };
}

responseStoreContract('redis', open);

test('redis: a record and its item index sit under the subject hash tag, each with the ttl', async () => {
  const { store, prefix, close } = await open();
  try {
    await store.put({ type: 'api_key', id: 'c' }, { id: 'resp_k', itemIds: ['msg_k'], record: '{}' }, 90_000);
    const keys = (await redis.admin.keys(`${prefix}*`)).sort();
    assert.deepEqual(keys, [`${prefix}{resp:api_key:c}:i:msg_k`, `${prefix}{resp:api_key:c}:r:resp_k`]);
    assert.equal(await redis.admin.get(`${prefix}{resp:api_key:c}:i:msg_k`), 'resp_k');
    for (const key of keys) {
      const ttl = await redis.admin.pttl(key);
      assert.ok(ttl > 80_000 && ttl <= 90_000, `${key} ttl ${ttl}`);
    }
  } finally {
    await close();
  }
});
