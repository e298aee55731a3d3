// Shared-store mode against a real three-primary Redis Cluster (store.cluster): key layout in hash slots
// (every state key in the `{state}` slot, each billing stream shard in a slot of its own), the view read in
// one script on the right node, the view cache kept exact by tracking on every node, usage events spread
// over the shards and delivered from all of them, and a restart of the primary holding the state slot.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { StoreConfig } from '../../common/config-types.ts';
import { hashAccessKey } from '../../hooks/builtin/auth.ts';
import { createRedisEventQueue } from '../../proxy/redis-queue.ts';
import { startShardedConsumers } from '../../sidecar/stream-consumer.ts';
import { createKeyLayout, createRedisClient, keySlot, waitReady } from '../../store/redis-client.ts';
import { openRedisStores } from '../../store/redis-store.ts';
import { viewCacheKey } from '../../store/view-cache.ts';
import { waitUntil } from '../support/billing-stack.ts';
import { testKeyRecord, testStoreConfig } from '../support/redis.ts';
import { type RedisClusterSetup, startRedisCluster } from '../support/redis-cluster.ts';
import { makeEvent } from '../support/usage-events.ts';

let cluster: RedisClusterSetup;

before(async () => {
  cluster = await startRedisCluster();
});
after(() => cluster?.close());

function clusterConfig(overrides: Partial<StoreConfig> = {}): StoreConfig {
  const addr = cluster.seeds
    .split(',')
    .map((s) => `redis://${s}`)
    .join(',');
  return testStoreConfig(addr, { cluster: true, ...overrides });
}

/** The slot of a key, as the cluster computes it. */
async function slotOf(key: string): Promise<number> {
  return Number(await cluster.admin.call('CLUSTER', 'KEYSLOT', key));
}

test('the key layout: state keys share the {state} slot, stream shards get slots of their own', async () => {
  const k = createKeyLayout({
    keyPrefix: 'router:',
    billingStream: 'billing:events',
    cluster: true,
    billingStreamShards: 4,
  });
  const state = await slotOf(k.accessKeyIndex);
  for (const key of [
    k.accessKey('a'),
    k.subject('api_key', 'x'),
    k.balance('api_key', 'x', 'USD'),
    k.balanceLock('api_key', 'x', 'USD'),
    k.webhook('evt_1'),
  ]) {
    assert.ok(key.startsWith('router:'), key);
    assert.equal(await slotOf(key), state, key);
  }
  const shardSlots = new Set<number>();
  for (const shard of k.shards) {
    const slot = await slotOf(shard.stream);
    assert.equal(await slotOf(shard.attempts), slot);
    assert.equal(await slotOf(shard.deadLetter), slot);
    shardSlots.add(slot);
  }
  assert.equal(shardSlots.size, 4);
  // A single endpoint keeps the layout of earlier versions.
  const single = createKeyLayout({ keyPrefix: 'router:', billingStream: 'billing:events' });
  assert.equal(single.accessKeyIndex, 'router:access_key:index');
  assert.equal(single.shards[0]?.stream, 'router:billing:events');
});

test('keys made on one instance are seen by another; a revoke reaches its view cache at once', async () => {
  const config = clusterConfig();
  const a = await openRedisStores(config, { currencies: ['USD'], viewCacheMs: 60_000 });
  const b = await openRedisStores(config, { currencies: ['USD'], viewCacheMs: 60_000 });
  try {
    assert.ok(b.viewCache);
    await waitUntil(() => b.viewCache?.live === true, 'tracking on every node');
    // The create's own invalidation (broadcast) reaches b first: a read it overlapped would not be kept.
    const before = b.viewCache.invalidations;
    await a.accessKeys.create(testKeyRecord('cl-a', 'ak_cluster_a'));
    await waitUntil(() => (b.viewCache?.invalidations ?? 0) > before, "the create's invalidation");
    const query = { keyHash: hashAccessKey('test-hash-secret', 'ak_cluster_a'), currency: 'USD' };
    const first = await b.state.view(query);
    assert.equal(first.key?.status, 'active');
    assert.equal(first.subject, null);
    assert.equal(await b.state.view(query), first, 'served from the view cache');

    await a.accessKeys.revoke('cl-a');
    const key = viewCacheKey(query.keyHash, undefined, undefined, 'USD');
    await waitUntil(() => b.viewCache?.get(key) === undefined, 'the invalidation from the owning node');
    assert.equal((await b.state.view(query)).key?.status, 'revoked');

    // Subject state and balances (the balance pre-check's reads) live in the same slot.
    const subject = { type: 'api_key', id: 'cl-a' };
    await a.state.setSubject(subject, {
      blocked: true,
      lastEvent: 'wallet.insufficient_balance',
      lastEventId: 'e1',
      updatedAt: 1,
    });
    await waitUntil(async () => (await b.state.view(query)).subject?.blocked === true, 'the block');
    assert.equal(await a.state.claimWebhook('evt_cluster_1', 60_000), true);
    assert.equal(await b.state.claimWebhook('evt_cluster_1', 60_000), false);
  } finally {
    await a.close();
    await b.close();
  }
});

