import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Decimal } from 'decimal.js';
import fc from 'fast-check';
import { tokenEventOf, usageEventOf } from '../../billing/event/token-event.ts';
import {
  boundEventSize,
  buildTokenEvent,
  buildUsageEvent,
  MAX_EVENT_BYTES,
  reportDecision,
  type UsageEventInput,
} from '../../billing/event-builder.ts';
import { compilePricing } from '../../billing/pricing.ts';
import { eventInput } from '../support/usage-event-arbitrary.ts';

const { pricing } = compilePricing([
  {
    file: 'pricing.yaml',
    text: `prices:
  - { provider: openai, model: gpt-4o-mini, cost: { input: 0.15, output: 0.6 } }
  - { provider: openai, model: gpt-5.4-mini, cost: { input: 0.15, output: 0.6, cache_read: 0.075 } }
  - { provider: anthropic, model: "claude-*", cost: { input: 3, output: 15, cache_read: 0.3, cache_creation: 3.75 } }
`,
  },
]);

/** sum(quantity / pricing_unit * unit_price) over the hinted items, as the billing service charges. */
function amount(event: ReturnType<typeof buildUsageEvent>): string {
  const x = event['x-billing'];
  let total = new Decimal(0);
  for (const item of x?.items ?? []) {
    const hint = x?.pricing_hints?.[item.metric];
    if (hint)
      total = total.plus(new Decimal(item.quantity).times(hint.unit_price).dividedBy(hint.pricing_unit));
  }
  return total.toFixed();
}

function base(overrides: Partial<UsageEventInput> = {}): UsageEventInput {
  return {
    requestId: '<rid>',
    occurredAtMs: 1_760_000_000_000,
    provider: 'openai',
    api: 'chat.completions',
    model: 'gpt-4o-mini',
    stream: false,
    status: 200,
    usage: { inputTokens: 12, outputTokens: 5, totalTokens: 17 },
    usageStage: 'upstream',
    subjectType: 'api_key',
    subjectId: 'client-a',
    source: 'router',
    completionStyle: true,
    price: pricing.lookup('openai', 'gpt-4o-mini'),
    ...overrides,
  };
}

test("builds exactly the billing service's example event", () => {
  const expected =
    JSON.parse(`{"source":"router","external_event_id":"<rid>","idempotency_key":"router:<rid>","occurred_at":1760000000,
 "subject_type":"api_key","subject_id":"client-a",
 "raw_json":{"provider":"openai","api":"chat.completions","model":"gpt-4o-mini","stream":false,"status":200,
   "usage_stage":"upstream",
   "usage":{"input_tokens":12,"output_tokens":5,"total_tokens":17,"prompt_tokens":12,"completion_tokens":5},
   "meta":{"subject_type":"api_key","subject_id":"client-a","request_id":"<rid>"}},
 "x-billing":{"items":[{"metric":"prompt_tokens","quantity":12,"unit":"token"},
                       {"metric":"completion_tokens","quantity":5,"unit":"token"}],
   "pricing_hints":{"prompt_tokens":{"unit_price":0.15,"pricing_unit":1000000,"currency":"USD"},
                    "completion_tokens":{"unit_price":0.6,"pricing_unit":1000000,"currency":"USD"}}}}`);
  const event = buildUsageEvent(base());
  assert.deepEqual(event, expected);
  // Same keys in the same order, so the serialized bytes match too.
  assert.equal(JSON.stringify(event), JSON.stringify(expected));
});

test('occurred_at is whole Unix seconds', () => {
  assert.equal(buildUsageEvent(base({ occurredAtMs: 1_760_000_000_999 })).occurred_at, 1_760_000_000);
});

test('native rules get no completion-style aliases', () => {
  const event = buildUsageEvent(base({ api: 'native.messages', completionStyle: false }));
  assert.deepEqual(event.raw_json.usage, { input_tokens: 12, output_tokens: 5, total_tokens: 17 });
});

