// Hash-secret rotation in the Redis adapter (StateStore.rehashAccessKey) against a real redis-server: a
// key indexed under the previous secret's hash moves to the current one in one step, only while it is
// active and still under that hash; concurrent movers leave one consistent record; the view cache never
// answers from before the move.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { RehashedKey } from '../../common/store-types.ts';
import { hashAccessKey, hashSecretId } from '../../hooks/builtin/auth.ts';
import { openRedisStores, type RedisStores } from '../../store/redis-store.ts';
import { waitUntil } from '../support/billing-stack.ts';
import { type RedisServer, startRedis, testKeyRecord, testStoreConfig } from '../support/redis.ts';

const OLD = 'test-hash-secret';
const NEW = 'new-hash-secret';
const NEW_ID = hashSecretId(NEW);

let redis: RedisServer;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.close();
});

async function open(prefix?: string, viewCacheMs = 0): Promise<{ stores: RedisStores; prefix: string }> {
  const config = testStoreConfig(redis.url, prefix === undefined ? {} : { keyPrefix: prefix });
  const stores = await openRedisStores(config, { viewCacheMs });
  assert.equal(stores.connected, true);
  const cache = stores.viewCache;
  if (cache !== undefined) await waitUntil(() => cache.live, 'tracking on');
  return { stores, prefix: config.keyPrefix };
}

function rehash(stores: RedisStores, secret: string): Promise<RehashedKey | null> {
  const fn = stores.state.rehashAccessKey;
  assert.ok(fn, 'the Redis adapter re-hashes');
  return fn.call(stores.state, hashAccessKey(OLD, secret), hashAccessKey(NEW, secret), NEW_ID);
}

test('a key under the previous hash moves to the current one: index entry and record together', async () => {
  const { stores, prefix } = await open();
  try {
    await stores.accessKeys.create(testKeyRecord('mover', 'ak_mover'));
    const moved = await rehash(stores, 'ak_mover');
    assert.equal(moved?.moved, true);
    assert.equal(moved?.key.secretHash, hashAccessKey(NEW, 'ak_mover'));
    assert.equal(moved?.key.hashSecretId, NEW_ID);
    assert.equal(moved?.key.version, 1, 'not a new secret: the version stays');
    assert.deepEqual(await redis.admin.hgetall(`${prefix}access_key:index`), {
      [hashAccessKey(NEW, 'ak_mover')]: 'mover',
    });
    const record = await redis.admin.hgetall(`${prefix}access_key:mover`);
    assert.equal(record.secret_hash, hashAccessKey(NEW, 'ak_mover'));
    assert.equal(record.hash_secret_id, NEW_ID);
    assert.equal(JSON.stringify(record).includes(NEW), false, 'the secret itself is never stored');
    assert.equal((await stores.state.view({ keyHash: hashAccessKey(OLD, 'ak_mover') })).key, null);
    assert.equal((await stores.state.view({ keyHash: hashAccessKey(NEW, 'ak_mover') })).key?.name, 'mover');

    // Asked again (another instance that also found it under the old hash): the moved record, no move.
    const again = await rehash(stores, 'ak_mover');
    assert.equal(again?.moved, false);
    assert.equal(again?.key.secretHash, hashAccessKey(NEW, 'ak_mover'));
    assert.equal(await rehash(stores, 'ak_nobody'), null);
  } finally {
    await stores.close();
  }
});

test('a revoked key stays where it is; a key rotated in the meantime is not touched', async () => {
  const { stores, prefix } = await open();
  try {
    await stores.accessKeys.create(testKeyRecord('revoked', 'ak_revoked'));
    await stores.accessKeys.revoke('revoked');
    const revoked = await rehash(stores, 'ak_revoked');
    assert.equal(revoked?.moved, false);
    assert.equal(revoked?.key.status, 'revoked');
    assert.equal(
      await redis.admin.hget(`${prefix}access_key:index`, hashAccessKey(OLD, 'ak_revoked')),
      'revoked',
    );
    assert.equal(await redis.admin.hget(`${prefix}access_key:index`, hashAccessKey(NEW, 'ak_revoked')), null);

    await stores.accessKeys.create(testKeyRecord('rotated', 'ak_rotated'));
    const fresh = hashAccessKey(NEW, 'ak_rotated_2');
    await stores.accessKeys.rotate('rotated', fresh, NEW_ID);
    assert.equal(await rehash(stores, 'ak_rotated'), null, 'the old secret is gone');
    assert.equal(await redis.admin.hget(`${prefix}access_key:rotated`, 'secret_hash'), fresh);
    assert.equal(await redis.admin.hget(`${prefix}access_key:index`, hashAccessKey(NEW, 'ak_rotated')), null);
  } finally {
    await stores.close();
  }
});

