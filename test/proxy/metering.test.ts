// Settling usage at the end of a reply (proxy/metering.ts) with the real usage hook, presets and
// estimator, fed the recorded upstream streams of test/fixtures/upstream through the gateway's own SSE
// reader. Every family's stream endings: complete, in-stream error, cut, client gone, and the end reason
// each gets; finish_upstream's reading on after the client left.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { pino } from 'pino';
import type { ApiName, JsonObject, RequestContext } from '../../common/types.ts';
import { RuleTranslators } from '../../hooks/builtin/rule-translators.ts';
import { createUsageMeterHook } from '../../hooks/builtin/usage-meter.ts';
import { requestTextOf, TRANSLATORS, USAGE_PRESETS } from '../../hooks/families/index.ts';
import { setProviderInputCount } from '../../hooks/usage/early-input.ts';
import { countTokens, estimateInputTokens, estimateUsageSteps } from '../../hooks/usage/estimate.ts';
import { deliveredOutputText, settleUsage } from '../../proxy/metering.ts';
import { type SseEvent, SseReader } from '../../proxy/sse.ts';

const log = pino({ level: 'silent' });

function context(api: ApiName, model: string, body: JsonObject): RequestContext {
  return {
    id: 'req-metering',
    correlationId: undefined,
    api,
    clientFormat: api === 'native.messages' ? 'anthropic' : api.startsWith('native.') ? 'gemini' : 'openai',
    method: 'POST',
    path: '/',
    query: new URLSearchParams(),
    headers: {},
    receivedAt: 0,
    startedAt: 0,
    signal: new AbortController().signal,
    log,
    body,
    rawBody: Buffer.alloc(0),
    model,
    stream: true,
    principal: undefined,
    provider: 'p',
    upstreamModel: model,
    channel: undefined,
    upstreamTtfbMs: undefined,
    status: 200,
    usage: undefined,
    usageStage: undefined,
    responseStarted: true,
    clientAborted: false,
    deliveredText: [],
    error: undefined,
  };
}

function fixtureEvents(path: string): SseEvent[] {
  const events: SseEvent[] = [];
  const reader = new SseReader((ev) => events.push(ev));
  reader.push(readFileSync(new URL(`../fixtures/upstream/${path}`, import.meta.url)));
  reader.end();
  return events;
}

type Ending = 'complete' | 'client-gone' | 'upstream-failed';

/**
 * Relays `events` as the gateway does: each through the usage hook, delivered to the client and kept
 * for estimation; onResponseEnd runs unless the client went away. Then settles.
 */
async function relay(ctx: RequestContext, preset: string, events: SseEvent[], ending: Ending): Promise<void> {
  const hook = createUsageMeterHook(USAGE_PRESETS.get(preset)!);
  for (const ev of events) {
    hook.onResponseChunk?.(ctx, [{ type: 'event', event: ev.event, data: ev.data }]);
    ctx.deliveredText.push(ev.data);
  }
  if (ending === 'client-gone') ctx.clientAborted = true;
  else {
    if (ending === 'upstream-failed') ctx.error = { code: 'upstream_unreachable', message: 'cut' };
    hook.onResponseEnd?.(ctx);
  }
  await settleUsage(ctx, estimateUsageSteps);
}

/** Read through a call, so the type checker keeps the field's type across an await. */
function usageOf(ctx: RequestContext): RequestContext['usage'] {
  return ctx.usage;
}

function delivered(ctx: RequestContext): number {
  return countTokens(deliveredOutputText(ctx.deliveredText), ctx.model ?? '');
}

const CLAUDE = 'claude-sonnet-5';
const CLAUDE_BODY: JsonObject = {
  model: CLAUDE,
  max_tokens: 100,
  stream: true,
  messages: [{ role: 'user', content: 'Say the quick brown fox, and a little more about it please.' }],
};

test('Anthropic: a complete stream keeps message_delta’s counts as reported', async () => {
  const ctx = context('native.messages', CLAUDE, CLAUDE_BODY);
  await relay(ctx, 'anthropic_messages', fixtureEvents('anthropic/messages-stream-text.sse'), 'complete');
  assert.equal(ctx.usageStage, 'upstream');
  assert.equal(ctx.usage?.inputTokens, 25);
  assert.equal(ctx.usage?.outputTokens, 15);
});

