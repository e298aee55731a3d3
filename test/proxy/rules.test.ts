// The routing rules, one test each: match rules (docs/dsl.md), the x-router-provider override, the
// registry, alt=sse, retries before the first byte only, client disconnects, mid-stream
// failures as SDK-visible error events, and the request id.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import type { RecordedRequest } from '../../sim/upstream/types.ts';
import { modelsWith, simProvider } from '../support/sim-providers.ts';
import { ACCESS_KEY, postJson, type Stack, startStack } from '../support/stack.ts';

let stack: Stack;
let openai: OpenAI;
let anthropic: Anthropic;

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

before(async () => {
  stack = await startStack({
    providers: {
      'sim-a': simProvider('sim-a'),
      'sim-b': simProvider('sim-b'),
      'sim-c': simProvider('sim-c'),
      'sim-dead': simProvider('sim-dead'),
    },
    // Port 1 on loopback: nothing listens, so connecting is refused at once.
    baseUrls: { 'sim-dead': 'http://127.0.0.1:1' },
    modelsYaml: modelsWith([
      'retry-pair: { providers: [sim-a, sim-b] }',
      'retry-refused: { providers: [sim-dead, sim-b] }',
      'retry-three: { providers: [sim-a, sim-b, sim-c] }',
    ]),
  });
  openai = new OpenAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: ACCESS_KEY, baseURL: stack.url, maxRetries: 0 });
});
after(() => stack.close());

function chat(model: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model, messages: [{ role: 'user', content: 'route me' }], ...extra };
}

function errorOf(json: unknown): { message: string; type: string; code: string } {
  return (json as { error: { message: string; type: string; code: string } }).error;
}

/** Upstream requests that carried the given x-sim-fail-key (one test's requests). */
function withKey(key: string): RecordedRequest[] {
  return stack.sim.requests.filter((r) => r.headers['x-sim-fail-key'] === key);
}

describe('provider selection', () => {
  test('a selected provider with no matching rule answers 400 no_matching_rule and calls nobody', async () => {
    const before = stack.sim.requests.length;
    const res = await postJson(
      `${stack.url}/v1/embeddings`,
      { model: 'text-embedding-3-small', input: 'x' },
      { 'x-router-provider': 'anthropic' },
    );
    assert.equal(res.status, 400);
    assert.equal(errorOf(res.json).code, 'no_matching_rule');
    assert.equal(stack.sim.requests.length, before);
  });

  test('x-router-provider bypasses the registry: an unlisted model is served', async () => {
    const res = await postJson(`${stack.url}/v1/chat/completions`, chat('not-in-any-registry'), {
      'x-router-provider': 'openai',
    });
    assert.equal(res.status, 200);
    const up = stack.sim.requests.at(-1);
    assert.equal(up?.path, '/v1/chat/completions');
    assert.equal((up?.json as { model?: string } | undefined)?.model, 'not-in-any-registry');
  });

  test('x-router-provider wins over the registry entry of a known model', async () => {
    const res = await postJson(`${stack.url}/v1/chat/completions`, chat('claude-sonnet-5'), {
      'x-router-provider': 'sim-a',
    });
    assert.equal(res.status, 200);
    const up = stack.sim.requests.at(-1);
    assert.equal(up?.path, '/v1/chat/completions', 'sent as chat completions, not to /v1/messages');
    assert.equal(up?.headers['x-test-provider'], 'sim-a');
  });

  test('an unknown provider in x-router-provider answers 400 provider_not_offered', async () => {
    const res = await postJson(`${stack.url}/v1/chat/completions`, chat('gpt-5.4-mini'), {
      'x-router-provider': 'no-such-provider',
    });
    assert.equal(res.status, 400);
    assert.equal(errorOf(res.json).code, 'provider_not_offered');
    assert.match(errorOf(res.json).message, /no-such-provider/);
  });

  test('a model not in the registry answers 404 model_not_found', async () => {
    const before = stack.sim.requests.length;
    const res = await postJson(`${stack.url}/v1/chat/completions`, chat('no-such-model'));
    assert.equal(res.status, 404);
    assert.equal(errorOf(res.json).code, 'model_not_found');
    assert.match(errorOf(res.json).message, /no-such-model/);
    assert.equal(stack.sim.requests.length, before);
  });
});

