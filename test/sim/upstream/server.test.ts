// The simulator's wire formats, proven with the official SDKs pointed straight at it.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import OpenAI, { toFile } from 'openai';
import { startUpstreamSim, type UpstreamSim } from '../../../sim/upstream/server.ts';
import { UNICODE_SAMPLE } from '../../../sim/upstream/text.ts';

let sim: UpstreamSim;
let openai: OpenAI;
let anthropic: Anthropic;
let gemini: GoogleGenAI;

const weatherTool = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'Current weather for a place',
    parameters: { type: 'object', properties: { location: { type: 'string' }, unit: { type: 'string' } } },
  },
};

before(async () => {
  sim = await startUpstreamSim();
  openai = new OpenAI({ apiKey: 'sk-test', baseURL: `${sim.url}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: 'sk-ant-test', baseURL: sim.url, maxRetries: 0 });
  gemini = new GoogleGenAI({ apiKey: 'gm-test', httpOptions: { baseUrl: sim.url } });
});

after(async () => {
  await sim.close();
});

describe('OpenAI', () => {
  test('chat completion: deterministic echo and token usage', async () => {
    const res = await openai.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'hello simulator how are you' },
      ],
    });
    const text = res.choices[0]!.message.content ?? '';
    assert.match(text, /^Echo: hello simulator how are you\. /);
    assert.equal(res.choices[0]!.finish_reason, 'stop');
    assert.ok(res.usage);
    assert.ok(res.usage.prompt_tokens > 10, 'prompt tokens include per-message overhead');
    assert.ok(res.usage.completion_tokens > 10);
    assert.equal(res.usage.total_tokens, res.usage.prompt_tokens + res.usage.completion_tokens);
    const recorded = sim.requests.at(-1);
    assert.equal(recorded?.path, '/v1/chat/completions');
    assert.equal(recorded?.headers.authorization, 'Bearer sk-test');
  });

  test('chat stream: deltas add up to the plain reply; include_usage sends a usage-only chunk', async () => {
    const messages = [{ role: 'user' as const, content: 'stream me please' }];
    const plain = await openai.chat.completions.create({ model: 'gpt-4o-mini', messages });
    const stream = await openai.chat.completions.create(
      { model: 'gpt-4o-mini', messages, stream: true, stream_options: { include_usage: true } },
      { headers: { 'x-sim-chunks': '5' } },
    );
    let text = '';
    let contentDeltas = 0;
    let last: OpenAI.Chat.Completions.ChatCompletionChunk | undefined;
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta.content;
      if (delta) {
        text += delta;
        contentDeltas++;
      }
      last = chunk;
    }
    assert.equal(text, plain.choices[0]!.message.content);
    assert.equal(contentDeltas, 5);
    assert.deepEqual(last?.choices, []);
    assert.equal(last?.usage?.completion_tokens, plain.usage?.completion_tokens);
    assert.equal(last?.usage?.prompt_tokens, plain.usage?.prompt_tokens);
  });

  test('chat stream helper accumulates a streamed tool call', async () => {
    const runner = openai.chat.completions.stream({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'What is the weather in Oslo?' }],
      tools: [weatherTool],
      stream_options: { include_usage: true },
    });
    let argumentFragments = 0;
    runner.on('chunk', (chunk) => {
      if (chunk.choices[0]?.delta.tool_calls?.[0]?.function?.arguments) argumentFragments++;
    });
    const final = await runner.finalChatCompletion();
    const call = final.choices[0]!.message.tool_calls?.[0];
    assert.equal(final.choices[0]!.finish_reason, 'tool_calls');
    assert.ok(call && call.type === 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.function.arguments), { location: 'Oslo', unit: 'celsius' });
    assert.ok(argumentFragments >= 2, 'arguments arrive in several fragments');
    assert.ok(final.usage && final.usage.prompt_tokens > 0);
  });

  test('after a tool result the model answers with text (agent loops end)', async () => {
    const res = await openai.chat.completions.create({
      model: 'gpt-4o-mini',
      tools: [weatherTool],
      messages: [
        { role: 'user', content: 'weather in Oslo?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }],
        },
        { role: 'tool', tool_call_id: 'c1', content: '12 degrees' },
      ],
    });
    assert.equal(res.choices[0]!.finish_reason, 'stop');
    assert.match(res.choices[0]!.message.content ?? '', /^Echo: weather in Oslo\?/);
  });

  test('max_tokens cuts the reply with finish_reason length', async () => {
    const res = await openai.chat.completions.create({
      model: 'gpt-4o-mini',
      max_tokens: 3,
      messages: [{ role: 'user', content: 'a long answer please' }],
    });
    assert.equal(res.choices[0]!.finish_reason, 'length');
    assert.equal(res.usage?.completion_tokens, 3);
  });

  test('legacy completions, plain and streamed', async () => {
    const plain = await openai.completions.create({
      model: 'gpt-3.5-turbo-instruct',
      prompt: 'say hi',
      max_tokens: 200,
    });
    assert.match(plain.choices[0]!.text, /^Echo: say hi\./);
    const stream = await openai.completions.create({
      model: 'gpt-3.5-turbo-instruct',
      prompt: 'say hi',
      max_tokens: 200,
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
    assert.equal(text, plain.choices[0]!.text);
  });

  test('responses API: plain, streamed events, and a function call', async () => {
    const plain = await openai.responses.create({ model: 'gpt-4o-mini', input: 'respond to me' });
    assert.match(plain.output_text, /^Echo: respond to me\./);
    assert.ok(plain.usage && plain.usage.input_tokens > 0 && plain.usage.output_tokens > 0);

    const stream = openai.responses.stream({ model: 'gpt-4o-mini', input: 'respond to me' });
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

    const withTool = await openai.responses.create({
      model: 'gpt-4o-mini',
      input: [{ role: 'user', content: 'weather in Lyon please' }],
      tools: [{ type: 'function', name: 'get_weather', parameters: {}, strict: false }],
    });
    const call = withTool.output[0];
    assert.equal(call!.type, 'function_call');
    assert.ok(call!.type === 'function_call');
    assert.deepEqual(JSON.parse(call!.arguments), { location: 'Lyon', unit: 'celsius' });
  });

  test('embeddings: deterministic unit vectors, float and base64 (the SDK default)', async () => {
    const a = await openai.embeddings.create({ model: 'text-embedding-3-small', input: ['alpha', 'beta'] });
    const b = await openai.embeddings.create({
      model: 'text-embedding-3-small',
      input: 'alpha',
      encoding_format: 'float',
    });
    assert.equal(a.data.length, 2);
    assert.equal(a.data[0]!.embedding.length, 1536);
    assert.notDeepEqual(a.data[0]!.embedding, a.data[1]!.embedding);
    for (let i = 0; i < 1536; i++)
      assert.ok(Math.abs(a.data[0]!.embedding[i]! - b.data[0]!.embedding[i]!) < 1e-6);
    const norm = Math.sqrt(b.data[0]!.embedding.reduce((s, v) => s + v * v, 0));
    assert.ok(Math.abs(norm - 1) < 1e-4);
    assert.equal(a.usage.prompt_tokens, a.usage.total_tokens);
    assert.ok(a.usage.prompt_tokens >= 2);
    const sized = await openai.embeddings.create({
      model: 'text-embedding-3-large',
      input: 'x',
      dimensions: 64,
    });
    assert.equal(sized.data[0]!.embedding.length, 64);
  });

  test('images: generations (b64_json) and multipart edits echo what arrived', async () => {
    const gen = await openai.images.generate({ model: 'gpt-image-1', prompt: 'a cat' });
    assert.ok(gen.data?.[0]?.b64_json);
    assert.equal(Buffer.from(gen.data[0].b64_json, 'base64').subarray(1, 4).toString(), 'PNG');
    assert.ok(gen.usage && gen.usage.total_tokens > 0);

    const image = await toFile(Buffer.alloc(1234, 7), 'cat.png', { type: 'image/png' });
    const { data, response } = await openai.images
      .edit({ model: 'gpt-image-1', image, prompt: 'add a hat' })
      .withResponse();
    assert.ok(data.data?.[0]?.b64_json);
    const echo = JSON.parse(decodeURIComponent(response.headers.get('x-sim-multipart') ?? ''));
    assert.ok(echo.fields.includes('prompt') && echo.fields.includes('model'));
    assert.deepEqual(echo.files, [{ field: 'image', filename: 'cat.png', size: 1234 }]);
  });

  test('audio: speech bytes grow with the input; transcription and translation', async () => {
    const short = await openai.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'hi' });
    const long = await openai.audio.speech.create({
      model: 'tts-1',
      voice: 'alloy',
      input: 'hi '.repeat(50),
    });
    assert.equal(short.headers.get('content-type'), 'audio/mpeg');
    const shortBytes = Buffer.from(await short.arrayBuffer());
    const longBytes = Buffer.from(await long.arrayBuffer());
    assert.deepEqual([...shortBytes.subarray(0, 2)], [0xff, 0xfb]);
    assert.ok(longBytes.length > shortBytes.length * 5);

    const file = await toFile(Buffer.alloc(32_000, 1), 'clip.mp3', { type: 'audio/mpeg' });
    const tr = await openai.audio.transcriptions.create({ model: 'whisper-1', file });
    assert.equal(tr.text, 'Transcribed 32000 bytes of audio from clip.mp3.');
    const asText = await openai.audio.translations.create({
      model: 'whisper-1',
      file: await toFile(Buffer.alloc(10, 1), 'x.wav'),
      response_format: 'text',
    });
    assert.equal(String(asText).trim(), 'Translated 10 bytes of audio from x.wav.');
  });

  test('models list', async () => {
    const ids: string[] = [];
    for await (const m of openai.models.list()) ids.push(m.id);
    assert.ok(ids.includes('gpt-4o-mini'));
  });

  test('injected 429 surfaces as the SDK rate-limit error with the OpenAI error body', async () => {
    await assert.rejects(
      openai.chat.completions.create(
        { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x' }] },
        { headers: { 'x-sim-fail': '429' } },
      ),
      (err: unknown) => {
        assert.ok(err instanceof OpenAI.RateLimitError);
        assert.equal(err.code, 'rate_limit_exceeded');
        return true;
      },
    );
  });

  test('midstream error becomes an APIError while iterating', async () => {
    const stream = await openai.chat.completions.create(
      { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x' }], stream: true },
      { headers: { 'x-sim-fail': 'midstream' } },
    );
    let deltas = 0;
    await assert.rejects(async () => {
      for await (const chunk of stream) if (chunk.choices[0]?.delta.content) deltas++;
    }, OpenAI.APIError);
    assert.ok(deltas > 0, 'some content arrived before the error');
  });
});

describe('Anthropic', () => {
  test('messages: plain reply with usage and cache fields', async () => {
    const msg = await anthropic.messages.create({
      model: 'claude-sim-1',
      max_tokens: 500,
      system: 'be brief',
      messages: [{ role: 'user', content: 'hello claude simulator' }],
    });
    const block = msg.content[0];
    assert.ok(block!.type === 'text');
    assert.match(block.text, /^Echo: hello claude simulator\./);
    assert.equal(msg.stop_reason, 'end_turn');
    assert.ok(msg.usage.input_tokens > 0 && msg.usage.output_tokens > 0);
    assert.equal(msg.usage.cache_read_input_tokens, 0);
    // This SDK version sends the key as a bearer token; older ones used x-api-key. Both are accepted.
    const headers = sim.requests.at(-1)?.headers;
    assert.ok(headers?.['x-api-key'] === 'sk-ant-test' || headers?.authorization === 'Bearer sk-ant-test');
    assert.ok(headers?.['anthropic-version']);
  });

  test('messages stream: finalMessage accumulates text and a tool_use input', async () => {
    const stream = anthropic.messages.stream({
      model: 'claude-sim-1',
      max_tokens: 500,
      tools: [
        {
          name: 'get_weather',
          input_schema: { type: 'object', properties: { location: { type: 'string' } } },
        },
      ],
      messages: [{ role: 'user', content: 'What is the weather in Kyoto?' }],
    });
    const events: string[] = [];
    stream.on('streamEvent', (e) => events.push(e.type));
    const final = await stream.finalMessage();
    assert.equal(final.stop_reason, 'tool_use');
    const tool = final.content.find((b) => b.type === 'tool_use');
    assert.ok(tool && tool.type === 'tool_use');
    assert.equal(tool.name, 'get_weather');
    assert.deepEqual(tool.input, { location: 'Kyoto', unit: 'celsius' });
    assert.ok(final.usage.output_tokens > 1, 'message_delta usage reached the SDK');
    // The SDK drops `ping` events itself; the raw-wire tests check they are sent.
    assert.equal(events[0], 'message_start');
    assert.equal(events.at(-1), 'message_stop');
  });

  test('messages stream text equals the plain reply, multi-byte text intact', async () => {
    const params = {
      model: 'claude-sim-1',
      max_tokens: 500,
      messages: [{ role: 'user' as const, content: 'unicode please' }],
    };
    const plain = await anthropic.messages.create(params);
    const stream = anthropic.messages.stream(params, { headers: { 'x-sim-chunks': '13' } });
    const text = await stream.finalText();
    const block = plain.content[0];
    assert.ok(block!.type === 'text');
    assert.equal(text, block.text);
    assert.ok(text.includes(UNICODE_SAMPLE));
  });

  test('error event mid-stream rejects finalMessage with the Anthropic error type', async () => {
    const stream = anthropic.messages.stream(
      { model: 'claude-sim-1', max_tokens: 100, messages: [{ role: 'user', content: 'x' }] },
      { headers: { 'x-sim-fail': 'midstream' } },
    );
    await assert.rejects(stream.finalMessage(), (err: unknown) => {
      assert.ok(err instanceof Anthropic.APIError);
      assert.match(String(err.message), /overloaded_error/);
      return true;
    });
  });

  test('injected 500 answers the Anthropic error body', async () => {
    await assert.rejects(
      anthropic.messages.create(
        { model: 'claude-sim-1', max_tokens: 100, messages: [{ role: 'user', content: 'x' }] },
        { headers: { 'x-sim-fail': '500' } },
      ),
      (err: unknown) => {
        assert.ok(err instanceof Anthropic.InternalServerError);
        assert.deepEqual(err.error, {
          type: 'error',
          error: { type: 'api_error', message: 'Simulated internal error (x-sim-fail: 500).' },
        });
        return true;
      },
    );
  });
});

describe('Gemini', () => {
  test('generateContent: text and usageMetadata', async () => {
    const res = await gemini.models.generateContent({
      model: 'gemini-2.5-flash',
      contents: 'hello gemini simulator',
    });
    assert.match(res.text ?? '', /^Echo: hello gemini simulator\./);
    assert.equal(res.candidates?.[0]?.finishReason, 'STOP');
    const u = res.usageMetadata;
    assert.ok(u?.promptTokenCount && u.candidatesTokenCount);
    assert.equal(u.totalTokenCount, u.promptTokenCount + u.candidatesTokenCount);
    const rec = sim.requests.at(-1);
    assert.match(rec?.path ?? '', /^\/v1(beta)?\/models\/gemini-2\.5-flash:generateContent$/);
    assert.equal(rec?.headers['x-goog-api-key'], 'gm-test');
  });

  test('generateContentStream: chunks add up; the last carries full usage', async () => {
    const plain = await gemini.models.generateContent({
      model: 'gemini-2.5-flash',
      contents: 'stream gemini',
    });
    const stream = await gemini.models.generateContentStream({
      model: 'gemini-2.5-flash',
      contents: 'stream gemini',
      config: { httpOptions: { headers: { 'x-sim-chunks': '4', 'x-sim-reasoning-tokens': '7' } } },
    });
    let text = '';
    let chunks = 0;
    let lastUsage: { candidatesTokenCount?: number; thoughtsTokenCount?: number } | undefined;
    for await (const chunk of stream) {
      text += chunk.text ?? '';
      chunks++;
      lastUsage = chunk.usageMetadata;
    }
    assert.equal(text, plain.text);
    assert.equal(chunks, 4);
    assert.equal(lastUsage?.candidatesTokenCount, plain.usageMetadata?.candidatesTokenCount);
    assert.equal(lastUsage?.thoughtsTokenCount, 7);
    assert.match(sim.requests.at(-1)?.path ?? '', /:streamGenerateContent\?alt=sse$/);
  });

  test('functionCall part when function declarations are given', async () => {
    const res = await gemini.models.generateContent({
      model: 'gemini-2.5-flash',
      contents: 'weather for Lisbon?',
      config: { tools: [{ functionDeclarations: [{ name: 'get_weather', description: 'weather' }] }] },
    });
    assert.deepEqual(res.functionCalls?.[0]?.args, { location: 'Lisbon', unit: 'celsius' });
    assert.equal(res.functionCalls?.[0].name, 'get_weather');
  });

  test('embedContent (batchEmbedContents on the wire)', async () => {
    const res = await gemini.models.embedContent({ model: 'text-embedding-004', contents: ['one', 'two'] });
    assert.equal(res.embeddings?.length, 2);
    assert.equal(res.embeddings?.[0]?.values?.length, 768);
  });

  test('error chunk mid-stream throws an ApiError', async () => {
    const stream = await gemini.models.generateContentStream({
      model: 'gemini-2.5-flash',
      contents: 'x',
      config: { httpOptions: { headers: { 'x-sim-fail': 'midstream' } } },
    });
    await assert.rejects(async () => {
      for await (const _chunk of stream) {
        // drain
      }
    }, /INTERNAL/);
  });

  test('injected 429 uses the Google error body', async () => {
    await assert.rejects(
      gemini.models.generateContent({ model: 'gemini-2.5-flash-fail-429', contents: 'x' }),
      /RESOURCE_EXHAUSTED/,
    );
  });
});

describe('recorded fixtures parse with the official SDKs', () => {
  test('OpenAI chat tool-call stream', async () => {
    const runner = openai.chat.completions.stream(
      { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x' }] },
      { headers: { 'x-sim-replay': 'openai/chat-stream-tool-call' } },
    );
    const final = await runner.finalChatCompletion();
    const call = final.choices[0]!.message.tool_calls?.[0];
    assert.ok(call && call.type === 'function');
    assert.deepEqual(JSON.parse(call.function.arguments), { location: 'Paris, France', unit: 'celsius' });
    assert.equal(final.usage?.total_tokens, 99);
  });

  test('OpenAI responses stream', async () => {
    const stream = openai.responses.stream(
      { model: 'gpt-4o-mini', input: 'x' },
      { headers: { 'x-sim-replay': 'openai/responses-stream' } },
    );
    const final = await stream.finalResponse();
    assert.equal(final.output_text, 'Hello! Héllo wörld ✓.');
    assert.equal(final.usage?.total_tokens, 22);
  });

  test('Anthropic tool_use stream', async () => {
    const stream = anthropic.messages.stream(
      { model: 'claude-sim-1', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] },
      { headers: { 'x-sim-replay': 'anthropic/messages-stream-tool-use' } },
    );
    const final = await stream.finalMessage();
    const tool = final.content.find((b) => b.type === 'tool_use');
    assert.ok(tool && tool.type === 'tool_use');
    assert.deepEqual(tool.input, { location: 'Paris, France', unit: 'celsius' });
    assert.equal(final.usage.output_tokens, 89);
  });

  test('Gemini function-call stream', async () => {
    const stream = await gemini.models.generateContentStream({
      model: 'gemini-2.5-flash',
      contents: 'x',
      config: { httpOptions: { headers: { 'x-sim-replay': 'gemini/stream-function-call' } } },
    });
    const names: string[] = [];
    for await (const chunk of stream) for (const c of chunk.functionCalls ?? []) names.push(c.name ?? '');
    assert.deepEqual(names, ['get_weather']);
  });
});