test('item_detail detailed: cache reads counted in usage, split into their own priced item when the price has cache_read', () => {
  const event = buildUsageEvent(
    base({
      itemDetail: 'detailed',
      model: 'gpt-5.4-mini',
      price: pricing.lookup('openai', 'gpt-5.4-mini'),
      usage: {
        inputTokens: 1342,
        outputTokens: 196,
        totalTokens: 1538,
        cacheReadTokens: 1152,
        reasoningTokens: 128,
      },
    }),
  );
  assert.deepEqual(event.raw_json.usage, {
    input_tokens: 1342,
    output_tokens: 196,
    total_tokens: 1538,
    cache_read_tokens: 1152,
    prompt_tokens: 1342,
    completion_tokens: 196,
    cached_tokens: 1152,
  });
  assert.deepEqual(event['x-billing'], {
    items: [
      { metric: 'prompt_tokens', quantity: 190, unit: 'token' },
      { metric: 'completion_tokens', quantity: 196, unit: 'token' },
      { metric: 'cache_read_tokens', quantity: 1152, unit: 'token' },
    ],
    pricing_hints: {
      prompt_tokens: { unit_price: 0.15, pricing_unit: 1000000, currency: 'USD' },
      completion_tokens: { unit_price: 0.6, pricing_unit: 1000000, currency: 'USD' },
      cache_read_tokens: { unit_price: 0.075, pricing_unit: 1000000, currency: 'USD' },
    },
  });
});

test('cache reads without a cache price stay in prompt_tokens; zero cache reads are not emitted', () => {
  const event = buildUsageEvent(
    base({ usage: { inputTokens: 100, outputTokens: 10, totalTokens: 110, cacheReadTokens: 64 } }),
  );
  assert.deepEqual(
    event['x-billing']?.items.map((i) => [i.metric, i.quantity]),
    [
      ['prompt_tokens', 100],
      ['completion_tokens', 10],
    ],
  );
  const zero = buildUsageEvent(
    base({ usage: { inputTokens: 10, outputTokens: 1, totalTokens: 11, cacheReadTokens: 0 } }),
  );
  assert.equal(zero.raw_json.usage.cache_read_tokens, undefined);
  assert.equal(zero.raw_json.usage.cached_tokens, undefined);
});

test('item_detail detailed: Anthropic cache writes and reads get their own items at their own prices', () => {
  const event = buildUsageEvent(
    base({
      itemDetail: 'detailed',
      provider: 'anthropic',
      api: 'native.messages',
      model: 'claude-sonnet-5',
      completionStyle: false,
      price: pricing.lookup('anthropic', 'claude-sonnet-5'),
      usage: {
        inputTokens: 2257,
        outputTokens: 393,
        totalTokens: 2650,
        cacheReadTokens: 2048,
        cacheCreationTokens: 188,
      },
    }),
  );
  assert.deepEqual(event.raw_json.usage, {
    input_tokens: 2257,
    output_tokens: 393,
    total_tokens: 2650,
    cache_read_tokens: 2048,
    cache_creation_tokens: 188,
  });
  assert.deepEqual(event['x-billing']?.items, [
    { metric: 'prompt_tokens', quantity: 21, unit: 'token' },
    { metric: 'completion_tokens', quantity: 393, unit: 'token' },
    { metric: 'cache_read_tokens', quantity: 2048, unit: 'token' },
    { metric: 'cache_creation_tokens', quantity: 188, unit: 'token' },
  ]);
  assert.deepEqual(Object.keys(event['x-billing']?.pricing_hints ?? {}), [
    'prompt_tokens',
    'completion_tokens',
    'cache_read_tokens',
    'cache_creation_tokens',
  ]);
  assert.equal(event['x-billing']?.pricing_hints?.['cache_creation_tokens']?.unit_price, 3.75);
});

