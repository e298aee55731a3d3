import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { JsonObject, JsonValue } from '../../../../common/types.ts';
import { openaiToGemini } from '../../../../hooks/families/gemini/openai-to-gemini.ts';
import type { TranslatorInit } from '../../../../hooks/translators/types.ts';
import { TranslationError } from '../../../../hooks/translators/types.ts';
import { caseNames, checkGolden } from '../../../fixtures/translators/gemini/golden.ts';

const DIRECTION = 'openai-to-gemini';

const INIT: TranslatorInit = {
  requestId: 'req_1',
  model: 'gemini-2.5-flash',
  upstreamModel: 'gemini-2.5-flash',
  stream: true,
  createdAt: 1760000000,
};

function parsed(data: string): JsonObject {
  return JSON.parse(data) as JsonObject;
}

describe('openai-to-gemini golden fixtures', () => {
  for (const name of caseNames(DIRECTION)) {
    test(name, () => {
      const outputs = checkGolden(openaiToGemini, DIRECTION, name);
      const request = JSON.parse(outputs.get('expected-upstream-request.json') ?? '{}') as JsonObject;
      assert.equal(request.model, undefined, 'Gemini takes the model from the path');
      assert.equal(request.stream, undefined, 'Gemini takes streaming from the path');
    });
  }
});