test('Anthropic: an in-stream error event bills what was delivered, not message_start’s 1', async () => {
  const ctx = context('native.messages', CLAUDE, CLAUDE_BODY);
  await relay(
    ctx,
    'anthropic_messages',
    fixtureEvents('anthropic/messages-stream-midstream-error.sse'),
    'complete',
  );
  assert.equal(ctx.usageStage, 'estimated');
  assert.equal(ctx.usage?.inputTokens, 25, 'input as message_start reported it');
  assert.equal(ctx.usage?.outputTokens, delivered(ctx));
  assert.ok((ctx.usage?.outputTokens ?? 0) > 1);
  assert.equal(ctx.usage?.totalTokens, 25 + delivered(ctx));
});

test('Anthropic: a stream the client left keeps message_start’s input count', async () => {
  const events = fixtureEvents('anthropic/messages-stream-text.sse');
  const cut = events.findIndex((ev) => ev.event === 'message_delta');
  const ctx = context('native.messages', CLAUDE, CLAUDE_BODY);
  await relay(ctx, 'anthropic_messages', events.slice(0, cut - 2), 'client-gone');
  assert.notEqual(
    estimateInputTokens(CLAUDE, requestTextOf('anthropic', 'native.messages'), CLAUDE_BODY),
    25,
    'the estimate differs',
  );
  assert.equal(ctx.usageStage, 'estimated');
  assert.equal(ctx.usage?.inputTokens, 25);
  assert.equal(ctx.usage?.outputTokens, delivered(ctx));
  assert.ok((ctx.usage?.outputTokens ?? 0) > 1);
});

test('Anthropic: a cut connection after message_start bills the delivered output', async () => {
  const events = fixtureEvents('anthropic/messages-stream-text.sse');
  const cut = events.findIndex((ev) => ev.event === 'message_delta');
  const ctx = context('native.messages', CLAUDE, CLAUDE_BODY);
  await relay(ctx, 'anthropic_messages', events.slice(0, cut), 'upstream-failed');
  assert.equal(ctx.usageStage, 'estimated');
  assert.equal(ctx.usage?.inputTokens, 25);
  assert.equal(ctx.usage?.outputTokens, delivered(ctx));
});

const GEMINI = 'gemini-3.8-flash';
const GEMINI_BODY: JsonObject = {
  contents: [{ role: 'user', parts: [{ text: 'Say the quick brown fox, and then a few more words.' }] }],
};

test('Gemini: a complete stream keeps the last chunk’s counts as reported', async () => {
  const ctx = context('native.streamGenerateContent', GEMINI, GEMINI_BODY);
  await relay(ctx, 'gemini_generate_content', fixtureEvents('gemini/stream-text.sse'), 'complete');
  assert.equal(ctx.usageStage, 'upstream');
  assert.deepEqual([ctx.usage?.inputTokens, ctx.usage?.outputTokens, ctx.usage?.totalTokens], [9, 12, 21]);
});

test('Gemini: an in-stream error before the last chunk bills what was delivered, not 0', async () => {
  const ctx = context('native.streamGenerateContent', GEMINI, GEMINI_BODY);
  await relay(ctx, 'gemini_generate_content', fixtureEvents('gemini/stream-midstream-error.sse'), 'complete');
  assert.equal(ctx.usageStage, 'estimated');
  assert.equal(ctx.usage?.inputTokens, 9, 'promptTokenCount as reported');
  assert.equal(ctx.usage?.outputTokens, delivered(ctx));
  assert.ok((ctx.usage?.outputTokens ?? 0) > 0);
});

test('Gemini: a stream the client left keeps the reported prompt count', async () => {
  const events = fixtureEvents('gemini/stream-text.sse');
  const ctx = context('native.streamGenerateContent', GEMINI, GEMINI_BODY);
  await relay(ctx, 'gemini_generate_content', events.slice(0, 2), 'client-gone');
  assert.notEqual(
    estimateInputTokens(GEMINI, requestTextOf('gemini', 'native.streamGenerateContent'), GEMINI_BODY),
    9,
  );
  assert.equal(ctx.usageStage, 'estimated');
  assert.equal(ctx.usage?.inputTokens, 9);
  assert.equal(ctx.usage?.outputTokens, delivered(ctx));
});