test('item_detail spec (default): prompt_tokens is all input, its hint the exact amount of its parts', () => {
  const usage = {
    inputTokens: 2257,
    outputTokens: 393,
    totalTokens: 2650,
    cacheReadTokens: 2048,
    cacheCreationTokens: 188,
  };
  const price = pricing.lookup('anthropic', 'claude-sonnet-5');
  const input = base({
    provider: 'anthropic',
    model: 'claude-sonnet-5',
    completionStyle: false,
    price,
    usage,
  });
  const spec = buildUsageEvent(input);
  assert.deepEqual(spec['x-billing'], {
    items: [
      { metric: 'prompt_tokens', quantity: 2257, unit: 'token' },
      { metric: 'completion_tokens', quantity: 393, unit: 'token' },
    ],
    pricing_hints: {
      // 21 x 3 + 2048 x 0.3 + 188 x 3.75 per million = 0.0013824
      prompt_tokens: { unit_price: 0.0013824, pricing_unit: 2257, currency: 'USD' },
      completion_tokens: { unit_price: 15, pricing_unit: 1000000, currency: 'USD' },
    },
  });
  assert.equal(amount(spec), amount(buildUsageEvent({ ...input, itemDetail: 'detailed' })));
  assert.deepEqual(spec.raw_json.usage, {
    input_tokens: 2257,
    output_tokens: 393,
    total_tokens: 2650,
    cache_read_tokens: 2048,
    cache_creation_tokens: 188,
  });
});

test('item_detail spec: audio tokens priced apart fold into prompt and completion tokens at the same amount', () => {
  const { pricing: audio } = compilePricing([
    {
      file: 'p.yaml',
      text: `multipliers: { providers: { openai: 1.07 } }
prices:
  - { provider: openai, model: gpt-realtime, cost: { input: 4, output: 16, cache_read: 0.4, input_audio: 32, output_audio: 64 } }
`,
    },
  ]);
  const input = base({
    api: 'realtime',
    model: 'gpt-realtime',
    price: audio.lookup('openai', 'gpt-realtime'),
    usage: {
      inputTokens: 1377,
      outputTokens: 611,
      totalTokens: 1988,
      cacheReadTokens: 1280,
      inputAudioTokens: 45,
      outputAudioTokens: 402,
    },
  });
  const spec = buildUsageEvent(input);
  const detailed = buildUsageEvent({ ...input, itemDetail: 'detailed' });
  assert.deepEqual(
    spec['x-billing']?.items.map((i) => [i.metric, i.quantity]),
    [
      ['prompt_tokens', 1377],
      ['completion_tokens', 611],
    ],
  );
  assert.equal(spec['x-billing']?.pricing_hints?.completion_tokens?.pricing_unit, 611);
  assert.deepEqual(
    detailed['x-billing']?.items.map((i) => i.metric),
    ['prompt_tokens', 'completion_tokens', 'cache_read_tokens', 'input_audio_tokens', 'output_audio_tokens'],
  );
  assert.equal(amount(spec), amount(detailed));
  // (52 x 4 + 1280 x 0.4 + 45 x 32 + 209 x 16 + 402 x 64) per million x 1.07
  assert.equal(amount(spec), '0.03341824');
});

/**
 * Counts below ten million tokens, beyond any model's context: an amount then has at most the 15
 * significant digits a JSON number holds exactly (699,061,760 audio tokens at 32 USD a million with a
 * multiplier of 1.07 need 16).
 */
function realistic(input: UsageEventInput): UsageEventInput {
  const usage: Record<string, unknown> = { ...input.usage };
  for (const [k, v] of Object.entries(usage))
    if (typeof v === 'number' && Number.isFinite(v)) usage[k] = Math.abs(v) % 1e7;
  return { ...input, usage: usage as unknown as UsageEventInput['usage'] };
}