describe('alt=sse on streamGenerateContent', () => {
  const body = { contents: [{ role: 'user', parts: [{ text: 'stream without alt' }] }] };

  test('the shipped Gemini provider: a request without alt gets alt=sse upstream and an SSE reply', async () => {
    const res = await fetch(`${stack.url}/v1beta/models/gemini-3.8-flash:streamGenerateContent`, {
      method: 'POST',
      headers: { 'x-goog-api-key': ACCESS_KEY, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.match(await res.text(), /^data: \{/m);
    const url = new URL(stack.sim.requests.at(-1)?.path ?? '/', 'http://x');
    assert.equal(url.searchParams.get('alt'), 'sse');
  });

  test('a provider rule that sets no query still gets alt=sse from the core', async () => {
    const res = await fetch(`${stack.url}/v1beta/models/gemini-3.8-flash:streamGenerateContent`, {
      method: 'POST',
      headers: {
        'x-goog-api-key': ACCESS_KEY,
        'content-type': 'application/json',
        'x-router-provider': 'sim-a',
      },
      body: JSON.stringify(body),
    });
    assert.equal(res.status, 200);
    await res.text();
    const up = stack.sim.requests.at(-1);
    assert.equal(up?.headers['x-test-provider'], 'sim-a');
    const url = new URL(up?.path ?? '/', 'http://x');
    assert.equal(url.pathname, '/v1beta/models/gemini-3.8-flash:streamGenerateContent');
    assert.equal(url.searchParams.get('alt'), 'sse');
  });
});

describe('retries', () => {
  for (const status of ['500', '429', '503']) {
    test(`first provider answers ${status}: the next provider serves, both attempts upstream`, async () => {
      const key = `retry-${status}`;
      const res = await postJson(`${stack.url}/v1/chat/completions`, chat('retry-pair'), {
        'x-sim-fail': status,
        'x-sim-fail-times': '1',
        'x-sim-fail-key': key,
      });
      assert.equal(res.status, 200, res.text);
      assert.match(
        (res.json as { choices: { message: { content: string } }[] }).choices[0]!.message.content,
        /^Echo: route me/,
      );
      assert.deepEqual(
        withKey(key).map((r) => r.headers['x-test-provider']),
        ['sim-a', 'sim-b'],
      );
    });
  }

  test('every candidate fails: the last upstream error is relayed, attempts capped by limits.max_retries', async () => {
    const key = 'retry-all-fail';
    const res = await postJson(`${stack.url}/v1/chat/completions`, chat('retry-three'), {
      'x-sim-fail': '503',
      'x-sim-fail-key': key,
    });
    assert.equal(res.status, 503);
    assert.ok(errorOf(res.json).message.length > 0);
    // max_retries defaults to 1: two attempts, the third provider is never tried.
    assert.deepEqual(
      withKey(key).map((r) => r.headers['x-test-provider']),
      ['sim-a', 'sim-b'],
    );
  });

  test('a 4xx other than 429 is not retried', async () => {
    const key = 'no-retry-400';
    const res = await postJson(`${stack.url}/v1/chat/completions`, chat('retry-pair'), {
      'x-sim-fail': '400',
      'x-sim-fail-times': '1',
      'x-sim-fail-key': key,
    });
    assert.equal(res.status, 400);
    assert.equal(withKey(key).length, 1);
  });

  test('first provider refuses the connection: the next provider serves', async () => {
    const before = stack.sim.requests.length;
    const res = await postJson(`${stack.url}/v1/chat/completions`, chat('retry-refused'));
    assert.equal(res.status, 200, res.text);
    const sent = stack.sim.requests.slice(before);
    assert.deepEqual(
      sent.map((r) => r.headers['x-test-provider']),
      ['sim-b'],
    );
  });

  test('a stream whose first provider answers 500 is retried before the first byte', async () => {
    const key = 'retry-stream-500';
    const stream = await openai.chat.completions.create(
      { model: 'retry-pair', messages: [{ role: 'user', content: 'retry my stream' }], stream: true },
      { headers: { 'x-sim-fail': '500', 'x-sim-fail-times': '1', 'x-sim-fail-key': key } },
    );
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    assert.match(text, /^Echo: retry my stream/);
    assert.deepEqual(
      withKey(key).map((r) => r.headers['x-test-provider']),
      ['sim-a', 'sim-b'],
    );
  });

  test('no retry after the first byte: a mid-stream failure reaches the client, one attempt only', async () => {
    const key = 'no-retry-midstream';
    const stream = await openai.chat.completions.create(
      { model: 'retry-pair', messages: [{ role: 'user', content: 'fail half way' }], stream: true },
      { headers: { 'x-sim-fail': 'midstream', 'x-sim-fail-times': '1', 'x-sim-fail-key': key } },
    );
    let deltas = 0;
    await assert.rejects(async () => {
      for await (const chunk of stream) if (chunk.choices[0]?.delta.content) deltas++;
    }, OpenAI.APIError);
    assert.ok(deltas > 0, 'content arrived before the failure');
    assert.equal(withKey(key).length, 1);
  });
});

describe('client disconnect', () => {
  test('aborting a stream mid-way aborts the upstream request', async () => {
    const before = stack.sim.stats.aborted;
    const ctrl = new AbortController();
    const res = await fetch(`${stack.url}/v1/chat/completions`, {
      method: 'POST',
      signal: ctrl.signal,
      headers: {
        authorization: `Bearer ${ACCESS_KEY}`,
        'content-type': 'application/json',
        'x-sim-chunks': '200',
        'x-sim-chunk-delay-ms': '20',
      },
      body: JSON.stringify(chat('retry-pair', { stream: true })),
    });
    assert.equal(res.status, 200);
    const reader = res.body?.getReader();
    assert.ok(reader);
    const first = await reader.read();
    assert.equal(first.done, false);
    ctrl.abort();
    await reader.cancel().catch(() => undefined);
    await stack.sim.waitFor((s) => s.stats.aborted === before + 1);
    assert.equal(stack.sim.stats.aborted, before + 1);
  });
});

describe('client disconnect on translated streams', () => {
  for (const model of ['claude-sonnet-5', 'gemini-3.8-flash']) {
    test(`aborting a completion-style stream from ${model} aborts the upstream request`, async () => {
      const before = stack.sim.stats.aborted;
      const ctrl = new AbortController();
      const res = await fetch(`${stack.url}/v1/chat/completions`, {
        method: 'POST',
        signal: ctrl.signal,
        headers: { authorization: `Bearer ${ACCESS_KEY}`, 'content-type': 'application/json' },
        // Knobs ride in the model name: the shipped providers forward no x-sim-* header.
        body: JSON.stringify(chat(`${model}-chunks-200-delay-20`, { stream: true, max_tokens: 5000 })),
      });
      assert.equal(res.status, 200);
      const reader = res.body?.getReader();
      assert.ok(reader);
      assert.equal((await reader.read()).done, false);
      ctrl.abort();
      await reader.cancel().catch(() => undefined);
      await stack.sim.waitFor((s) => s.stats.aborted === before + 1);
    });
  }
});

describe('mid-stream upstream failure ends the stream with an SDK-visible error', () => {
  for (const model of ['claude-sonnet-5', 'gemini-3.8-flash']) {
    for (const mode of ['midstream', 'midstream-reset']) {
      const what = mode === 'midstream-reset' ? 'APIError naming the request id' : 'APIError';
      test(`openai SDK from ${model} (translated), fail-${mode}: ${what}`, async () => {
        const rid = `rid-${model}-${mode}`;
        const stream = await openai.chat.completions.create(
          {
            model: `${model}-fail-${mode}`,
            messages: [{ role: 'user', content: 'x' }],
            max_tokens: 300,
            stream: true,
          },
          { headers: { 'x-router-request-id': rid } },
        );
        let deltas = 0;
        await assert.rejects(
          async () => {
            for await (const chunk of stream) if (chunk.choices[0]?.delta.content) deltas++;
          },
          (err: unknown) => {
            assert.ok(err instanceof OpenAI.APIError, String(err));
            if (mode === 'midstream-reset') {
              // The gateway itself saw the upstream drop: its error, so its request id (docs/lifecycle.md).
              const body = err.error as { message?: string } | undefined;
              assert.match(body?.message ?? '', new RegExp(`\\(request id: ${rid}\\)`));
            }
            return true;
          },
        );
        assert.ok(deltas > 0);
      });
    }
  }

  test('openai SDK: the upstream error event (x-sim-fail: midstream) raises APIError', async () => {
    const stream = await openai.chat.completions.create(
      { model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'x' }], stream: true },
      { headers: { 'x-router-provider': 'sim-a', 'x-sim-fail': 'midstream' } },
    );
    let deltas = 0;
    await assert.rejects(
      async () => {
        for await (const chunk of stream) if (chunk.choices[0]?.delta.content) deltas++;
      },
      (err: unknown) => err instanceof OpenAI.APIError,
    );
    assert.ok(deltas > 0);
  });

  test('openai SDK: a dropped upstream connection (midstream-reset) becomes an error event it raises', async () => {
    const stream = await openai.chat.completions.create(
      { model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'x' }], stream: true },
      {
        headers: {
          'x-router-provider': 'sim-a',
          'x-sim-fail': 'midstream-reset',
          'x-router-request-id': 'rid-midstream-reset-openai',
        },
      },
    );
    let deltas = 0;
    await assert.rejects(
      async () => {
        for await (const chunk of stream) if (chunk.choices[0]?.delta.content) deltas++;
      },
      (err: unknown) => {
        assert.ok(err instanceof OpenAI.APIError, String(err));
        const body = err.error as { code?: string; message?: string } | undefined;
        assert.equal(body?.code, 'upstream_unreachable');
        assert.match(body?.message ?? '', /rid-midstream-reset-openai/);
        return true;
      },
    );
    assert.ok(deltas > 0);
  });

  test('Anthropic SDK, native passthrough: the upstream error event raises APIError', async () => {
    const stream = anthropic.messages.stream({
      model: 'claude-sonnet-5-fail-midstream',
      max_tokens: 200,
      messages: [{ role: 'user', content: 'x' }],
    });
    await assert.rejects(stream.finalMessage(), (err: unknown) => {
      assert.ok(err instanceof Anthropic.APIError, String(err));
      assert.match(String(err.message), /overloaded_error/);
      return true;
    });
  });

  test('Anthropic SDK, native passthrough: a dropped upstream connection becomes an error event', async () => {
    const stream = anthropic.messages.stream({
      model: 'claude-sonnet-5-fail-midstream-reset',
      max_tokens: 200,
      messages: [{ role: 'user', content: 'x' }],
    });
    await assert.rejects(stream.finalMessage(), (err: unknown) => {
      assert.ok(err instanceof Anthropic.APIError, String(err));
      const body = err.error as { type?: string; error?: { type?: string; code?: string } } | undefined;
      assert.equal(body?.type, 'error');
      assert.equal(body?.error?.code, 'upstream_unreachable');
      return true;
    });
  });

  test('Anthropic SDK through anthropic_to_openai: an upstream error chunk becomes an Anthropic error event', async () => {
    const stream = anthropic.messages.stream(
      { model: 'compat-model', max_tokens: 200, messages: [{ role: 'user', content: 'x' }] },
      { headers: { 'x-router-provider': 'sim-a', 'x-sim-fail': 'midstream' } },
    );
    await assert.rejects(stream.finalMessage(), (err: unknown) => {
      assert.ok(err instanceof Anthropic.APIError, String(err));
      assert.equal((err.error as { type?: string } | undefined)?.type, 'error');
      return true;
    });
  });

  test('Anthropic SDK through anthropic_to_openai: a dropped connection becomes an Anthropic error event naming the request id', async () => {
    const stream = anthropic.messages.stream(
      { model: 'compat-model', max_tokens: 200, messages: [{ role: 'user', content: 'x' }] },
      {
        headers: {
          'x-router-provider': 'sim-a',
          'x-sim-fail': 'midstream-reset',
          'x-router-request-id': 'rid-anthropic-compat-reset',
        },
      },
    );
    await assert.rejects(stream.finalMessage(), (err: unknown) => {
      assert.ok(err instanceof Anthropic.APIError, String(err));
      const body = err.error as { type?: string; error?: { message?: string } } | undefined;
      assert.equal(body?.type, 'error');
      assert.match(body?.error?.message ?? '', /\(request id: rid-anthropic-compat-reset\)/);
      return true;
    });
  });
});