const GPT = 'gpt-5.4-mini';
const GPT_BODY: JsonObject = {
  model: GPT,
  stream: true,
  messages: [{ role: 'user', content: 'Say hello in three languages.' }],
};

test('completion-style: the include_usage chunk is final; a stream without it is estimated', async () => {
  const complete = context('chat.completions', GPT, GPT_BODY);
  await relay(complete, 'openai_chat_completions', fixtureEvents('openai/chat-stream-text.sse'), 'complete');
  assert.equal(complete.usageStage, 'upstream');

  const failed = context('chat.completions', GPT, GPT_BODY);
  await relay(
    failed,
    'openai_chat_completions',
    fixtureEvents('openai/chat-stream-midstream-error.sse'),
    'complete',
  );
  assert.equal(failed.usageStage, 'estimated');
  assert.equal(
    failed.usage?.inputTokens,
    estimateInputTokens(GPT, requestTextOf('openai', 'chat.completions'), GPT_BODY),
  );
  assert.equal(failed.usage?.outputTokens, delivered(failed));
});

test('completion-style: running usage on content chunks (vLLM) is not final when the stream is cut', async () => {
  const chunk = (text: string, completion: number, finish: string | null = null): SseEvent => ({
    data: JSON.stringify({
      object: 'chat.completion.chunk',
      choices: [{ index: 0, delta: { content: text }, finish_reason: finish }],
      usage: { prompt_tokens: 14, completion_tokens: completion, total_tokens: 14 + completion },
    }),
  });
  const words = ['Hola, ', 'bonjour ', 'and hallo, ', 'said the very long ', 'reply that was cut'];
  const cut = context('chat.completions', GPT, GPT_BODY);
  // The server counts a token behind what it already sent.
  await relay(
    cut,
    'openai_chat_completions',
    words.map((w, i) => chunk(w, i)),
    'complete',
  );
  assert.equal(cut.usageStage, 'estimated');
  assert.equal(cut.usage?.inputTokens, 14);
  assert.equal(cut.usage?.outputTokens, delivered(cut));
  assert.ok(delivered(cut) > words.length - 1);

  const finished = context('chat.completions', GPT, GPT_BODY);
  await relay(
    finished,
    'openai_chat_completions',
    [...words.map((w, i) => chunk(w, i)), chunk('.', 40, 'stop'), { data: '[DONE]' }],
    'complete',
  );
  assert.equal(finished.usageStage, 'upstream');
  assert.equal(finished.usage?.outputTokens, 40);
});

test('a huge prompt is settled in slices: the event loop runs in between, the counts are the same', async () => {
  const body: JsonObject = { ...GPT_BODY, messages: [{ role: 'user', content: 'x'.repeat(150_000) }] };
  const ctx = context('chat.completions', GPT, body);
  ctx.clientAborted = true;
  ctx.deliveredText.push(JSON.stringify({ choices: [{ delta: { content: 'Echo: x' } }] }));
  const order: string[] = [];
  setImmediate(() => order.push('immediate scheduled before settling'));
  const pending = settleUsage(ctx, estimateUsageSteps);
  assert.ok(pending instanceof Promise, 'a 150 KB prompt is not estimated in one go');
  assert.equal(usageOf(ctx), undefined, 'not settled before the estimate is done');
  await pending;
  order.push('settled');
  assert.deepEqual(order, ['immediate scheduled before settling', 'settled']);
  assert.equal(ctx.usageStage, 'estimated');
  assert.equal(
    ctx.usage?.inputTokens,
    estimateInputTokens(GPT, requestTextOf('openai', 'chat.completions'), body),
  );
  assert.equal(ctx.usage?.outputTokens, countTokens('Echo: x', GPT));
});

