// Billing end to end, one served request at a time: every request through the gateway yields exactly
// one accepted usage event at the billing simulator, field by field as docs/billing.md "The usage event" says,
// with the usage the upstream reported (also after translation), prices from deploy/config/pricing.yaml,
// and a wallet debit of exactly sum(quantity / pricing_unit * unit_price). Aborted streams and replies
// without usage are estimated.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { Decimal } from 'decimal.js';
import { load as loadYaml } from 'js-yaml';
import type { UsageEvent } from '../../billing/event/usage-event.ts';
import { loadPricing } from '../../billing/pricing.ts';
import { requestTextOf } from '../../hooks/families/index.ts';
import { countTokens, estimateInputTokens } from '../../hooks/usage/estimate.ts';
import type { RecordedRequest } from '../../sim/upstream/server.ts';
import { type BillingStack, SUBJECT_ID, startBillingStack } from '../support/billing-stack.ts';
import { simProvider } from '../support/sim-providers.ts';
import { ACCESS_KEY, PRICING_FILE } from '../support/stack.ts';
import { chargeOf } from '../support/usage-events.ts';

// --- what the upstream reported --------------------------------------------------------------------

interface Counts {
  input: number;
  output: number;
  cacheRead: number;
}

type Json = Record<string, unknown>;

function num(value: unknown): number {
  return typeof value === 'number' ? value : 0;
}

function rec(value: unknown): Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : {};
}

/** JSON documents of a reply: the body, or each SSE `data:` payload. */
function documents(text: string, contentType: string): Json[] {
  if (!contentType.includes('event-stream')) return [rec(JSON.parse(text))];
  const out: Json[] = [];
  for (const line of text.split(/\r?\n/)) {
    if (!line.startsWith('data:')) continue;
    const data = line.slice(5).trim();
    if (data === '' || data === '[DONE]') continue;
    out.push(rec(JSON.parse(data)));
  }
  return out;
}

/** Usage as each vendor's wire format reports it (read independently of the gateway's presets). */
function reportedCounts(docs: Json[]): Counts {
  const c: Counts = { input: 0, output: 0, cacheRead: 0 };
  for (const doc of docs) {
    // OpenAI chat / embeddings (JSON body or the include_usage chunk).
    const u = rec(doc.usage);
    if ('prompt_tokens' in u) {
      c.input = num(u.prompt_tokens);
      c.output = num(u.completion_tokens);
      c.cacheRead = num(rec(u.prompt_tokens_details).cached_tokens);
    }
    // Anthropic: message (JSON), message_start (input), message_delta (output).
    const a = doc.type === 'message_start' ? rec(rec(doc.message).usage) : u;
    if ('input_tokens' in a) {
      c.input = num(a.input_tokens);
      c.cacheRead = num(a.cache_read_input_tokens);
    }
    if ('output_tokens' in a) c.output = num(a.output_tokens);
    // Gemini: usageMetadata, thinking tokens bill as output.
    const g = rec(doc.usageMetadata);
    if ('promptTokenCount' in g) {
      c.input = num(g.promptTokenCount);
      c.output = num(g.candidatesTokenCount) + num(g.thoughtsTokenCount);
      c.cacheRead = num(g.cachedContentTokenCount);
    }
  }
  return c;
}

/**
 * Sends the upstream request the gateway made again, straight to the simulator (its replies are
 * deterministic), and returns the usage the upstream reported and its reply documents.
 */
async function upstreamReported(
  stack: BillingStack,
  recorded: RecordedRequest,
): Promise<{ counts: Counts; docs: Json[] }> {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(recorded.headers)) {
    if (['host', 'content-length', 'connection', 'transfer-encoding'].includes(k)) continue;
    if (typeof v === 'string') headers[k] = v;
  }
  const res = await fetch(`${stack.upstream.url}${recorded.path}`, {
    method: recorded.method,
    headers,
    body: new Uint8Array(recorded.body),
  });
  const docs = documents(await res.text(), res.headers.get('content-type') ?? '');
  return { counts: reportedCounts(docs), docs };
}

// --- prices ----------------------------------------------------------------------------------------

interface PriceEntry {
  provider: string;
  model: string;
  cost: Record<string, number>;
}
const pricingFile = loadYaml(readFileSync(PRICING_FILE, 'utf8')) as {
  currency: string;
  pricing_unit: number;
  prices: PriceEntry[];
};

