// Proves the translators' output is consumable by the official SDKs: a tiny node:http server plays the
// gateway, translating a recorded upstream reply (test/fixtures/translators/anthropic/) for each SDK call.
// - The openai SDK talks to /v1/chat/completions, served by openai-to-anthropic from Anthropic fixtures.
// - The Anthropic SDK talks to /v1/messages, served by anthropic-to-openai from OpenAI fixtures.

import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import type { JsonObject, JsonValue } from '../../../../common/types.ts';
import { anthropicToOpenai } from '../../../../hooks/families/anthropic/anthropic-to-openai.ts';
import { openaiToAnthropic } from '../../../../hooks/families/anthropic/openai-to-anthropic.ts';
import type { TranslatorFactory } from '../../../../hooks/translators/types.ts';
import {
  caseDir,
  formatSse,
  makeInit,
  readJson,
  readText,
  replay,
} from '../../../fixtures/translators/anthropic/harness.ts';

interface Route {
  factory: TranslatorFactory;
  direction: string;
  upstreamModel: string;
}
const ROUTES: Record<string, Route> = {
  '/v1/chat/completions': {
    factory: openaiToAnthropic,
    direction: 'openai-to-anthropic',
    upstreamModel: 'claude-sonnet-4-5-20250929',
  },
  '/v1/messages': {
    factory: anthropicToOpenai,
    direction: 'anthropic-to-openai',
    upstreamModel: 'gpt-4o-mini',
  },
};

/** Upstream request bodies the translators produced, by fixture name, for assertions. */
const upstreamRequests = new Map<string, JsonObject>();

async function readBody(req: IncomingMessage): Promise<JsonObject> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const route = ROUTES[req.url ?? ''];
  const fixture = req.headers['x-fixture'];
  if (!route || typeof fixture !== 'string') {
    res.writeHead(404).end();
    return;
  }
  const body = await readBody(req);
  const dir = caseDir(route.direction, fixture);
  const translator = route.factory.create(makeInit(body, route.upstreamModel));
  upstreamRequests.set(`${route.direction}/${fixture}`, translator.request(body));

  if (body.stream === true) {
    const meta = readJson(dir, 'meta.json');
    const complete = !(
      typeof meta === 'object' &&
      meta !== null &&
      !Array.isArray(meta) &&
      meta.complete === false
    );
    const out = replay(translator, readText(dir, 'upstream.sse') ?? '', complete);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.end(formatSse(out));
    return;
  }
  const upstream: JsonValue = readJson(dir, 'upstream-response.json') ?? null;
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(translator.response(upstream)));
}

const server = createServer((req, res) => {
  handle(req, res).catch((error: unknown) => {
    res.writeHead(500, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: String(error), type: 'server_error', code: 'test_server' } }));
  });
});
let openai: OpenAI;
let anthropic: Anthropic;

before(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  openai = new OpenAI({ apiKey: 'test-key', baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: 'test-key', baseURL: `http://127.0.0.1:${port}`, maxRetries: 0 });
});

after(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
});

function fixtureHeader(name: string) {
  return { headers: { 'x-fixture': name } };
}

const weatherTools: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'to_fahrenheit',
      parameters: { type: 'object', properties: { celsius: { type: 'number' } }, required: ['celsius'] },
    },
  },
];

test('openai SDK: streamed tool calls accumulate into complete arguments', async () => {
  const stream = openai.chat.completions.stream(
    {
      model: 'claude-sonnet',
      messages: [{ role: 'user', content: 'Convert 18 and 24 Celsius.' }],
      tools: weatherTools,
      stream_options: { include_usage: true },
    },
    fixtureHeader('tool-calls-stream'),
  );
  const completion = await stream.finalChatCompletion();
  const choice = completion.choices[0];
  assert.equal(choice!.finish_reason, 'tool_calls');
  assert.equal(choice!.message.content, 'Converting both.');
  const calls = (choice!.message.tool_calls ?? []).map((call) =>
    call.type === 'function' ? [call.id, call.function.name, JSON.parse(call.function.arguments)] : [],
  );
  assert.deepEqual(calls, [
    ['toolu_01T1x1fJ34qAmk2tNTrN7Up6', 'to_fahrenheit', { celsius: 18 }],
    ['toolu_01Kb7vtkLcsGTVqgGbYTFDh8', 'to_fahrenheit', { celsius: 24 }],
  ]);
  assert.equal(completion.model, 'claude-sonnet');
  assert.equal(completion.usage?.prompt_tokens, 472);
  assert.equal(completion.usage?.completion_tokens, 89);
  assert.equal(upstreamRequests.get('openai-to-anthropic/tool-calls-stream')?.stream, true);
});

test('openai SDK: multi-byte text streams intact', async () => {
  const stream = openai.chat.completions.stream(
    { model: 'claude-sonnet', messages: [{ role: 'user', content: 'hello' }] },
    fixtureHeader('text-stream'),
  );
  const completion = await stream.finalChatCompletion();
  assert.equal(
    completion.choices[0]!.message.content,
    'Hello 👋🏽, Bonjour à tous 🇫🇷, こんにちは 🇯🇵 — naïve café!',
  );
  assert.equal(completion.choices[0]!.finish_reason, 'stop');
});