test('item_detail spec: the same amount as detailed for any usage and price (decimal, to the last digit)', () => {
  fc.assert(
    fc.property(eventInput.map(realistic), (input) => {
      assert.equal(
        amount(buildUsageEvent({ ...input, itemDetail: 'spec' })),
        amount(buildUsageEvent({ ...input, itemDetail: 'detailed' })),
      );
    }),
    { numRuns: 500 },
  );
});

test('price version: in meta and x-billing; an unpriced model is marked and has no hints', () => {
  const version = pricing.version;
  assert.match(version, /^sha256:[0-9a-f]{16}$/);
  const priced = buildUsageEvent(base({ priceVersion: version }));
  assert.equal(priced.raw_json.meta.price_version, version);
  assert.equal(priced['x-billing']?.price_version, version);
  assert.equal(priced.raw_json.meta.unpriced, undefined);
  const free = buildUsageEvent(base({ price: undefined, priceVersion: version }));
  assert.deepEqual(free.raw_json.meta, {
    subject_type: 'api_key',
    subject_id: 'client-a',
    request_id: '<rid>',
    price_version: version,
    unpriced: true,
  });
  assert.equal(free['x-billing']?.pricing_hints, undefined);
  assert.equal(free['x-billing']?.price_version, version);
  const empty = buildUsageEvent(
    base({ priceVersion: version, usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 } }),
  );
  assert.equal(empty.raw_json.meta.price_version, version, 'an event without x-billing carries it too');
});

test('no price: items without pricing_hints; no usage: no x-billing at all', () => {
  const unpriced = buildUsageEvent(base({ price: undefined }));
  assert.deepEqual(unpriced['x-billing'], {
    items: [
      { metric: 'prompt_tokens', quantity: 12, unit: 'token' },
      { metric: 'completion_tokens', quantity: 5, unit: 'token' },
    ],
  });
  const empty = buildUsageEvent(base({ usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 } }));
  assert.equal('x-billing' in empty, false);
  assert.deepEqual(empty.raw_json.usage, {
    input_tokens: 0,
    output_tokens: 0,
    total_tokens: 0,
    prompt_tokens: 0,
    completion_tokens: 0,
  });
});

test('embeddings: only prompt_tokens is billed', () => {
  const event = buildUsageEvent(
    base({ api: 'embeddings', usage: { inputTokens: 17, outputTokens: 0, totalTokens: 17 } }),
  );
  assert.deepEqual(event['x-billing']?.items, [{ metric: 'prompt_tokens', quantity: 17, unit: 'token' }]);
  assert.deepEqual(Object.keys(event['x-billing']?.pricing_hints ?? {}), ['prompt_tokens']);
});

test('estimated usage, streams and error statuses are carried as given', () => {
  const event = buildUsageEvent(base({ usageStage: 'estimated', stream: true, status: 502 }));
  assert.equal(event.raw_json.usage_stage, 'estimated');
  assert.equal(event.raw_json.stream, true);
  assert.equal(event.raw_json.status, 502);
});

test('counts are sanitized to non-negative integers', () => {
  const event = buildUsageEvent(
    base({
      usage: { inputTokens: 12.7, outputTokens: -3, totalTokens: Number.NaN, cacheReadTokens: 50 },
      price: undefined,
    }),
  );
  assert.deepEqual(event.raw_json.usage, {
    input_tokens: 12,
    output_tokens: 0,
    total_tokens: 12,
    cache_read_tokens: 50,
    prompt_tokens: 12,
    completion_tokens: 0,
    cached_tokens: 50,
  });
});

test('the event holds only the given fields: no prompt, output, header or key can appear', () => {
  const event = buildUsageEvent(base());
  const keys = new Set<string>();
  JSON.stringify(event, (key, value) => {
    keys.add(key);
    return value;
  });
  for (const forbidden of ['messages', 'prompt', 'content', 'authorization', 'headers', 'api_key', 'body']) {
    assert.equal(keys.has(forbidden), false, forbidden);
  }
});

