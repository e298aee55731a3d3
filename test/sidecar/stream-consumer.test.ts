import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { IngestResult } from '../../billing/billing-client.ts';
import { createBillingClient } from '../../billing/billing-client.ts';
import type { UsageEvent } from '../../billing/event/usage-event.ts';
import type { StoreConfig } from '../../common/config-types.ts';
import { createRedisEventQueue } from '../../proxy/redis-queue.ts';
import { type StreamConsumer, startStreamConsumer } from '../../sidecar/stream-consumer.ts';
import { startBillingSim } from '../../sim/billing/server.ts';
import { createKeyLayout, createRedisClient, waitReady } from '../../store/redis-client.ts';
import { countDelta, type RedisServer, startRedis, testStoreConfig } from '../support/redis.ts';
import { makeEvent as makeEventWithAliases } from '../support/usage-events.ts';

let redis: RedisServer;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.close();
});

function makeEvent(i: number): UsageEvent {
  return makeEventWithAliases(i, { aliases: true });
}

const BILLING = { retryIntervalMs: 5, maxRetryIntervalMs: 20 };

async function enqueue(store: StoreConfig, events: UsageEvent[]): Promise<void> {
  const client = createRedisClient(store);
  await waitReady(client, 2000);
  const queue = createRedisEventQueue(client, createKeyLayout(store));
  for (const e of events) await queue.enqueue(e);
  client.disconnect();
}

