// Streams that end without the upstream's final usage, end to end (gateway + upstream simulator +
// billing simulator): each family's in-stream error, cut connection and client abort is billed the
// upstream's input count when it had arrived and the larger of its running output count and the
// estimate of what was delivered, as `estimated`; and a huge prompt's estimate never stalls the
// gateway. Simulator knobs ride in the model name (sim/upstream/README.md): fail-midstream streams half
// the events then the provider's error event, fail-midstream-reset cuts the connection there.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { UsageEvent } from '../../billing/event/usage-event.ts';
import type { ApiName, JsonObject } from '../../common/types.ts';
import { requestTextOf } from '../../hooks/families/index.ts';
import { countTokens, estimateInputTokens } from '../../hooks/usage/estimate.ts';
import { type BillingStack, outboxText, startBillingStack } from '../support/billing-stack.ts';
import { simProvider } from '../support/sim-providers.ts';
import { ACCESS_KEY } from '../support/stack.ts';

let stack: BillingStack;
let seq = 0;

before(async () => {
  stack = await startBillingStack({ providers: { simx: simProvider('simx') } });
});
after(async () => {
  await stack.close();
});

type Json = Record<string, unknown>;

function rec(value: unknown): Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : {};
}

/** The JSON `data:` payloads of whole SSE events. */
function payloads(sse: string): Json[] {
  const out: Json[] = [];
  for (const block of sse.split(/\r?\n\r?\n/)) {
    for (const line of block.split(/\r?\n/)) {
      if (!line.startsWith('data:')) continue;
      const data = line.slice(5).trim();
      if (data !== '' && data !== '[DONE]') out.push(rec(JSON.parse(data)));
    }
  }
  return out;
}

/** Generated text of delivered events, in any of the three wire families. */
function deliveredText(sse: string): string {
  let text = '';
  for (const doc of payloads(sse)) {
    const delta = rec(doc.delta);
    if (typeof delta.text === 'string') text += delta.text;
    for (const c of (doc.candidates as unknown[] | undefined) ?? []) {
      for (const part of (rec(rec(c).content).parts as unknown[] | undefined) ?? []) {
        if (typeof rec(part).text === 'string') text += rec(part).text;
      }
    }
    const choice = rec((doc.choices as unknown[] | undefined)?.[0]);
    if (typeof rec(choice.delta).content === 'string') text += rec(choice.delta).content;
  }
  return text;
}

/** Input count the upstream reported in the stream: Anthropic message_start, Gemini promptTokenCount. */
function reportedInput(sse: string): number | undefined {
  for (const doc of payloads(sse)) {
    const start = rec(rec(doc.message).usage);
    if (typeof start.input_tokens === 'number') return start.input_tokens;
    const meta = rec(doc.usageMetadata);
    if (typeof meta.promptTokenCount === 'number') return meta.promptTokenCount;
  }
  return undefined;
}

interface Streamed {
  rid: string;
  /** Whole events the client read. */
  text: string;
}

