import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { StoreUnavailableError } from '../../common/store-types.ts';
import { hashAccessKey } from '../../hooks/builtin/auth.ts';
import { openRedisStores, type RedisStores } from '../../store/redis-store.ts';
import { type RedisServer, startRedis, testKeyRecord, testStoreConfig } from '../support/redis.ts';

let redis: RedisServer;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.close();
});

async function open(): Promise<{ stores: RedisStores; prefix: string }> {
  const config = testStoreConfig(redis.url);
  const stores = await openRedisStores(config, { currencies: ['USD'] });
  assert.equal(stores.connected, true);
  return { stores, prefix: config.keyPrefix };
}

test('access keys: create, lookup by hash in one view, list, revoke, rotate; no plaintext stored', async () => {
  const { stores, prefix } = await open();
  try {
    const secret = 'ak_secret_one';
    assert.equal(await stores.accessKeys.create(testKeyRecord('client-a', secret)), 'created');
    assert.equal(await stores.accessKeys.create(testKeyRecord('client-a', 'other')), 'exists');
    const hash = hashAccessKey('test-hash-secret', secret);

    const v = await stores.state.view({ keyHash: hash, currency: 'USD' });
    assert.equal(v.key?.name, 'client-a');
    assert.equal(v.key?.status, 'active');
    assert.equal(v.subject, null);
    assert.equal(v.balance, null);

    const missing = await stores.state.view({ keyHash: 'nope' });
    assert.equal(missing.key, null);
    assert.equal(missing.subject, undefined);

    // Nothing under the prefix holds the secret.
    const keys = await redis.admin.keys(`${prefix}*`);
    assert.deepEqual(keys.sort(), [`${prefix}access_key:client-a`, `${prefix}access_key:index`]);
    const dump = JSON.stringify(await redis.admin.hgetall(`${prefix}access_key:client-a`));
    assert.equal(dump.includes(secret), false);
    assert.equal(await redis.admin.hget(`${prefix}access_key:index`, hash), 'client-a');

    const revoked = await stores.accessKeys.revoke('client-a');
    assert.equal(revoked?.status, 'revoked');
    assert.equal(revoked?.version, 2);
    assert.equal((await stores.state.view({ keyHash: hash })).key?.status, 'revoked');
    assert.equal(await stores.accessKeys.revoke('unknown'), undefined);

    await stores.accessKeys.create(testKeyRecord('client-b', 'ak_b'));
    const newHash = hashAccessKey('test-hash-secret', 'ak_b2');
    const rotated = await stores.accessKeys.rotate('client-b', newHash);
    assert.equal(rotated?.secretHash, newHash);
    assert.equal(rotated?.version, 2);
    assert.equal((await stores.state.view({ keyHash: hashAccessKey('test-hash-secret', 'ak_b') })).key, null);
    assert.equal((await stores.state.view({ keyHash: newHash })).key?.name, 'client-b');

    const list = await stores.accessKeys.list();
    assert.deepEqual(
      list.map((k) => [k.name, k.status]),
      [
        ['client-a', 'revoked'],
        ['client-b', 'active'],
      ],
    );
  } finally {
    await stores.close();
  }
});