test("an input estimate is the serving provider's: the body its rule translated, in its framing", async () => {
  const body: JsonObject = {
    model: 'gpt-5.4-mini',
    max_tokens: 100,
    stream: true,
    system: 'Answer briefly.',
    tools: [{ name: 'lookup', description: 'Find a word.', input_schema: { type: 'object' } }],
    messages: [{ role: 'user', content: 'Define serendipity.' }],
  };
  const ctx = context('native.messages', 'gpt-5.4-mini', body);
  const rules = new RuleTranslators(TRANSLATORS, new Map(), []);
  const served = rules.mapRequest(ctx, 'anthropic_to_openai', body);
  ctx.clientAborted = true;
  await settleUsage(ctx, estimateUsageSteps);
  const expected = estimateInputTokens('gpt-5.4-mini', requestTextOf('openai', 'chat.completions'), served);
  assert.equal(usageOf(ctx)?.inputTokens, expected);
  // Counted in the client's (Anthropic's) framing it would add the tool-use system prompt.
  assert.notEqual(
    expected,
    estimateInputTokens('gpt-5.4-mini', requestTextOf('anthropic', 'native.messages'), body),
  );
});

test('end reasons: none for a whole stream; client_gone, upstream_error (error event, failed connection), upstream_cut', async () => {
  const cases: [string, ApiName, string, JsonObject, string, Ending, string | undefined][] = [
    [
      'anthropic_messages',
      'native.messages',
      CLAUDE,
      CLAUDE_BODY,
      'anthropic/messages-stream-text.sse',
      'complete',
      undefined,
    ],
    [
      'anthropic_messages',
      'native.messages',
      CLAUDE,
      CLAUDE_BODY,
      'anthropic/messages-stream-midstream-error.sse',
      'complete',
      'upstream_error',
    ],
    [
      'gemini_generate_content',
      'native.streamGenerateContent',
      GEMINI,
      GEMINI_BODY,
      'gemini/stream-midstream-error.sse',
      'complete',
      'upstream_error',
    ],
    [
      'openai_chat_completions',
      'chat.completions',
      GPT,
      GPT_BODY,
      'openai/chat-stream-midstream-error.sse',
      'complete',
      'upstream_error',
    ],
    [
      'openai_chat_completions',
      'chat.completions',
      GPT,
      GPT_BODY,
      'openai/chat-stream-text.sse',
      'client-gone',
      'client_gone',
    ],
    [
      'openai_chat_completions',
      'chat.completions',
      GPT,
      GPT_BODY,
      'openai/chat-stream-text.sse',
      'upstream-failed',
      'upstream_error',
    ],
    ['openai_responses', 'responses', GPT, GPT_BODY, 'openai/responses-stream.sse', 'complete', undefined],
  ];
  for (const [preset, api, model, body, fixture, ending, reason] of cases) {
    const ctx = context(api, model, body);
    await relay(ctx, preset, fixtureEvents(fixture), ending);
    assert.equal(ctx.endReason, reason, `${fixture}, ${ending}`);
    assert.equal(ctx.usageStage, reason === undefined ? 'upstream' : 'estimated', `${fixture}, ${ending}`);
  }
  // A stream that stops before its final report, with no error: cut.
  const events = fixtureEvents('anthropic/messages-stream-text.sse');
  const ctx = context('native.messages', CLAUDE, CLAUDE_BODY);
  await relay(ctx, 'anthropic_messages', events.slice(0, events.length - 3), 'complete');
  assert.equal(ctx.endReason, 'upstream_cut');
  assert.equal(ctx.usageStage, 'estimated');
});

/**
 * finish_upstream as the relay does it: the client leaves after `delivered` events (the relay marks the
 * reading on with client_gone), the rest still goes through the usage hook but reaches nobody, and the
 * stream ends (no onResponseEnd: the reply is gone) or is cut at the bound.
 */
async function readOn(
  ctx: RequestContext,
  preset: string,
  events: SseEvent[],
  delivered: number,
  bound: boolean,
): Promise<void> {
  const hook = createUsageMeterHook(USAGE_PRESETS.get(preset)!);
  events.forEach((ev, i) => {
    if (i === delivered) {
      ctx.clientAborted = true;
      ctx.endReason = 'client_gone';
    }
    hook.onResponseChunk?.(ctx, [{ type: 'event', event: ev.event, data: ev.data }]);
    if (i < delivered) ctx.deliveredText.push(ev.data);
  });
  if (bound) ctx.endReason = 'timeout';
  await settleUsage(ctx, estimateUsageSteps);
}