/** Streams a request; with `stopAfter`, hangs up once that many events with text have arrived. */
async function stream(path: string, body: JsonObject, stopAfter?: number): Promise<Streamed> {
  const rid = `mid-stream-${++seq}-${Date.now()}`;
  const controller = new AbortController();
  const res = await fetch(`${stack.url}${path}`, {
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
  const reader = res.body?.getReader();
  assert.ok(reader);
  const decoder = new TextDecoder();
  let text = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    if (stopAfter === undefined || !/\r?\n\r?\n$/.test(text)) continue;
    const withText = payloads(text).filter((doc) => deliveredText(`data: ${JSON.stringify(doc)}\n\n`) !== '');
    if (withText.length >= stopAfter) {
      const abortedBefore = stack.upstream.stats.aborted;
      controller.abort();
      await reader.cancel().catch(() => undefined);
      await stack.upstream.waitFor((s) => s.stats.aborted > abortedBefore, 60_000);
      break;
    }
  }
  return { rid, text };
}

function assertUsage(event: UsageEvent, input: number, output: number): void {
  const usage = event.raw_json.usage;
  assert.equal(event.raw_json.usage_stage, 'estimated');
  assert.equal(event.raw_json.status, 200);
  assert.equal(usage.input_tokens, input, 'input');
  assert.equal(usage.output_tokens, output, 'output');
  assert.equal(usage.total_tokens, input + output);
}

const CLAUDE_MESSAGES = [{ role: 'user', content: 'Tell me about foxes and dogs, in a few words please.' }];

test('Anthropic: an in-stream error event after 6 deltas bills the delivered output and message_start’s input', async () => {
  const model = 'claude-sonnet-5-fail-midstream-chunks-12';
  const { rid, text } = await stream('/v1/messages', {
    model,
    max_tokens: 200,
    stream: true,
    messages: CLAUDE_MESSAGES,
  });
  assert.match(text, /event: error/);
  assert.equal(payloads(text).filter((doc) => doc.type === 'content_block_delta').length, 6);
  const input = reportedInput(text);
  assert.ok(input !== undefined && input > 0);
  const output = countTokens(deliveredText(text), model);
  assert.ok(output > 1, `${output} tokens reached the client`);
  assertUsage(await stack.eventFor(rid), input, output);
});

test('Anthropic: a connection cut mid-stream bills the delivered output and message_start’s input', async () => {
  const model = 'claude-sonnet-5-fail-midstream-reset-chunks-12';
  const { rid, text } = await stream('/v1/messages', {
    model,
    max_tokens: 200,
    stream: true,
    messages: CLAUDE_MESSAGES,
  });
  const input = reportedInput(text);
  assert.ok(input !== undefined);
  assertUsage(await stack.eventFor(rid), input, countTokens(deliveredText(text), model));
});

test('Anthropic: a client that hangs up keeps message_start’s input count, output from what was delivered', async () => {
  const model = 'claude-sonnet-5-delay-30-chunks-12';
  const body = { model, max_tokens: 200, stream: true, messages: CLAUDE_MESSAGES };
  const { rid, text } = await stream('/v1/messages', body, 3);
  const input = reportedInput(text);
  assert.ok(input !== undefined);
  assert.notEqual(
    estimateInputTokens(model, requestTextOf('anthropic', 'native.messages'), body),
    input,
    'the estimate would differ',
  );
  const event = await stack.eventFor(rid);
  const usage = event.raw_json.usage;
  assert.equal(event.raw_json.usage_stage, 'estimated');
  assert.equal(usage.input_tokens, input);
  const read = countTokens(deliveredText(text), model);
  assert.ok(
    usage.output_tokens >= read && usage.output_tokens > 1,
    `output ${usage.output_tokens}, read ${read}`,
  );
});

const GEMINI_BODY = {
  contents: [{ role: 'user', parts: [{ text: 'Tell me about foxes and dogs, briefly.' }] }],
};

test('Gemini: an in-stream error before the last chunk bills the delivered output, not 0', async () => {
  const model = 'gemini-3.8-flash-fail-midstream';
  const { rid, text } = await stream(`/v1beta/models/${model}:streamGenerateContent?alt=sse`, GEMINI_BODY);
  assert.match(text, /"INTERNAL"/);
  const input = reportedInput(text);
  assert.ok(input !== undefined && input > 0);
  const output = countTokens(deliveredText(text), model);
  assert.ok(output > 0);
  assertUsage(await stack.eventFor(rid), input, output);
});

test('Gemini: a connection cut before the last chunk bills the delivered output', async () => {
  const model = 'gemini-3.8-flash-fail-midstream-reset';
  const { rid, text } = await stream(`/v1beta/models/${model}:streamGenerateContent?alt=sse`, GEMINI_BODY);
  const input = reportedInput(text);
  assert.ok(input !== undefined);
  assertUsage(await stack.eventFor(rid), input, countTokens(deliveredText(text), model));
});

test('Gemini: a client that hangs up keeps the reported prompt count', async () => {
  const model = 'gemini-3.8-flash-delay-30-chunks-12';
  const { rid, text } = await stream(`/v1beta/models/${model}:streamGenerateContent?alt=sse`, GEMINI_BODY, 3);
  const input = reportedInput(text);
  assert.ok(input !== undefined);
  const api: ApiName = 'native.streamGenerateContent';
  assert.notEqual(
    estimateInputTokens(model, requestTextOf('gemini', api), GEMINI_BODY),
    input,
    'the estimate would differ',
  );
  const event = await stack.eventFor(rid);
  assert.equal(event.raw_json.usage_stage, 'estimated');
  assert.equal(event.raw_json.usage.input_tokens, input);
  assert.ok(event.raw_json.usage.output_tokens >= countTokens(deliveredText(text), model));
});

const CHAT_MESSAGES = [{ role: 'user', content: 'Tell me about foxes and dogs, in a few words please.' }];

for (const [family, model] of [
  ['Anthropic', 'claude-sonnet-5-fail-midstream-chunks-12'],
  ['Gemini', 'gemini-3.8-flash-fail-midstream'],
] as const) {
  test(`completion-style client, ${family} upstream: an in-stream error bills what the client received`, async () => {
    const { rid, text } = await stream('/v1/chat/completions', {
      model,
      stream: true,
      messages: CHAT_MESSAGES,
    });
    const output = countTokens(deliveredText(text), model);
    assert.ok(output > 1);
    const event = await stack.eventFor(rid);
    assert.equal(event.raw_json.usage_stage, 'estimated');
    assert.equal(event.raw_json.usage.output_tokens, output);
    assert.ok(event.raw_json.usage.input_tokens > 0);
    assert.equal(event.raw_json.usage.prompt_tokens, event.raw_json.usage.input_tokens);
    assert.equal(event.raw_json.usage.completion_tokens, output);
  });
}

for (const fail of ['midstream', 'midstream-reset'] as const) {
  test(`completion-style, OpenAI upstream, ${fail}: estimated from the request and the delivered output`, async () => {
    const model = `gpt-5.4-mini-fail-${fail}`;
    const body = { model, stream: true, messages: CHAT_MESSAGES };
    const { rid, text } = await stream('/v1/chat/completions', body);
    assertUsage(
      await stack.eventFor(rid),
      estimateInputTokens(model, requestTextOf('openai', 'chat.completions'), body),
      countTokens(deliveredText(text), model),
    );
  });
}

test('a 150 KB space-less prompt, aborted after the first chunk: /healthz is answered while its usage is estimated', async () => {
  const healthz = async (): Promise<number> => {
    const res = await fetch(`${stack.url}/healthz`);
    await res.arrayBuffer();
    return res.status;
  };
  // A kept-alive connection, so that the probe below is a request, not a connect.
  assert.equal(await healthz(), 200);
  const model = 'gpt-5.4-mini-delay-30';
  const body = { model, stream: true, messages: [{ role: 'user', content: 'x'.repeat(150_000) }] };
  const { rid, text } = await stream('/v1/chat/completions', body, 1);
  const settled = () => stack.logs.some((line) => line.msg === 'request' && line.reqId === rid);
  assert.equal(await healthz(), 200);
  assert.equal(settled(), false, '/healthz waited for the aborted request to be settled');

  const event = await stack.eventFor(rid, 60_000);
  assert.equal(event.raw_json.usage_stage, 'estimated');
  assert.equal(
    event.raw_json.usage.input_tokens,
    estimateInputTokens(model, requestTextOf('openai', 'chat.completions'), body),
  );
  assert.ok(event.raw_json.usage.output_tokens >= countTokens(deliveredText(text), model));
});

test('a reply whose usage is estimated in slices still ends after its usage event is on record', async () => {
  const rid = `mid-stream-json-${Date.now()}`;
  const body = { model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'y'.repeat(60_000) }] };
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${ACCESS_KEY}`,
      'content-type': 'application/json',
      'x-router-request-id': rid,
      'x-router-provider': 'simx',
      'x-sim-no-usage': '1',
    },
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 200);
  await res.arrayBuffer();
  assert.ok((await outboxText(stack.outboxDir)).includes(rid), 'the event was written before the last byte');
  const event = await stack.eventFor(rid);
  assert.equal(event.raw_json.usage_stage, 'estimated');
  assert.equal(
    event.raw_json.usage.input_tokens,
    estimateInputTokens('gpt-5.4-mini', requestTextOf('openai', 'chat.completions'), body),
  );
});