test('view reads key, subject state and cached balance in one EVALSHA', async () => {
  const { stores } = await open();
  try {
    await stores.accessKeys.create(testKeyRecord('client-c', 'ak_c', { subjectId: 'acct-c' }));
    const subject = { type: 'api_key', id: 'acct-c' };
    await stores.state.setSubject(subject, {
      blocked: true,
      lastEvent: 'wallet.insufficient_balance',
      lastEventId: 'evt_1',
      updatedAt: 1,
    });
    await stores.state.putBalance(
      subject,
      { allowed: false, balance: '0', currency: 'USD', fetchedAt: 2 },
      60_000,
    );
    const hash = hashAccessKey('test-hash-secret', 'ak_c');
    await stores.state.view({ keyHash: hash, currency: 'USD' }); // script loaded
    const monitor = await redis.monitor();
    const v = await stores.state.view({ keyHash: hash, currency: 'USD' });
    const sent = await monitor.stop();
    assert.deepEqual(
      sent.map((c) => c[0]),
      ['evalsha'],
    );
    assert.equal(v.subject?.blocked, true);
    assert.equal(v.balance?.allowed, false);

    // Subject asked directly (no key).
    const bySubject = await stores.state.view({ subject, currency: 'USD' });
    assert.equal(bySubject.key, undefined);
    assert.equal(bySubject.subject?.lastEventId, 'evt_1');

    await stores.state.invalidateBalance(subject);
    assert.equal((await stores.state.view({ subject, currency: 'USD' })).balance, null);
  } finally {
    await stores.close();
  }
});

test('webhook claims, refresh lock single flight, subject state round trip', async () => {
  const { stores } = await open();
  try {
    assert.equal(await stores.state.claimWebhook('evt_9', 60_000), true);
    assert.equal(await stores.state.claimWebhook('evt_9', 60_000), false);
    await stores.state.releaseWebhook('evt_9');
    assert.equal(await stores.state.claimWebhook('evt_9', 60_000), true);

    const subject = { type: 'api_key', id: 'lock-me' };
    assert.equal(await stores.state.tryRefreshLock(subject, 'USD', 60_000), true);
    assert.equal(await stores.state.tryRefreshLock(subject, 'USD', 60_000), false);
    await stores.state.putBalance(
      subject,
      { allowed: true, balance: '5', currency: 'USD', fetchedAt: 1 },
      60_000,
    );
    // putBalance releases the lock: the next refresh may start.
    assert.equal(await stores.state.tryRefreshLock(subject, 'USD', 60_000), true);

    assert.equal(await stores.state.getSubject(subject), undefined);
    await stores.state.setSubject(subject, {
      blocked: false,
      lastEvent: 'x',
      lastEventId: 'e',
      updatedAt: 3,
    });
    assert.equal((await stores.state.getSubject(subject))?.lastEvent, 'x');
  } finally {
    await stores.close();
  }
});

test('access keys: limits and models round trip; update changes and clears them atomically and bumps version', async () => {
  const { stores, prefix } = await open();
  try {
    const limits = { requestsPerMinute: 600, tokensPerMinute: 200_000, maxConcurrent: 8 };
    await stores.accessKeys.create(
      testKeyRecord('lim-a', 'ak_lim_a', { limits, models: ['gpt-*', 'claude-*'] }),
    );
    const record = await redis.admin.hgetall(`${prefix}access_key:lim-a`);
    assert.deepEqual(JSON.parse(record.limits!), {
      requests_per_minute: 600,
      tokens_per_minute: 200000,
      max_concurrent: 8,
    });
    assert.deepEqual(JSON.parse(record.models!), ['gpt-*', 'claude-*']);
    const got = await stores.accessKeys.get('lim-a');
    assert.deepEqual(got?.limits, limits);
    assert.deepEqual(got?.models, ['gpt-*', 'claude-*']);
    const hash = hashAccessKey('test-hash-secret', 'ak_lim_a');
    assert.deepEqual((await stores.state.view({ keyHash: hash })).key?.limits, limits);

    const changed = await stores.accessKeys.update('lim-a', { limits: { maxConcurrent: 2 } });
    assert.deepEqual(changed?.limits, { maxConcurrent: 2 });
    assert.deepEqual(changed?.models, ['gpt-*', 'claude-*'], 'models left as they were');
    assert.equal(changed?.version, 2);
    assert.equal(changed?.secretHash, hash);

    const cleared = await stores.accessKeys.update('lim-a', { limits: null, models: ['o3*'] });
    assert.equal(cleared?.limits, undefined);
    assert.deepEqual(cleared?.models, ['o3*']);
    assert.equal(cleared?.version, 3);
    assert.equal(await redis.admin.hexists(`${prefix}access_key:lim-a`, 'limits'), 0);

    const none = await stores.accessKeys.update('lim-a', { models: null });
    assert.equal(none?.models, undefined);
    assert.equal(await redis.admin.hexists(`${prefix}access_key:lim-a`, 'models'), 0);
    assert.equal((await stores.state.view({ keyHash: hash })).key?.version, 4);

    assert.equal(await stores.accessKeys.update('nobody', { limits: { maxConcurrent: 1 } }), undefined);
    assert.equal(
      await redis.admin.exists(`${prefix}access_key:nobody`),
      0,
      'no record made for an unknown name',
    );

    // A hand-edited, malformed field is read as unset: the key still authenticates.
    await redis.admin.hset(`${prefix}access_key:lim-a`, 'limits', '{"requests_per_minute":"lots"}');
    const view = await stores.state.view({ keyHash: hash });
    assert.equal(view.key?.name, 'lim-a');
    assert.equal(view.key?.limits, undefined);
  } finally {
    await stores.close();
  }
});

