// The gateway's in-process copy of request views (store/view-cache.ts) against a real redis-server:
// served after one read, dropped when Redis reports a change by anyone, never kept from a read that raced
// an invalidation, bounded by the cached balance's TTL, and switched off while the tracking connection is
// down. Waits are for conditions (an invalidation arriving), never fixed sleeps.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { hashAccessKey } from '../../hooks/builtin/auth.ts';
import { openRedisStores, type RedisStores } from '../../store/redis-store.ts';
import { openViewCache, viewCacheKey } from '../../store/view-cache.ts';
import { waitUntil } from '../support/billing-stack.ts';
import {
  countDelta,
  type RedisServer,
  startRedis,
  testKeyRecord,
  testStoreConfig,
} from '../support/redis.ts';

let redis: RedisServer;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.close();
});

const SUBJECT = { type: 'api_key', id: 'cached-a' };

async function open(viewCacheMs = 60_000): Promise<{ stores: RedisStores; prefix: string }> {
  const config = testStoreConfig(redis.url);
  const stores = await openRedisStores(config, { currencies: ['USD'], viewCacheMs });
  const cache = stores.viewCache;
  assert.ok(cache, 'view cache opened');
  await waitUntil(() => cache.live, 'tracking on');
  return { stores, prefix: config.keyPrefix };
}

/** Whether the cache holds an answer for this query. */
function cached(
  stores: RedisStores,
  q: { keyHash?: string; subject?: typeof SUBJECT; currency?: string },
): boolean {
  const key = viewCacheKey(q.keyHash, q.subject?.type, q.subject?.id, q.currency);
  return stores.viewCache?.get(key) !== undefined;
}

async function evalshaCount(): Promise<number> {
  return (await redis.commandCounts()).evalsha ?? 0;
}

test('a view is read once, then served in process until another client changes a key it read', async () => {
  const { stores, prefix } = await open();
  try {
    assert.ok(stores.viewCache);
    await waitUntil(() => stores.viewCache?.live === true, 'tracking on');
    // The create's own invalidation (broadcast) must come first: a read it overlapped would not be kept.
    const invalidations = stores.viewCache.invalidations;
    await stores.accessKeys.create(testKeyRecord('cached-a', 'ak_cached_a'));
    await waitUntil(
      () => (stores.viewCache?.invalidations ?? 0) > invalidations,
      "the create's invalidation",
    );
    const query = { keyHash: hashAccessKey('test-hash-secret', 'ak_cached_a'), currency: 'USD' };
    await stores.state.view({ keyHash: 'warm-up' }); // loads the script (NOSCRIPT, EVAL) first
    const before = await redis.commandCounts();
    const first = await stores.state.view(query);
    const second = await stores.state.view(query);
    assert.equal(first.key?.status, 'active');
    assert.equal(second, first, 'the second view is the cached answer');
    assert.equal(countDelta(before, await redis.commandCounts()).evalsha, 1);

    // Another client (an admin tool, another instance) revokes the key behind this process's back.
    await redis.admin.hset(`${prefix}access_key:cached-a`, 'status', 'revoked');
    await waitUntil(() => !cached(stores, query), 'the invalidation');
    const third = await stores.state.view(query);
    assert.equal(third.key?.status, 'revoked');

    // The same for subject state (a webhook handled by another instance's sidecar).
    const subject = { keyHash: query.keyHash, currency: 'USD' };
    assert.equal((await stores.state.view(subject)).subject, null);
    assert.ok(cached(stores, subject));
    const blocked = {
      blocked: true,
      lastEvent: 'wallet.insufficient_balance',
      lastEventId: 'e1',
      updatedAt: 1,
    };
    await redis.admin.set(`${prefix}subject:api_key:cached-a`, JSON.stringify(blocked));
    await waitUntil(() => !cached(stores, subject), 'the subject invalidation');
    assert.equal((await stores.state.view(subject)).subject?.blocked, true);

    // An unknown key hash is cached as a miss, and creating a key with that hash drops the miss.
    const unknown = { keyHash: hashAccessKey('test-hash-secret', 'ak_later') };
    assert.equal((await stores.state.view(unknown)).key, null);
    const evals = await evalshaCount();
    assert.equal((await stores.state.view(unknown)).key, null);
    assert.equal(await evalshaCount(), evals, 'the miss is served from the cache');
    await stores.accessKeys.create(testKeyRecord('later', 'ak_later'));
    await waitUntil(async () => (await stores.state.view(unknown)).key?.name === 'later', 'the new key');
  } finally {
    await stores.close();
  }
});