test('reportDecision', () => {
  const ok = { billingEnabled: true, onlyBillableSuccess: true, status: 200, subjectId: 'client-a' };
  assert.equal(reportDecision(ok), 'report');
  assert.equal(reportDecision({ ...ok, status: 204 }), 'report');
  assert.equal(reportDecision({ ...ok, billingEnabled: false }), 'skip_disabled');
  assert.equal(reportDecision({ ...ok, status: 429 }), 'skip_status');
  assert.equal(reportDecision({ ...ok, status: 0 }), 'skip_status');
  assert.equal(reportDecision({ ...ok, status: 500, onlyBillableSuccess: false }), 'report');
  assert.equal(reportDecision({ ...ok, subjectId: '' }), 'skip_no_subject');
  assert.equal(
    reportDecision({ ...ok, subjectId: '', status: 500, onlyBillableSuccess: false }),
    'skip_no_subject',
  );
});

test('size bound: an event over MAX_EVENT_BYTES keeps billing with its long strings cut and marked', () => {
  const model = `m-${'x'.repeat(2 * 1024 * 1024)}`;
  const event = buildUsageEvent(base({ model, requestId: 'r'.repeat(100_000) }));
  const bytes = Buffer.byteLength(JSON.stringify(event));
  assert.ok(bytes <= MAX_EVENT_BYTES, `${bytes} bytes`);
  assert.match(event.raw_json.model, /^m-x{1022}…\[truncated from 2097154 chars, sha256 [0-9a-f]{16}\]$/);
  // Counts, subject and prices are untouched: it still bills exactly as before.
  const small = buildUsageEvent(base());
  assert.deepEqual(event['x-billing'], small['x-billing']);
  assert.deepEqual(event.raw_json.usage, small.raw_json.usage);
  assert.equal(event.subject_id, 'client-a');
  // Two long ids sharing their first 1024 characters stay distinct.
  const other = buildUsageEvent(base({ model, requestId: `${'r'.repeat(99_999)}s` }));
  assert.notEqual(other.idempotency_key, event.idempotency_key);
  assert.ok(event.idempotency_key.startsWith('router:rrr'));
});

test('size bound: escaping-heavy strings in every field still fit; small events are returned as they are', () => {
  const control = '\u0001'.repeat(30_000); // 6 bytes of JSON each
  const event = buildUsageEvent(
    base({
      requestId: control,
      subjectType: control,
      subjectId: control,
      provider: control,
      model: control,
      source: control,
    }),
  );
  assert.ok(Buffer.byteLength(JSON.stringify(event)) <= MAX_EVENT_BYTES);
  assert.match(event.source, /truncated from 30000 chars/);
  const small = buildUsageEvent(base());
  assert.equal(boundEventSize(small), small);
  const emoji = boundEventSize({ ...small, subject_id: '😀'.repeat(40_000) });
  assert.doesNotMatch(emoji.subject_id, /[\ud800-\udbff](?![\udc00-\udfff])/, 'no lone surrogate');
  assert.ok(Buffer.byteLength(JSON.stringify(emoji)) <= MAX_EVENT_BYTES);
});