test("subject limits: set, read, replace and clear the subject's {rl:<type>:<id>}:limits hash", async () => {
  const { stores, prefix } = await open();
  try {
    const subject = { type: 'team', id: 'team-x' };
    const key = `${prefix}{rl:team:team-x}:limits`;
    assert.equal(await stores.subjectLimits.getSubjectLimits(subject), undefined);
    await stores.subjectLimits.setSubjectLimits(subject, { requestsPerMinute: 100, maxConcurrent: 4 });
    assert.deepEqual(await redis.admin.hgetall(key), { requests_per_minute: '100', max_concurrent: '4' });
    assert.deepEqual(await stores.subjectLimits.getSubjectLimits(subject), {
      requestsPerMinute: 100,
      maxConcurrent: 4,
    });
    // The state store carries the same (how the gateway reaches it).
    assert.deepEqual(await stores.state.subjectLimits?.getSubjectLimits(subject), {
      requestsPerMinute: 100,
      maxConcurrent: 4,
    });
    await stores.subjectLimits.setSubjectLimits(subject, { tokensPerMinute: 5000 });
    assert.deepEqual(await redis.admin.hgetall(key), { tokens_per_minute: '5000' }, 'replaced whole');
    await stores.subjectLimits.setSubjectLimits(subject, undefined);
    assert.equal(await redis.admin.exists(key), 0);
    assert.equal(await stores.subjectLimits.getSubjectLimits(subject), undefined);
    await stores.subjectLimits.setSubjectLimits(subject, {});
    assert.equal(await redis.admin.exists(key), 0, 'no limit set: nothing kept');
  } finally {
    await stores.close();
  }
});

test('store down: operations fail fast with StoreUnavailableError and recover after restart', async () => {
  const { stores } = await open();
  try {
    await stores.accessKeys.create(testKeyRecord('client-d', 'ak_d'));
    await redis.stop();
    const started = Date.now();
    await assert.rejects(stores.state.view({ keyHash: 'x' }), StoreUnavailableError);
    await assert.rejects(stores.state.getSubject({ type: 'a', id: 'b' }), StoreUnavailableError);
    assert.ok(Date.now() - started < 2000, 'fails within the operation timeout, not after retries');
    assert.deepEqual(await stores.state.health(), { connected: false });
    await redis.start();
    await redis.admin.ping();
    const { waitReady } = await import('../../store/redis-client.ts');
    assert.equal(await waitReady(stores.client, 5000), true);
    // The server restarted empty: the script is reloaded transparently (NOSCRIPT -> EVAL).
    const v = await stores.state.view({ keyHash: hashAccessKey('test-hash-secret', 'ak_d') });
    assert.equal(v.key, null);
    assert.deepEqual(await stores.state.health(), { connected: true });
  } finally {
    await stores.close();
  }
});