describe('openai-to-gemini request', () => {
  test('strips JSON-schema keys Gemini rejects, at every depth', () => {
    const translator = openaiToGemini.create(INIT);
    const out = translator.request({
      messages: [{ role: 'user', content: 'hi' }],
      tools: [
        {
          type: 'function',
          function: {
            name: 'f',
            parameters: {
              $schema: 'http://json-schema.org/draft-07/schema#',
              type: 'object',
              additionalProperties: false,
              properties: {
                nested: {
                  type: 'object',
                  additionalProperties: { type: 'string' },
                  properties: { a: { type: 'array', items: { type: 'string', format: 'email' } } },
                },
              },
            },
          },
        },
      ],
    });
    const text = JSON.stringify(out);
    assert.doesNotMatch(text, /additionalProperties|\$schema|email/);
    assert.match(text, /"items":\{"type":"string"\}/);
  });

  test('maps tool_choice values', () => {
    const choices: [JsonValue, JsonObject][] = [
      ['auto', { mode: 'AUTO' }],
      ['none', { mode: 'NONE' }],
      ['required', { mode: 'ANY' }],
      [
        { type: 'function', function: { name: 'f' } },
        { mode: 'ANY', allowedFunctionNames: ['f'] },
      ],
    ];
    for (const [choice, expected] of choices) {
      const out = openaiToGemini.create(INIT).request({ messages: [], tool_choice: choice });
      assert.deepEqual(out.toolConfig, { functionCallingConfig: expected });
    }
  });

  test('looks up the function name of a tool message from the tool call id', () => {
    const out = openaiToGemini.create(INIT).request({
      messages: [
        { role: 'user', content: 'q' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'a', type: 'function', function: { name: 'one', arguments: '{}' } },
            { id: 'b', type: 'function', function: { name: 'two', arguments: '{"x":1}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'b', content: 'plain text' },
        { role: 'tool', tool_call_id: 'a', content: '{"ok":true}' },
      ],
    });
    const contents = out.contents as JsonObject[];
    assert.equal(contents.length, 3);
    assert.deepEqual(contents[2], {
      role: 'user',
      parts: [
        { functionResponse: { name: 'two', response: { output: 'plain text' } } },
        { functionResponse: { name: 'one', response: { ok: true } } },
      ],
    });
  });

  test('rejects what Gemini cannot express', () => {
    const translator = openaiToGemini.create(INIT);
    assert.throws(() => translator.request({ messages: [], n: 2 }), TranslationError);
    assert.throws(
      () => translator.request({ messages: [{ role: 'tool', tool_call_id: 'nope', content: 'x' }] }),
      TranslationError,
    );
    assert.throws(
      () =>
        translator.request({
          messages: [{ role: 'user', content: [{ type: 'image_url', image_url: 'ftp://x' }] }],
        }),
      TranslationError,
    );
    for (const url of ['http://[bad', 'data:text/plain,%E0%A4%A']) {
      const content = [{ type: 'image_url', image_url: { url } }];
      assert.throws(() => translator.request({ messages: [{ role: 'user', content }] }), TranslationError);
    }
    assert.throws(() => translator.request({ messages: 'hi' }), TranslationError);
  });
});

describe('openai-to-gemini replies', () => {
  test('a blocked prompt becomes content_filter', () => {
    const translator = openaiToGemini.create({ ...INIT, stream: false });
    const reply = translator.response({
      promptFeedback: { blockReason: 'PROHIBITED_CONTENT' },
      usageMetadata: { promptTokenCount: 9, totalTokenCount: 9 },
    }) as JsonObject;
    const choice = (reply.choices as JsonObject[])[0];
    assert.equal(choice!.finish_reason, 'content_filter');
    assert.deepEqual(reply.usage, { prompt_tokens: 9, completion_tokens: 0, total_tokens: 9 });
  });

  test('MAX_TOKENS is length and SAFETY is content_filter', () => {
    for (const [reason, expected] of [
      ['MAX_TOKENS', 'length'],
      ['SAFETY', 'content_filter'],
      ['RECITATION', 'content_filter'],
    ] as const) {
      const reply = openaiToGemini.create(INIT).response({
        candidates: [{ content: { role: 'model', parts: [{ text: 'x' }] }, finishReason: reason }],
      }) as JsonObject;
      assert.equal((reply.choices as JsonObject[])[0]!.finish_reason, expected);
    }
  });

  test('the usage chunk is sent only when the client asked for it', () => {
    const chunk = JSON.stringify({
      candidates: [{ content: { role: 'model', parts: [{ text: 'hi' }] }, finishReason: 'STOP' }],
      usageMetadata: { promptTokenCount: 3, candidatesTokenCount: 1, totalTokenCount: 4 },
    });
    for (const includeUsage of [false, true]) {
      const translator = openaiToGemini.create(INIT);
      translator.request({ messages: [], stream: true, stream_options: { include_usage: includeUsage } });
      const events = [...translator.streamEvent(undefined, chunk), ...translator.streamEnd(true)];
      const usageChunks = events.filter(
        (event) => event.data !== '[DONE]' && parsed(event.data).usage !== undefined,
      );
      assert.equal(usageChunks.length, includeUsage ? 1 : 0);
      assert.equal(events.at(-1)?.data, '[DONE]');
    }
  });

  test('streamed function calls get consecutive indexes and ids across chunks', () => {
    const translator = openaiToGemini.create(INIT);
    const call = (city: string): string =>
      JSON.stringify({
        candidates: [
          { content: { role: 'model', parts: [{ functionCall: { name: 'w', args: { city } } }] } },
        ],
      });
    const events = [
      ...translator.streamEvent(undefined, call('A')),
      ...translator.streamEvent(undefined, call('B')),
    ];
    const deltas = events
      .map((event) => ((parsed(event.data).choices as JsonObject[])[0]!.delta as JsonObject).tool_calls)
      .filter((calls) => calls !== undefined)
      .flatMap((calls) => calls as JsonObject[]);
    assert.deepEqual(
      deltas.map((delta) => [delta.index, delta.id]),
      [
        [0, 'call_0'],
        [1, 'call_1'],
      ],
    );
  });

  test('no [DONE] after an error event', () => {
    const translator = openaiToGemini.create(INIT);
    translator.request({ messages: [] });
    const error = translator.streamEvent(
      undefined,
      '{"error":{"code":500,"message":"boom","status":"INTERNAL"}}',
    );
    assert.equal(error.length, 1);
    assert.deepEqual(parsed(error[0]!.data), {
      error: { message: 'boom (request id: req_1)', type: 'server_error', code: 'internal' },
    });
    assert.deepEqual(translator.streamEnd(true), []);
  });

  test('a non-JSON error body does not leak into the message', () => {
    const out = openaiToGemini.create(INIT).error(502, '<html>proxy error</html>') as JsonObject;
    assert.deepEqual(out, {
      error: {
        message: 'upstream error (HTTP 502) (request id: req_1)',
        type: 'server_error',
        code: 'unavailable',
      },
    });
  });
});
