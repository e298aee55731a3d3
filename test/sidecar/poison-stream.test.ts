// Shared-store mode, with a real redis-server, the billing simulator and the real billing client: a
// poison entry is dead-lettered after billing_max_attempts counted attempts (also across a consumer
// restart) while the others are delivered; an outage (500 to everything, or the service down) moves
// nothing to the dead letter.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type BillingClient, createBillingClient } from '../../billing/billing-client.ts';
import type { UsageEvent } from '../../billing/event/usage-event.ts';
import type { StoreConfig } from '../../common/config-types.ts';
import { type StreamConsumer, startStreamConsumer } from '../../sidecar/stream-consumer.ts';
import { type BillingSim, type BillingSimOptions, startBillingSim } from '../../sim/billing/server.ts';
import { createKeyLayout } from '../../store/redis-client.ts';
import { waitUntil } from '../support/billing-stack.ts';
import { type RedisServer, startRedis, testStoreConfig } from '../support/redis.ts';
import { makeEvent } from '../support/usage-events.ts';

const BILLING = { retryIntervalMs: 5, maxRetryIntervalMs: 20 };
const MAX_ATTEMPTS = 3;
const BODY_LIMIT = 8192;
const EVENTS = 20;

let redis: RedisServer;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.close();
});

interface Parts {
  sim: BillingSim;
  client: BillingClient;
  store: StoreConfig;
  keys: ReturnType<typeof createKeyLayout>;
  consumers: StreamConsumer[];
  start(billing?: typeof BILLING): Promise<StreamConsumer>;
}

async function parts(
  t: { after: (fn: () => Promise<void>) => void },
  simOptions: Partial<BillingSimOptions> = {},
): Promise<Parts> {
  const sim = await startBillingSim({ apiKey: 'sk-test', ...simOptions });
  const client = createBillingClient({
    baseUrl: sim.url,
    projectId: sim.projectId,
    apiKey: 'sk-test',
    extractorRuleSetId: 'rs_router',
    requestTimeoutMs: 2000,
  });
  const store = testStoreConfig(redis.url, {
    billingMaxAttempts: MAX_ATTEMPTS,
    billingConsumerName: 'poison-test',
  });
  const consumers: StreamConsumer[] = [];
  t.after(async () => {
    for (const c of consumers) await c.stop({ abort: true });
    await client.close();
    await sim.close();
  });
  return {
    sim,
    client,
    store,
    keys: createKeyLayout(store),
    consumers,
    async start(billing = BILLING) {
      const c = await startStreamConsumer({ store, billing, client, window: 4, random: () => 0.99 });
      consumers.push(c);
      return c;
    },
  };
}

async function enqueue(p: Parts, events: UsageEvent[]): Promise<string[]> {
  const ids: string[] = [];
  for (const e of events)
    ids.push((await redis.admin.xadd(p.keys.shards[0]!.stream, '*', 'payload', JSON.stringify(e))) ?? '');
  return ids;
}

function oversized(i: number): UsageEvent {
  const e = makeEvent(i);
  return { ...e, raw_json: { ...e.raw_json, model: `m-${'x'.repeat(BODY_LIMIT * 2)}` } };
}

async function deadLetterFields(p: Parts): Promise<Record<string, string>[]> {
  return (await redis.admin.xrange(p.keys.shards[0]!.deadLetter, '-', '+')).map(([, f]) => {
    const o: Record<string, string> = {};
    for (let i = 0; i + 1 < f.length; i += 2) o[f[i]!] = f[i + 1]!;
    return o;
  });
}

const others = (): UsageEvent[] => Array.from({ length: EVENTS - 1 }, (_, i) => makeEvent(i + 1));

