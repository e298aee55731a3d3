// The HELP texts of router_billing_events_total and router_unreported_requests_total list exactly the
// values the usage-event hooks emit (billing on, and billing off): every outcome of a request the hooks
// see is driven once, and /metrics is compared with HELP.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import type { EventQueue } from '../../billing/event/event-queue.ts';
import { compilePricing } from '../../billing/pricing.ts';
import type { BillingConfig } from '../../common/config-types.ts';
import type { RequestContext } from '../../common/types.ts';
import { createBillingEnqueueHook, createBillingOffHook } from '../../proxy/enqueue-hook.ts';
import { createGatewayMetrics } from '../../proxy/metrics.ts';

const log = pino({ level: 'silent' });

function request(id: string, fields: Partial<Record<string, unknown>> = {}): RequestContext {
  return {
    id,
    api: 'chat.completions',
    clientFormat: 'openai-chat',
    receivedAt: Date.now(),
    provider: 'openai',
    model: 'gpt-5.4-mini',
    stream: false,
    status: 200,
    usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 },
    usageStage: 'upstream',
    principal: { subjectType: 'api_key', subjectId: 'client_a' },
    log,
    ...fields,
  } as unknown as RequestContext;
}

test('router_billing_events_total and router_unreported_requests_total: HELP names exactly what the hooks emit', async () => {
  const metrics = createGatewayMetrics();
  let fail = false;
  const queue: EventQueue = {
    enqueue: () => (fail ? Promise.reject(new Error('disk full')) : Promise.resolve()),
  };
  const hook = createBillingEnqueueHook({
    // The hook exists only with billing on (proxy/runtime.ts).
    billing: {
      enabled: true,
      onlyBillableSuccess: true,
      subjectType: 'api_key',
      fallbackSubjectId: '',
      source: 'llm-router',
    } as BillingConfig,
    pricing: compilePricing([]).pricing,
    queue,
    metrics,
    log,
  });
  hook.onComplete!(request('queued'));
  await new Promise((resolve) => setImmediate(resolve));
  fail = true;
  hook.onComplete!(request('failed'));
  hook.onComplete!(request('status', { status: 500 }));
  hook.onComplete!(request('no-subject', { principal: undefined }));
  hook.onComplete!(request('count', { api: 'messages.count_tokens' }));
  hook.onComplete!(request('aborted', { status: 0 }));
  hook.onComplete!(request('unmetered', { usage: undefined }));
  createBillingOffHook(metrics).onComplete!(request('billing-off'));
  const voiding = createBillingEnqueueHook({
    billing: {
      enabled: true,
      onlyBillableSuccess: false,
      subjectType: 'api_key',
      fallbackSubjectId: '',
      source: 'llm-router',
      interruptedStream: 'void',
    } as BillingConfig,
    pricing: compilePricing([]).pricing,
    queue,
    metrics,
    log,
  });
  voiding.onComplete!(request('interrupted', { stream: true, endReason: 'client_gone' }));
  await new Promise((resolve) => setImmediate(resolve));

  const text = await metrics.registry.metrics();
  const help = /^# HELP router_billing_events_total [^:\n]*: (.*)$/m.exec(text);
  assert.ok(help !== null, text);
  const listed = help[1]!.split(', ').sort();
  const emitted = [...text.matchAll(/^router_billing_events_total\{result="([^"]+)"\} [1-9]/gm)]
    .map((m) => m[1]!)
    .sort();
  assert.deepEqual(emitted, [
    'not_billable',
    'queue_failed',
    'queued',
    'skip_disabled',
    'skip_no_subject',
    'skip_status',
    'void_interrupted',
  ]);
  assert.deepEqual(listed, emitted);

  const reasonsHelp = /^# HELP router_unreported_requests_total [^:\n]*: (.*)$/m.exec(text);
  assert.ok(reasonsHelp !== null, text);
  const reasons = [...text.matchAll(/^router_unreported_requests_total\{reason="([^"]+)"\} [1-9]/gm)]
    .map((m) => m[1]!)
    .sort();
  assert.deepEqual(reasons, ['client_aborted', 'no_usage']);
  assert.deepEqual(reasonsHelp[1]!.split(', ').sort(), reasons);
});
