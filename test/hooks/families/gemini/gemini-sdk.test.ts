// Proves the Gemini translators' output is consumable by the official SDKs: a tiny node:http server
// plays the gateway, translating the SDK's real request and a recorded upstream reply
// (test/fixtures/translators/gemini/) for each call.
// - The openai SDK talks to /v1/chat/completions, served by openai-to-gemini from Gemini fixtures
//   (fixture named by the x-fixture header).
// - @google/genai talks to /{v1,v1beta}/models/<fixture>:generateContent and
//   :streamGenerateContent?alt=sse, served by gemini-to-openai from OpenAI fixtures. The SDK's default
//   API version has changed between releases (v1beta, now v1), so both prefixes are served.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ApiError, GoogleGenAI, Type } from '@google/genai';
import OpenAI, { APIError } from 'openai';
import type { JsonObject, JsonValue } from '../../../../common/types.ts';
import { geminiToOpenai } from '../../../../hooks/families/gemini/gemini-to-openai.ts';
import { openaiToGemini } from '../../../../hooks/families/gemini/openai-to-gemini.ts';
import type { TranslatorFactory } from '../../../../hooks/translators/types.ts';
import { FIXTURE_ROOT, replaySse, serializeSse } from '../../../fixtures/translators/gemini/golden.ts';

/** Upstream request bodies the translators produced, keyed by `<direction>/<fixture>`, for assertions. */
const upstreamRequests = new Map<string, JsonObject>();
/** Paths the Google SDK called, to pin down which API version it uses. */
const googlePaths: string[] = [];

async function readBody(req: IncomingMessage): Promise<JsonObject> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8')) as JsonObject;
}

function serve(
  res: ServerResponse,
  factory: TranslatorFactory,
  direction: string,
  fixture: string,
  body: JsonObject,
  stream: boolean,
): void {
  const translator = factory.create({
    requestId: `req_${fixture}`,
    model: 'client-model',
    upstreamModel: 'upstream-model',
    stream,
    createdAt: 1760000000,
  });
  upstreamRequests.set(`${direction}/${fixture}`, translator.request(body));
  const dir = join(FIXTURE_ROOT, direction, fixture);
  if (stream) {
    const events = replaySse(translator, readFileSync(join(dir, 'upstream-response.sse')));
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.end(serializeSse(events));
    return;
  }
  const upstream = JSON.parse(readFileSync(join(dir, 'upstream-response.json'), 'utf8')) as JsonValue;
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(translator.response(upstream)));
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const body = await readBody(req);
  if (url.pathname === '/v1/chat/completions') {
    const fixture = String(req.headers['x-fixture']);
    serve(res, openaiToGemini, 'openai-to-gemini', fixture, body, body.stream === true);
    return;
  }
  const google = /^\/(v1|v1beta)\/models\/([\w-]+):(generateContent|streamGenerateContent)$/.exec(
    url.pathname,
  );
  if (google) {
    googlePaths.push(`${url.pathname}${url.search}`);
    const stream = google[3] === 'streamGenerateContent';
    assert.equal(stream, url.searchParams.get('alt') === 'sse', 'streaming calls ask for SSE');
    serve(res, geminiToOpenai, 'gemini-to-openai', google[2]!, body, stream);
    return;
  }
  res.writeHead(404).end();
}

let server: ReturnType<typeof createServer>;
let origin: string;