test("a key's limits updated on one instance reach another's view cache; subject limits in their own slot", async () => {
  const config = clusterConfig();
  const a = await openRedisStores(config, { currencies: ['USD'] });
  const b = await openRedisStores(config, { currencies: ['USD'], viewCacheMs: 60_000 });
  try {
    await waitUntil(() => b.viewCache?.live === true, 'tracking on every node');
    const before = b.viewCache?.invalidations ?? 0;
    await a.accessKeys.create(testKeyRecord('cl-lim', 'ak_cluster_lim'));
    await waitUntil(() => (b.viewCache?.invalidations ?? 0) > before, "the create's invalidation");
    const query = { keyHash: hashAccessKey('test-hash-secret', 'ak_cluster_lim') };
    assert.equal((await b.state.view(query)).key?.limits, undefined);
    const key = viewCacheKey(query.keyHash);
    assert.notEqual(b.viewCache?.get(key), undefined, 'cached');

    const updated = await a.accessKeys.update('cl-lim', { limits: { maxConcurrent: 2 }, models: ['gpt-*'] });
    assert.equal(updated?.version, 2);
    await waitUntil(() => b.viewCache?.get(key) === undefined, 'the invalidation from the owning node');
    const seen = (await b.state.view(query)).key;
    assert.deepEqual(seen?.limits, { maxConcurrent: 2 });
    assert.deepEqual(seen?.models, ['gpt-*']);

    const subject = { type: 'team', id: 'cl-team' };
    await a.subjectLimits.setSubjectLimits(subject, { requestsPerMinute: 50, tokensPerMinute: 900 });
    assert.deepEqual(await b.subjectLimits.getSubjectLimits(subject), {
      requestsPerMinute: 50,
      tokensPerMinute: 900,
    });
    const limitsKey = `${config.keyPrefix}{rl:team:cl-team}:limits`;
    assert.equal(await slotOf(limitsKey), await slotOf(`${config.keyPrefix}{rl:team:cl-team}:s:r`));
    await a.subjectLimits.setSubjectLimits(subject, undefined);
    assert.equal(await b.subjectLimits.getSubjectLimits(subject), undefined);
  } finally {
    await a.close();
    await b.close();
  }
});

test('usage events spread over four shards; one consumer per shard delivers every one once', async () => {
  const config = clusterConfig({ billingStreamShards: 4 });
  const k = createKeyLayout(config);
  for (const shard of k.shards) assert.equal(keySlot(shard.stream), await slotOf(shard.stream));
  const client = createRedisClient(config, { writeAtOnce: true, ownTimeouts: true });
  try {
    assert.ok(await waitReady(client, 5000));
    const queue = createRedisEventQueue(client, k, undefined, undefined, undefined, 2000);
    for (const node of cluster.nodes) await node.admin.config('RESETSTAT');
    // One event per turn: each turn's batch goes to the next shard.
    for (let i = 0; i < 40; i++) {
      await queue.enqueue(makeEvent(i));
      await queue.recorded?.();
    }
    // Then four turns of three events each: one script call per turn, again one shard after the other.
    for (let turn = 0; turn < 4; turn++) {
      const enqueued = await new Promise<Promise<void>[]>((resolve) => {
        const events: Promise<void>[] = [];
        for (let j = 0; j < 3; j++) {
          setImmediate(() => {
            events.push(queue.enqueue(makeEvent(40 + turn * 3 + j)));
            if (j === 2) resolve(events);
          });
        }
      });
      await queue.recorded?.();
      await Promise.all(enqueued);
    }
    await queue.settled();
    const lengths = await Promise.all(k.shards.map((shard) => cluster.admin.xlen(shard.stream)));
    assert.deepEqual(lengths, [13, 13, 13, 13]);
    // Each command went straight to the node of its shard's slot: no node answered MOVED.
    for (const node of cluster.nodes) {
      assert.doesNotMatch(String(await node.admin.info('errorstats')), /errorstat_MOVED/);
    }
  } finally {
    client.disconnect();
  }
  const received: string[] = [];
  const consumer = await startShardedConsumers({
    store: config,
    billing: { retryIntervalMs: 10, maxRetryIntervalMs: 50 },
    client: {
      ingest: async (event) => {
        received.push(event.external_event_id);
        return { kind: 'ok', status: 202 };
      },
    },
    blockMs: 50,
  });
  try {
    await waitUntil(async () => (await consumer.status()).pending === 0, 'delivery from every shard', 15_000);
    assert.equal(received.length, 52);
    assert.equal(new Set(received).size, 52);
    assert.equal(consumer.counters().delivered, 52);
  } finally {
    await consumer.stop();
  }
});
