// The translation matrix again, driven by the Vercel AI SDK, whose providers validate every reply and
// every stream chunk against schemas of the vendors' wire formats: each client family (chat completions,
// Responses, Anthropic Messages, Gemini) x each provider family, plain and streamed, with a tool call,
// an upstream 429 and a stream that fails mid-way.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createGoogleGenerativeAI } from '@ai-sdk/google';
import { createOpenAI } from '@ai-sdk/openai';
import {
  APICallError,
  generateText,
  type JSONValue,
  jsonSchema,
  type LanguageModel,
  Output,
  streamText,
  tool,
} from 'ai';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { ACCESS_KEY, type Stack, startStack } from '../support/stack.ts';

// The SDK warns about unknown model ids on every call; the tests assert on behaviour, not on warnings.
(globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS = false;

let stack: Stack;
let compat: UpstreamSim;

before(async () => {
  compat = await startUpstreamSim();
  stack = await startStack({ baseUrls: { deepseek: compat.url } });
});
after(async () => {
  await stack?.close();
  await compat?.close();
});

const PROVIDERS = {
  openai: 'gpt-5.4-mini',
  anthropic: 'claude-sonnet-5',
  gemini: 'gemini-3.8-flash',
  'openai-compatible (deepseek)': 'deepseek-chat',
} as const;

const CLIENTS: Record<string, (model: string) => LanguageModel> = {
  'chat completions (@ai-sdk/openai .chat)': (model) =>
    createOpenAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1` }).chat(model),
  'responses (@ai-sdk/openai .responses)': (model) =>
    createOpenAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1` }).responses(model),
  'messages (@ai-sdk/anthropic)': (model) =>
    createAnthropic({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1` })(model),
  'generateContent (@ai-sdk/google)': (model) =>
    createGoogleGenerativeAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1beta` })(model),
};

const weather = tool({
  description: 'Current weather for a place',
  inputSchema: jsonSchema<{ location: string }>({
    type: 'object',
    properties: { location: { type: 'string' } },
    required: ['location'],
  }),
});

for (const [clientName, client] of Object.entries(CLIENTS)) {
  describe(`${clientName} client`, () => {
    for (const [providerName, model] of Object.entries(PROVIDERS)) {
      describe(`-> ${providerName} (${model})`, () => {
        test('generateText: the echo, a stop finish and both token counts', async () => {
          const r = await generateText({ model: client(model), prompt: 'hello ai sdk', maxRetries: 0 });
          assert.match(r.text, /^Echo: hello ai sdk/);
          assert.equal(r.finishReason, 'stop');
          assert.ok((r.usage.inputTokens ?? 0) > 0, `input tokens ${r.usage.inputTokens}`);
          assert.ok((r.usage.outputTokens ?? 0) > 0, `output tokens ${r.usage.outputTokens}`);
        });

        test('streamText: every chunk validates and the text equals the plain reply', async () => {
          const prompt = 'stream with the ai sdk';
          const plain = await generateText({ model: client(model), prompt, maxRetries: 0 });
          const errors: unknown[] = [];
          const s = streamText({
            model: client(model),
            prompt,
            maxRetries: 0,
            onError: (e) => errors.push(e),
          });
          assert.equal(await s.text, plain.text);
          assert.equal(await s.finishReason, 'stop');
          assert.ok(((await s.usage).outputTokens ?? 0) > 0);
          assert.deepEqual(errors, []);
        });

        test('streamText with a tool: one whole tool call', async () => {
          const s = streamText({
            model: client(model),
            prompt: 'What is the weather in Kyoto?',
            tools: { get_weather: weather },
            maxRetries: 0,
          });
          const calls = await s.toolCalls;
          assert.equal(calls.length, 1);
          assert.equal(calls[0]?.toolName, 'get_weather');
          assert.equal((calls[0]?.input as { location?: string } | undefined)?.location, 'Kyoto');
          assert.equal(await s.finishReason, 'tool-calls');
        });

        test('upstream 429: an APICallError with status 429 and the upstream message', async () => {
          await assert.rejects(
            generateText({ model: client(`${model}-fail-429`), prompt: 'rate limited', maxRetries: 0 }),
            (err) => {
              assert.ok(APICallError.isInstance(err), `got ${String(err)}`);
              assert.equal(err.statusCode, 429);
              assert.doesNotMatch(err.message, /^$/);
              return true;
            },
          );
        });

        test('upstream 429 to a streaming request: an APICallError carrying the upstream message', async () => {
          const errors: unknown[] = [];
          const s = streamText({
            model: client(`${model}-fail-429`),
            prompt: 'rate limited',
            maxRetries: 0,
            onError: ({ error }) => errors.push(error),
          });
          try {
            await s.consumeStream();
          } catch (err) {
            errors.push(err);
          }
          const err = errors.find((e) => APICallError.isInstance(e));
          assert.ok(
            err !== undefined && APICallError.isInstance(err),
            `got ${errors.map(String).join('; ')}`,
          );
          assert.equal(err.statusCode, 429);
          assert.match(err.message, /Simulated rate limit/);
        });

        test('upstream fails mid-stream: the stream reports an error, never a clean stop', async () => {
          const errors: unknown[] = [];
          const s = streamText({
            model: client(`${model}-fail-midstream`),
            prompt: 'cut short',
            maxRetries: 0,
            onError: ({ error }) => errors.push(error),
          });
          let finish: string | undefined;
          try {
            await s.consumeStream();
            finish = await s.finishReason;
          } catch (err) {
            errors.push(err);
          }
          assert.ok(errors.length > 0 || finish === 'error', `finish ${finish}, no error reported`);
          assert.notEqual(finish, 'stop');
        });
      });
    }
  });
}

