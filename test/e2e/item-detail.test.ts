// billing.item_detail (docs/billing.md "Charge items"): a rule set written to the specification charges
// prompt_tokens and completion_tokens only. With the default item_detail `spec`, the billing simulator in
// its spec rule set mode charges a request with cache reads and writes, and a realtime session with
// audio, exactly what the detailed items charge a rule set that charges them all; and every event
// names the price table that priced it. Two real stacks (gateway, sidecar, upstream and billing
// simulators), prices from the shipped deploy/config/pricing.yaml.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Decimal } from 'decimal.js';
import type { UsageEvent } from '../../billing/event/usage-event.ts';
import { loadPricing } from '../../billing/pricing.ts';
import { chargeItems } from '../../sim/billing/pricing.ts';
import {
  BILLING_API_KEY,
  BILLING_PROJECT,
  type BillingStack,
  startBillingStack,
} from '../support/billing-stack.ts';
import { RealtimeClient } from '../support/realtime-client.ts';
import { ACCESS_KEY, PRICING_FILE } from '../support/stack.ts';
import { chargeOf } from '../support/usage-events.ts';

let spec: BillingStack;
let detailed: BillingStack;

before(async () => {
  [spec, detailed] = await Promise.all([
    // The defaults: item_detail spec; the simulator's rule set charges the spec's two metrics only.
    startBillingStack({ billingSim: { ruleSetMode: 'spec' } }),
    startBillingStack({ billing: { item_detail: 'detailed' } }),
  ]);
});
after(async () => {
  await Promise.all([spec?.close(), detailed?.close()]);
});

async function post(stack: BillingStack, path: string, rid: string, body: unknown): Promise<void> {
  const res = await fetch(`${stack.url}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${ACCESS_KEY}`,
      'content-type': 'application/json',
      'anthropic-version': '2023-06-01',
      'x-router-request-id': rid,
    },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  assert.equal(res.status, 200, text);
}

/** Two audio responses in one session; the second reads the first from the cache. Their event ids. */
async function realtimeSession(stack: BillingStack, rid: string): Promise<string[]> {
  const session = await RealtimeClient.open(
    `${stack.url.replace(/^http/, 'ws')}/v1/realtime?model=gpt-realtime`,
    {
      headers: { authorization: `Bearer ${ACCESS_KEY}`, 'x-router-request-id': rid },
    },
  );
  await session.until((m) => m.type === 'session.created');
  const ids: string[] = [];
  for (const text of ['Tell me a story about a lighthouse.', 'And another one, please.']) {
    session.ws.send(
      JSON.stringify({
        type: 'conversation.item.create',
        item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] },
      }),
    );
    session.ws.send(JSON.stringify({ type: 'response.create' }));
    const done = await session.until((m) => m.type === 'response.done');
    ids.push(`${rid}:${done.response.id}`);
  }
  session.ws.close(1000);
  await session.closed;
  return ids;
}

/** Sends the same requests to a stack; the ids of their events. */
async function traffic(stack: BillingStack): Promise<string[]> {
  const long = 'The quick brown fox jumps over the lazy dog. '.repeat(300);
  await post(stack, '/v1/chat/completions', 'cache-chat', {
    model: 'gpt-5.4-mini-cached-1024',
    messages: [{ role: 'user', content: long }],
  });
  await post(stack, '/v1/messages', 'cache-claude', {
    model: 'claude-sonnet-5-cached-1536-cachewrite-700',
    max_tokens: 256,
    messages: [{ role: 'user', content: long }],
  });
  return ['cache-chat', 'cache-claude', ...(await realtimeSession(stack, 'audio'))];
}

/** The amounts the billing simulator's rule set charged, by event id (its usage details). */
async function chargedAmounts(stack: BillingStack): Promise<Map<string, string>> {
  const res = await fetch(
    `${stack.billing.url}/v1/projects/${BILLING_PROJECT}/usage/events/details?limit=100`,
    { headers: { authorization: `Bearer ${BILLING_API_KEY}` } },
  );
  const body = (await res.json()) as { data: (UsageEvent & { amounts: Record<string, string> })[] };
  return new Map(body.data.map((e) => [e.external_event_id, e.amounts.USD ?? '0']));
}

test('a spec rule set charges, with item_detail spec, exactly what the detailed items charge', async () => {
  const [specIds, detailedIds] = await Promise.all([traffic(spec), traffic(detailed)]);
  assert.deepEqual(
    specIds.map((id) => id.split(':')[0]),
    ['cache-chat', 'cache-claude', 'audio', 'audio'],
  );
  const specEvents = await Promise.all(specIds.map((id) => spec.eventFor(id)));
  const detailedEvents = await Promise.all(detailedIds.map((id) => detailed.eventFor(id)));
  await spec.sidecar?.worker?.waitForDrain();
  await detailed.sidecar?.worker?.waitForDrain();

  const specCharged = await chargedAmounts(spec);
  const detailedCharged = await chargedAmounts(detailed);
  const parts = new Set<string>();
  for (const [i, s] of specEvents.entries()) {
    const d = detailedEvents[i]!;
    assert.deepEqual(s.raw_json.usage, d.raw_json.usage, 'the same usage reached both gateways');
    assert.deepEqual(
      s['x-billing']?.items.map((item) => item.metric),
      ['prompt_tokens', 'completion_tokens'],
      'spec mode: the two metrics only',
    );
    const detailedMetrics = d['x-billing']?.items.map((item) => item.metric) ?? [];
    for (const m of detailedMetrics) parts.add(m);
    const full = chargeOf(d).toFixed();
    assert.notEqual(full, '0');
    assert.equal(detailedCharged.get(d.external_event_id), full, 'the detailed rule set charges every item');
    assert.equal(specCharged.get(s.external_event_id), full, `${s.external_event_id}: the same amount`);
    // What a spec rule set would have charged for the detailed items: less, whenever there are parts.
    const specOfDetailed = chargeItems(d, 'spec').reduce(
      (sum, c) => (c.amount === undefined ? sum : sum.plus(c.amount)),
      new Decimal(0),
    );
    if (detailedMetrics.length > 2)
      assert.ok(specOfDetailed.lessThan(full), 'detailed items under-charge a spec rule set');
  }
  for (const m of ['cache_read_tokens', 'cache_creation_tokens', 'input_audio_tokens', 'output_audio_tokens'])
    assert.ok(parts.has(m), `the traffic has ${m}`);
  assert.equal(spec.debited(), detailed.debited(), 'the wallets were debited alike');
});

test('every event carries the price version of the shipped pricing file, the same on both gateways', async () => {
  const version = (await loadPricing([PRICING_FILE])).pricing.version;
  assert.match(version, /^sha256:[0-9a-f]{16}$/);
  for (const stack of [spec, detailed]) {
    const loaded = stack.logs.filter((l) => l.msg === 'pricing loaded');
    assert.equal(loaded.length, 1);
    assert.equal(loaded[0]?.priceVersion, version, 'the gateway logs the version it loaded');
    assert.ok(stack.billing.events.length >= 4);
    for (const event of stack.billing.events) {
      assert.equal(event.raw_json.meta.price_version, version, event.external_event_id);
      assert.equal(event['x-billing']?.price_version, version);
      assert.equal(event.raw_json.meta.unpriced, undefined);
    }
  }
});
