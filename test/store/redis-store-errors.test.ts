// Store errors against a real redis-server that the test stops: every operation the gateway runs on the
// shared store (the key lookup's view read, the rehash lookup, the rate-limit script, the response store,
// subject state) tells onStoreError of its failure exactly once, by a bounded operation name, also when
// several callers share one failed call; and closing the stores finishes against a server that is gone
// (killed: dropped at once) or that no longer answers (paused: QUIT given up after its bound), so this
// file exits.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import { after, before, test } from 'node:test';
import type { Admission } from '../../common/rate-limit-types.ts';
import { StoreUnavailableError } from '../../common/store-types.ts';
import { QUIT_TIMEOUT_MS } from '../../store/redis-client.ts';
import { openRedisStores, type RedisStores } from '../../store/redis-store.ts';
import { type RedisServer, startRedis, testKeyRecord, testStoreConfig } from '../support/redis.ts';

let redis: RedisServer;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.close();
});

const SUBJECT = { type: 'api_key', id: 'client_a' };

function admission(lease: string): Admission {
  return {
    key: undefined,
    subject: SUBJECT,
    subjectLimits: { requestsPerMinute: 100 },
    lease,
    tokens: 10,
    countRequest: true,
    holdSlot: false,
  };
}

async function open(viewCacheMs: number): Promise<{ stores: RedisStores; errors: string[] }> {
  const errors: string[] = [];
  const stores = await openRedisStores(testStoreConfig(redis.url), {
    currencies: ['USD'],
    viewCacheMs,
    onStoreError: (operation) => errors.push(operation),
  });
  assert.equal(stores.connected, true);
  return { stores, errors };
}

/** Every gateway operation once against a server that is gone: each rejects, each is told once. */
async function failEach(stores: RedisStores): Promise<void> {
  const { state } = stores;
  const { rateLimits, responses, rehashAccessKey } = state;
  assert.ok(rateLimits && responses && rehashAccessKey);
  const unavailable = (err: unknown) => err instanceof StoreUnavailableError;
  await assert.rejects(state.view({ keyHash: 'h1', currency: 'USD' }), unavailable);
  await assert.rejects(rehashAccessKey('h-old', 'h-new', 'secret-2'), unavailable);
  await assert.rejects(state.getSubject(SUBJECT), unavailable);
  // Two admissions of one subject in one turn go out as one script call: one failure, told once.
  const admits = [rateLimits.admit(admission('l1'), 60_000), rateLimits.admit(admission('l2'), 60_000)];
  for (const a of admits) await assert.rejects(Promise.resolve(a), unavailable);
  await assert.rejects(responses.get(SUBJECT, 'resp_1'), unavailable);
  await assert.rejects(
    responses.put(SUBJECT, { id: 'resp_2', record: '{}', itemIds: [] }, 60_000),
    unavailable,
  );
}

const EXPECTED = ['view', 'rehashAccessKey', 'getSubject', 'rateLimits', 'responses', 'responses'];

test('a killed server: each failed operation is counted once by its name, and close finishes', async () => {
  const { stores, errors } = await open(0);
  await stores.accessKeys.create(testKeyRecord('client-a', 'ak_one'));
  await stores.state.view({ keyHash: 'nope' });
  assert.deepEqual(errors, [], 'nothing failed while the server answered');
  await redis.stop();
  try {
    await failEach(stores);
    assert.deepEqual(errors, EXPECTED);
  } finally {
    await stores.close();
    await redis.start();
  }
});

test('with the view cache: concurrent misses share one failed read, told once; close finishes', async () => {
  const { stores, errors } = await open(1000);
  await stores.state.view({ keyHash: 'warm', currency: 'USD' });
  await redis.stop();
  try {
    const views = [1, 2, 3].map(() => stores.state.view({ keyHash: 'same', currency: 'USD' }));
    for (const v of views) await assert.rejects(v);
    // The cache is not live once its server is gone: each miss read on its own, each told once.
    assert.ok(errors.length >= 1 && errors.length <= 3, String(errors));
    assert.deepEqual(new Set(errors), new Set(['view']));
  } finally {
    await stores.close();
    await redis.start();
  }
});

test('a server that stops answering (paused): close drops the connection after its QUIT bound', async () => {
  // A command timeout far above the QUIT bound: only the bound can end the close early.
  const stores = await openRedisStores(testStoreConfig(redis.url, { operationTimeoutMs: 20_000 }), {
    viewCacheMs: 1000,
  });
  await stores.state.view({ keyHash: 'warm', currency: 'USD' });
  // The connection stays open and nothing is answered (the admin connection included) until the pause
  // ends: QUIT alone would wait for it.
  const pauseMs = 4 * QUIT_TIMEOUT_MS;
  await redis.admin.call('CLIENT', 'PAUSE', String(pauseMs), 'ALL');
  const started = performance.now();
  await stores.close();
  const took = performance.now() - started;
  assert.ok(took >= QUIT_TIMEOUT_MS - 50 && took < pauseMs - 500, `close took ${Math.round(took)} ms`);
  // The connection is being dropped, not left open: it ends without the server's help.
  if (stores.client.status !== 'end') await once(stores.client, 'end');
});
