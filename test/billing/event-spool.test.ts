// The spool of shared-store mode on a real redis-server: events the stream cannot take are on disk by
// the time recorded() resolves, and are moved to the stream exactly once, also when the mover died
// between its XADD and its checkpoint.

import assert from 'node:assert/strict';
import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { type TokenEvent, usageEventOf } from '../../billing/event/token-event.ts';
import { openEventSpool } from '../../billing/event-spool.ts';
import { createRedisEventQueue } from '../../proxy/redis-queue.ts';
import { createKeyLayout, createRedisClient } from '../../store/redis-client.ts';
import { waitUntil } from '../support/billing-stack.ts';
import { type RedisServer, startRedis, testStoreConfig } from '../support/redis.ts';
import { makeEvent } from '../support/usage-events.ts';

let redis: RedisServer;
const dirs: string[] = [];
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.close();
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'router-spool-'));
  dirs.push(dir);
  return dir;
}

async function streamIds(stream: string): Promise<string[]> {
  const entries = await redis.admin.xrange(stream, '-', '+');
  return entries.map(([, f]) => (JSON.parse(f[1]!) as { idempotency_key: string }).idempotency_key);
}

function tokenEvent(i: number): TokenEvent {
  return {
    source: 'router',
    subjectType: 'api_key',
    subjectId: 'client-a',
    provider: 'openai',
    api: 'chat.completions',
    model: 'gpt-4o-mini',
    stream: false,
    status: 200,
    usageStage: 'upstream',
    aliases: true,
    promptHint: undefined,
    completionHint: undefined,
    priceVersion: 'sha256:0123456789abcdef',
    unpriced: true,
    id: `req-${i}`,
    correlationId: undefined,
    occurredAt: 1760000000 + i,
    input: 12,
    output: 5,
    total: 17,
  };
}

test('Redis down: the queue spools each event, on disk once recorded() resolves; moved when Redis is back', async () => {
  const store = testStoreConfig(redis.url);
  const keys = createKeyLayout(store);
  const root = await tempDir();
  await redis.stop();
  let restarted = false;
  try {
    const spool = await openEventSpool(root, store);
    const client = createRedisClient(store, { writeAtOnce: true });
    const queue = createRedisEventQueue(client, keys, spool);
    const enqueued = Array.from({ length: 5 }, (_, i) => queue.enqueue(makeEvent(i)));
    // Token events as the gateway's hook hands them over: made whole for the spool.
    const parts = [5, 6].map((i) => tokenEvent(i));
    const tokens = parts.map((t) => usageEventOf(t));
    assert.ok(queue.enqueueTokens);
    for (const t of parts) enqueued.push(queue.enqueueTokens(t));
    const recorded = queue.recorded?.();
    assert.ok(recorded instanceof Promise);
    await recorded;
    const text = await readFile(join(spool.dir, 'events.jsonl'), 'utf8');
    for (let i = 0; i < 5; i++) assert.ok(text.includes(`"router:req-${i}"`), `req-${i} in the spool`);
    await Promise.all(enqueued);
    assert.equal(await spool.pending(), 7);

    await redis.start();
    restarted = true;
    await waitUntil(async () => (await spool.pending()) === 0, 'the spool moved to the stream');
    assert.deepEqual(
      (await streamIds(keys.shards[0]!.stream)).sort(),
      Array.from({ length: 7 }, (_, i) => `router:req-${i}`).sort(),
    );
    const moved = await redis.admin.xrange(keys.shards[0]!.stream, '-', '+');
    for (const e of tokens) {
      const entry = moved.find(([, f]) => f[1]!.includes(`"${e.idempotency_key}"`));
      assert.deepEqual(JSON.parse(entry![1][1]!), e, 'a spooled token event reaches the stream whole');
    }
    await queue.settled();
    client.disconnect();
    await spool.close();
  } finally {
    if (!restarted) await redis.start();
  }
});

test('a mover that died between XADD and checkpoint moves again: nothing twice on the stream', async () => {
  const store = testStoreConfig(redis.url);
  const keys = createKeyLayout(store);
  const root = await tempDir();
  const expected = Array.from({ length: 150 }, (_, i) => `router:req-${i}`);

  // Events in the spool while Redis is away.
  await redis.stop();
  const first = await openEventSpool(root, store);
  await Promise.all(Array.from({ length: 150 }, (_, i) => first.append(makeEvent(i))));
  await first.close();
  await redis.start();
  const before = join(await tempDir(), 'snapshot');
  await cp(join(root, 'spool'), before, { recursive: true });

  const second = await openEventSpool(root, store);
  await waitUntil(async () => (await second.pending()) === 0, 'moved');
  await second.close();
  assert.deepEqual((await streamIds(keys.shards[0]!.stream)).sort(), [...expected].sort());

  // The spool as it was before the move: the state a crash after the XADDs and before the checkpoint
  // leaves behind. The next mover sends all 150 again; the markers keep them off the stream.
  await rm(join(root, 'spool'), { recursive: true });
  await cp(before, join(root, 'spool'), { recursive: true });
  const third = await openEventSpool(root, store);
  await waitUntil(async () => (await third.pending()) === 0, 'moved again');
  await third.close();
  assert.deepEqual((await streamIds(keys.shards[0]!.stream)).sort(), [...expected].sort(), 'each event once');
  const ttl = await redis.admin.pttl(`${keys.shards[0]!.stream}:moved:router:req-0`);
  assert.ok(ttl > 0, 'the markers expire');
});

test('a second spool takes the next slot; a slot whose writer is gone is drained by the next spool', async () => {
  const store = testStoreConfig(redis.url);
  const keys = createKeyLayout(store);
  const root = await tempDir();
  await redis.stop();
  const a = await openEventSpool(root, store);
  const b = await openEventSpool(root, store);
  assert.equal(a.dir, join(root, 'spool', '0'));
  assert.equal(b.dir, join(root, 'spool', '1'), 'slot 0 is locked by a live writer');
  await a.append(makeEvent(0));
  await b.append(makeEvent(1));
  await b.close();
  await a.close();
  await redis.start();

  const c = await openEventSpool(root, store);
  assert.equal(c.dir, join(root, 'spool', '0'));
  await waitUntil(async () => (await c.pending()) === 0, 'both slots moved');
  await c.close();
  assert.deepEqual((await streamIds(keys.shards[0]!.stream)).sort(), ['router:req-0', 'router:req-1']);
});

test('with billing_wait_replicas, a move no replica acknowledged stays in the spool (moved again later)', async () => {
  // This server has no replica: WAIT 1 answers 0, so no move may count as done.
  const store = testStoreConfig(redis.url, { billingWaitReplicas: 1, operationTimeoutMs: 50 });
  const keys = createKeyLayout(store);
  const root = await tempDir();
  const spool = await openEventSpool(root, store);
  try {
    await spool.append(makeEvent(1));
    // The move itself reaches the stream (and is marked), but is not acknowledged by a replica.
    await waitUntil(
      async () => (await streamIds(keys.shards[0]!.stream)).length === 1,
      'the move was attempted',
    );
    assert.equal(await spool.pending(), 1, 'still pending: no replica has it');
  } finally {
    await spool.close();
  }
});
