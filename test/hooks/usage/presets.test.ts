import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { createParser } from 'eventsource-parser';
import fc from 'fast-check';
import type { JsonValue, Usage } from '../../../common/types.ts';
import { USAGE_PRESETS } from '../../../hooks/families/index.ts';
import { createPathExtractor } from '../../../hooks/usage/path-extractor.ts';
import { hasObjectKey } from '../../../hooks/usage/sniffers.ts';
import type { UsagePreset } from '../../../hooks/usage/types.ts';

const FIXTURES = new URL('../../fixtures/usage/', import.meta.url);

function fixtureJson(name: string): JsonValue {
  return JSON.parse(readFileSync(new URL(name, FIXTURES), 'utf8')) as JsonValue;
}

function fixtureEvents(name: string): { event: string | undefined; data: string }[] {
  const events: { event: string | undefined; data: string }[] = [];
  const parser = createParser({
    onEvent: (message) => events.push({ event: message.event, data: message.data }),
  });
  parser.feed(readFileSync(new URL(name, FIXTURES), 'utf8'));
  return events;
}

function preset(name: string): UsagePreset {
  const found = USAGE_PRESETS.get(name);
  assert.ok(found, `preset ${name} exists`);
  return found;
}

function sniff(name: string, file: string): Usage | undefined {
  const sniffer = preset(name).createSniffer();
  for (const { event, data } of fixtureEvents(file)) sniffer.event(event, data);
  return sniffer.result();
}

test('the registry holds the documented preset names', () => {
  assert.deepEqual([...USAGE_PRESETS.keys()].sort(), [
    'anthropic_messages',
    'bedrock_converse',
    'bedrock_invoke',
    'gemini_embed_content',
    'gemini_generate_content',
    'openai_audio_transcriptions',
    'openai_chat_completions',
    'openai_completions',
    'openai_embeddings',
    'openai_images',
    'openai_responses',
    'openai_speech',
    'vertex_predict_embeddings',
  ]);
  for (const [name, value] of USAGE_PRESETS) assert.equal(value.name, name);
});

test('openai_chat_completions reads JSON usage with cached and reasoning details', () => {
  assert.deepEqual(preset('openai_chat_completions').fromJson(fixtureJson('openai-chat.json')), {
    inputTokens: 1342,
    outputTokens: 196,
    totalTokens: 1538,
    cacheReadTokens: 1152,
    reasoningTokens: 128,
  });
});

test('openai_chat_completions stream: only the chunk carrying a usage object counts', () => {
  assert.deepEqual(sniff('openai_chat_completions', 'openai-chat.sse'), {
    inputTokens: 27,
    outputTokens: 11,
    totalTokens: 38,
    cacheReadTokens: 0,
    reasoningTokens: 0,
  });
});

test('openai_chat_completions stream without a usage chunk reports none', () => {
  const sniffer = preset('openai_chat_completions').createSniffer();
  for (const { event, data } of fixtureEvents('openai-chat.sse')) {
    if (!data.includes('"prompt_tokens"')) sniffer.event(event, data);
  }
  assert.equal(sniffer.result(), undefined);
});

test('openai_completions reads JSON and streams', () => {
  assert.deepEqual(preset('openai_completions').fromJson(fixtureJson('openai-completions.json')), {
    inputTokens: 5,
    outputTokens: 7,
    totalTokens: 12,
  });
  assert.deepEqual(sniff('openai_completions', 'openai-completions.sse'), {
    inputTokens: 5,
    outputTokens: 6,
    totalTokens: 11,
  });
});

test('openai_responses reads JSON usage, not a tool schema property named usage', () => {
  assert.deepEqual(preset('openai_responses').fromJson(fixtureJson('openai-responses.json')), {
    inputTokens: 2036,
    outputTokens: 418,
    totalTokens: 2454,
    cacheReadTokens: 1920,
    reasoningTokens: 384,
  });
});

test('openai_responses stream: response.completed carries the usage', () => {
  assert.deepEqual(sniff('openai_responses', 'openai-responses.sse'), {
    inputTokens: 37,
    outputTokens: 15,
    totalTokens: 52,
    cacheReadTokens: 0,
    reasoningTokens: 0,
  });
});

