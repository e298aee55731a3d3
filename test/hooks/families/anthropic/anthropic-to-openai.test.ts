import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { JsonObject } from '../../../../common/types.ts';
import { anthropicToOpenai } from '../../../../hooks/families/anthropic/anthropic-to-openai.ts';
import { TranslationError } from '../../../../hooks/translators/types.ts';
import {
  caseDir,
  listCases,
  makeInit,
  runGoldenCase,
} from '../../../fixtures/translators/anthropic/harness.ts';

const DIRECTION = 'anthropic-to-openai';
const UPSTREAM_MODEL = 'gpt-4o-mini-2024-07-18';

function create(request: JsonObject = { model: 'gpt-4o-mini', messages: [] }) {
  return anthropicToOpenai.create(makeInit(request, UPSTREAM_MODEL));
}

function chunk(delta: JsonObject, finish: string | null = null, extra: JsonObject = {}): string {
  return JSON.stringify({
    id: 'chatcmpl-abc',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'gpt-4o-mini',
    choices: [{ index: 0, delta, finish_reason: finish }],
    ...extra,
  });
}

test('factory identity', () => {
  assert.equal(anthropicToOpenai.name, 'anthropic_to_openai');
  assert.equal(anthropicToOpenai.from, 'anthropic');
  assert.equal(anthropicToOpenai.to, 'openai');
});

const cases = listCases(DIRECTION);
test('fixture cases exist', () => {
  for (const name of ['text-json', 'text-stream', 'tool-calls-stream', 'images', 'error-mid-stream']) {
    assert.ok(cases.includes(name), name);
  }
});
for (const name of cases) {
  test(`golden: ${name}`, () => {
    const checked = runGoldenCase(anthropicToOpenai, caseDir(DIRECTION, name), UPSTREAM_MODEL);
    assert.ok(checked.length >= 2, `case ${name} checks a reply, not only the request`);
  });
}

test('streaming requests ask the upstream for usage', () => {
  const out = create().request({
    model: 'gpt-4o-mini',
    max_tokens: 5,
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
  });
  assert.equal(out.stream, true);
  assert.deepEqual(out.stream_options, { include_usage: true });
  const plain = create().request({
    model: 'gpt-4o-mini',
    max_tokens: 5,
    messages: [{ role: 'user', content: 'hi' }],
  });
  assert.equal(plain.stream_options, undefined);
});

test('unsupported blocks throw TranslationError naming the field', () => {
  const cases: [JsonObject, string][] = [
    [
      {
        model: 'm',
        max_tokens: 1,
        messages: [{ role: 'user', content: [{ type: 'document', source: {} }] }],
      },
      'messages[0].content[0].type',
    ],
    [
      {
        model: 'm',
        max_tokens: 1,
        messages: [{ role: 'user', content: 'hi' }],
        tools: [{ type: 'web_search_20250305', name: 'web_search' }],
      },
      'tools[0]',
    ],
    [
      {
        model: 'm',
        max_tokens: 1,
        messages: [
          {
            role: 'user',
            content: [
              {
                type: 'tool_result',
                tool_use_id: 't',
                content: [{ type: 'image', source: { type: 'url', url: 'https://x' } }],
              },
            ],
          },
        ],
      },
      'messages[0].content[0].content[0].type',
    ],
  ];
  for (const [body, field] of cases) {
    assert.throws(
      () => create().request(body),
      (error: unknown) => error instanceof TranslationError && error.field === field,
      field,
    );
  }
});

test('finish reasons map to Anthropic stop reasons', () => {
  const expected: Record<string, string> = {
    stop: 'end_turn',
    length: 'max_tokens',
    tool_calls: 'tool_use',
    content_filter: 'refusal',
  };
  for (const [finish, reason] of Object.entries(expected)) {
    const reply = create().response({
      id: 'chatcmpl-1',
      choices: [{ index: 0, message: { role: 'assistant', content: 'x' }, finish_reason: finish }],
    });
    assert.ok(typeof reply === 'object' && reply !== null && !Array.isArray(reply));
    assert.equal(reply.stop_reason, reason, finish);
  }
});

