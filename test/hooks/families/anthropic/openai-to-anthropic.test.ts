import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { JsonObject } from '../../../../common/types.ts';
import {
  DEFAULT_MAX_TOKENS,
  openaiToAnthropic,
} from '../../../../hooks/families/anthropic/openai-to-anthropic.ts';
import { TranslationError } from '../../../../hooks/translators/types.ts';
import {
  caseDir,
  listCases,
  makeInit,
  runGoldenCase,
} from '../../../fixtures/translators/anthropic/harness.ts';

const DIRECTION = 'openai-to-anthropic';
const UPSTREAM_MODEL = 'claude-sonnet-4-5-20250929';

function create(request: JsonObject = { model: 'claude-sonnet', messages: [] }) {
  return openaiToAnthropic.create(makeInit(request, UPSTREAM_MODEL));
}

function parseData(data: string): JsonObject {
  return JSON.parse(data);
}

test('factory identity', () => {
  assert.equal(openaiToAnthropic.name, 'openai_to_anthropic');
  assert.equal(openaiToAnthropic.from, 'openai');
  assert.equal(openaiToAnthropic.to, 'anthropic');
});

const cases = listCases(DIRECTION);
test('fixture cases exist', () => {
  for (const name of ['text-json', 'text-stream', 'tool-calls-stream', 'images', 'error-mid-stream']) {
    assert.ok(cases.includes(name), name);
  }
});
for (const name of cases) {
  test(`golden: ${name}`, () => {
    const checked = runGoldenCase(openaiToAnthropic, caseDir(DIRECTION, name), UPSTREAM_MODEL);
    assert.ok(checked.length >= 2, `case ${name} checks a reply, not only the request`);
  });
}

test('max_tokens defaults when absent, and max_completion_tokens wins over max_tokens', () => {
  const messages = [{ role: 'user', content: 'hi' }];
  assert.equal(create().request({ model: 'm', messages }).max_tokens, DEFAULT_MAX_TOKENS);
  assert.equal(
    create().request({ model: 'm', messages, max_tokens: 9, max_completion_tokens: 7 }).max_tokens,
    7,
  );
});

test('unsupported values throw TranslationError naming the field', () => {
  const messages = [{ role: 'user', content: 'hi' }];
  const cases: [JsonObject, string][] = [
    [{ model: 'm', messages, n: 2 }, 'n'],
    [{ model: 'm', messages, temperature: 1.5 }, 'temperature'],
    [{ model: 'm', messages, response_format: { type: 'json_object' } }, 'response_format'],
    [
      { model: 'm', messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: {} }] }] },
      'messages[0].content[0].type',
    ],
    [
      {
        model: 'm',
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'ftp://x/y.png' } }] }],
      },
      'messages[0].content[0]',
    ],
    [{ model: 'm', messages: [{ role: 'function', name: 'f', content: 'x' }] }, 'messages[0].role'],
  ];
  for (const [body, field] of cases) {
    assert.throws(
      () => create().request(body),
      (error: unknown) => error instanceof TranslationError && error.field === field,
      field,
    );
  }
});

test('invalid tool call arguments in history are rejected, not forwarded', () => {
  const body = {
    model: 'm',
    messages: [
      {
        role: 'assistant',
        tool_calls: [{ id: 't1', type: 'function', function: { name: 'f', arguments: '{bad' } }],
      },
    ],
  };
  assert.throws(() => create().request(body), TranslationError);
});

test('usage normalization counts cache reads and writes as input, and keeps them apart', () => {
  const translator = create();
  translator.request({ model: 'claude-sonnet', messages: [{ role: 'user', content: 'hi' }] });
  const reply = translator.response({
    id: 'msg_1',
    type: 'message',
    role: 'assistant',
    content: [{ type: 'text', text: 'ok' }],
    stop_reason: 'end_turn',
    usage: {
      input_tokens: 12,
      cache_creation_input_tokens: 20,
      cache_read_input_tokens: 1800,
      output_tokens: 11,
    },
  });
  assert.ok(typeof reply === 'object' && reply !== null && !Array.isArray(reply));
  assert.deepEqual(reply.usage, {
    prompt_tokens: 1832,
    completion_tokens: 11,
    total_tokens: 1843,
    prompt_tokens_details: { cached_tokens: 1800 },
  });
});

