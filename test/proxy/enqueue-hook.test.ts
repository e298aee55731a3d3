// The usage-event hook counts each event's outcome once, also when the queue puts the events of one
// event-loop turn on record together and hands them one promise: `queued` for every event of a durable
// turn, `queue_failed` for every event of a failed one, with one error line naming all their requests;
// events whose write has not settled are in flight meanwhile; an event the queue throws on is lost.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import pino from 'pino';
import type { EventQueue } from '../../billing/event/event-queue.ts';
import type { UsageEvent } from '../../billing/event/usage-event.ts';
import { openOutboxWriter } from '../../billing/outbox/writer.ts';
import { compilePricing } from '../../billing/pricing.ts';
import type { BillingConfig } from '../../common/config-types.ts';
import type { RequestContext } from '../../common/types.ts';
import { createBillingEnqueueHook } from '../../proxy/enqueue-hook.ts';
import { createGatewayMetrics } from '../../proxy/metrics.ts';

const BILLING = {
  enabled: true,
  onlyBillableSuccess: true,
  subjectType: 'api_key',
  fallbackSubjectId: '',
  source: 'llm-router',
} as BillingConfig;

function served(id: string): RequestContext {
  return {
    id,
    correlationId: undefined,
    api: 'chat.completions',
    clientFormat: 'openai-chat',
    receivedAt: Date.now(),
    provider: 'openai',
    model: 'gpt-5.4-mini',
    upstreamModel: undefined,
    channel: undefined,
    stream: false,
    status: 200,
    usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 },
    usageStage: 'upstream',
    principal: { subjectType: 'api_key', subjectId: 'client_a' },
  } as unknown as RequestContext;
}

function harness(queue: EventQueue) {
  const lines: Record<string, unknown>[] = [];
  const log = pino(
    new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
        done();
      },
    }),
  );
  const metrics = createGatewayMetrics();
  const hook = createBillingEnqueueHook({
    billing: BILLING,
    pricing: compilePricing([]).pricing,
    queue,
    metrics,
    log,
  });
  const count = async (result: string) =>
    (await metrics.registry.getSingleMetric('router_billing_events_total')!.get()).values.find(
      (v) => v.labels.result === result,
    )?.value ?? 0;
  return { hook, lines, count, metrics };
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

test('the outbox: the events of a turn share one promise, and every event is counted once', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'enqueue-hook-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const outbox = await openOutboxWriter(dir, { fsyncIntervalMs: 0 });
  t.after(() => outbox.close());
  const promises: Promise<void>[] = [];
  const paths: string[] = [];
  const queue: EventQueue = {
    enqueue(event, traceparent) {
      const p = outbox.append(event, traceparent);
      promises.push(p);
      paths.push(`whole ${event.external_event_id}`);
      return p;
    },
    enqueueTokens(event, traceparent) {
      const p = outbox.appendTokens(event, traceparent);
      promises.push(p);
      paths.push(`tokens ${event.id}`);
      return p;
    },
    recorded: () => outbox.recorded(),
  };
  const { hook, count } = harness(queue);
  for (let i = 0; i < 4; i++) hook.onComplete!(served(`a${i}`));
  const cached = served('a4');
  cached.usage = { inputTokens: 10, outputTokens: 5, totalTokens: 15, cacheReadTokens: 4 };
  hook.onComplete!(cached);
  assert.deepEqual(paths, ['tokens a0', 'tokens a1', 'tokens a2', 'tokens a3', 'whole a4']);
  await nextTurn();
  for (let i = 0; i < 3; i++) hook.onComplete!(served(`b${i}`));
  assert.equal(new Set(promises.slice(0, 5)).size, 1, 'one promise for the first turn');
  assert.equal(new Set(promises.slice(5)).size, 1, 'one promise for the second turn');
  assert.notEqual(promises[0], promises[5]);
  assert.equal(outbox.pending(), 8);
  await Promise.all(promises);
  await nextTurn();
  assert.equal(await count('queued'), 8);
  assert.equal(await count('queue_failed'), 0);
  assert.equal(outbox.pending(), 0);
});

test('a failed turn: each of its events counted as queue_failed, one error line names their requests', async () => {
  const turns: { settle: (err?: Error) => void; promise: Promise<void> }[] = [];
  let current: (typeof turns)[number] | undefined;
  const queue: EventQueue = {
    enqueue(_event: UsageEvent) {
      if (current === undefined) {
        let resolve!: () => void;
        let reject!: (err: Error) => void;
        const promise = new Promise<void>((res, rej) => {
          resolve = res;
          reject = rej;
        });
        const turn = { promise, settle: (err?: Error) => (err === undefined ? resolve() : reject(err)) };
        current = turn;
        turns.push(turn);
        setImmediate(() => {
          current = undefined;
        });
      }
      return current.promise;
    },
  };
  const { hook, lines, count } = harness(queue);
  for (let i = 0; i < 3; i++) hook.onComplete!(served(`lost-${i}`));
  await nextTurn();
  for (let i = 0; i < 2; i++) hook.onComplete!(served(`kept-${i}`));
  await nextTurn();
  hook.onComplete!(served('kept-2'));
  assert.equal(turns.length, 3);
  turns[0]!.settle(new Error('disk full'));
  turns[1]!.settle();
  turns[2]!.settle();
  await Promise.allSettled(turns.map((x) => x.promise));
  await nextTurn();
  assert.equal(await count('queue_failed'), 3);
  assert.equal(await count('queued'), 3);
  const errors = lines.filter((l) => l.msg === 'usage events could not be queued');
  assert.equal(errors.length, 1);
  assert.deepEqual(errors[0]!.reqIds, ['lost-0', 'lost-1', 'lost-2']);
});

test('events whose write has not settled are in flight (router_billing_events_in_flight), then counted once', async () => {
  let settle!: () => void;
  const pending = new Promise<void>((resolve) => {
    settle = resolve;
  });
  const { hook, metrics, count } = harness({ enqueue: () => pending });
  const inFlight = async () =>
    (await metrics.registry.getSingleMetric('router_billing_events_in_flight')!.get()).values[0]?.value;
  for (let i = 0; i < 3; i++) hook.onComplete!(served(`w${i}`));
  assert.equal(await inFlight(), 3);
  assert.equal(await count('queued'), 0);
  settle();
  await pending;
  await nextTurn();
  assert.equal(await inFlight(), 0);
  assert.equal(await count('queued'), 3);
  // The same promise handed out again after it settled is watched again: counted, not lost.
  hook.onComplete!(served('w3'));
  await nextTurn();
  assert.equal(await count('queued'), 4);
  assert.equal(await inFlight(), 0);
});

test('an event that cannot be built or handed over counts as queue_failed, with an error line', async () => {
  const { hook, lines, count } = harness({
    enqueue: () => {
      throw new Error('queue closed');
    },
  });
  hook.onComplete!(served('thrown'));
  assert.equal(await count('queue_failed'), 1);
  assert.deepEqual(lines.find((l) => l.msg === 'usage events could not be queued')?.reqIds, ['thrown']);
});