test('usage: cached tokens move out of input_tokens for the client, stay in normalized input', () => {
  const translator = create();
  const reply = translator.response({
    id: 'chatcmpl-1',
    choices: [{ index: 0, message: { role: 'assistant', content: 'x' }, finish_reason: 'stop' }],
    usage: {
      prompt_tokens: 1000,
      completion_tokens: 10,
      total_tokens: 1010,
      prompt_tokens_details: { cached_tokens: 900 },
      completion_tokens_details: { reasoning_tokens: 4 },
    },
  });
  assert.ok(typeof reply === 'object' && reply !== null && !Array.isArray(reply));
  assert.deepEqual(reply.usage, {
    input_tokens: 100,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 900,
    output_tokens: 10,
    // Reasoning tokens reach the client where the upstream reports them.
    output_tokens_details: { thinking_tokens: 4 },
  });
});

test('message_delta waits for the usage chunk that follows finish_reason', () => {
  const translator = create();
  const afterFinish = [
    ...translator.streamEvent(undefined, chunk({ role: 'assistant', content: 'Hi' })),
    ...translator.streamEvent(undefined, chunk({}, 'stop')),
  ];
  assert.ok(!afterFinish.some((e) => e.event === 'message_delta'), 'held back until usage is known');
  const usage = translator.streamEvent(
    undefined,
    JSON.stringify({
      id: 'chatcmpl-abc',
      choices: [],
      usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 },
    }),
  );
  assert.deepEqual(usage, [], 'the usage chunk itself emits nothing');
  const done = translator.streamEvent(undefined, '[DONE]');
  assert.deepEqual(
    done.map((e) => e.event),
    ['message_delta', 'message_stop'],
  );
  const delta = JSON.parse(done[0]!.data);
  assert.deepEqual(delta.usage, {
    input_tokens: 7,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
    output_tokens: 3,
  });
  assert.equal(delta.delta.stop_reason, 'end_turn');
  assert.deepEqual(translator.streamEnd(true), []);
});

test('an upstream without [DONE] still closes the message when the stream ends cleanly', () => {
  const translator = create();
  translator.streamEvent(undefined, chunk({ content: 'Hi' }));
  translator.streamEvent(undefined, chunk({}, 'stop'));
  assert.deepEqual(
    translator.streamEnd(true).map((e) => e.event),
    ['message_delta', 'message_stop'],
  );
});

test('interleaved tool call deltas stay with their own content block', () => {
  const translator = create();
  const call = (index: number, args: string, id?: string) =>
    chunk({
      tool_calls: [
        {
          index,
          ...(id ? { id, type: 'function' } : {}),
          function: { ...(id ? { name: 'f' } : {}), arguments: args },
        },
      ],
    });
  const out = [
    ...translator.streamEvent(undefined, call(0, '{"a":', 'call_a')),
    ...translator.streamEvent(undefined, call(1, '{"b":', 'call_b')),
    ...translator.streamEvent(undefined, call(0, '1}')),
    ...translator.streamEvent(undefined, call(1, '2}')),
  ];
  const deltas = out.filter((e) => e.event === 'content_block_delta').map((e) => JSON.parse(e.data));
  assert.deepEqual(
    deltas.map((d) => [d.index, d.delta.partial_json]),
    [
      [0, '{"a":'],
      [1, '{"b":'],
      [0, '1}'],
      [1, '2}'],
    ],
  );
});

test('an unreadable upstream error body never reaches the client verbatim', () => {
  assert.deepEqual(create().error(503, '<html>internals</html>'), {
    type: 'error',
    error: { type: 'overloaded_error', message: 'upstream returned HTTP 503' },
  });
});

test('mid-stream error types: rate limits stay rate limits, anything unknown is api_error', () => {
  const expected: [JsonObject, string][] = [
    [{ message: 'slow down', type: 'tokens', code: 'rate_limit_exceeded' }, 'rate_limit_error'],
    [
      { message: 'bad', type: 'invalid_request_error', code: 'context_length_exceeded' },
      'invalid_request_error',
    ],
    [{ message: 'oops', type: 'server_error', code: null }, 'api_error'],
  ];
  for (const [error, type] of expected) {
    const translator = create();
    translator.streamEvent(undefined, chunk({ content: 'x' }));
    const out = translator.streamEvent(undefined, JSON.stringify({ error }));
    assert.equal(out.length, 1);
    assert.equal(out[0]!.event, 'error');
    const body = JSON.parse(out[0]!.data) as { type: string; error: { type: string; message: string } };
    assert.equal(body.type, 'error');
    assert.equal(body.error.type, type);
    assert.match(body.error.message, new RegExp(`^${error.message} \\(request id: .+\\)$`));
    assert.deepEqual(
      translator.streamEvent(undefined, chunk({ content: 'late' })),
      [],
      'nothing after an error',
    );
  }
});