test("this process's own writes drop what they change at once", async () => {
  const { stores } = await open();
  try {
    const query = { subject: SUBJECT, currency: 'USD' };
    assert.equal((await stores.state.view(query)).balance, null);
    const decision = { allowed: true, balance: '5', currency: 'USD', fetchedAt: 1 };
    await stores.state.putBalance(SUBJECT, decision, 60_000);
    // No wait for the invalidation message: the write itself dropped the entry.
    assert.deepEqual((await stores.state.view(query)).balance, decision);
    await stores.state.setSubject(SUBJECT, {
      blocked: true,
      lastEvent: 'wallet.insufficient_balance',
      lastEventId: 'e2',
      updatedAt: 2,
    });
    assert.equal((await stores.state.view(query)).subject?.blocked, true);
    await stores.state.invalidateBalance(SUBJECT);
    assert.equal((await stores.state.view(query)).balance, null);
  } finally {
    await stores.close();
  }
});

test("an access-key update by another client drops every instance's cached record, as a revoke does", async () => {
  const { stores, prefix } = await open();
  // Another process on the same keys: router-admin, without a cache of its own.
  const admin = await openRedisStores(testStoreConfig(redis.url, { keyPrefix: prefix }));
  try {
    const invalidations = stores.viewCache?.invalidations ?? 0;
    await admin.accessKeys.create(testKeyRecord('upd-a', 'ak_upd_a'));
    await waitUntil(
      () => (stores.viewCache?.invalidations ?? 0) > invalidations,
      "the create's invalidation",
    );
    const query = { keyHash: hashAccessKey('test-hash-secret', 'ak_upd_a'), currency: 'USD' };
    const first = await stores.state.view(query);
    assert.equal(first.key?.limits, undefined);
    assert.equal(cached(stores, query), true);

    await admin.accessKeys.update('upd-a', { limits: { requestsPerMinute: 30 }, models: ['gpt-*'] });
    await waitUntil(() => !cached(stores, query), 'the invalidation');
    const second = await stores.state.view(query);
    assert.deepEqual(second.key?.limits, { requestsPerMinute: 30 });
    assert.deepEqual(second.key?.models, ['gpt-*']);
    assert.equal(second.key?.version, 2);

    // This process's own update drops its copy at once, without waiting for Redis's message.
    await stores.accessKeys.update('upd-a', { limits: null });
    assert.equal(cached(stores, query), false);
    assert.equal((await stores.state.view(query)).key?.limits, undefined);
  } finally {
    await admin.close();
    await stores.close();
  }
});

test('a cached balance is served no longer than its TTL in Redis', async () => {
  const { stores } = await open();
  const writer = await openRedisStores(testStoreConfig(redis.url, { keyPrefix: stores.keys.prefix }));
  try {
    const subject = { type: 'api_key', id: 'short-ttl' };
    const query = { subject, currency: 'USD' };
    await writer.state.putBalance(
      subject,
      { allowed: true, balance: '1', currency: 'USD', fetchedAt: 1 },
      80,
    );
    await waitUntil(async () => (await stores.state.view(query)).balance?.balance === '1', 'the balance');
    await waitUntil(async () => (await stores.state.view(query)).balance === null, 'the balance to expire');
  } finally {
    await writer.close();
    await stores.close();
  }
});

test('an answer read while an invalidation arrived is not kept', async () => {
  const { stores } = await open();
  try {
    const cache = stores.viewCache;
    assert.ok(cache);
    const key = viewCacheKey(undefined, 'api_key', 'raced', 'USD');
    const since = cache.epoch();
    cache.invalidate(['some-key']); // arrives while the read is in flight
    cache.put(key, since, { subject: null }, ['some-key'], 60_000);
    assert.equal(cache.get(key), undefined);
    cache.put(key, cache.epoch(), { subject: null }, ['some-key'], 60_000);
    assert.deepEqual(cache.get(key), { subject: null });
  } finally {
    await stores.close();
  }
});