/** Exact model first, else the longest matching `prefix*` pattern (pricing.yaml's lookup rule). */
function priceOf(provider: string, model: string): Record<string, number> | undefined {
  const mine = pricingFile.prices.filter((p) => p.provider === provider);
  const exact = mine.find((p) => p.model === model);
  if (exact) return exact.cost;
  const patterns = mine
    .filter((p) => p.model.endsWith('*') && model.startsWith(p.model.slice(0, -1)))
    .sort((a, b) => b.model.length - a.model.length);
  return patterns[0]?.cost;
}

const COST_OF_METRIC: Record<string, string> = {
  prompt_tokens: 'input',
  completion_tokens: 'output',
  cache_read_tokens: 'cache_read',
};

const PRICE_VERSION = (await loadPricing([PRICING_FILE])).pricing.version;

/**
 * The x-billing block the gateway must send for these counts (item_detail spec, the default):
 * prompt_tokens is all input; with priced cache reads its hint is the exact amount for its quantity.
 */
function expectedXBilling(counts: Counts, cost: Record<string, number> | undefined): UsageEvent['x-billing'] {
  const cacheRead = cost?.cache_read !== undefined ? counts.cacheRead : 0;
  const items = [
    { metric: 'prompt_tokens', quantity: counts.input, unit: 'token' },
    { metric: 'completion_tokens', quantity: counts.output, unit: 'token' },
  ].filter((i) => i.quantity > 0);
  if (items.length === 0) return undefined;
  if (cost === undefined) return { items, price_version: PRICE_VERSION };
  const hints: Record<string, { unit_price: number; pricing_unit: number; currency: string }> = {};
  for (const item of items) {
    const unitPrice = cost[COST_OF_METRIC[item.metric] ?? ''];
    assert.ok(unitPrice !== undefined, `the pricing file prices ${item.metric}`);
    hints[item.metric] = {
      unit_price: unitPrice,
      pricing_unit: pricingFile.pricing_unit,
      currency: pricingFile.currency,
    };
  }
  if (cacheRead > 0 && cost?.cache_read !== undefined && cost.input !== undefined) {
    const amount = new Decimal(counts.input - cacheRead)
      .times(cost.input)
      .plus(new Decimal(cacheRead).times(cost.cache_read))
      .dividedBy(pricingFile.pricing_unit);
    hints.prompt_tokens = {
      unit_price: amount.toNumber(),
      pricing_unit: counts.input,
      currency: pricingFile.currency,
    };
  }
  return { items, pricing_hints: hints, price_version: PRICE_VERSION };
}

// --- the stack -------------------------------------------------------------------------------------

let stack: BillingStack;
let charged = new Decimal(0);
let seq = 0;

before(async () => {
  stack = await startBillingStack({ providers: { simx: simProvider('simx') } });
});
after(async () => {
  await stack.close();
});

interface Served {
  rid: string;
  status: number;
  text: string;
  contentType: string;
  startedAt: number;
  endedAt: number;
}