test('openai_responses stream without event names falls back to the data type', () => {
  const sniffer = preset('openai_responses').createSniffer();
  for (const { data } of fixtureEvents('openai-responses.sse')) sniffer.event(undefined, data);
  assert.equal(sniffer.result()?.inputTokens, 37);
});

test('openai_embeddings: prompt tokens in, zero out', () => {
  assert.deepEqual(preset('openai_embeddings').fromJson(fixtureJson('openai-embeddings.json')), {
    inputTokens: 17,
    outputTokens: 0,
    totalTokens: 17,
  });
});

test('anthropic_messages JSON: input includes cache reads and writes, kept separately too', () => {
  assert.deepEqual(preset('anthropic_messages').fromJson(fixtureJson('anthropic-messages.json')), {
    inputTokens: 21 + 2048 + 188,
    outputTokens: 393,
    totalTokens: 21 + 2048 + 188 + 393,
    cacheReadTokens: 2048,
    cacheCreationTokens: 188,
  });
});

test('anthropic_messages stream: message_start input, message_delta cumulative output wins', () => {
  assert.deepEqual(sniff('anthropic_messages', 'anthropic-messages.sse'), {
    inputTokens: 472 + 1024,
    outputTokens: 89,
    totalTokens: 472 + 1024 + 89,
    cacheReadTokens: 1024,
    cacheCreationTokens: 0,
  });
});

test('anthropic_messages stream: later message_delta input counts replace earlier ones', () => {
  const sniffer = preset('anthropic_messages').createSniffer();
  sniffer.event(
    'message_start',
    '{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}',
  );
  sniffer.event('message_delta', '{"type":"message_delta","usage":{"input_tokens":30,"output_tokens":5}}');
  sniffer.event('message_delta', '{"type":"message_delta","usage":{"output_tokens":7}}');
  assert.deepEqual(sniffer.result(), { inputTokens: 30, outputTokens: 7, totalTokens: 37 });
});

test('gemini_generate_content JSON: thoughts count as output and reasoning, cached content as cache read', () => {
  assert.deepEqual(preset('gemini_generate_content').fromJson(fixtureJson('gemini-generate.json')), {
    inputTokens: 1067,
    outputTokens: 34 + 330,
    totalTokens: 1431,
    cacheReadTokens: 1024,
    reasoningTokens: 330,
  });
});

test('gemini_generate_content stream: the last usageMetadata wins', () => {
  assert.deepEqual(sniff('gemini_generate_content', 'gemini-stream.sse'), {
    inputTokens: 9,
    outputTokens: 52,
    totalTokens: 61,
    reasoningTokens: 40,
  });
});

test('gemini_generate_content reads the JSON-array form of streamGenerateContent', () => {
  assert.deepEqual(preset('gemini_generate_content').fromJson(fixtureJson('gemini-stream-array.json')), {
    inputTokens: 4,
    outputTokens: 2,
    totalTokens: 6,
  });
});

test('gemini_embed_content reports none', () => {
  assert.equal(preset('gemini_embed_content').fromJson(fixtureJson('gemini-embed.json')), undefined);
  const sniffer = preset('gemini_embed_content').createSniffer();
  sniffer.event(undefined, '{"usageMetadata":{"promptTokenCount":3}}');
  assert.equal(sniffer.result(), undefined);
});

test('replies without usage give undefined', () => {
  for (const value of USAGE_PRESETS.values()) {
    assert.equal(value.fromJson({ id: 'x', choices: [] }), undefined, value.name);
    assert.equal(value.fromJson({ usage: null, usageMetadata: null }), undefined, value.name);
    assert.equal(value.fromJson({ usage: { prompt_tokens: 'many' } }), undefined, value.name);
    assert.equal(value.createSniffer().result(), undefined, value.name);
  }
});

test('hasObjectKey: an object must follow, escaped text never matches', () => {
  assert.equal(hasObjectKey('{"usage":null}', '"usage"'), false);
  assert.equal(hasObjectKey('{"usage" : {"a":1}}', '"usage"'), true);
  assert.equal(hasObjectKey('{"text":"\\"usage\\": {"}', '"usage"'), false);
  assert.equal(hasObjectKey('{"usage":null,"x":{"usage":{}}}', '"usage"'), true);
  assert.equal(hasObjectKey('"usage"', '"usage"'), false);
});

