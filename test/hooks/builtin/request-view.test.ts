// The auth and balance hooks in shared-store mode against a real redis-server: with the view cache warm
// they answer without a wait and without a store command, the balance hook taking what the auth hook
// read; a change made by another client is seen at the next request.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { pino } from 'pino';
import { GatewayError } from '../../../common/errors.ts';
import type { OnRequestResult, RequestContext } from '../../../common/types.ts';
import {
  createAuthenticator,
  createStoreAuthenticator,
  createStoreAuthHook,
} from '../../../hooks/builtin/auth.ts';
import { createBalanceCheckHook } from '../../../hooks/builtin/balance-check.ts';
import { openRedisStores, type RedisStores } from '../../../store/redis-store.ts';
import { waitUntil } from '../../support/billing-stack.ts';
import { type RedisServer, startRedis, testKeyRecord, testStoreConfig } from '../../support/redis.ts';

const silent = pino({ level: 'silent' });
const SECRET = 'ak_peek_test_secret';

let redis: RedisServer;
let stores: RedisStores;
before(async () => {
  redis = await startRedis();
  stores = await openRedisStores(testStoreConfig(redis.url, { accessKeyMode: 'redis_only' }), {
    currencies: ['USD'],
    viewCacheMs: 60_000,
  });
  await waitUntil(() => stores.viewCache?.live === true, 'tracking on');
});
after(async () => {
  await stores?.close();
  await redis?.close();
});

function requestWith(secret: string): RequestContext {
  return {
    id: 'req-peek',
    headers: { authorization: `Bearer ${secret}` },
    query: new URLSearchParams(),
    log: silent,
  } as unknown as RequestContext;
}

test('a warm view cache answers the auth and balance hooks without a wait; a revoke by another client is refused next', async () => {
  const file = createAuthenticator({
    keys: { accessKeys: [] },
    masterKey: undefined,
    subjectType: 'api_key',
    fallbackSubjectId: '',
    hashSecret: undefined,
  } as unknown as Parameters<typeof createAuthenticator>[0]);
  const auth = createStoreAuthHook(
    createStoreAuthenticator(file, {
      store: stores.state,
      mode: 'redis_only',
      hashSecret: 'test-hash-secret',
      masterKey: undefined,
      subjectType: 'api_key',
      currency: 'USD',
    }),
    stores.state,
  );
  let lookups = 0;
  const balance = createBalanceCheckHook({
    config: {
      enabled: true,
      currency: 'USD',
      failureMode: 'closed',
      requestTimeoutMs: 1000,
      cacheTtlMs: 60_000,
      deniedCacheTtlMs: 1000,
    },
    store: stores.state,
    lookup: async () => {
      lookups++;
      return { balance: '5.00', currency: 'USD' };
    },
  });
  const invalidations = stores.viewCache!.invalidations;
  await stores.accessKeys.create(testKeyRecord('peek', SECRET));
  await waitUntil(() => stores.viewCache!.invalidations > invalidations, "the create's invalidation");

  // Cold: the key is read from Redis, the balance asked for and cached.
  const cold = requestWith(SECRET);
  const coldAuth = auth.authenticate!(cold);
  assert.ok(coldAuth instanceof Promise);
  await coldAuth;
  const coldBalance = balance.onRequest!(cold);
  assert.ok(coldBalance instanceof Promise);
  await coldBalance;
  assert.equal(lookups, 1);
  // The balance write dropped the entry the cold read made: one more request reads it again.
  await waitUntil(async () => {
    const again = requestWith(SECRET);
    const result = auth.authenticate!(again);
    await result;
    await balance.onRequest!(again);
    return !(result instanceof Promise);
  }, 'a warm entry');

  const monitor = await redis.monitor();
  const warm = requestWith(SECRET);
  const authed = auth.authenticate!(warm) as OnRequestResult;
  assert.ok(!(authed instanceof Promise), 'the auth hook answered at once');
  assert.equal(warm.principal?.subjectId, 'peek');
  const allowed = balance.onRequest!(warm);
  assert.ok(!(allowed instanceof Promise), 'the balance hook answered at once');
  assert.equal(lookups, 1);
  assert.deepEqual(await monitor.stop(), [], 'no store command');

  // Another client revokes the key: the next request is refused.
  const heard = stores.viewCache!.invalidations;
  await redis.admin.hset(`${stores.keys.prefix}access_key:peek`, 'status', 'revoked');
  await waitUntil(() => stores.viewCache!.invalidations > heard, 'the revoke at this process');
  const refused = requestWith(SECRET);
  await assert.rejects(
    async () => auth.authenticate!(refused),
    (err: unknown) => err instanceof GatewayError && err.code === 'invalid_api_key',
  );
});