async function until(check: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A scripted billing client: answers from `script` per call (then ok), recording what it saw. */
function scriptedClient(script: (call: number, event: UsageEvent) => IngestResult | 'hang') {
  const seen: string[] = [];
  let calls = 0;
  return {
    seen,
    ingest(event: UsageEvent, signal?: AbortSignal): Promise<IngestResult> {
      seen.push(event.idempotency_key);
      const answer = script(++calls, event);
      if (answer !== 'hang') return Promise.resolve(answer);
      return new Promise((resolve) => {
        signal?.addEventListener('abort', () =>
          resolve({
            kind: 'retryable',
            status: undefined,
            code: 'aborted',
            message: 'aborted',
            unavailable: true,
          }),
        );
      });
    },
  };
}

test('delivers every stream entry to the billing simulator once, then acks and deletes it', async () => {
  const sim = await startBillingSim({ apiKey: 'sk-test' });
  const store = testStoreConfig(redis.url);
  const client = createBillingClient({
    baseUrl: sim.url,
    projectId: sim.projectId,
    apiKey: 'sk-test',
    extractorRuleSetId: 'rs_router',
    requestTimeoutMs: 2000,
  });
  let consumer: StreamConsumer | undefined;
  try {
    await enqueue(
      store,
      Array.from({ length: 25 }, (_, i) => makeEvent(i)),
    );
    consumer = await startStreamConsumer({ store, billing: BILLING, client, window: 4 });
    await sim.waitForEvents(25, 10_000);
    const k = createKeyLayout(store);
    await until(async () => (await redis.admin.xlen(k.shards[0]!.stream)) === 0, 'stream emptied');
    assert.equal(sim.accepted, 25);
    assert.equal(sim.duplicates, 0);
    assert.deepEqual(await consumer.status(), { pending: 0, claimed: 0, deadLetter: 0 });
    assert.equal(await redis.admin.exists(k.shards[0]!.attempts), 0);
    assert.equal(consumer.counters().delivered, 25);
  } finally {
    await consumer?.stop();
    await client.close();
    await sim.close();
  }
});

test('delivered entries are acknowledged in batches: one MULTI (XACK, XDEL, HDEL of every id) for many events', async () => {
  const store = testStoreConfig(redis.url);
  const k = createKeyLayout(store);
  await enqueue(
    store,
    Array.from({ length: 8 }, (_, i) => makeEvent(100 + i)),
  );
  // Every ingest answers at once: the 8 of one read are acknowledged together (within ACK_DELAY_MS).
  const client = scriptedClient(() => ({ kind: 'ok', status: 202 }));
  const before = await redis.commandCounts();
  const consumer = await startStreamConsumer({ store, billing: BILLING, client, window: 8 });
  try {
    await until(async () => (await redis.admin.xlen(k.shards[0]!.stream)) === 0, 'stream emptied');
    assert.equal(client.seen.length, 8);
    const delta = countDelta(before, await redis.commandCounts());
    assert.ok((delta.xack ?? 0) >= 1 && (delta.xack ?? 0) < 8, `batched XACKs: ${JSON.stringify(delta)}`);
    assert.equal(delta.xack, delta.xdel);
    assert.equal(delta.xack, delta.exec);
    const pending = (await redis.admin.xpending(k.shards[0]!.stream, 'router-billing')) as [
      number,
      ...unknown[],
    ];
    assert.equal(pending[0], 0, 'nothing left pending');
  } finally {
    await consumer.stop();
  }
});

test('counted failures dead-letter at billing_max_attempts; outage failures are not counted', async () => {
  const store = testStoreConfig(redis.url, { billingMaxAttempts: 3 });
  const k = createKeyLayout(store);
  const client = scriptedClient((_call, event) => {
    if (event.idempotency_key === 'router:req-poison')
      return { kind: 'permanent', status: 400, code: 'http_400', message: 'bad event' };
    if (
      event.idempotency_key === 'router:req-outage' &&
      client.seen.filter((s) => s === 'router:req-outage').length <= 6
    )
      return { kind: 'retryable', status: 503, code: 'http_503', message: 'down', unavailable: true };
    return { kind: 'ok', status: 202 };
  });
  const poison = { ...makeEvent(0), idempotency_key: 'router:req-poison', external_event_id: 'req-poison' };
  const outage = { ...makeEvent(1), idempotency_key: 'router:req-outage', external_event_id: 'req-outage' };
  await enqueue(store, [poison, outage]);
  await redis.admin.xadd(k.shards[0]!.stream, '*', 'payload', '{not json');
  const consumer = await startStreamConsumer({ store, billing: BILLING, client, window: 4 });
  try {
    await until(async () => (await redis.admin.xlen(k.shards[0]!.deadLetter)) === 2, 'two dead letters');
    await until(async () => (await redis.admin.xlen(k.shards[0]!.stream)) === 0, 'stream emptied');
    assert.equal(client.seen.filter((s) => s === 'router:req-poison').length, 3, 'three counted attempts');
    assert.equal(client.seen.filter((s) => s === 'router:req-outage').length, 7, 'six outages + success');
    const dead = await redis.admin.xrange(k.shards[0]!.deadLetter, '-', '+');
    const fields = dead.map(([, f]) => {
      const o: Record<string, string> = {};
      for (let i = 0; i + 1 < f.length; i += 2) o[f[i]!] = f[i + 1]!;
      return o;
    });
    const byCode = new Map(fields.map((f) => [f.error_code, f]));
    assert.equal(byCode.get('http_400')?.attempts, '3');
    assert.equal(JSON.parse(byCode.get('http_400')?.payload ?? '{}').idempotency_key, 'router:req-poison');
    assert.equal(byCode.get('invalid_payload')?.payload, '{not json');
    assert.equal(
      await redis.admin.exists(k.shards[0]!.attempts),
      0,
      'attempt counts removed with the entries',
    );
    assert.deepEqual(await consumer.status(), { pending: 0, claimed: 0, deadLetter: 2 });
  } finally {
    await consumer.stop();
  }
});

test("a dead consumer's pending entries are reclaimed by another after the idle timeout, billed once", async () => {
  const sim = await startBillingSim({ apiKey: 'sk-test' });
  const store = testStoreConfig(redis.url, { reclaimIdleMs: 300 });
  const k = createKeyLayout(store);
  const real = createBillingClient({
    baseUrl: sim.url,
    projectId: sim.projectId,
    apiKey: 'sk-test',
    extractorRuleSetId: 'rs_router',
    requestTimeoutMs: 2000,
  });
  let b: StreamConsumer | undefined;
  try {
    await enqueue(
      store,
      Array.from({ length: 5 }, (_, i) => makeEvent(100 + i)),
    );
    // What a consumer killed mid-delivery leaves: entries read under its name, never acknowledged.
    await redis.admin
      .xgroup('CREATE', k.shards[0]!.stream, store.billingConsumerGroup, '0', 'MKSTREAM')
      .catch(() => undefined);
    await redis.admin.call(
      'XREADGROUP',
      'GROUP',
      store.billingConsumerGroup,
      'consumer-a',
      'COUNT',
      10,
      'STREAMS',
      k.shards[0]!.stream,
      '>',
    );
    const pending = (await redis.admin.xpending(k.shards[0]!.stream, store.billingConsumerGroup)) as [
      number,
      string,
      string,
      [string, string][],
    ];
    assert.deepEqual(pending[3], [['consumer-a', '5']]);

    b = await startStreamConsumer({
      store: { ...store, billingConsumerName: 'consumer-b' },
      billing: BILLING,
      client: real,
      window: 8,
      reclaimIntervalMs: 50,
    });
    await sim.waitForEvents(5, 10_000);
    await until(async () => (await redis.admin.xlen(k.shards[0]!.stream)) === 0, 'stream emptied');
    assert.equal(sim.accepted, 5);
    assert.equal(b.counters().reclaimed, 5);
    assert.deepEqual(
      sim.events.map((e) => e.idempotency_key).sort(),
      Array.from({ length: 5 }, (_, i) => `router:req-${100 + i}`).sort(),
    );
  } finally {
    await b?.stop();
    await real.close();
    await sim.close();
  }
});

test('a consumer that stops hands back what it had not delivered: another sends it at once, attempts kept', async () => {
  // An idle time no test waits out: only a hand-back can make B deliver.
  const store = testStoreConfig(redis.url, { reclaimIdleMs: 600_000 });
  const k = createKeyLayout(store);
  // A fails the first entry once (counted: the others are accepted), then hangs on every send.
  let firstFailed = false;
  const a = scriptedClient((_call, event) => {
    if (event.idempotency_key === 'router:req-300' && !firstFailed) {
      firstFailed = true;
      return { kind: 'permanent', status: 400, code: 'http_400', message: 'refused' };
    }
    return 'hang';
  });
  const b = scriptedClient(() => ({ kind: 'ok', status: 202 }));
  await enqueue(
    store,
    Array.from({ length: 6 }, (_, i) => makeEvent(300 + i)),
  );
  const consumerA = await startStreamConsumer({
    store: { ...store, billingConsumerName: 'leaver-a' },
    billing: { retryIntervalMs: 1, maxRetryIntervalMs: 1 },
    client: a,
    window: 4,
  });
  let consumerB: StreamConsumer | undefined;
  try {
    await until(async () => a.seen.length >= 5, 'A holding four entries, one retried');
    const before = (await redis.admin.xrange(k.shards[0]!.stream, '-', '+')).map(([id]) => id);
    await consumerA.stop({ abort: true });

    const after = await redis.admin.xrange(k.shards[0]!.stream, '-', '+');
    assert.equal(after.length, 6, 'nothing lost, nothing doubled');
    const pending = (await redis.admin.xpending(k.shards[0]!.stream, store.billingConsumerGroup)) as [number];
    assert.equal(pending[0], 0, 'A holds nothing after its stop');
    const moved = after.filter(([id]) => !before.includes(id));
    assert.equal(moved.length, 4, "A's four entries are back under new ids");
    const attempts = await redis.admin.hgetall(k.shards[0]!.attempts);
    assert.deepEqual(Object.values(attempts), ['1'], 'the counted attempt moved with its entry');
    const [movedId] = Object.keys(attempts);
    assert.ok(moved.some(([id]) => id === movedId));

    consumerB = await startStreamConsumer({
      store: { ...store, billingConsumerName: 'leaver-b' },
      billing: BILLING,
      client: b,
      window: 8,
    });
    await until(async () => (await redis.admin.xlen(k.shards[0]!.stream)) === 0, 'B delivered everything');
    assert.deepEqual([...b.seen].sort(), Array.from({ length: 6 }, (_, i) => `router:req-${300 + i}`).sort());
    assert.equal(consumerB.counters().reclaimed, 0, 'read as new entries, not reclaimed');
  } finally {
    await consumerA.stop();
    await consumerB?.stop();
  }
});

test('a live consumer keeps its entries: no reclaim while it retries past the idle timeout', async () => {
  const store = testStoreConfig(redis.url, { reclaimIdleMs: 150 });
  const failUntil = Date.now() + 800;
  const slow = scriptedClient(() =>
    Date.now() < failUntil
      ? { kind: 'retryable', status: 503, code: 'http_503', message: 'down', unavailable: true }
      : { kind: 'ok', status: 202 },
  );
  const other = scriptedClient(() => ({ kind: 'ok', status: 202 }));
  await enqueue(store, [makeEvent(200)]);
  const a = await startStreamConsumer({
    store: { ...store, billingConsumerName: 'keeper-a' },
    billing: { retryIntervalMs: 50, maxRetryIntervalMs: 100 },
    client: slow,
  });
  await until(async () => slow.seen.length >= 1, 'A took the entry');
  const b = await startStreamConsumer({
    store: { ...store, billingConsumerName: 'keeper-b' },
    billing: BILLING,
    client: other,
    reclaimIntervalMs: 20,
  });
  try {
    const k = createKeyLayout(store);
    await until(async () => (await redis.admin.xlen(k.shards[0]!.stream)) === 0, 'delivered', 10_000);
    assert.equal(other.seen.length, 0, 'the live owner was never robbed');
    assert.ok(slow.seen.length >= 2);
  } finally {
    await a.stop();
    await b.stop();
  }
});

test('store restart: the consumer recreates its group and delivers new entries', async () => {
  const store = testStoreConfig(redis.url);
  const k = createKeyLayout(store);
  const client = scriptedClient(() => ({ kind: 'ok', status: 202 }));
  const consumer = await startStreamConsumer({ store, billing: BILLING, client, blockMs: 100 });
  try {
    await enqueue(store, [makeEvent(300)]);
    await until(async () => client.seen.length === 1, 'first delivery');
    await redis.stop();
    await until(async () => consumer.counters().lastError?.code === 'store_error', 'a failed read');
    await assert.rejects(consumer.status());
    await redis.start();
    await redis.admin.ping().catch(() => undefined);
    await until(async () => (await redis.admin.ping().catch(() => '')) === 'PONG', 'admin reconnected');
    await enqueue(store, [makeEvent(301)]);
    await until(async () => client.seen.includes('router:req-301'), 'delivery after restart');
    await until(async () => (await redis.admin.xlen(k.shards[0]!.stream)) === 0, 'acked after restart');
  } finally {
    await consumer.stop();
  }
});
