import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { JsonObject } from '../../../../common/types.ts';
import { geminiToOpenai } from '../../../../hooks/families/gemini/gemini-to-openai.ts';
import type { TranslatorInit } from '../../../../hooks/translators/types.ts';
import { TranslationError } from '../../../../hooks/translators/types.ts';
import { caseNames, checkGolden } from '../../../fixtures/translators/gemini/golden.ts';

const DIRECTION = 'gemini-to-openai';

const INIT: TranslatorInit = {
  requestId: 'req_2',
  model: 'gemini-2.5-flash',
  upstreamModel: 'gpt-4o-mini',
  stream: true,
  createdAt: 1760000000,
};

function chunk(
  delta: JsonObject | null,
  finish: string | null = null,
  usage: JsonObject | null = null,
): string {
  return JSON.stringify({
    id: 'chatcmpl-1',
    object: 'chat.completion.chunk',
    model: 'gpt-4o-mini',
    choices: delta ? [{ index: 0, delta, finish_reason: finish }] : [],
    usage,
  });
}

describe('gemini-to-openai golden fixtures', () => {
  for (const name of caseNames(DIRECTION)) {
    test(name, () => {
      const outputs = checkGolden(geminiToOpenai, DIRECTION, name);
      const request = JSON.parse(outputs.get('expected-upstream-request.json') ?? '{}') as JsonObject;
      assert.match(String(request.model), /^gpt-4o/, 'the upstream model goes in the body');
      const sse = outputs.get('expected-client-response.sse');
      if (sse !== undefined) {
        assert.deepEqual(request.stream_options, { include_usage: true });
        assert.doesNotMatch(sse, /\[DONE\]/, 'Gemini streams have no [DONE]');
      }
    });
  }
});

describe('gemini-to-openai request', () => {
  test('pairs function responses with the ids given to their calls, by name and order', () => {
    const out = geminiToOpenai.create(INIT).request({
      contents: [
        { role: 'user', parts: [{ text: 'q' }] },
        {
          role: 'model',
          parts: [
            { functionCall: { name: 'a', args: {} } },
            { functionCall: { name: 'b', args: { x: 1 } } },
            { functionCall: { name: 'a', args: { y: 2 } } },
          ],
        },
        {
          role: 'user',
          parts: [
            { functionResponse: { name: 'b', response: { r: 'b' } } },
            { functionResponse: { name: 'a', response: { r: 'a1' } } },
            { functionResponse: { name: 'a', response: { r: 'a2' } } },
            { text: 'thanks' },
          ],
        },
      ],
    });
    const messages = out.messages as JsonObject[];
    const calls = messages[1]!.tool_calls as JsonObject[];
    assert.deepEqual(
      calls.map((call) => call.id),
      ['call_0', 'call_1', 'call_2'],
    );
    assert.deepEqual(
      messages.slice(2).map((message) => [message.role, message.tool_call_id ?? message.content]),
      [
        ['tool', 'call_1'],
        ['tool', 'call_0'],
        ['tool', 'call_2'],
        ['user', 'thanks'],
      ],
    );
    assert.equal(out.stream, true);
  });

  test('rejects tools and parts an OpenAI upstream cannot serve', () => {
    const translator = geminiToOpenai.create(INIT);
    assert.throws(
      () => translator.request({ contents: [], tools: [{ googleSearch: {} }] }),
      TranslationError,
    );
    assert.throws(
      () =>
        translator.request({
          contents: [{ role: 'user', parts: [{ inlineData: { mimeType: 'video/mp4', data: 'AAAA' } }] }],
        }),
      TranslationError,
    );
    assert.throws(() => translator.request({ contents: {} }), TranslationError);
  });

  test('a non-streaming request carries no stream flag', () => {
    const out = geminiToOpenai.create({ ...INIT, stream: false }).request({ contents: [] });
    assert.equal(out.stream, undefined);
    assert.equal(out.stream_options, undefined);
  });
});