test('poison entry dropped mid-upload: dead-lettered after billing_max_attempts, the others delivered', async (t) => {
  const p = await parts(t, { ingestBodyLimitBytes: BODY_LIMIT, oversize: 'reset' });
  await enqueue(p, [oversized(0), ...others()]);
  const consumer = await p.start();
  await p.sim.waitForEvents(EVENTS - 1, 15_000);
  await waitUntil(
    async () => (await redis.admin.xlen(p.keys.shards[0]!.deadLetter)) === 1,
    'one dead letter',
  );
  await waitUntil(async () => (await redis.admin.xlen(p.keys.shards[0]!.stream)) === 0, 'stream emptied');
  const [dead] = await deadLetterFields(p);
  assert.ok(dead);
  assert.equal(dead.attempts, String(MAX_ATTEMPTS));
  assert.equal(dead.error_code, 'connection_reset');
  assert.equal((JSON.parse(dead.payload!) as UsageEvent).external_event_id, 'req-0');
  assert.equal(p.sim.accepted, EVENTS - 1);
  assert.equal(p.sim.ingestCalls, EVENTS - 1 + MAX_ATTEMPTS);
  assert.equal(consumer.counters().deadLettered, 1);
});

test('poison entry across a consumer restart: its count persists, max_attempts sends in total', async (t) => {
  const p = await parts(t, { ingestBodyLimitBytes: BODY_LIMIT, oversize: '413' });
  const [poisonId] = await enqueue(p, [oversized(0), ...others()]);
  assert.ok(poisonId);
  // The first consumer's retry waits far longer than the test: it stops after one counted attempt.
  const first = await p.start({ retryIntervalMs: 600_000, maxRetryIntervalMs: 600_000 });
  await p.sim.waitForEvents(EVENTS - 1, 15_000);
  await waitUntil(
    async () => (await redis.admin.hget(p.keys.shards[0]!.attempts, poisonId)) === '1',
    'one count',
  );
  await first.stop({ abort: true });
  await p.start(); // same consumer name: takes its pending entry back with its count
  await waitUntil(
    async () => (await redis.admin.xlen(p.keys.shards[0]!.deadLetter)) === 1,
    'one dead letter',
  );
  const [dead] = await deadLetterFields(p);
  assert.ok(dead);
  assert.equal(dead.attempts, String(MAX_ATTEMPTS));
  assert.equal(dead.error_code, 'http_413');
  const poisonCalls = p.sim.ingestCalls - p.sim.accepted - p.sim.duplicates;
  assert.equal(poisonCalls, MAX_ATTEMPTS);
});

test('500 to every ingest, however long and across a restart: nothing is dead-lettered', async (t) => {
  const p = await parts(t);
  p.sim.setFailure('error500');
  await enqueue(
    p,
    Array.from({ length: 5 }, (_, i) => makeEvent(i)),
  );
  const first = await p.start();
  await waitUntil(() => first.counters().failedAttempts >= 15 * MAX_ATTEMPTS, 'many failed tries');
  await first.stop({ abort: true });
  const second = await p.start();
  await waitUntil(() => second.counters().failedAttempts >= 15 * MAX_ATTEMPTS, 'many more after a restart');
  assert.equal(await redis.admin.xlen(p.keys.shards[0]!.deadLetter), 0);
  assert.equal(first.counters().deadLettered + second.counters().deadLettered, 0);
  p.sim.setFailure('none');
  await p.sim.waitForEvents(5, 15_000);
  await waitUntil(async () => (await redis.admin.xlen(p.keys.shards[0]!.stream)) === 0, 'stream emptied');
  assert.equal(await redis.admin.xlen(p.keys.shards[0]!.deadLetter), 0);
});

test('service down: nothing is dead-lettered; delivered once it is back', async (t) => {
  const p = await parts(t);
  const port = Number(new URL(p.sim.url).port);
  await p.sim.close();
  await enqueue(
    p,
    Array.from({ length: 5 }, (_, i) => makeEvent(i)),
  );
  const consumer = await p.start();
  await waitUntil(() => consumer.counters().failedAttempts >= 10 * MAX_ATTEMPTS, 'many failed tries');
  assert.equal(await redis.admin.xlen(p.keys.shards[0]!.deadLetter), 0);
  const back = await startBillingSim({ apiKey: 'sk-test', port });
  t.after(() => back.close());
  await back.waitForEvents(5, 15_000);
  await waitUntil(async () => (await redis.admin.xlen(p.keys.shards[0]!.stream)) === 0, 'stream emptied');
  assert.equal(await redis.admin.xlen(p.keys.shards[0]!.deadLetter), 0);
});
