// The Vertex wire's translators on their own: throttling of both publishers as upstream_rate_limited,
// the counting requests each endpoint takes, and embeddings through :predict with their usage.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GatewayError } from '../../../../common/errors.ts';
import type { JsonObject } from '../../../../common/types.ts';
import { TRANSLATORS, USAGE_PRESETS } from '../../../../hooks/families/index.ts';
import type { TranslatorInit } from '../../../../hooks/translators/types.ts';

const init: TranslatorInit = {
  requestId: 'req_v',
  model: 'client-model',
  upstreamModel: 'upstream-model',
  stream: false,
  createdAt: 1760000000,
};
const QUOTA = {
  error: {
    code: 429,
    message:
      'Quota exceeded for aiplatform.googleapis.com/generate_content_requests_per_minute_per_project_per_base_model',
    status: 'RESOURCE_EXHAUSTED',
  },
};

test('a 429 RESOURCE_EXHAUSTED is upstream_rate_limited with Google message, in every Vertex translator', () => {
  const names = [...TRANSLATORS.keys()].filter((n) => /_to_vertex_(anthropic|gemini|predict)$/.test(n));
  assert.ok(names.length >= 15, names.join());
  for (const name of names) {
    assert.throws(
      () => TRANSLATORS.get(name)!.create(init).error(429, QUOTA),
      (err: unknown) =>
        err instanceof GatewayError &&
        err.code === 'upstream_rate_limited' &&
        err.status === 429 &&
        err.message.includes('Quota exceeded'),
      name,
    );
    const other = TRANSLATORS.get(name)!
      .create(init)
      .error(503, {
        error: { code: 503, message: 'The service is currently unavailable.', status: 'UNAVAILABLE' },
      });
    assert.match(JSON.stringify(other), /currently unavailable/, name);
  }
});

test("a throttle within a stream (Claude's rate_limit_error, Gemini's 429 chunk) keeps upstream_rate_limited in every client's error event", () => {
  const claude = JSON.stringify({
    type: 'error',
    error: { type: 'rate_limit_error', message: 'Quota exceeded for online_prediction_requests' },
  });
  const names = [...TRANSLATORS.keys()].filter(
    (n) => /_to_vertex_(anthropic|gemini)$/.test(n) && !n.includes('_count_'),
  );
  assert.ok(names.length >= 8, names.join());
  for (const name of names) {
    const t = TRANSLATORS.get(name)!.create({ ...init, stream: true });
    const out = name.endsWith('_anthropic')
      ? t.streamEvent('error', claude)
      : t.streamEvent(undefined, JSON.stringify(QUOTA));
    const last = out.at(-1);
    assert.ok(last !== undefined, name);
    assert.match(last.data, /"upstream_rate_limited"/, name);
    assert.match(last.data, /Quota exceeded/, name);
  }
  // Overload is not throttling: it keeps its own type.
  const overloaded = TRANSLATORS.get('openai_to_vertex_anthropic')!
    .create({ ...init, stream: true })
    .streamEvent(
      'error',
      JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }),
    );
  assert.doesNotMatch(overloaded.at(-1)!.data, /upstream_rate_limited/);
});

test('a Gemini client on the Google publisher: body, reply and error as they are', () => {
  const t = TRANSLATORS.get('gemini_to_vertex_gemini')!.create(init);
  const body = { contents: [{ role: 'user', parts: [{ text: 'hi' }] }], generationConfig: { topK: 3 } };
  assert.deepEqual(t.request(body), body);
  const reply = { candidates: [], usageMetadata: { promptTokenCount: 1 } };
  assert.deepEqual(t.response(reply), reply);
  assert.deepEqual(t.error(400, { error: { code: 400, message: 'bad', status: 'INVALID_ARGUMENT' } }), {
    error: { code: 400, message: 'bad', status: 'INVALID_ARGUMENT' },
  });
  assert.deepEqual(t.streamEvent(undefined, '{"candidates":[]}'), [
    { event: undefined, data: '{"candidates":[]}' },
  ]);
  assert.deepEqual(t.streamEnd(true), []);
  assert.match(t.streamEnd(false)[0]!.data, /"status":"UNAVAILABLE"/);
});

test("counting requests: Claude's with model and anthropic_version, Gemini's without the wrapper", () => {
  const claude = TRANSLATORS.get('gemini_count_to_vertex_anthropic')!.create(init);
  const fromGemini = claude.request({
    generateContentRequest: {
      model: 'models/x',
      contents: [{ role: 'user', parts: [{ text: 'count me' }] }],
      systemInstruction: { parts: [{ text: 'be brief' }] },
    },
  });
  assert.equal(fromGemini.model, 'upstream-model');
  assert.equal(fromGemini.anthropic_version, 'vertex-2023-10-16');
  assert.deepEqual(fromGemini.messages, [{ role: 'user', content: 'count me' }]);
  assert.equal(fromGemini.max_tokens, undefined);
  assert.deepEqual(claude.response({ input_tokens: 12 }), { totalTokens: 12 });

  const gemini = TRANSLATORS.get('gemini_count_to_vertex_gemini')!.create(init);
  const contents = [{ role: 'user', parts: [{ text: 'count me' }] }];
  const tools = [{ functionDeclarations: [{ name: 'f' }] }];
  assert.deepEqual(
    gemini.request({ generateContentRequest: { model: 'models/x', contents, tools, toolConfig: {} } }),
    { contents, tools },
  );
  assert.deepEqual(gemini.request({ contents }), { contents });
  const anthropic = TRANSLATORS.get('anthropic_count_to_vertex_gemini')!.create(init);
  const counted = anthropic.request({
    model: 'client-model',
    system: 'be brief',
    messages: [{ role: 'user', content: 'count me' }],
  }) as JsonObject;
  assert.deepEqual(Object.keys(counted).sort(), ['contents', 'systemInstruction']);
  assert.deepEqual(anthropic.response({ totalTokens: 7 }), { input_tokens: 7 });
});

test('embeddings through :predict: instances, dimensions, base64 vectors and the reported tokens', () => {
  const t = TRANSLATORS.get('openai_embeddings_to_vertex_predict')!.create(init);
  assert.deepEqual(t.request({ model: 'm', input: ['a b', 'c'], dimensions: 2, encoding_format: 'base64' }), {
    instances: [{ content: 'a b' }, { content: 'c' }],
    parameters: { outputDimensionality: 2 },
  });
  const reply = {
    predictions: [
      { embeddings: { statistics: { truncated: false, token_count: 2 }, values: [0.5, -0.25] } },
      { embeddings: { statistics: { truncated: false, token_count: 1 }, values: [1, 0] } },
    ],
    metadata: { billableCharacterCount: 3 },
  };
  const out = t.response(reply) as { data: { embedding: string }[]; usage: JsonObject; model: string };
  assert.deepEqual(out.usage, { prompt_tokens: 3, total_tokens: 3 });
  assert.equal(out.model, 'client-model');
  const first = Buffer.from(out.data[0]!.embedding, 'base64');
  assert.deepEqual([first.readFloatLE(0), first.readFloatLE(4)], [0.5, -0.25]);
  assert.deepEqual(USAGE_PRESETS.get('vertex_predict_embeddings')!.fromJson(reply), {
    inputTokens: 3,
    outputTokens: 0,
    totalTokens: 3,
  });
  assert.throws(
    () =>
      TRANSLATORS.get('openai_embeddings_to_vertex_predict')!
        .create(init)
        .request({ model: 'm', input: [[1, 2]] }),
    /token array input/,
  );
});