test('size bound: a long string in any input field is bounded, the pricing currency too (no field escapes the quick check)', () => {
  const long = '\u0001'.repeat(11_000); // 66,000 bytes of JSON: over the bound on its own
  const price = pricing.lookup('anthropic', 'claude-sonnet-5')!;
  const full = base({
    provider: 'anthropic',
    model: 'claude-sonnet-5',
    correlationId: 'corr-1',
    usage: {
      inputTokens: 120,
      outputTokens: 5,
      totalTokens: 125,
      cacheReadTokens: 40,
      cacheCreationTokens: 20,
    },
    price,
  });
  const fields: Partial<UsageEventInput>[] = [
    { requestId: long },
    { correlationId: long },
    { provider: long },
    { api: long as UsageEventInput['api'] },
    { model: long },
    { usageStage: long as UsageEventInput['usageStage'] },
    { subjectType: long },
    { subjectId: long },
    { source: long },
    { price: { ...price, currency: long } },
    { priceVersion: long },
  ];
  for (const field of fields) {
    const event = buildUsageEvent({ ...full, ...field });
    const bytes = Buffer.byteLength(JSON.stringify(event));
    assert.ok(bytes <= MAX_EVENT_BYTES, `${Object.keys(field)[0]}: ${bytes} bytes`);
  }
  const small = buildUsageEvent({ ...full, itemDetail: 'detailed' });
  assert.ok(small['x-billing']?.pricing_hints?.cache_read_tokens, 'the event carries pricing hints');
  assert.equal(small.raw_json.meta.correlation_id, 'corr-1');
});

const EXTRAS = [
  'cacheReadTokens',
  'cacheCreationTokens',
  'inputAudioTokens',
  'outputAudioTokens',
  'images',
  'inputCharacters',
  'audioSeconds',
] as const;

// Token events are a narrow kind: most inputs keep one non-token quantity at most (or none), so that each
// is seen alone. Long strings (past MAX_EVENT_BYTES, or past the builder's quick size check only) and
// counts beyond safe integers: the token event must step aside there.
const sizedInput = fc
  .tuple(eventInput, fc.nat(EXTRAS.length + 3), fc.nat(4), fc.constantFrom(0, 0, 1, 2 ** 60))
  .map(([input, extra, long, big]) => {
    const usage = { ...input.usage };
    if (extra < EXTRAS.length + 3) {
      for (const key of EXTRAS) if (key !== EXTRAS[extra]) delete usage[key];
    }
    if (big !== 0) usage.inputTokens = big;
    if (long === 0) return { ...input, model: 'x'.repeat(70_000), usage };
    if (long === 1) return { ...input, subjectId: 'x'.repeat(12_000), usage };
    return { ...input, usage };
  });

test('a non-finite audio length bills no seconds, and the token event agrees the event is token-only', () => {
  for (const audioSeconds of [Number.POSITIVE_INFINITY, Number.NaN, -3]) {
    const sample = fc.sample(eventInput, { numRuns: 1, seed: 7 })[0];
    assert.ok(sample);
    const input = { ...sample, endReason: undefined };
    const usage = { inputTokens: 3, outputTokens: 2, totalTokens: 5, audioSeconds };
    const event = buildUsageEvent({ ...input, usage, model: 'm', subjectId: 's' });
    assert.equal(event.raw_json.usage.audio_seconds, undefined, String(audioSeconds));
    const parts = buildTokenEvent({ ...input, usage, model: 'm', subjectId: 's' });
    assert.ok(parts, `a token event for audioSeconds ${audioSeconds}`);
    assert.deepEqual(usageEventOf(parts), event);
  }
});

test('buildTokenEvent: exactly the token-only events, and usageEventOf of it is the built event key for key', () => {
  fc.assert(
    fc.property(sizedInput, (input) => {
      const event = buildUsageEvent(input);
      const parts = buildTokenEvent(input);
      const long = input.model.length > 1000 || input.subjectId.length > 1000;
      if (parts === undefined) {
        // Stepping aside is always safe (the whole event is written); only long strings may cause it.
        assert.ok(long || tokenEventOf(event) === undefined, 'a token event stepped aside');
        return;
      }
      const bounded = event.raw_json.model !== input.model || event.subject_id !== input.subjectId;
      assert.ok(!bounded, 'a bounded event is never a token event');
      assert.equal(JSON.stringify(usageEventOf(parts)), JSON.stringify(event));
      assert.deepEqual(usageEventOf(parts), event);
      assert.deepEqual(tokenEventOf(event), parts, 'the event read back gives the same parts');
    }),
    { numRuns: 500 },
  );
});
