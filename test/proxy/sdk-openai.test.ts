// End to end with the official openai SDK: the gateway in front of the upstream simulator, native
// OpenAI routes (passthrough) and translated ones (Claude and Gemini models behind the completion API).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { load } from 'js-yaml';
import OpenAI, { toFile } from 'openai';
import { createReplyLog, type ReplyLog, UPSTREAM_KEY_RE } from '../support/sim-providers.ts';
import { ACCESS_KEY, MODELS_FILE, type Stack, startStack } from '../support/stack.ts';

let stack: Stack;
let client: OpenAI;
let log: ReplyLog;

const weatherTool = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'Current weather for a place',
    parameters: { type: 'object', properties: { location: { type: 'string' }, unit: { type: 'string' } } },
  },
};

before(async () => {
  stack = await startStack();
  log = createReplyLog();
  client = new OpenAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1`, maxRetries: 0, fetch: log.fetch });
});
after(() => stack.close());

/** The JSON body of the last upstream request whose path starts with `prefix`. */
function lastUpstream(prefix: string): { path: string; json: Record<string, unknown>; headers: object } {
  const rec = stack.sim.requests.findLast((r) => r.path.startsWith(prefix));
  assert.ok(rec, `an upstream request to ${prefix}`);
  return { path: rec.path, json: (rec.json ?? {}) as Record<string, unknown>, headers: rec.headers };
}

describe('native OpenAI routes', () => {
  test('chat completion: echo reply, usage, upstream got the provider key', async () => {
    const res = await client.chat.completions.create({
      model: 'gpt-5.4-mini',
      messages: [{ role: 'user', content: 'hello from the openai sdk' }],
    });
    assert.match(res.choices[0]!.message.content ?? '', /^Echo: hello from the openai sdk\./);
    assert.equal(res.choices[0]!.finish_reason, 'stop');
    assert.ok(res.usage && res.usage.prompt_tokens > 0 && res.usage.completion_tokens > 0);
    const up = lastUpstream('/v1/chat/completions');
    assert.equal((up.headers as Record<string, string>).authorization, 'Bearer sim-openai-key');
  });

  test('chat stream without include_usage: deltas add up, the injected usage chunk is stripped', async () => {
    const messages = [{ role: 'user' as const, content: 'stream to me please' }];
    const plain = await client.chat.completions.create({ model: 'gpt-5.4-mini', messages });
    const stream = await client.chat.completions.create({ model: 'gpt-5.4-mini', messages, stream: true });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    assert.equal(text, plain.choices[0]!.message.content);
    assert.ok(chunks.length > 2);
    // The gateway asked upstream for usage on the client's behalf...
    const up = lastUpstream('/v1/chat/completions');
    assert.deepEqual(up.json.stream_options, { include_usage: true });
    // ...and the usage-only chunk it caused must not reach a client that did not ask.
    for (const c of chunks) {
      assert.ok(c.choices.length > 0, 'no usage-only chunk (choices: [])');
      assert.ok(c.usage == null, 'no chunk carries usage');
    }
  });

  test('chat stream with include_usage: the usage-only chunk arrives last', async () => {
    const messages = [{ role: 'user' as const, content: 'stream with usage' }];
    const plain = await client.chat.completions.create({ model: 'gpt-5.4-mini', messages });
    const stream = await client.chat.completions.create({
      model: 'gpt-5.4-mini',
      messages,
      stream: true,
      stream_options: { include_usage: true },
    });
    let last: OpenAI.Chat.Completions.ChatCompletionChunk | undefined;
    for await (const chunk of stream) last = chunk;
    assert.deepEqual(last?.choices, []);
    assert.equal(last?.usage?.prompt_tokens, plain.usage?.prompt_tokens);
    assert.equal(last?.usage?.completion_tokens, plain.usage?.completion_tokens);
  });

  test('tool call streamed and accumulated by chat.completions.stream().finalChatCompletion()', async () => {
    const runner = client.chat.completions.stream({
      model: 'gpt-5.4-mini',
      messages: [{ role: 'user', content: 'What is the weather in Oslo?' }],
      tools: [weatherTool],
    });
    const final = await runner.finalChatCompletion();
    const call = final.choices[0]!.message.tool_calls?.[0];
    assert.equal(final.choices[0]!.finish_reason, 'tool_calls');
    assert.ok(call && call.type === 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.function.arguments), { location: 'Oslo', unit: 'celsius' });
  });

  test('embeddings (the SDK asks for base64 and decodes it)', async () => {
    const res = await client.embeddings.create({ model: 'text-embedding-3-small', input: ['alpha', 'beta'] });
    assert.equal(res.data.length, 2);
    assert.equal(res.data[0]!.embedding.length, 1536);
    assert.notDeepEqual(res.data[0]!.embedding, res.data[1]!.embedding);
    assert.ok(res.usage.prompt_tokens >= 2);
    assert.equal(lastUpstream('/v1/embeddings').json.model, 'text-embedding-3-small');
  });

  test('models.list() lists the registry exact ids in file order, not the upstream list', async () => {
    const registry = load(readFileSync(MODELS_FILE, 'utf8')) as { models: Record<string, unknown> };
    const expected = Object.keys(registry.models).filter((id) => !id.includes('*'));
    const ids: string[] = [];
    for await (const m of client.models.list()) ids.push(m.id);
    assert.deepEqual(ids, expected);
    assert.ok(!ids.includes('gpt-4o-mini'), 'a simulator-only model is not listed');
  });

  test('images.generate: a PNG as b64_json', async () => {
    const res = await client.images.generate({ model: 'gpt-image-1', prompt: 'a cat in a hat' });
    const b64 = res.data?.[0]?.b64_json;
    assert.ok(b64);
    assert.equal(Buffer.from(b64, 'base64').subarray(1, 4).toString(), 'PNG');
    assert.equal(lastUpstream('/v1/images/generations').json.prompt, 'a cat in a hat');
  });

  test('audio.speech: binary reply bytes arrive intact', async () => {
    const input = 'say this out loud';
    const res = await client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input });
    assert.equal(res.headers.get('content-type'), 'audio/mpeg');
    const bytes = Buffer.from(await res.arrayBuffer());
    assert.deepEqual([...bytes.subarray(0, 2)], [0xff, 0xfb]);
    assert.equal(bytes.length, 418 + 64 * Buffer.byteLength(input));
  });

  test('audio.transcriptions.create with a file (multipart reaches upstream intact)', async () => {
    const file = await toFile(Buffer.alloc(32_000, 1), 'clip.mp3', { type: 'audio/mpeg' });
    const res = await client.audio.transcriptions.create({ model: 'whisper-1', file });
    assert.equal(res.text, 'Transcribed 32000 bytes of audio from clip.mp3.');
    const up = lastUpstream('/v1/audio/transcriptions');
    assert.match(String((up.headers as Record<string, string>)['content-type']), /^multipart\/form-data/);
  });

  test('images.edit (multipart): fields and file arrive upstream', async () => {
    const image = await toFile(Buffer.alloc(1234, 7), 'cat.png', { type: 'image/png' });
    const { data, response } = await client.images
      .edit({ model: 'gpt-image-1', image, prompt: 'add a hat' })
      .withResponse();
    assert.ok(data.data?.[0]?.b64_json);
    const echo = JSON.parse(decodeURIComponent(response.headers.get('x-sim-multipart') ?? '{}')) as {
      fields: string[];
      files: unknown[];
    };
    assert.ok(echo.fields.includes('prompt') && echo.fields.includes('model'));
    assert.deepEqual(echo.files, [{ field: 'image', filename: 'cat.png', size: 1234 }]);
  });

  test('responses.create plain and streamed give the same text', async () => {
    const plain = await client.responses.create({ model: 'gpt-5.4-mini', input: 'respond to me' });
    assert.match(plain.output_text, /^Echo: respond to me\./);
    const stream = client.responses.stream({ model: 'gpt-5.4-mini', input: 'respond to me' });
    const types: string[] = [];
    let deltas = '';
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.output_text.delta') deltas += event.delta;
    }
    const final = await stream.finalResponse();
    assert.equal(deltas, plain.output_text);
    assert.equal(types[0], 'response.created');
    assert.equal(types.at(-1), 'response.completed');
    assert.equal(final.usage?.total_tokens, plain.usage?.total_tokens);
  });

  test('legacy completions, plain and streamed', async () => {
    const plain = await client.completions.create({ model: 'gpt-3.5-turbo-instruct', prompt: 'say hi' });
    assert.match(plain.choices[0]!.text, /^Echo: say hi\./);
    const stream = await client.completions.create({
      model: 'gpt-3.5-turbo-instruct',
      prompt: 'say hi',
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) {
      assert.ok(chunk.choices.length > 0, 'no usage-only chunk reaches a client that did not ask');
      text += chunk.choices[0]!.text;
    }
    assert.equal(text, plain.choices[0]!.text);
  });
});

describe('translated routes', () => {
  test('streaming from a Claude model: deltas equal the plain reply, usage on request', async () => {
    const messages = [{ role: 'user' as const, content: 'hello claude via openai' }];
    const plain = await client.chat.completions.create({
      model: 'claude-sonnet-5',
      messages,
      max_tokens: 400,
    });
    assert.match(plain.choices[0]!.message.content ?? '', /^Echo: hello claude via openai\./);
    const stream = await client.chat.completions.create({
      model: 'claude-sonnet-5',
      messages,
      max_tokens: 400,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(text, plain.choices[0]!.message.content);
    assert.ok(usage && usage.prompt_tokens > 0 && usage.completion_tokens > 0);
    const up = lastUpstream('/v1/messages');
    assert.equal(up.json.model, 'claude-sonnet-5');
    assert.equal(up.json.stream, true);
  });

  test('streaming from a Claude model without include_usage: no usage chunk reaches the client', async () => {
    const stream = await client.chat.completions.create({
      model: 'claude-sonnet-5',
      messages: [{ role: 'user', content: 'no usage for me' }],
      max_tokens: 400,
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) {
      assert.ok(chunk.choices.length > 0, 'no usage-only chunk (choices: [])');
      assert.ok(chunk.usage == null, 'no chunk carries usage');
      text += chunk.choices[0]!.delta.content ?? '';
    }
    assert.match(text, /^Echo: no usage for me\./);
  });

  test('Claude model: a tool call accumulated by the SDK helper', async () => {
    const final = await client.chat.completions
      .stream({
        model: 'claude-sonnet-5',
        max_tokens: 400,
        messages: [{ role: 'user', content: 'What is the weather in Kyoto?' }],
        tools: [weatherTool],
      })
      .finalChatCompletion();
    const call = final.choices[0]!.message.tool_calls?.[0];
    assert.equal(final.choices[0]!.finish_reason, 'tool_calls');
    assert.ok(call && call.type === 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.function.arguments), { location: 'Kyoto', unit: 'celsius' });
  });

  test('streaming from a Gemini model: deltas equal the plain reply', async () => {
    const messages = [{ role: 'user' as const, content: 'hello gemini via openai' }];
    const plain = await client.chat.completions.create({ model: 'gemini-3.8-flash', messages });
    assert.match(plain.choices[0]!.message.content ?? '', /^Echo: hello gemini via openai\./);
    const stream = await client.chat.completions.create({
      model: 'gemini-3.8-flash',
      messages,
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) {
      assert.ok(chunk.choices.length > 0 && chunk.usage == null, 'no usage chunk: the client did not ask');
      text += chunk.choices[0]?.delta.content ?? '';
    }
    assert.equal(text, plain.choices[0]!.message.content);
    const up = lastUpstream('/v1beta/models/gemini-3.8-flash:streamGenerateContent');
    assert.match(up.path, /[?&]alt=sse/);
  });

  test('Gemini model: a tool call accumulated by the SDK helper', async () => {
    const final = await client.chat.completions
      .stream({
        model: 'gemini-3.8-flash',
        messages: [{ role: 'user', content: 'What is the weather in Lyon?' }],
        tools: [weatherTool],
      })
      .finalChatCompletion();
    const call = final.choices[0]!.message.tool_calls?.[0];
    assert.equal(final.choices[0]!.finish_reason, 'tool_calls');
    assert.ok(call && call.type === 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.function.arguments), { location: 'Lyon', unit: 'celsius' });
  });
});

test('no reply of this suite carries an upstream key', async () => {
  const replies = await log.settled();
  assert.ok(replies.length > 10);
  for (const r of replies) {
    assert.doesNotMatch(r.headers, UPSTREAM_KEY_RE, `headers of ${r.url}`);
    assert.doesNotMatch(r.body, UPSTREAM_KEY_RE, `body of ${r.url}`);
  }
});
