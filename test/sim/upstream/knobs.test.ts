// The simulator's control knobs, admin endpoints and replay, driven over raw HTTP.

import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, beforeEach, test } from 'node:test';
import { readKnobs } from '../../../sim/upstream/knobs.ts';
import { startUpstreamSim, type UpstreamSim } from '../../../sim/upstream/server.ts';
import { UNICODE_SAMPLE } from '../../../sim/upstream/text.ts';

let sim: UpstreamSim;

before(async () => {
  sim = await startUpstreamSim();
});

after(async () => {
  await sim.close();
});

beforeEach(() => {
  sim.reset();
});

const OPENAI_AUTH = { authorization: 'Bearer sk-test', 'content-type': 'application/json' };
const ANTHROPIC_AUTH = {
  'x-api-key': 'k',
  'anthropic-version': '2023-06-01',
  'content-type': 'application/json',
};
const GEMINI_AUTH = { 'x-goog-api-key': 'k', 'content-type': 'application/json' };

function chat(extra: Record<string, string> = {}, body: Record<string, unknown> = {}, signal?: AbortSignal) {
  return fetch(`${sim.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { ...OPENAI_AUTH, ...extra },
    body: JSON.stringify({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'knob test' }],
      ...body,
    }),
    signal,
  });
}

function anthropicMessages(extra: Record<string, string> = {}, body: Record<string, unknown> = {}) {
  return fetch(`${sim.url}/v1/messages`, {
    method: 'POST',
    headers: { ...ANTHROPIC_AUTH, ...extra },
    body: JSON.stringify({
      model: 'claude-x',
      max_tokens: 200,
      messages: [{ role: 'user', content: 'hi' }],
      ...body,
    }),
  });
}

function geminiGenerate(method: string, extra: Record<string, string> = {}, query = '') {
  return fetch(`${sim.url}/v1beta/models/gemini-2.0-flash:${method}${query}`, {
    method: 'POST',
    headers: { ...GEMINI_AUTH, ...extra },
    body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi gemini' }] }] }),
  });
}

/** SSE data payloads (and event names) of a complete body. */
function sseEvents(text: string): { event: string | undefined; data: string }[] {
  return text
    .split(/\r\n\r\n|\n\n/)
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const lines = block.split(/\r?\n/);
      const event = lines.find((l) => l.startsWith('event: '))?.slice(7);
      const data = lines.find((l) => l.startsWith('data: '))?.slice(6) ?? '';
      return { event, data };
    });
}

test('x-sim-fail status codes answer each provider’s error shape', async () => {
  const o = await chat({ 'x-sim-fail': '503' });
  assert.equal(o.status, 503);
  assert.equal(((await o.json()) as { error: { type: string } }).error.type, 'server_error');

  const a = await anthropicMessages({ 'x-sim-fail': '429', 'x-sim-retry-after': '2' });
  assert.equal(a.status, 429);
  assert.equal(a.headers.get('retry-after'), '2');
  assert.deepEqual(await a.json(), {
    type: 'error',
    error: {
      type: 'rate_limit_error',
      message: 'Simulated rate limit (x-sim-fail: 429). Please retry after a short wait.',
    },
  });

  const g = await geminiGenerate('generateContent', { 'x-sim-fail': '400' });
  assert.equal(g.status, 400);
  const body = (await g.json()) as { error: { code: number; status: string } };
  assert.equal(body.error.code, 400);
  assert.equal(body.error.status, 'INVALID_ARGUMENT');
  assert.equal(sim.stats.injected, 3);
});

test('x-sim-fail-times fails only the first N requests per x-sim-fail-key', async () => {
  const knobs = { 'x-sim-fail': '500', 'x-sim-fail-times': '2', 'x-sim-fail-key': 'k1' };
  assert.equal((await chat(knobs)).status, 500);
  assert.equal(
    (await chat({ ...knobs, 'x-sim-fail-key': 'k2' })).status,
    500,
    'another key counts separately',
  );
  assert.equal((await chat(knobs)).status, 500);
  assert.equal((await chat(knobs)).status, 200);
  assert.equal((await chat(knobs)).status, 200);
  sim.reset();
  assert.equal((await chat(knobs)).status, 500, 'reset() forgets the counters');
});

test('fail mode in the model name (SDK-friendly) and header precedence', async () => {
  const res = await chat({}, { model: 'sim-fail-503' });
  assert.equal(res.status, 503);
  const overridden = await chat({ 'x-sim-fail': '429' }, { model: 'sim-fail-503' });
  assert.equal(overridden.status, 429);
  const chunks = await chat({}, { model: 'gpt-4o-chunks-3', stream: true });
  const deltas = sseEvents(await chunks.text()).filter(
    (e) => e.data.includes('"content":"') && !e.data.includes('"content":""'),
  );
  assert.equal(deltas.length, 3);
});

test('reset destroys the connection before any reply', async () => {
  await assert.rejects(chat({ 'x-sim-fail': 'reset' }));
  assert.equal(sim.stats.injected, 1);
  assert.equal(sim.stats.aborted, 0, 'our own reset is not a client abort');
});

test('midstream sends some deltas, then the provider’s in-stream error', async () => {
  const o = sseEvents(await (await chat({ 'x-sim-fail': 'midstream' }, { stream: true })).text());
  assert.ok(o.some((e) => e.data.includes('"content"')));
  assert.match(o.at(-1)?.data ?? '', /^\{"error":\{"message":/);
  assert.ok(!o.some((e) => e.data === '[DONE]'));

  const a = sseEvents(
    await (await anthropicMessages({ 'x-sim-fail': 'midstream' }, { stream: true })).text(),
  );
  assert.equal(a[0]!.event, 'message_start');
  assert.equal(a.at(-1)?.event, 'error');
  assert.equal(JSON.parse(a.at(-1)?.data ?? '{}').error.type, 'overloaded_error');

  const g = await (
    await geminiGenerate('streamGenerateContent', { 'x-sim-fail': 'midstream' }, '?alt=sse')
  ).text();
  const gEvents = sseEvents(g);
  assert.equal(JSON.parse(gEvents.at(-1)?.data ?? '{}').error.status, 'INTERNAL');
  assert.ok(gEvents.length >= 2);

  const r = await fetch(`${sim.url}/v1/responses`, {
    method: 'POST',
    headers: { ...OPENAI_AUTH, 'x-sim-fail': 'midstream' },
    body: JSON.stringify({ model: 'gpt-4o-mini', input: 'hi', stream: true }),
  });
  const numbers = sseEvents(await r.text()).map((e) => JSON.parse(e.data).sequence_number);
  assert.ok(numbers.length >= 2);
  assert.equal(
    sseEvents(
      await (
        await fetch(`${sim.url}/v1/responses`, {
          method: 'POST',
          headers: OPENAI_AUTH,
          body: JSON.stringify({ model: 'gpt-4o-mini', input: 'hi', stream: true }),
        })
      ).text(),
    ).length > numbers.length,
    true,
    'the stream was cut',
  );
  assert.deepEqual(
    numbers,
    numbers.map((_, i) => i),
    'the error event continues the numbering',
  );
});

test("midstream-429 ends the stream with the provider's in-stream throttling error", async () => {
  assert.equal(readKnobs({}, 'claude-sonnet-5-fail-midstream-429', 0).fail, 'midstream-429');
  const a = sseEvents(
    await (await anthropicMessages({ 'x-sim-fail': 'midstream-429' }, { stream: true })).text(),
  );
  assert.equal(a[0]!.event, 'message_start');
  assert.equal(a.at(-1)?.event, 'error');
  assert.equal(JSON.parse(a.at(-1)?.data ?? '{}').error.type, 'rate_limit_error');

  const g = sseEvents(
    await (
      await geminiGenerate('streamGenerateContent', { 'x-sim-fail': 'midstream-429' }, '?alt=sse')
    ).text(),
  );
  assert.ok(g.length >= 2);
  assert.deepEqual(
    [JSON.parse(g.at(-1)?.data ?? '{}').error.code, JSON.parse(g.at(-1)?.data ?? '{}').error.status],
    [429, 'RESOURCE_EXHAUSTED'],
  );
  const array = JSON.parse(
    await (await geminiGenerate('streamGenerateContent', { 'x-sim-fail': 'midstream-429' })).text(),
  ) as { error?: { status: string } }[];
  assert.equal(array.at(-1)?.error?.status, 'RESOURCE_EXHAUSTED');
});

test('midstream-reset cuts the stream without a terminator', async () => {
  const res = await chat({ 'x-sim-fail': 'midstream-reset' }, { stream: true });
  assert.equal(res.status, 200);
  await assert.rejects(res.text());
});

test('a client abort of a paced stream stops it and is counted', async () => {
  const controller = new AbortController();
  const res = await chat(
    { 'x-sim-chunk-delay-ms': '20', 'x-sim-chunks': '200' },
    { stream: true },
    controller.signal,
  );
  const reader = res.body?.getReader();
  assert.ok(reader);
  const first = await reader.read();
  assert.ok(first.value && first.value.length > 0);
  controller.abort();
  await sim.waitFor((s) => s.stats.aborted === 1);
  assert.equal(sim.stats.served, 0);
});

test('hang never answers; the client giving up counts as an abort', async () => {
  const controller = new AbortController();
  const pending = chat({ 'x-sim-fail': 'hang' }, {}, controller.signal);
  await sim.waitFor((s) => s.requests.length === 1);
  controller.abort();
  await assert.rejects(pending);
  await sim.waitFor((s) => s.stats.aborted === 1);
});

test('latency delays the headers; pacing spreads the events', async () => {
  let start = performance.now();
  await (await chat({ 'x-sim-latency-ms': '60' })).json();
  assert.ok(performance.now() - start >= 55);
  start = performance.now();
  await (await chat({ 'x-sim-chunk-delay-ms': '15', 'x-sim-chunks': '4' }, { stream: true })).text();
  // role chunk + 4 deltas + finish + [DONE] = 7 events, 6 pauses
  assert.ok(performance.now() - start >= 6 * 15 - 5);
});

test('x-sim-no-usage omits usage everywhere', async () => {
  const o = (await (await chat({ 'x-sim-no-usage': '1' })).json()) as Record<string, unknown>;
  assert.equal(o.usage, undefined);
  const s = await (
    await chat({ 'x-sim-no-usage': '1' }, { stream: true, stream_options: { include_usage: true } })
  ).text();
  assert.ok(!s.includes('"usage"'));
  const a = await (await anthropicMessages({ 'x-sim-no-usage': '1' }, { stream: true })).text();
  assert.ok(!a.includes('"usage"'));
  const g = await (
    await geminiGenerate('streamGenerateContent', { 'x-sim-no-usage': '1' }, '?alt=sse')
  ).text();
  assert.ok(!g.includes('usageMetadata'));
});

test('cached and reasoning token knobs reach each usage shape', async () => {
  // Cached tokens are capped at the prompt size, so keep them below the shortest prompt here.
  const knobs = { 'x-sim-cached-tokens': '2', 'x-sim-reasoning-tokens': '5' };
  const o = (await (await chat(knobs)).json()) as {
    usage: {
      prompt_tokens_details: { cached_tokens: number };
      completion_tokens_details: { reasoning_tokens: number };
    };
  };
  assert.equal(o.usage.prompt_tokens_details.cached_tokens, 2);
  assert.equal(o.usage.completion_tokens_details.reasoning_tokens, 5);
  const a = (await (await anthropicMessages(knobs)).json()) as { usage: { cache_read_input_tokens: number } };
  assert.equal(a.usage.cache_read_input_tokens, 2);
  const g = (await (await geminiGenerate('generateContent', knobs)).json()) as {
    usageMetadata: { cachedContentTokenCount: number; thoughtsTokenCount: number };
  };
  assert.equal(g.usageMetadata.cachedContentTokenCount, 2);
  assert.equal(g.usageMetadata.thoughtsTokenCount, 5);
});

test('x-sim-unicode adds multi-byte text with a correct content-length', async () => {
  const res = await chat({ 'x-sim-unicode': '1' });
  const raw = Buffer.from(await res.arrayBuffer());
  assert.equal(Number(res.headers.get('content-length')), raw.length);
  const body = JSON.parse(raw.toString('utf8')) as { choices: { message: { content: string } }[] };
  assert.ok(body.choices[0]!.message.content.includes(UNICODE_SAMPLE));
});

test('anthropic raw stream: event order, ping, cache fields in message_start', async () => {
  const events = sseEvents(await (await anthropicMessages({}, { stream: true })).text());
  const names = events.map((e) => e.event);
  assert.deepEqual(names.slice(0, 3), ['message_start', 'content_block_start', 'ping']);
  assert.deepEqual(names.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
  const start = JSON.parse(events[0]!.data) as { message: { usage: Record<string, number> } };
  assert.ok(start.message.usage.input_tokens! > 0);
  assert.equal(start.message.usage.cache_read_input_tokens, 0);
  assert.equal(start.message.usage.cache_creation_input_tokens, 0);
  const delta = JSON.parse(events.at(-2)?.data ?? '{}') as {
    delta: { stop_reason: string };
    usage: { output_tokens: number };
  };
  assert.equal(delta.delta.stop_reason, 'end_turn');
  assert.ok(delta.usage.output_tokens > 1);
});

test('gemini: CRLF-separated SSE, JSON-array stream without alt=sse, ?key= auth, /v1/ routes', async () => {
  const sse = await (await geminiGenerate('streamGenerateContent', {}, '?alt=sse')).text();
  assert.ok(sse.includes('\r\n\r\n'));
  const arr = JSON.parse(await (await geminiGenerate('streamGenerateContent')).text()) as unknown[];
  assert.equal(arr.length, 8);
  const byKey = await fetch(`${sim.url}/v1/models/gemini-2.0-flash:generateContent?key=abc`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ contents: [{ parts: [{ text: 'v1 route' }] }] }),
  });
  assert.equal(byKey.status, 200);
  const models = (await (await fetch(`${sim.url}/v1/models?key=abc`)).json()) as { models: unknown[] };
  assert.ok(models.models.length > 0, '/v1/models with a Google key lists Gemini models');
});

test('missing credentials: 401 in the provider’s shape; bad JSON: 400; unknown path: 404', async () => {
  const o = await fetch(`${sim.url}/v1/chat/completions`, { method: 'POST', body: '{}' });
  assert.equal(o.status, 401);
  assert.equal(((await o.json()) as { error: { code: string } }).error.code, 'invalid_api_key');
  const a = await fetch(`${sim.url}/v1/messages`, { method: 'POST', body: '{}' });
  assert.equal(((await a.json()) as { error: { type: string } }).error.type, 'authentication_error');
  const g = await fetch(`${sim.url}/v1beta/models/x:generateContent`, { method: 'POST', body: '{}' });
  assert.equal(((await g.json()) as { error: { status: string } }).error.status, 'UNAUTHENTICATED');
  const bad = await fetch(`${sim.url}/v1/chat/completions`, {
    method: 'POST',
    headers: OPENAI_AUTH,
    body: '{nope',
  });
  assert.equal(bad.status, 400);
  const missing = await fetch(`${sim.url}/v1/nothing`, { headers: OPENAI_AUTH });
  assert.equal(missing.status, 404);
});

test('replay: verbatim fixtures by URL or header, statuses from the file name', async () => {
  const file = await readFile(
    new URL('../../fixtures/upstream/anthropic/messages-stream-tool-use.sse', import.meta.url),
    'utf8',
  );
  const byUrl = await fetch(`${sim.url}/_sim/replay/anthropic/messages-stream-tool-use`);
  assert.equal(byUrl.headers.get('content-type'), 'text/event-stream; charset=utf-8');
  assert.equal(await byUrl.text(), file);
  const paced = await chat({
    'x-sim-replay': 'anthropic/messages-stream-tool-use.sse',
    'x-sim-chunk-delay-ms': '1',
  });
  assert.equal(await paced.text(), file);
  const limited = await chat({ 'x-sim-replay': 'openai/rate-limit' });
  assert.equal(limited.status, 429);
  assert.equal(((await limited.json()) as { error: { code: string } }).error.code, 'rate_limit_exceeded');
  assert.equal((await fetch(`${sim.url}/_sim/replay/openai/..%2F..%2Fpackage.json`)).status, 404);
  assert.equal((await chat({ 'x-sim-replay': 'openai/none' })).status, 404);
});

test('admin endpoints: requests, stats, reset', async () => {
  await chat({}, { stream: false });
  const recorded = (await (await fetch(`${sim.url}/_sim/requests`)).json()) as {
    path: string;
    json: { model: string };
    bodyEncoding: string;
  }[];
  assert.equal(recorded.length, 1);
  assert.equal(recorded[0]!.path, '/v1/chat/completions');
  assert.equal(recorded[0]!.json.model, 'gpt-4o-mini');
  assert.equal(recorded[0]!.bodyEncoding, 'utf8');
  assert.deepEqual(await (await fetch(`${sim.url}/_sim/stats`)).json(), {
    aborted: 0,
    served: 1,
    injected: 0,
    held: 0,
  });
  assert.equal((await fetch(`${sim.url}/_sim/reset`, { method: 'POST' })).status, 204);
  assert.equal(sim.requests.length, 0);
  assert.equal(sim.stats.served, 0);
});

test('recording is bounded and can be turned off', async () => {
  const small = await startUpstreamSim({ maxRecorded: 3 });
  const off = await startUpstreamSim({ record: false, requireAuth: false });
  try {
    for (let i = 0; i < 5; i++) {
      await fetch(`${small.url}/v1/models`, { headers: OPENAI_AUTH });
      await fetch(`${off.url}/v1/models`);
    }
    assert.equal(small.requests.length, 3);
    assert.equal(off.requests.length, 0);
    assert.equal(off.stats.served, 5, 'requireAuth: false serves without credentials');
  } finally {
    await small.close();
    await off.close();
  }
});

test('cached-N and cachewrite-N in the model name set the cache knobs; headers win', () => {
  const k = readKnobs({}, 'us.anthropic.claude-cached-7-cachewrite-5-v1:0', 0);
  assert.deepEqual([k.cachedTokens, k.cacheWriteTokens], [7, 5]);
  const h = readKnobs({ 'x-sim-cached-tokens': '2' }, 'claude-cached-7', 0);
  assert.equal(h.cachedTokens, 2);
});