/**
 * Per client family: the provider options that ask for reasoning (the AI SDK's own spelling). The
 * OpenAI provider drops reasoning options for model ids it does not know as reasoning models unless
 * told otherwise (forceReasoning), and Anthropic's asks for structured output in the request's own field.
 */
const REASONING_OPTIONS: Record<string, Record<string, Record<string, JSONValue>>> = {
  'chat completions (@ai-sdk/openai .chat)': { openai: { reasoningEffort: 'low', forceReasoning: true } },
  'responses (@ai-sdk/openai .responses)': {
    openai: { reasoningEffort: 'low', reasoningSummary: 'auto', forceReasoning: true },
  },
  'messages (@ai-sdk/anthropic)': { anthropic: { thinking: { type: 'enabled', budgetTokens: 2048 } } },
  'generateContent (@ai-sdk/google)': {
    google: { thinkingConfig: { includeThoughts: true, thinkingBudget: 1024 } },
  },
};

describe('reasoning and structured output through the AI SDK (every chunk validated)', () => {
  for (const [clientName, client] of Object.entries(CLIENTS)) {
    for (const model of Object.values(PROVIDERS)) {
      test(`${clientName} <- ${model}: streamed reasoning and its tokens`, async () => {
        const errors: unknown[] = [];
        const s = streamText({
          model: client(model),
          prompt: 'why is the sky blue',
          maxOutputTokens: 8000,
          maxRetries: 0,
          providerOptions: REASONING_OPTIONS[clientName],
          onError: ({ error }) => errors.push(error),
        });
        await s.consumeStream();
        assert.deepEqual(errors, []);
        assert.match(await s.text, /^Echo: why is the sky blue/);
        assert.ok(((await s.usage).outputTokenDetails.reasoningTokens ?? 0) > 0, 'reasoning tokens');
        // The chat provider does not surface reasoning_content (a DeepSeek field); the others do.
        if (!clientName.startsWith('chat')) {
          assert.equal(await s.reasoningText, 'Thinking about: why is the sky blue.');
        }
      });

      test(`${clientName} <- ${model}: an object of the schema`, async () => {
        const r = await generateText({
          model: client(model),
          prompt: 'Kyoto weather as JSON',
          maxRetries: 0,
          providerOptions: { anthropic: { structuredOutputMode: 'outputFormat' } },
          output: Output.object({
            schema: jsonSchema<{ city: string; celsius: number }>({
              type: 'object',
              properties: { city: { type: 'string' }, celsius: { type: 'number' } },
              required: ['city', 'celsius'],
              additionalProperties: false,
            }),
          }),
        });
        assert.deepEqual(r.output, { city: 'Kyoto weather as JSON', celsius: 42 });
      });
    }
  }
});