test('openai SDK: a non-streamed tool call reply parses', async () => {
  const completion = await openai.chat.completions.create(
    { model: 'claude-sonnet', messages: [{ role: 'user', content: 'weather?' }], tools: weatherTools },
    fixtureHeader('tool-calls-json'),
  );
  const call = completion.choices[0]!.message.tool_calls?.[0];
  assert.ok(call && call.type === 'function');
  assert.deepEqual(JSON.parse(call.function.arguments), { location: 'Paris, France', unit: 'celsius' });
});

test('openai SDK: an upstream error mid-stream is raised as an APIError', async () => {
  const stream = openai.chat.completions.stream(
    { model: 'claude-sonnet', messages: [{ role: 'user', content: 'story' }] },
    fixtureHeader('error-mid-stream'),
  );
  await assert.rejects(stream.finalChatCompletion(), (error: unknown) => {
    assert.ok(error instanceof OpenAI.APIError, String(error));
    assert.match(error.message, /Overloaded/);
    return true;
  });
});

test('openai SDK: a cut upstream stream is raised as an error', async () => {
  const stream = openai.chat.completions.stream(
    { model: 'claude-sonnet', messages: [{ role: 'user', content: 'count' }] },
    fixtureHeader('truncated-stream'),
  );
  await assert.rejects(stream.finalChatCompletion(), OpenAI.APIError);
});

const anthropicTools: Anthropic.Messages.Tool[] = [
  {
    name: 'to_fahrenheit',
    input_schema: { type: 'object', properties: { celsius: { type: 'number' } }, required: ['celsius'] },
  },
];

test('anthropic SDK: streamed tool calls accumulate into tool_use inputs', async () => {
  const message = await anthropic.messages
    .stream(
      {
        model: 'gpt-4o-mini',
        max_tokens: 1024,
        messages: [{ role: 'user', content: 'Convert 18 and 24 Celsius.' }],
        tools: anthropicTools,
      },
      fixtureHeader('tool-calls-stream'),
    )
    .finalMessage();
  assert.equal(message.stop_reason, 'tool_use');
  assert.equal(message.model, 'gpt-4o-mini');
  const calls = message.content.map((block) =>
    block.type === 'tool_use' ? [block.id, block.name, block.input] : [],
  );
  assert.deepEqual(calls, [
    ['call_F1a2b3c4', 'to_fahrenheit', { celsius: 18 }],
    ['call_G5d6e7f8', 'to_fahrenheit', { celsius: 24 }],
  ]);
  assert.equal(message.usage.input_tokens, 188);
  assert.equal(message.usage.output_tokens, 46);
  assert.deepEqual(upstreamRequests.get('anthropic-to-openai/tool-calls-stream')?.stream_options, {
    include_usage: true,
  });
});

test('anthropic SDK: multi-byte text streams intact', async () => {
  const message = await anthropic.messages
    .stream(
      { model: 'gpt-4o-mini', max_tokens: 1024, messages: [{ role: 'user', content: 'hello' }] },
      fixtureHeader('text-stream'),
    )
    .finalMessage();
  assert.deepEqual(
    message.content.map((block) => (block.type === 'text' ? block.text : block.type)),
    ['Hello 👋🏽, Bonjour à tous 🇫🇷, こんにちは 🇯🇵 — naïve café!'],
  );
  assert.equal(message.stop_reason, 'end_turn');
  assert.equal(message.usage.input_tokens, 19);
});

test('anthropic SDK: a non-streamed tool call reply parses', async () => {
  const message = await anthropic.messages.create(
    {
      model: 'gpt-4o-mini',
      max_tokens: 1024,
      messages: [{ role: 'user', content: 'weather?' }],
      tools: anthropicTools,
    },
    fixtureHeader('tool-calls-json'),
  );
  const block = message.content[0];
  assert.ok(block!.type === 'tool_use');
  assert.deepEqual(block.input, { location: 'Paris, France', unit: 'celsius' });
  assert.equal(message.stop_reason, 'tool_use');
});

test('anthropic SDK: an upstream error mid-stream is raised as an APIError', async () => {
  const stream = anthropic.messages.stream(
    { model: 'gpt-4o-mini', max_tokens: 1024, messages: [{ role: 'user', content: 'story' }] },
    fixtureHeader('error-mid-stream'),
  );
  await assert.rejects(stream.finalMessage(), (error: unknown) => {
    assert.ok(error instanceof Anthropic.APIError, String(error));
    assert.match(error.message, /server had an error/);
    return true;
  });
});

test('anthropic SDK: a cut upstream stream is raised as an error', async () => {
  const stream = anthropic.messages.stream(
    { model: 'gpt-4o-mini', max_tokens: 64, messages: [{ role: 'user', content: 'count' }] },
    fixtureHeader('truncated-stream'),
  );
  await assert.rejects(stream.finalMessage(), Anthropic.APIError);
});
