// The sidecar's delivery joins its request's trace: the request's traceparent travels beside the usage
// event (the outbox line, the Redis stream entry), the ingest call is a CLIENT span under the request's
// server span, and the billing service receives the event without it.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { IngestResult } from '../../billing/billing-client.ts';
import { TRACE_KEY, type UsageEvent } from '../../billing/event/usage-event.ts';
import { createRedisEventQueue } from '../../proxy/redis-queue.ts';
import { startStreamConsumer } from '../../sidecar/stream-consumer.ts';
import { createKeyLayout, createRedisClient, waitReady } from '../../store/redis-client.ts';
import { type BillingStack, outboxText, startBillingStack } from '../support/billing-stack.ts';
import { type OtlpReceiver, startOtlpReceiver } from '../support/otlp-receiver.ts';
import { type RedisServer, startRedis, testStoreConfig } from '../support/redis.ts';
import { ACCESS_KEY } from '../support/stack.ts';
import { makeEvent } from '../support/usage-events.ts';

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';

let receiver: OtlpReceiver;
let stack: BillingStack;
let redis: RedisServer;

before(async () => {
  receiver = await startOtlpReceiver();
  redis = await startRedis();
  stack = await startBillingStack({
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '20',
    },
  });
});

after(async () => {
  await stack?.close();
  await receiver?.close();
  await redis?.close();
});

test('file mode: the outbox line carries the traceparent; the ingest span is under the request span', async () => {
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${ACCESS_KEY}`,
      'content-type': 'application/json',
      traceparent: `00-${TRACE_ID}-b7ad6b7169203331-01`,
      'x-router-request-id': 'tr-billing-1',
    },
    body: JSON.stringify({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] }),
  });
  assert.equal(res.status, 200);
  await res.arrayBuffer();
  const event = await stack.eventFor('tr-billing-1');
  assert.equal(TRACE_KEY in event, false, 'the billing service never receives the trace');

  await receiver.waitFor((spans) => spans.some((s) => s.name === 'billing ingest' && s.traceId === TRACE_ID));
  const server = receiver.spans.find(
    (s) => s.kind === 2 && s.attributes['router.request_id'] === 'tr-billing-1',
  );
  assert.ok(server);
  const ingest = receiver.spans.find((s) => s.name === 'billing ingest' && s.traceId === TRACE_ID)!;
  assert.equal(ingest.parentSpanId, server.spanId);
  assert.equal(ingest.kind, 3);
  assert.equal(ingest.attributes['http.response.status_code'], 202);
  assert.equal(ingest.attributes['router.request_id'], 'tr-billing-1');
  assert.equal(ingest.resource['router.component'], 'billing-sidecar');

  const line = (await outboxText(stack.outboxDir)).split('\n').find((l) => l.includes('"tr-billing-1"'));
  // A token-only event is written as the outbox's compact line, its traceparent the last element.
  assert.ok(line, 'the event is in the outbox');
  assert.ok(line.startsWith('[1,'), line);
  assert.ok(line.endsWith(`,"00-${TRACE_ID}-${server.spanId}-01"]`), line);
});

test('Redis stream: the entry carries the traceparent; the consumer hands it to the ingest, not the event', async () => {
  const store = testStoreConfig(redis.url, { keyPrefix: 'trace:' });
  const client = createRedisClient(store);
  await waitReady(client, 2000);
  const traceparent = `00-${TRACE_ID}-00f067aa0ba902b7-01`;
  const seen: { event: UsageEvent; traceparent: string | undefined }[] = [];
  const consumer = await startStreamConsumer({
    store,
    billing: { retryIntervalMs: 5, maxRetryIntervalMs: 20 },
    client: {
      ingest(event, _signal, carried): Promise<IngestResult> {
        seen.push({ event, traceparent: carried });
        return Promise.resolve({ kind: 'ok', status: 200 });
      },
    },
    window: 2,
  });
  try {
    const queue = createRedisEventQueue(client, createKeyLayout(store));
    await queue.enqueue(makeEvent(1), traceparent);
    await queue.enqueue(makeEvent(2));
    const start = Date.now();
    while (seen.length < 2) {
      if (Date.now() - start > 10_000) throw new Error('the consumer did not deliver both events');
      await new Promise((r) => setTimeout(r, 10));
    }
    const byKey = new Map(seen.map((s) => [s.event.idempotency_key, s]));
    assert.equal(byKey.get(makeEvent(1).idempotency_key)?.traceparent, traceparent);
    assert.equal(byKey.get(makeEvent(2).idempotency_key)?.traceparent, undefined);
    for (const s of seen) assert.equal(TRACE_KEY in s.event, false);
  } finally {
    await consumer.stop();
    client.disconnect();
  }
});