describe('gemini-to-openai stream', () => {
  test('the final chunk waits for the usage chunk', () => {
    const translator = geminiToOpenai.create(INIT);
    translator.request({ contents: [] });
    assert.equal(translator.streamEvent(undefined, chunk({ content: 'Hi' })).length, 1);
    assert.deepEqual(translator.streamEvent(undefined, chunk({}, 'stop')), []);
    const final = translator.streamEvent(
      undefined,
      chunk(null, null, { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 }),
    );
    assert.equal(final.length, 1);
    const body = JSON.parse(final[0]!.data) as JsonObject;
    assert.equal((body.candidates as JsonObject[])[0]!.finishReason, 'STOP');
    assert.deepEqual(body.usageMetadata, {
      promptTokenCount: 4,
      candidatesTokenCount: 2,
      totalTokenCount: 6,
    });
    assert.deepEqual(translator.streamEvent(undefined, '[DONE]'), []);
    assert.deepEqual(translator.streamEnd(true), []);
  });

  test('without a usage chunk the final chunk goes out at the end of the stream', () => {
    const translator = geminiToOpenai.create(INIT);
    translator.streamEvent(undefined, chunk({ content: 'Hi' }));
    translator.streamEvent(undefined, chunk({}, 'length'));
    const end = translator.streamEnd(true);
    assert.equal(end.length, 1);
    assert.equal(
      ((JSON.parse(end[0]!.data) as JsonObject).candidates as JsonObject[])[0]!.finishReason,
      'MAX_TOKENS',
    );
  });

  test('broken tool-call JSON is reported as MALFORMED_FUNCTION_CALL', () => {
    const translator = geminiToOpenai.create(INIT);
    translator.streamEvent(
      undefined,
      chunk({
        tool_calls: [{ index: 0, id: 'c', type: 'function', function: { name: 'f', arguments: '{"a":' } }],
      }),
    );
    const out = [
      ...translator.streamEvent(undefined, chunk({}, 'tool_calls')),
      ...translator.streamEnd(true),
    ];
    const candidate = ((JSON.parse(out[0]!.data) as JsonObject).candidates as JsonObject[])[0];
    assert.equal(candidate!.finishReason, 'MALFORMED_FUNCTION_CALL');
  });

  test('reasoning deltas become thought parts only when the client asked for thoughts', () => {
    for (const includeThoughts of [false, true]) {
      const translator = geminiToOpenai.create(INIT);
      translator.request({ contents: [], generationConfig: { thinkingConfig: { includeThoughts } } });
      const out = translator.streamEvent(undefined, chunk({ reasoning_content: 'hmm', content: 'Hi' }));
      const parts = ((JSON.parse(out[0]!.data) as JsonObject).candidates as JsonObject[])[0]!
        .content as JsonObject;
      const expected = includeThoughts ? [{ text: 'hmm', thought: true }, { text: 'Hi' }] : [{ text: 'Hi' }];
      assert.deepEqual(parts.parts, expected);
    }
  });

  test('a cut-off stream ends with a Gemini error chunk the SDK raises', () => {
    const translator = geminiToOpenai.create(INIT);
    translator.streamEvent(undefined, chunk({ content: 'Hi' }));
    const out = translator.streamEnd(false);
    assert.deepEqual(JSON.parse(out[0]!.data), {
      error: {
        code: 500,
        message: 'upstream stream ended before completion (request id: req_2)',
        status: 'INTERNAL',
      },
    });
  });

  test('error statuses map to google.rpc names', () => {
    const translator = geminiToOpenai.create(INIT);
    const cases: [number, string][] = [
      [400, 'INVALID_ARGUMENT'],
      [401, 'UNAUTHENTICATED'],
      [403, 'PERMISSION_DENIED'],
      [404, 'NOT_FOUND'],
      [429, 'RESOURCE_EXHAUSTED'],
      [500, 'INTERNAL'],
      [503, 'UNAVAILABLE'],
    ];
    for (const [status, name] of cases) {
      const out = translator.error(status, { error: { message: 'm', type: 'x' } }) as JsonObject;
      assert.deepEqual(out.error, { code: status, message: 'm (request id: req_2)', status: name });
    }
  });
});