describe('request id', () => {
  test('X-Router-Request-Id is honoured and echoed as x-router-request-id', async () => {
    const res = await postJson(`${stack.url}/v1/chat/completions`, chat('gpt-5.4-mini'), {
      'X-Router-Request-Id': 'client-fixed-id.42:a_b-c',
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-router-request-id'), 'client-fixed-id.42:a_b-c');
  });

  test('without one the gateway generates an id', async () => {
    const a = await postJson(`${stack.url}/v1/chat/completions`, chat('gpt-5.4-mini'));
    const b = await postJson(`${stack.url}/v1/chat/completions`, chat('gpt-5.4-mini'));
    assert.match(a.headers.get('x-router-request-id') ?? '', UUID_RE);
    assert.notEqual(a.headers.get('x-router-request-id'), b.headers.get('x-router-request-id'));
  });

  for (const [label, bad] of [
    ['too long', 'x'.repeat(129)],
    ['with a space', 'bad id'],
    ['with a slash', 'a/b'],
    ['with a quote', 'a"b'],
  ] as const) {
    test(`an invalid id (${label}) is replaced by a generated one`, async () => {
      const res = await postJson(`${stack.url}/v1/chat/completions`, chat('no-such-model'), {
        'x-router-request-id': bad,
      });
      const id = res.headers.get('x-router-request-id') ?? '';
      assert.match(id, UUID_RE);
      assert.ok(!errorOf(res.json).message.includes(bad));
      assert.match(errorOf(res.json).message, new RegExp(`\\(request id: ${id}\\)`));
    });
  }

  test('the longest valid id (128 characters) is kept', async () => {
    const id = 'y'.repeat(128);
    const res = await postJson(`${stack.url}/v1/chat/completions`, chat('gpt-5.4-mini'), {
      'x-router-request-id': id,
    });
    assert.equal(res.headers.get('x-router-request-id'), id);
  });

  test('the id appears in error messages of every wire family', async () => {
    const id = 'rid-in-errors';
    const openaiErr = await postJson(`${stack.url}/v1/chat/completions`, chat('no-such-model'), {
      'x-router-request-id': id,
    });
    assert.match(errorOf(openaiErr.json).message, /\(request id: rid-in-errors\)/);
    const anthropicErr = await postJson(
      `${stack.url}/v1/messages`,
      { model: 'no-such-model', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] },
      { 'x-router-request-id': id },
    );
    assert.equal(anthropicErr.status, 404);
    assert.match(errorOf(anthropicErr.json).message, /\(request id: rid-in-errors\)/);
    const geminiErr = await postJson(
      `${stack.url}/v1beta/models/no-such-model:generateContent`,
      { contents: [{ role: 'user', parts: [{ text: 'x' }] }] },
      { 'x-router-request-id': id },
    );
    assert.equal(geminiErr.status, 404);
    assert.match(errorOf(geminiErr.json).message, /\(request id: rid-in-errors\)/);
  });
});
