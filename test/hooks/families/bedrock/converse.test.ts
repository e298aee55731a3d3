import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import test from 'node:test';
import type { JsonObject, SseOut } from '../../../../common/types.ts';
import { bedrockEventStream } from '../../../../hooks/families/bedrock/event-stream.ts';
import { TRANSLATORS } from '../../../../hooks/families/index.ts';
import { TranslationError, type TranslatorInit } from '../../../../hooks/translators/types.ts';

const fixtureBytes = (name: string) =>
  new Uint8Array(readFileSync(new URL(`../../../fixtures/bedrock/${name}`, import.meta.url)));
const fixtureJson = (name: string) =>
  JSON.parse(readFileSync(new URL(`../../../fixtures/bedrock/${name}`, import.meta.url), 'utf8'));

const init = (over: Partial<TranslatorInit> = {}): TranslatorInit => ({
  requestId: 'req_1',
  model: 'nova-pro',
  upstreamModel: 'us.amazon.nova-pro-v1:0',
  stream: false,
  createdAt: 1760000000,
  ...over,
});

const converse = (over: Partial<TranslatorInit> = {}) =>
  TRANSLATORS.get('openai_to_bedrock_converse')!.create(init(over));

/** The upstream's stream as the relay hands it over: framing parts through the translator. */
function streamThrough(
  name: string,
  bin: string,
  body: JsonObject,
  over: Partial<TranslatorInit> = {},
): SseOut[] {
  const t = TRANSLATORS.get(name)!.create(init({ stream: true, ...over }));
  t.request(body);
  const decoder = bedrockEventStream.create();
  const out: SseOut[] = [];
  for (const part of decoder.decode(fixtureBytes(bin))) {
    if (part.type === 'event') out.push(...t.streamEvent(part.event, part.data));
  }
  out.push(...t.streamEnd(true));
  return out;
}

test('messages, system, images, tool calls and tool results become Converse turns', () => {
  const body = converse().request({
    model: 'nova-pro',
    messages: [
      { role: 'system', content: 'You are terse.' },
      { role: 'developer', content: [{ type: 'text', text: 'Answer in French.' }] },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is in this picture, and the weather?' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
        ],
      },
      {
        role: 'assistant',
        content: 'Looking.',
        tool_calls: [
          {
            id: 'call_a',
            type: 'function',
            function: { name: 'get_weather', arguments: '{"city":"Paris"}' },
          },
          { id: 'call_b', type: 'function', function: { name: 'get_time', arguments: '' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_a', content: '18°C' },
      { role: 'tool', tool_call_id: 'call_b', content: [{ type: 'text', text: '14:02' }] },
    ],
    max_tokens: 300,
    temperature: 0.2,
    top_p: 0.9,
    stop: ['END'],
    stream: true,
    stream_options: { include_usage: true },
  });
  assert.deepEqual(body, {
    messages: [
      {
        role: 'user',
        content: [
          { text: 'What is in this picture, and the weather?' },
          { image: { format: 'png', source: { bytes: 'iVBORw0KGgo=' } } },
        ],
      },
      {
        role: 'assistant',
        content: [
          { text: 'Looking.' },
          { toolUse: { toolUseId: 'call_a', name: 'get_weather', input: { city: 'Paris' } } },
          { toolUse: { toolUseId: 'call_b', name: 'get_time', input: {} } },
        ],
      },
      {
        role: 'user',
        content: [
          { toolResult: { toolUseId: 'call_a', content: [{ text: '18°C' }] } },
          { toolResult: { toolUseId: 'call_b', content: [{ text: '14:02' }] } },
        ],
      },
    ],
    system: [{ text: 'You are terse.' }, { text: 'Answer in French.' }],
    inferenceConfig: { maxTokens: 300, temperature: 0.2, topP: 0.9, stopSequences: ['END'] },
  });
});

test('tools, tool choice and structured output', () => {
  const tools = [
    {
      type: 'function',
      function: {
        name: 'get_weather',
        description: 'Weather of a city',
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      },
    },
  ];
  const messages = [{ role: 'user', content: 'hi' }];
  const spec = {
    toolSpec: {
      name: 'get_weather',
      description: 'Weather of a city',
      inputSchema: {
        json: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      },
    },
  };
  assert.deepEqual(converse().request({ messages, tools }).toolConfig, { tools: [spec] });
  assert.deepEqual(converse().request({ messages, tools, tool_choice: 'auto' }).toolConfig, {
    tools: [spec],
    toolChoice: { auto: {} },
  });
  assert.deepEqual(converse().request({ messages, tools, tool_choice: 'required' }).toolConfig, {
    tools: [spec],
    toolChoice: { any: {} },
  });
  assert.deepEqual(
    converse().request({
      messages,
      tools,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
    }).toolConfig,
    { tools: [spec], toolChoice: { tool: { name: 'get_weather' } } },
  );
  assert.equal(converse().request({ messages, tools, tool_choice: 'none' }).toolConfig, undefined);

  const schema = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] };
  const structured = converse().request({
    messages,
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } },
  });
  assert.deepEqual(structured.outputConfig, {
    textFormat: {
      type: 'json_schema',
      structure: { jsonSchema: { schema: JSON.stringify(schema), name: 'person' } },
    },
  });
});