test('stop reasons map to completion-style finish reasons', () => {
  const expected: Record<string, string> = {
    end_turn: 'stop',
    stop_sequence: 'stop',
    max_tokens: 'length',
    tool_use: 'tool_calls',
    refusal: 'content_filter',
  };
  for (const [reason, finish] of Object.entries(expected)) {
    const reply = create().response({ id: 'msg_1', content: [], stop_reason: reason });
    assert.ok(
      typeof reply === 'object' && reply !== null && !Array.isArray(reply) && Array.isArray(reply.choices),
    );
    const choice = reply.choices[0];
    assert.ok(typeof choice === 'object' && choice !== null && !Array.isArray(choice));
    assert.equal(choice.finish_reason, finish, reason);
  }
});

test('usage chunk only when the request asked for it', () => {
  const events = [
    [
      'message_start',
      '{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":3,"output_tokens":1}}}',
    ],
    [
      'message_delta',
      '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}',
    ],
    ['message_stop', '{"type":"message_stop"}'],
  ] as const;
  for (const includeUsage of [false, true]) {
    const translator = create();
    const body: JsonObject = {
      model: 'claude-sonnet',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    };
    if (includeUsage) body.stream_options = { include_usage: true };
    translator.request(body);
    const out = events.flatMap(([event, data]) => translator.streamEvent(event, data));
    assert.equal(out.at(-1)?.data, '[DONE]');
    const usageChunks = out.filter((e) => e.data !== '[DONE]' && parseData(e.data).usage !== undefined);
    assert.equal(usageChunks.length, includeUsage ? 1 : 0);
    if (includeUsage) assert.deepEqual(parseData(usageChunks[0]!.data).choices, []);
    assert.deepEqual(translator.streamEnd(true), [], 'nothing after [DONE]');
  }
});

test('a stream cut before message_stop ends with an error event, a clean end after message_delta with [DONE]', () => {
  const start =
    '{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":3,"output_tokens":1}}}';
  const cut = create();
  cut.streamEvent('message_start', start);
  const error = cut.streamEnd(false);
  assert.equal(error.length, 1);
  const body = parseData(error[0]!.data);
  assert.ok(typeof body.error === 'object' && body.error !== null && !Array.isArray(body.error));
  assert.equal(typeof body.error.message, 'string');

  const clean = create();
  clean.streamEvent('message_start', start);
  clean.streamEvent(
    'message_delta',
    '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}',
  );
  assert.deepEqual(
    clean.streamEnd(true).map((e) => e.data),
    ['[DONE]'],
  );
});

test('an unreadable upstream error body never reaches the client verbatim', () => {
  const out = create().error(502, '<html>secret internals</html>');
  assert.deepEqual(out, {
    error: { message: 'upstream returned HTTP 502', type: 'server_error', code: 'api_error' },
  });
});

test('text deltas read without a full parse carry exactly the text a full parse would', () => {
  const translator = create({ model: 'claude-sonnet', messages: [], stream: true });
  translator.request({ model: 'claude-sonnet', messages: [{ role: 'user', content: 'hi' }], stream: true });
  const start = {
    type: 'message_start',
    message: { id: 'msg_1', usage: { input_tokens: 1, output_tokens: 1 } },
  };
  translator.streamEvent('message_start', JSON.stringify(start));
  translator.streamEvent(
    'content_block_start',
    JSON.stringify({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
  );
  const texts = [
    'say "hi"}}',
    'caf\u00e9 \u{1F600}\n\t\\',
    '',
    ' ,"delta":{"type":"text_delta","text":"x"}}',
  ];
  const layouts = (text: string) => [
    JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } }),
    // Escapes JSON.stringify would not choose, and a field after the text: still the same text.
    `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":${JSON.stringify(text).replace(/a/g, '\\u0061')}}}`,
    `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":${JSON.stringify(text)},"extra":1}}`,
  ];
  for (const text of texts) {
    for (const data of layouts(text)) {
      const out = translator.streamEvent('content_block_delta', data);
      if (text === '') {
        assert.deepEqual(out, []);
        continue;
      }
      assert.equal(out.length, 1, data);
      const body = parseData(out[0]!.data) as { choices: { delta: { content: string } }[] };
      assert.equal(body.choices[0]?.delta.content, text, data);
    }
  }
});