test('finish_upstream: a stream read on to its final report after the client left keeps its counts (client_gone)', async () => {
  const events = fixtureEvents('anthropic/messages-stream-text.sse');
  const whole = context('native.messages', CLAUDE, CLAUDE_BODY);
  await relay(whole, 'anthropic_messages', events, 'complete');

  const ctx = context('native.messages', CLAUDE, CLAUDE_BODY);
  await readOn(ctx, 'anthropic_messages', events, 3, false);
  assert.equal(ctx.endReason, 'client_gone');
  assert.equal(ctx.usageStage, 'upstream');
  assert.deepEqual(usageOf(ctx), usageOf(whole));

  const stopped = context('native.messages', CLAUDE, CLAUDE_BODY);
  await readOn(stopped, 'anthropic_messages', events.slice(0, events.length - 3), 3, false);
  assert.equal(stopped.endReason, 'upstream_cut', 'read on, but the stream stopped before its final report');
  assert.equal(stopped.usageStage, 'estimated');

  const failed = context('native.messages', CLAUDE, CLAUDE_BODY);
  await readOn(
    failed,
    'anthropic_messages',
    fixtureEvents('anthropic/messages-stream-midstream-error.sse'),
    3,
    false,
  );
  assert.equal(failed.endReason, 'upstream_error');
  assert.equal(failed.usageStage, 'estimated');

  const bound = context('native.messages', CLAUDE, CLAUDE_BODY);
  await readOn(bound, 'anthropic_messages', events.slice(0, 8), 5, true);
  assert.equal(bound.endReason, 'timeout');
  assert.equal(bound.usageStage, 'estimated');
  assert.equal(bound.usage?.inputTokens, 25, 'message_start’s input');
  assert.ok(delivered(bound) > 1);
  assert.equal(bound.usage?.outputTokens, delivered(bound), 'output: what reached the client');
});

test("a cut stream whose provider's count was asked alongside bills that count as its input", async () => {
  const body: JsonObject = { ...CLAUDE_BODY, model: GPT };
  const events = fixtureEvents('openai/chat-stream-text.sse');
  const estimate = estimateInputTokens(GPT, requestTextOf('anthropic', 'native.messages'), body);
  for (const ending of ['client-gone', 'upstream-failed'] as const) {
    const ctx = context('native.messages', GPT, body);
    setProviderInputCount(ctx, estimate + 7);
    await relay(ctx, 'openai_chat_completions', events.slice(0, 3), ending);
    assert.equal(ctx.usageStage, 'estimated', ending);
    assert.equal(usageOf(ctx)?.inputTokens, estimate + 7, `${ending}: the provider's count`);
    assert.equal(usageOf(ctx)?.outputTokens, delivered(ctx), `${ending}: output as delivered`);
    assert.equal(usageOf(ctx)?.totalTokens, estimate + 7 + delivered(ctx));
  }
  // A stream that reported the input itself keeps the stream's figure.
  const ctx = context('native.messages', CLAUDE, CLAUDE_BODY);
  setProviderInputCount(ctx, 99);
  const anthropic = fixtureEvents('anthropic/messages-stream-text.sse');
  await relay(ctx, 'anthropic_messages', anthropic.slice(0, 4), 'client-gone');
  assert.equal(usageOf(ctx)?.inputTokens, 25);
});

test('Responses: a usage object in the opening events is the input before the end, not the final report', async () => {
  const events = fixtureEvents('openai/responses-stream.sse').map((ev) => {
    if (ev.event !== 'response.created') return ev;
    const data = JSON.parse(ev.data) as { response: JsonObject };
    data.response.usage = { input_tokens: 31, output_tokens: 0, total_tokens: 31 };
    return { ...ev, data: JSON.stringify(data) };
  });
  const terminal = events.findIndex((ev) => ev.event === 'response.completed');
  const cut = context('responses', GPT, GPT_BODY);
  await relay(cut, 'openai_responses', events.slice(0, terminal), 'complete');
  assert.equal(cut.endReason, 'upstream_cut');
  assert.equal(cut.usageStage, 'estimated');
  assert.equal(usageOf(cut)?.inputTokens, 31);
  assert.equal(usageOf(cut)?.outputTokens, delivered(cut));

  const whole = context('responses', GPT, GPT_BODY);
  await relay(whole, 'openai_responses', events, 'complete');
  assert.equal(whole.endReason, undefined);
  assert.equal(whole.usageStage, 'upstream');
  assert.notEqual(usageOf(whole)?.inputTokens, 31, "the terminal event's counts");
});