test('what Converse cannot take is refused by name, never dropped', () => {
  const messages = [{ role: 'user', content: 'hi' }];
  const refused = (body: JsonObject, field: string) =>
    assert.throws(
      () => converse().request(body),
      (err: unknown) => err instanceof TranslationError && err.field === field,
    );
  refused({ messages, response_format: { type: 'json_object' } }, 'response_format');
  refused({ messages, n: 2 }, 'n');
  refused({ messages, temperature: 1.5 }, 'temperature');
  refused({ messages, logprobs: true }, 'logprobs');
  refused({ messages, reasoning_effort: 'high' }, 'reasoning_effort');
  refused(
    {
      messages: [
        { role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x.test/a.png' } }] },
      ],
    },
    'messages[0].content[0]',
  );
  // Claude models take a thinking budget through additionalModelRequestFields.
  const claude = TRANSLATORS.get('openai_to_bedrock_converse')!.create(
    init({ upstreamModel: 'eu.anthropic.claude-sonnet-4-20250514-v1:0' }),
  );
  assert.deepEqual(
    claude.request({ messages, reasoning_effort: 'low', max_tokens: 8000, top_k: 5 })
      .additionalModelRequestFields,
    {
      top_k: 5,
      thinking: { type: 'enabled', budget_tokens: 2048 },
    },
  );
});

test('a Converse reply: text, tool calls, stop reason and usage with the prompt cache', () => {
  const t = converse();
  t.request({ model: 'nova-pro', messages: [{ role: 'user', content: 'weather?' }] });
  assert.deepEqual(t.response(fixtureJson('converse-reply.json')), {
    id: 'chatcmpl-req_1',
    object: 'chat.completion',
    created: 1760000000,
    model: 'nova-pro',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: 'Let me look up the weather in Paris.',
          refusal: null,
          tool_calls: [
            {
              id: 'tooluse_kZJMlvQmRJ6eAyJE5GIl7Q',
              type: 'function',
              function: { name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' },
            },
          ],
        },
        logprobs: null,
        finish_reason: 'tool_calls',
      },
    ],
    usage: {
      prompt_tokens: 2460,
      completion_tokens: 58,
      total_tokens: 2518,
      prompt_tokens_details: { cached_tokens: 2048 },
    },
  });
});

test('stop reasons map to finish reasons', () => {
  const cases: Record<string, string> = {
    end_turn: 'stop',
    stop_sequence: 'stop',
    max_tokens: 'length',
    model_context_window_exceeded: 'length',
    tool_use: 'tool_calls',
    guardrail_intervened: 'content_filter',
    content_filtered: 'content_filter',
  };
  for (const [stopReason, finish] of Object.entries(cases)) {
    const reply = converse().response({
      output: { message: { role: 'assistant', content: [{ text: 'x' }] } },
      stopReason,
    });
    assert.equal(
      (reply as { choices: { finish_reason: string }[] }).choices[0]!.finish_reason,
      finish,
      stopReason,
    );
  }
});