test('two instances moving the same keys at once: one move each, one index entry, records agree', async () => {
  const a = await open();
  const b = await open(a.prefix);
  try {
    const names = Array.from({ length: 40 }, (_, i) => `race-${i}`);
    for (const name of names) await a.stores.accessKeys.create(testKeyRecord(name, `ak_${name}`));
    const results = await Promise.all(
      names.flatMap((name) => [rehash(a.stores, `ak_${name}`), rehash(b.stores, `ak_${name}`)]),
    );
    for (let i = 0; i < names.length; i++) {
      const pair = [results[2 * i], results[2 * i + 1]];
      assert.equal(pair.filter((r) => r?.moved === true).length, 1, `${names[i]} moved exactly once`);
      for (const r of pair) assert.equal(r?.key.secretHash, hashAccessKey(NEW, `ak_${names[i]}`));
    }
    const index = await redis.admin.hgetall(`${a.prefix}access_key:index`);
    assert.equal(Object.keys(index).length, names.length);
    for (const name of names) {
      assert.equal(index[hashAccessKey(NEW, `ak_${name}`)], name);
      assert.equal(
        await redis.admin.hget(`${a.prefix}access_key:${name}`, 'secret_hash'),
        hashAccessKey(NEW, `ak_${name}`),
      );
    }
  } finally {
    await a.stores.close();
    await b.stores.close();
  }
});

test('the view cache answers from after the move: a cached miss under the new hash is dropped', async () => {
  const { stores } = await open(undefined, 60_000);
  try {
    await stores.accessKeys.create(testKeyRecord('cached', 'ak_cached'));
    const oldQuery = { keyHash: hashAccessKey(OLD, 'ak_cached') };
    const newQuery = { keyHash: hashAccessKey(NEW, 'ak_cached') };
    assert.equal((await stores.state.view(newQuery)).key, null);
    assert.equal((await stores.state.view(oldQuery)).key?.name, 'cached');
    assert.equal(stores.viewCache?.size, 2, 'both answers are cached');
    assert.equal((await rehash(stores, 'ak_cached'))?.moved, true);
    assert.equal((await stores.state.view(newQuery)).key?.name, 'cached');
    assert.equal((await stores.state.view(oldQuery)).key, null);
  } finally {
    await stores.close();
  }
});

test('"under neither hash" is cached until the index changes: a wrong key repeated costs no round trip', async () => {
  const { stores, prefix } = await open(undefined, 60_000);
  const writer = await open(prefix);
  try {
    await stores.state.view({ keyHash: 'warm-up' }); // loads the view script; rehash loads its own below
    assert.equal(await rehash(stores, 'ak_late'), null);
    const before = (await redis.commandCounts()).evalsha ?? 0;
    assert.equal(await rehash(stores, 'ak_late'), null);
    assert.equal((await redis.commandCounts()).evalsha ?? 0, before, 'answered from the cache');

    // Another client writes a key under the previous hash: Redis's invalidation drops the cached answer.
    const heard = stores.viewCache?.invalidations ?? 0;
    await writer.stores.accessKeys.create(testKeyRecord('late', 'ak_late'));
    await waitUntil(() => (stores.viewCache?.invalidations ?? 0) > heard, 'the index invalidation');
    assert.equal((await rehash(stores, 'ak_late'))?.moved, true);
  } finally {
    await stores.close();
    await writer.stores.close();
  }
});

test('instances with the two secrets swapped (a two-step rollout) move a key back and forth, never losing it', async () => {
  const { stores, prefix } = await open();
  try {
    await stores.accessKeys.create(testKeyRecord('swap', 'ak_swap'));
    const [a, b] = [hashAccessKey(OLD, 'ak_swap'), hashAccessKey(NEW, 'ak_swap')];
    const move = (from: string, to: string, id: string) => stores.state.rehashAccessKey?.(from, to, id);
    assert.equal((await move(a, b, NEW_ID))?.moved, true);
    assert.equal((await move(b, a, hashSecretId(OLD)))?.moved, true);
    assert.equal((await move(a, b, NEW_ID))?.moved, true);
    assert.deepEqual(await redis.admin.hgetall(`${prefix}access_key:index`), { [b]: 'swap' });
    assert.equal(await redis.admin.hget(`${prefix}access_key:swap`, 'secret_hash'), b);
  } finally {
    await stores.close();
  }
});