before(async () => {
  server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      res.writeHead(500, { 'content-type': 'text/plain' }).end(String(error));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function openaiClient(): OpenAI {
  return new OpenAI({ apiKey: 'x', baseURL: `${origin}/v1`, maxRetries: 0 });
}

function googleClient(): GoogleGenAI {
  return new GoogleGenAI({ apiKey: 'x', httpOptions: { baseUrl: origin } });
}

describe('openai SDK against openai-to-gemini', () => {
  test('finalChatCompletion accumulates a streamed tool call and usage', async () => {
    const completion = await openaiClient()
      .chat.completions.stream(
        {
          model: 'gemini-2.5-flash',
          messages: [{ role: 'user', content: 'Weather in Oslo?' }],
          tools: [
            {
              type: 'function',
              function: {
                name: 'get_weather',
                parameters: {
                  type: 'object',
                  properties: { city: { type: 'string' }, unit: { type: 'string' } },
                  additionalProperties: false,
                },
              },
            },
          ],
          stream_options: { include_usage: true },
        },
        { headers: { 'x-fixture': 'tool-calls-stream' } },
      )
      .finalChatCompletion();
    const choice = completion.choices[0];
    assert.equal(choice!.finish_reason, 'tool_calls');
    assert.equal(choice!.message.content, 'Let me check.');
    const call = choice!.message.tool_calls?.[0];
    assert.ok(call && call.type === 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Oslo', unit: 'celsius' });
    assert.equal(completion.usage?.prompt_tokens, 60);
    const request = upstreamRequests.get('openai-to-gemini/tool-calls-stream');
    assert.doesNotMatch(JSON.stringify(request), /additionalProperties|"stream"|"model"/);
  });

  test('streamed multi-byte text arrives intact', async () => {
    const stream = await openaiClient().chat.completions.create(
      { model: 'gemini-2.5-flash', messages: [{ role: 'user', content: '日本の首都は？' }], stream: true },
      { headers: { 'x-fixture': 'stream-utf8' } },
    );
    let text = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(text, '日本の首都は東京です 🗼🇯🇵。');
    assert.equal(finish, 'stop');
  });

  test('an upstream error mid-stream is raised as an APIError', async () => {
    const stream = await openaiClient().chat.completions.create(
      { model: 'gemini-2.5-flash', messages: [{ role: 'user', content: 'story' }], stream: true },
      { headers: { 'x-fixture': 'error-mid-stream' } },
    );
    await assert.rejects(
      async () => {
        for await (const _chunk of stream) {
          // drain
        }
      },
      (error: unknown) => error instanceof APIError && /overloaded/.test(error.message),
    );
  });

  test('a plain reply parses with usage', async () => {
    const completion = await openaiClient().chat.completions.create(
      { model: 'gemini-2.5-flash', messages: [{ role: 'user', content: 'Capital of France?' }] },
      { headers: { 'x-fixture': 'plain' } },
    );
    assert.equal(completion.choices[0]!.message.content, 'The capital of France is Paris.');
    assert.equal(completion.usage?.completion_tokens_details?.reasoning_tokens, 24);
  });
});

describe('@google/genai against gemini-to-openai', () => {
  test('generateContentStream yields text chunks and a final usage chunk', async () => {
    const stream = await googleClient().models.generateContentStream({
      model: 'stream-utf8',
      contents: 'Say hello in Japanese with an emoji.',
      config: { maxOutputTokens: 64, systemInstruction: 'Be warm.' },
    });
    let text = '';
    let last: Awaited<ReturnType<typeof stream.next>>['value'];
    for await (const chunk of stream) {
      text += chunk.text ?? '';
      last = chunk;
    }
    assert.equal(text, 'こんにちは！👋 🇯🇵');
    assert.equal(last?.candidates?.[0]?.finishReason, 'STOP');
    assert.equal(last?.usageMetadata?.totalTokenCount, 24);
    const request = upstreamRequests.get('gemini-to-openai/stream-utf8');
    assert.ok(request);
    assert.equal(request.model, 'upstream-model');
    assert.deepEqual((request.messages as JsonObject[])[0], { role: 'system', content: 'Be warm.' });
    assert.equal(request.max_tokens, 64);
    assert.match(
      googlePaths.at(-1) ?? '',
      /^\/v1(beta)?\/models\/stream-utf8:streamGenerateContent\?alt=sse$/,
    );
  });

  test('generateContentStream delivers accumulated tool calls as whole function calls', async () => {
    const stream = await googleClient().models.generateContentStream({
      model: 'tool-calls-stream',
      contents: 'Now Tokyo and Berlin, and the time in Tokyo.',
      config: {
        tools: [
          {
            functionDeclarations: [
              {
                name: 'get_weather',
                parameters: {
                  type: Type.OBJECT,
                  properties: { city: { type: Type.STRING } },
                  required: ['city'],
                },
              },
              {
                name: 'get_time',
                parameters: { type: Type.OBJECT, properties: { tz: { type: Type.STRING } } },
              },
            ],
          },
        ],
      },
    });
    const calls: { name?: string; args?: Record<string, unknown> }[] = [];
    for await (const chunk of stream) calls.push(...(chunk.functionCalls ?? []));
    assert.deepEqual(
      calls.map((call) => [call.name, call.args]),
      [
        ['get_weather', { city: 'Tokyo' }],
        ['get_weather', { city: 'Berlin' }],
        ['get_time', { tz: 'Asia/Tokyo' }],
      ],
    );
    const request = upstreamRequests.get('gemini-to-openai/tool-calls-stream');
    assert.ok(request);
    const tools = request.tools as JsonObject[];
    assert.deepEqual((tools[0]!.function as JsonObject).parameters, {
      type: 'object',
      properties: { city: { type: 'string' } },
      required: ['city'],
    });
  });

  test('generateContent maps a chat.completion', async () => {
    const response = await googleClient().models.generateContent({
      model: 'plain',
      contents: 'Name three primary colours.',
    });
    assert.equal(response.text, 'Red, blue and yellow.');
    assert.equal(response.usageMetadata?.promptTokenCount, 38);
    assert.match(googlePaths.at(-1) ?? '', /^\/v1(beta)?\/models\/plain:generateContent$/);
  });

  test('an upstream error mid-stream is raised as an ApiError', async () => {
    const stream = await googleClient().models.generateContentStream({
      model: 'error-mid-stream',
      contents: 'Tell me a story.',
    });
    await assert.rejects(
      async () => {
        for await (const _chunk of stream) {
          // drain
        }
      },
      (error: unknown) => error instanceof ApiError && error.status === 500,
    );
  });
});