test('a ConverseStream capture becomes chat chunks: text, a streamed tool call, finish, usage, [DONE]', () => {
  const out = streamThrough('openai_to_bedrock_converse', 'converse-stream.bin', {
    model: 'nova-pro',
    messages: [{ role: 'user', content: 'weather?' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  assert.equal(out.at(-1)!.data, '[DONE]');
  const chunks = out.slice(0, -1).map((ev) => JSON.parse(ev.data));
  const deltas = chunks
    .filter((c) => c.choices.length > 0)
    .map((c) => [c.choices[0].delta, c.choices[0].finish_reason]);
  assert.deepEqual(deltas, [
    [{ role: 'assistant', content: '' }, null],
    [{ content: 'Checking the ' }, null],
    [{ content: 'weather — één moment.' }, null],
    [
      {
        tool_calls: [
          {
            index: 0,
            id: 'tooluse_3bT9XnQWS_2JwVZtLrcw8A',
            type: 'function',
            function: { name: 'get_weather', arguments: '' },
          },
        ],
      },
      null,
    ],
    [{ tool_calls: [{ index: 0, function: { arguments: '{"city": "Pa' } }] }, null],
    [{ tool_calls: [{ index: 0, function: { arguments: 'ris"}' } }] }, null],
    [{}, 'tool_calls'],
  ]);
  assert.deepEqual(chunks.at(-1).usage, {
    prompt_tokens: 1416,
    completion_tokens: 71,
    total_tokens: 1487,
    prompt_tokens_details: { cached_tokens: 1024 },
  });
  for (const c of chunks) assert.equal(c.id, 'chatcmpl-req_1');
});

test('a mid-stream exception ends the chat stream with an error chunk, nothing after it', () => {
  const out = streamThrough('openai_to_bedrock_converse', 'converse-stream-exception.bin', {
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
  });
  const last = JSON.parse(out.at(-1)!.data);
  assert.equal(last.error.type, 'server_error');
  assert.match(
    last.error.message,
    /^Model stream error: the model produced an invalid sequence\. \(request id: req_1\)$/,
  );
  assert.equal(out.filter((ev) => ev.data === '[DONE]').length, 0);
});

test('a stream that ends before messageStop ends with an error chunk', () => {
  const t = converse({ stream: true });
  t.request({ messages: [{ role: 'user', content: 'hi' }], stream: true });
  t.streamEvent('messageStart', '{"role":"assistant"}');
  const end = t.streamEnd(false);
  assert.equal(end.length, 1);
  assert.ok(JSON.parse(end[0]!.data).error);
});

test('Bedrock error bodies keep their message in the client family shape', () => {
  const t = converse();
  assert.deepEqual(
    t.error(400, { message: 'Malformed input request: #: extraneous key [foo] is not permitted' }),
    {
      error: {
        message: 'Malformed input request: #: extraneous key [foo] is not permitted',
        type: 'invalid_request_error',
        code: 'invalid_request_error',
      },
    },
  );
  // Throttling is the gateway's own upstream_rate_limited (errors.test.ts).
  assert.throws(() => t.error(429, { message: 'Too many requests, please wait before trying again.' }), {
    code: 'upstream_rate_limited',
  });
  assert.deepEqual(t.error(503, '<html>'), {
    error: { message: 'upstream returned HTTP 503', type: 'server_error', code: 'overloaded' },
  });
});

test('an Anthropic client reaches Converse through the pivot: request, reply and stream', () => {
  const t = TRANSLATORS.get('anthropic_to_bedrock_converse')!.create(init({ stream: true }));
  const body = t.request({
    model: 'nova-pro',
    max_tokens: 200,
    system: 'Be brief.',
    messages: [{ role: 'user', content: 'weather?' }],
    tools: [
      { name: 'get_weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } },
    ],
    stream: true,
  });
  assert.deepEqual(body.system, [{ text: 'Be brief.' }]);
  assert.equal((body.inferenceConfig as JsonObject).maxTokens, 200);
  assert.equal(((body.toolConfig as JsonObject).tools as JsonObject[]).length, 1);
  const out = streamThrough('anthropic_to_bedrock_converse', 'converse-stream.bin', {
    model: 'nova-pro',
    max_tokens: 200,
    messages: [{ role: 'user', content: 'weather?' }],
    stream: true,
  });
  const names = out.map((ev) => ev.event);
  assert.equal(names[0], 'message_start');
  assert.equal(names.at(-1), 'message_stop');
  const delta = out.find((ev) => ev.event === 'message_delta')!;
  const parsed = JSON.parse(delta.data);
  assert.equal(parsed.delta.stop_reason, 'tool_use');
  // The Anthropic client sees input without the cache, as Anthropic reports it.
  assert.equal(parsed.usage.output_tokens, 71);
  assert.ok(out.some((ev) => ev.data.includes('"input_json_delta"')));
});