async function call(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Served> {
  const rid = `evt-test-${++seq}-${Date.now()}`;
  const startedAt = Date.now();
  const res = await fetch(`${stack.url}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${ACCESS_KEY}`,
      'content-type': 'application/json',
      'x-router-request-id': rid,
      ...headers,
    },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  assert.equal(res.headers.get('x-router-request-id'), rid);
  return {
    rid,
    status: res.status,
    text,
    contentType: res.headers.get('content-type') ?? '',
    startedAt,
    endedAt: Date.now(),
  };
}

interface Expect {
  provider: string;
  api: string;
  model: string;
  stream: boolean;
  /** Completion-style client: the usage carries prompt_/completion_/cached_tokens aliases. */
  completionStyle: boolean;
}

/**
 * The whole event, field by field, against what the upstream reported for this request; then the
 * wallet: debited by exactly this event's charge, and this request id accepted exactly once.
 */
async function assertBilled(served: Served, exp: Expect): Promise<UsageEvent> {
  assert.equal(served.status, 200, served.text);
  const recorded = stack.upstream.requests.at(-1);
  assert.ok(recorded, 'the gateway called the upstream');
  const { counts } = await upstreamReported(stack, recorded);
  assert.ok(counts.input > 0, 'the upstream reported input tokens');
  const event = await stack.eventFor(served.rid);

  assert.ok(Number.isInteger(event.occurred_at), 'occurred_at is an integer');
  assert.ok(
    event.occurred_at >= Math.floor(served.startedAt / 1000) && event.occurred_at <= served.endedAt / 1000,
    `occurred_at ${event.occurred_at} is the request time in Unix seconds`,
  );
  const usage: Record<string, number> = {
    input_tokens: counts.input,
    output_tokens: counts.output,
    total_tokens: counts.input + counts.output,
  };
  if (counts.cacheRead > 0) usage.cache_read_tokens = counts.cacheRead;
  if (exp.completionStyle) {
    usage.prompt_tokens = counts.input;
    usage.completion_tokens = counts.output;
    if (counts.cacheRead > 0) usage.cached_tokens = counts.cacheRead;
  }
  const expected: UsageEvent = {
    source: 'router',
    external_event_id: served.rid,
    idempotency_key: `router:${served.rid}`,
    occurred_at: event.occurred_at,
    subject_type: 'api_key',
    subject_id: SUBJECT_ID,
    raw_json: {
      provider: exp.provider,
      api: exp.api as UsageEvent['raw_json']['api'],
      model: exp.model,
      stream: exp.stream,
      status: 200,
      usage_stage: 'upstream',
      usage: usage as unknown as UsageEvent['raw_json']['usage'],
      meta: {
        subject_type: 'api_key',
        subject_id: SUBJECT_ID,
        request_id: served.rid,
        price_version: PRICE_VERSION,
      },
    },
  };
  const cost = priceOf(exp.provider, exp.model);
  if (cost === undefined) expected.raw_json.meta.unpriced = true;
  const xb = expectedXBilling(counts, cost);
  if (xb) expected['x-billing'] = xb;
  assert.deepEqual(event, expected);
  assert.ok(expected['x-billing']?.pricing_hints, `${exp.provider}/${exp.model} has a price`);
  await assertCharged(event);
  return event;
}

async function assertCharged(event: UsageEvent): Promise<void> {
  charged = charged.plus(chargeOf(event));
  assert.ok(
    new Decimal(stack.debited()).eq(charged),
    `wallet debited ${stack.debited()}, expected ${charged}`,
  );
  assert.equal(
    stack.billing.events.filter((e) => e.external_event_id === event.external_event_id).length,
    1,
    'exactly one accepted event for the request',
  );
  assert.equal(stack.billing.duplicates, 0);
}

const USER_MESSAGE = {
  role: 'user',
  content: 'Tell me about the weather patterns over the Atlantic in autumn.',
};
const MESSAGES = [{ role: 'system', content: 'You are terse.' }, USER_MESSAGE];

// --- plain and streaming, each provider family ------------------------------------------------------

test('OpenAI chat, plain: one event with the upstream usage, aliases and gpt-5.4-mini prices', async () => {
  const served = await call('/v1/chat/completions', { model: 'gpt-5.4-mini', messages: MESSAGES });
  await assertBilled(served, {
    provider: 'openai',
    api: 'chat.completions',
    model: 'gpt-5.4-mini',
    stream: false,
    completionStyle: true,
  });
});

test('OpenAI chat, streaming: the usage chunk the gateway asked for is billed (and stripped)', async () => {
  const served = await call('/v1/chat/completions', { model: 'gpt-5.4', messages: MESSAGES, stream: true });
  assert.doesNotMatch(served.text, /"usage":\{/, 'the client did not ask for usage, so it sees none');
  await assertBilled(served, {
    provider: 'openai',
    api: 'chat.completions',
    model: 'gpt-5.4',
    stream: true,
    completionStyle: true,
  });
});

test('Anthropic native messages, plain and streaming: no completion-style aliases', async () => {
  const body = { model: 'claude-sonnet-5', max_tokens: 200, messages: [USER_MESSAGE] };
  const plain = await call('/v1/messages', body);
  await assertBilled(plain, {
    provider: 'anthropic',
    api: 'native.messages',
    model: 'claude-sonnet-5',
    stream: false,
    completionStyle: false,
  });
  const streamed = await call('/v1/messages', { ...body, model: 'claude-haiku-5-5', stream: true });
  await assertBilled(streamed, {
    provider: 'anthropic',
    api: 'native.messages',
    model: 'claude-haiku-5-5',
    stream: true,
    completionStyle: false,
  });
});

test('Gemini native generateContent and streamGenerateContent: model from the path', async () => {
  const body = { contents: [{ role: 'user', parts: [{ text: USER_MESSAGE.content }] }] };
  const plain = await call('/v1beta/models/gemini-3.8-flash:generateContent', body);
  await assertBilled(plain, {
    provider: 'gemini',
    api: 'native.generateContent',
    model: 'gemini-3.8-flash',
    stream: false,
    completionStyle: false,
  });
  const streamed = await call('/v1beta/models/gemini-3.8-pro:streamGenerateContent?alt=sse', body);
  await assertBilled(streamed, {
    provider: 'gemini',
    api: 'native.streamGenerateContent',
    model: 'gemini-3.8-pro',
    stream: true,
    completionStyle: false,
  });
});

// --- translated paths: the usage after translation is the upstream's ---------------------------------

test('chat -> Claude, streaming: billed with the usage Anthropic reported, completion-style aliases', async () => {
  const served = await call('/v1/chat/completions', {
    model: 'claude-sonnet-5',
    messages: MESSAGES,
    stream: true,
    stream_options: { include_usage: true },
  });
  const event = await assertBilled(served, {
    provider: 'anthropic',
    api: 'chat.completions',
    model: 'claude-sonnet-5',
    stream: true,
    completionStyle: true,
  });
  // The client asked for usage: the translated usage chunk says what the event says.
  const clientUsage = reportedCounts(documents(served.text, served.contentType));
  assert.equal(clientUsage.input, event.raw_json.usage.input_tokens);
  assert.equal(clientUsage.output, event.raw_json.usage.output_tokens);
});

test('chat -> Gemini, plain and streaming: billed with the usage Gemini reported', async () => {
  const plain = await call('/v1/chat/completions', { model: 'gemini-3.8-flash', messages: MESSAGES });
  const event = await assertBilled(plain, {
    provider: 'gemini',
    api: 'chat.completions',
    model: 'gemini-3.8-flash',
    stream: false,
    completionStyle: true,
  });
  const clientUsage = reportedCounts(documents(plain.text, plain.contentType));
  assert.deepEqual(
    [clientUsage.input, clientUsage.output],
    [event.raw_json.usage.input_tokens, event.raw_json.usage.output_tokens],
    'the client and the billing service see the same usage',
  );
  const streamed = await call('/v1/chat/completions', {
    model: 'gemini-3.8-flash',
    messages: MESSAGES,
    stream: true,
  });
  await assertBilled(streamed, {
    provider: 'gemini',
    api: 'chat.completions',
    model: 'gemini-3.8-flash',
    stream: true,
    completionStyle: true,
  });
});

test('embeddings: input tokens only, no completion item', async () => {
  const served = await call('/v1/embeddings', {
    model: 'text-embedding-3-small',
    input: ['the quick brown fox', 'jumps over the lazy dog'],
  });
  const event = await assertBilled(served, {
    provider: 'openai',
    api: 'embeddings',
    model: 'text-embedding-3-small',
    stream: false,
    completionStyle: true,
  });
  assert.deepEqual(
    event['x-billing']?.items.map((i) => i.metric),
    ['prompt_tokens'],
  );
});

// --- estimated usage -------------------------------------------------------------------------------

/** Text the client received in completion-style stream deltas (or a plain reply). */
function completionText(text: string, contentType: string): string {
  return documents(text, contentType)
    .map((doc) => {
      const choice = rec((doc.choices as unknown[] | undefined)?.[0]);
      const part = rec(choice.delta ?? choice.message);
      return typeof part.content === 'string' ? part.content : '';
    })
    .join('');
}

function contentDeltas(sse: string): number {
  return documents(sse, 'text/event-stream').filter(
    (doc) => completionText(`data: ${JSON.stringify(doc)}\n\n`, 'text/event-stream') !== '',
  ).length;
}

test('an aborted stream: billed once as estimated, output from what was delivered', async () => {
  // The model name carries the simulator's pacing knob (delay-40 ms between events, 12 deltas); the
  // pricing pattern gpt-5.4-mini* prices it.
  const model = 'gpt-5.4-mini-delay-40-chunks-12';
  const rid = `evt-abort-${Date.now()}`;
  const body = { model, messages: MESSAGES, stream: true };
  const controller = new AbortController();
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${ACCESS_KEY}`,
      'content-type': 'application/json',
      'x-router-request-id': rid,
    },
    body: JSON.stringify(body),
    signal: controller.signal,
  });
  assert.equal(res.status, 200);
  const abortedBefore = stack.upstream.stats.aborted;
  let received = '';
  const decoder = new TextDecoder();
  const reader = res.body?.getReader();
  assert.ok(reader);
  // Read until three content deltas arrived (whole events only), then hang up.
  while (!received.endsWith('\n\n') || contentDeltas(received) < 3) {
    const { value, done } = await reader.read();
    assert.ok(!done, 'the stream ended before the client hung up');
    received += decoder.decode(value, { stream: true });
  }
  controller.abort();
  await reader.cancel().catch(() => undefined);
  await stack.upstream.waitFor((s) => s.stats.aborted > abortedBefore);

  const event = await stack.eventFor(rid);
  const recorded = stack.upstream.requests.at(-1);
  assert.ok(recorded);
  const full = await upstreamReported(stack, recorded);
  const fullText = completionText(
    full.docs.map((d) => `data: ${JSON.stringify(d)}\n\n`).join(''),
    'text/event-stream',
  );
  const deliveredAtLeast = countTokens(completionText(received, 'text/event-stream'), model);
  const usage = event.raw_json.usage;
  assert.equal(event.raw_json.usage_stage, 'estimated');
  assert.equal(event.raw_json.stream, true);
  assert.equal(event.raw_json.status, 200);
  assert.equal(event.raw_json.model, model);
  // No upstream count reached the gateway (the usage chunk comes last): input is the estimate.
  assert.equal(
    usage.input_tokens,
    estimateInputTokens(model, requestTextOf('openai', 'chat.completions'), body),
  );
  assert.ok(
    usage.output_tokens >= deliveredAtLeast && usage.output_tokens < countTokens(fullText, model),
    `output ${usage.output_tokens}: at least the ${deliveredAtLeast} tokens the client read, less than the whole reply`,
  );
  assert.ok(usage.output_tokens < full.counts.output, 'less than the upstream would have billed in full');
  assert.equal(usage.total_tokens, usage.input_tokens + usage.output_tokens);
  assert.equal(usage.prompt_tokens, usage.input_tokens);
  assert.equal(usage.completion_tokens, usage.output_tokens);
  assert.deepEqual(
    event['x-billing'],
    expectedXBilling(
      { input: usage.input_tokens, output: usage.output_tokens, cacheRead: 0 },
      priceOf('openai', model),
    ),
  );
  await assertCharged(event);
});

test('an upstream that reports no usage: estimated from the request and the reply, still billed', async () => {
  // simx passes x-sim-no-usage through; it has no price, so the event carries items without hints.
  const body = { model: 'gpt-5.4-mini', messages: MESSAGES };
  for (const stream of [false, true]) {
    const served = await call(
      '/v1/chat/completions',
      { ...body, stream },
      { 'x-router-provider': 'simx', 'x-sim-no-usage': '1' },
    );
    assert.equal(served.status, 200, served.text);
    const event = await stack.eventFor(served.rid);
    const input = estimateInputTokens('gpt-5.4-mini', requestTextOf('openai', 'chat.completions'), {
      ...body,
      stream,
    });
    const output = countTokens(completionText(served.text, served.contentType), 'gpt-5.4-mini');
    assert.ok(output > 0);
    assert.equal(event.raw_json.provider, 'simx');
    assert.equal(event.raw_json.stream, stream);
    assert.equal(event.raw_json.usage_stage, 'estimated');
    assert.deepEqual(event.raw_json.usage, {
      input_tokens: input,
      output_tokens: output,
      total_tokens: input + output,
      prompt_tokens: input,
      completion_tokens: output,
    });
    assert.deepEqual(event['x-billing'], expectedXBilling({ input, output, cacheRead: 0 }, undefined));
    await assertCharged(event);
  }
});

test('every served request above yielded exactly one accepted event, none charged twice', () => {
  const ids = stack.billing.events.map((e) => e.external_event_id);
  assert.equal(new Set(ids).size, ids.length);
  assert.equal(stack.billing.accepted, seq + 1, 'one per request (the aborted one included)');
  assert.equal(stack.billing.duplicates, 0);
  assert.equal(stack.billing.missingIdempotencyHeader, 0);
});