test('misses of one key while its read is on its way share that read, unless an invalidation came between', async () => {
  const { stores } = await open();
  try {
    const cache = stores.viewCache;
    assert.ok(cache);
    const query = { subject: { type: 'api_key', id: 'herd' }, currency: 'USD' };
    await stores.state.view({ keyHash: 'warm-up' }); // loads the script (NOSCRIPT, EVAL) first
    const evals = await evalshaCount();
    // An entry of a busy key expired: every request in flight misses in the same turn.
    const views = await Promise.all(Array.from({ length: 16 }, () => stores.state.view(query)));
    assert.equal((await evalshaCount()) - evals, 1, 'one read for the sixteen misses');
    for (const view of views) assert.equal(view, views[0]);

    // The read of a miss taken before an invalidation is not handed to a miss that came after it.
    const key = viewCacheKey(undefined, 'api_key', 'raced-load', 'USD');
    let reads = 0;
    let answer!: (v: { view: { subject: null }; deps: string[]; ttlMs: number }) => void;
    const read = () => {
      reads++;
      return new Promise<{ view: { subject: null }; deps: string[]; ttlMs: number }>((resolve) => {
        answer = resolve;
      });
    };
    const early = cache.load(key, read);
    const joined = cache.load(key, read);
    assert.equal(joined, early);
    assert.equal(reads, 1);
    const firstAnswer = answer;
    cache.invalidate(['some-key']);
    const late = cache.load(key, read);
    assert.notEqual(late, early);
    assert.equal(reads, 2);
    firstAnswer({ view: { subject: null }, deps: ['some-key'], ttlMs: 60_000 });
    await early;
    assert.equal(cache.get(key), undefined, 'the early answer is not kept');
    answer({ view: { subject: null }, deps: ['some-key'], ttlMs: 60_000 });
    await late;
    assert.deepEqual(cache.get(key), { subject: null });
    // A settled read is not shared: a later miss (the entry expired) reads again.
    void cache.load(key, read);
    assert.equal(reads, 3);
    answer({ view: { subject: null }, deps: ['some-key'], ttlMs: 60_000 });
  } finally {
    await stores.close();
  }
});

test('while the tracking connection is down the cache is empty and unused; it resumes once tracking is back', async () => {
  const { stores } = await open();
  try {
    const cache = stores.viewCache;
    assert.ok(cache);
    const query = { subject: SUBJECT };
    await stores.state.view(query);
    assert.equal(cache.size, 1);
    const addrs = await redis.clientAddrs('router-store-tracking');
    assert.equal(addrs.size, 1);
    for (const addr of addrs) await redis.admin.client('KILL', 'ADDR', addr);
    await waitUntil(() => !cache.live, 'the cache to switch off');
    assert.equal(cache.size, 0);
    await waitUntil(() => cache.live, 'tracking again', 10_000);
    const evals = await evalshaCount();
    await stores.state.view(query);
    await stores.state.view(query);
    assert.equal((await evalshaCount()) - evals, 1, 'read once after the reconnect, then cached');

    // FLUSHALL: every entry goes.
    await redis.admin.flushall();
    await waitUntil(() => cache.size === 0, 'the flush');
  } finally {
    await stores.close();
  }
});

test('the entry count is capped; the oldest entries go first', async () => {
  const cache = openViewCache(testStoreConfig(redis.url), {
    maxAgeMs: 60_000,
    maxEntries: 2,
    prefixes: ['x:'],
  });
  try {
    await waitUntil(() => cache.live, 'tracking on');
    for (const id of ['a', 'b', 'c']) cache.put(id, cache.epoch(), { subject: null }, [`x:${id}`], 60_000);
    assert.equal(cache.size, 2);
    assert.equal(cache.get('a'), undefined);
    assert.deepEqual(cache.get('c'), { subject: null });
    // An entry dropped by the cap no longer answers to its key's invalidation (nothing left behind).
    await redis.admin.set('x:a', '1');
    await redis.admin.set('x:b', '1');
    await waitUntil(() => cache.size === 1, 'the invalidation of b');
  } finally {
    await cache.close();
  }
});