test('the stream gate skips content deltas (no parse of every event)', (t) => {
  const parse = t.mock.method(JSON, 'parse');
  const sniffer = preset('openai_chat_completions').createSniffer();
  for (const { event, data } of fixtureEvents('openai-chat.sse')) sniffer.event(event, data);
  sniffer.result();
  sniffer.result();
  assert.equal(parse.mock.callCount(), 1);
});

test('malformed and hostile input never throws', () => {
  const samples = [
    '',
    '[DONE]',
    '{',
    '{"usage":{',
    '{"usage":{"prompt_tokens":-5,"completion_tokens":1e400}}',
    '{"type":"message_start","message":null,"usage":{"input_tokens":"x"}}',
    '{"type":"response.completed","response":{"usage":[1,2]}}',
    '{"usageMetadata":{"promptTokenCount":{"a":1}}}',
    'null',
    '"usage"',
  ];
  for (const value of USAGE_PRESETS.values()) {
    for (const sample of samples) {
      const sniffer = value.createSniffer();
      assert.doesNotThrow(() => {
        sniffer.event(undefined, sample);
        sniffer.event('response.completed', sample);
        sniffer.event('message_delta', sample);
        sniffer.result();
      }, `${value.name}: ${sample}`);
    }
    for (const body of [null, 1, 'x', [], [null], { usage: [] }, { usageMetadata: 'x' }] as JsonValue[]) {
      assert.doesNotThrow(() => value.fromJson(body), value.name);
    }
  }
});

test('property: arbitrary strings and JSON never make a preset throw', () => {
  fc.assert(
    fc.property(
      fc.oneof(fc.string(), fc.json()),
      fc.option(fc.string(), { nil: undefined }),
      (data, event) => {
        for (const value of USAGE_PRESETS.values()) {
          const sniffer = value.createSniffer();
          sniffer.event(event, data);
          sniffer.event(event, `{"usage":${data}}`);
          sniffer.event(event, `{"usageMetadata":${data}}`);
          sniffer.result();
          try {
            value.fromJson(JSON.parse(data) as JsonValue);
          } catch (error) {
            if (!(error instanceof SyntaxError)) throw error;
          }
        }
      },
    ),
    { numRuns: 300 },
  );
});

test('createPathExtractor reads the named paths from JSON', () => {
  const extractor = createPathExtractor([
    { field: 'input_tokens', path: ['meta', 'billed_units', 'input_tokens'] },
    { field: 'output_tokens', path: ['meta', 'billed_units', 'output_tokens'] },
    { field: 'cache_read_tokens', path: ['meta', 'cached', 0] },
  ]);
  assert.deepEqual(
    extractor.fromJson({ meta: { billed_units: { input_tokens: 12, output_tokens: 30 }, cached: [4, 9] } }),
    { inputTokens: 12, outputTokens: 30, totalTokens: 42, cacheReadTokens: 4 },
  );
  assert.equal(extractor.fromJson({ meta: {} }), undefined);
  assert.equal(extractor.fromJson([]), undefined);
});

test('createPathExtractor stream: later values win, unrelated events are not parsed', (t) => {
  const extractor = createPathExtractor([
    { field: 'input_tokens', path: ['usage', 'in'] },
    { field: 'output_tokens', path: ['usage', 'out'] },
    { field: 'total_tokens', path: ['usage', 'sum'] },
    { field: 'reasoning_tokens', path: ['items', -1, 'think'] },
  ]);
  const sniffer = extractor.createSniffer();
  const parse = t.mock.method(JSON, 'parse');
  sniffer.event(undefined, '{"delta":"hello"}');
  assert.equal(parse.mock.callCount(), 0);
  sniffer.event(undefined, '{"usage":{"in":5,"out":1}}');
  sniffer.event(undefined, '{"usage":{"out":9,"sum":14},"items":[{"think":1},{"think":3}]}');
  sniffer.event(undefined, '{"usage":{"out":');
  assert.deepEqual(sniffer.result(), {
    inputTokens: 5,
    outputTokens: 9,
    totalTokens: 14,
    reasoningTokens: 3,
  });
});
