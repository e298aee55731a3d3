// Every client family x every provider family through the shipped configuration and model registry
// (no x-router-provider), each driven by its official SDK: a plain reply, a stream through the SDK's own
// helper, a streamed tool call, an upstream 429 raised as the SDK's own typed error, and a stream that
// fails mid-way raised as an error (never a clean end). docs/translation.md has the table.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { ApiError, GoogleGenAI, Type } from '@google/genai';
import OpenAI from 'openai';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { ACCESS_KEY, type Stack, startStack } from '../support/stack.ts';

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

/** Provider family -> a model the shipped registry sends there. */
const PROVIDERS = {
  openai: 'gpt-5.4-mini',
  anthropic: 'claude-sonnet-5',
  gemini: 'gemini-3.8-flash',
  'openai-compatible (deepseek)': 'deepseek-chat',
} as const;

/** Where each provider family's requests must land: the simulator and the upstream path. */
const UPSTREAM_PATH: Record<keyof typeof PROVIDERS, RegExp> = {
  openai: /^\/v1\/(chat\/completions|responses)$/,
  anthropic: /^\/v1\/messages$/,
  gemini: /^\/v1beta\/models\/gemini-3\.8-flash:generateContent$/,
  'openai-compatible (deepseek)': /^\/v1\/chat\/completions$/,
};

function upstreamLog(provider: keyof typeof PROVIDERS): UpstreamSim['requests'] {
  return provider === 'openai-compatible (deepseek)' ? compat.requests : stack.sim.requests;
}

interface Reply {
  readonly text: string;
  readonly inputTokens: number;
  readonly outputTokens: number;
}

interface ClientFamily {
  plain(model: string, prompt: string): Promise<Reply>;
  stream(model: string, prompt: string): Promise<Reply>;
  /** Every tool call of a streamed reply to `prompt`, in order. */
  toolCalls(model: string, prompt: string): Promise<{ name: string; args: unknown }[]>;
  /** The SDK's own error class for HTTP 429. */
  isRateLimit(err: unknown): boolean;
}

const WEATHER = 'What is the weather in Kyoto?';
const weatherSchema = {
  type: 'object',
  properties: { location: { type: 'string' } },
  required: ['location'],
};

function chatClient(): ClientFamily {
  const client = new OpenAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1`, maxRetries: 0 });
  return {
    async plain(model, prompt) {
      const r = await client.chat.completions.create({
        model,
        messages: [{ role: 'user', content: prompt }],
      });
      return {
        text: r.choices[0]?.message.content ?? '',
        inputTokens: r.usage?.prompt_tokens ?? 0,
        outputTokens: r.usage?.completion_tokens ?? 0,
      };
    },
    async stream(model, prompt) {
      const r = await client.chat.completions
        .stream({
          model,
          messages: [{ role: 'user', content: prompt }],
          stream_options: { include_usage: true },
        })
        .finalChatCompletion();
      return {
        text: r.choices[0]?.message.content ?? '',
        inputTokens: r.usage?.prompt_tokens ?? 0,
        outputTokens: r.usage?.completion_tokens ?? 0,
      };
    },
    async toolCalls(model, prompt) {
      const r = await client.chat.completions
        .stream({
          model,
          messages: [{ role: 'user', content: prompt }],
          tools: [{ type: 'function', function: { name: 'get_weather', parameters: weatherSchema } }],
        })
        .finalChatCompletion();
      assert.equal(r.choices[0]?.finish_reason, 'tool_calls');
      return (r.choices[0]?.message.tool_calls ?? []).map((call) => {
        assert.ok(call.type === 'function');
        return { name: call.function.name, args: JSON.parse(call.function.arguments) };
      });
    },
    isRateLimit: (err) => err instanceof OpenAI.RateLimitError,
  };
}

function responsesClient(): ClientFamily {
  const client = new OpenAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1`, maxRetries: 0 });
  const reply = (r: OpenAI.Responses.Response): Reply => ({
    text: r.output_text,
    inputTokens: r.usage?.input_tokens ?? 0,
    outputTokens: r.usage?.output_tokens ?? 0,
  });
  return {
    async plain(model, prompt) {
      const r = await client.responses.create({ model, input: prompt });
      assert.equal(r.status, 'completed');
      return reply(r);
    },
    async stream(model, prompt) {
      const r = await client.responses.stream({ model, input: prompt }).finalResponse();
      assert.equal(r.status, 'completed');
      return reply(r);
    },
    async toolCalls(model, prompt) {
      const r = await client.responses
        .stream({
          model,
          input: [{ role: 'user', content: prompt }],
          tools: [{ type: 'function', name: 'get_weather', parameters: weatherSchema, strict: false }],
        })
        .finalResponse();
      return r.output.flatMap((item) =>
        item.type === 'function_call' ? [{ name: item.name, args: JSON.parse(item.arguments) }] : [],
      );
    },
    isRateLimit: (err) => err instanceof OpenAI.RateLimitError,
  };
}

function anthropicClient(): ClientFamily {
  const client = new Anthropic({ apiKey: ACCESS_KEY, baseURL: stack.url, maxRetries: 0 });
  const reply = (m: Anthropic.Message): Reply => ({
    text: m.content.map((b) => (b.type === 'text' ? b.text : '')).join(''),
    inputTokens: m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0),
    outputTokens: m.usage.output_tokens,
  });
  return {
    async plain(model, prompt) {
      return reply(
        await client.messages.create({
          model,
          max_tokens: 500,
          messages: [{ role: 'user', content: prompt }],
        }),
      );
    },
    async stream(model, prompt) {
      const stream = client.messages.stream({
        model,
        max_tokens: 500,
        messages: [{ role: 'user', content: prompt }],
      });
      return reply(await stream.finalMessage());
    },
    async toolCalls(model, prompt) {
      const m = await client.messages
        .stream({
          model,
          max_tokens: 500,
          tools: [{ name: 'get_weather', input_schema: weatherSchema as Anthropic.Tool.InputSchema }],
          messages: [{ role: 'user', content: prompt }],
        })
        .finalMessage();
      assert.equal(m.stop_reason, 'tool_use');
      return m.content.flatMap((b) => (b.type === 'tool_use' ? [{ name: b.name, args: b.input }] : []));
    },
    isRateLimit: (err) => err instanceof Anthropic.RateLimitError,
  };
}

function geminiClient(): ClientFamily {
  const client = new GoogleGenAI({ apiKey: ACCESS_KEY, httpOptions: { baseUrl: stack.url } });
  return {
    async plain(model, prompt) {
      const r = await client.models.generateContent({ model, contents: prompt });
      return {
        text: r.text ?? '',
        inputTokens: r.usageMetadata?.promptTokenCount ?? 0,
        outputTokens: r.usageMetadata?.candidatesTokenCount ?? 0,
      };
    },
    async stream(model, prompt) {
      let text = '';
      let usage: { promptTokenCount?: number; candidatesTokenCount?: number } | undefined;
      for await (const chunk of await client.models.generateContentStream({ model, contents: prompt })) {
        text += chunk.text ?? '';
        usage = chunk.usageMetadata ?? usage;
      }
      return {
        text,
        inputTokens: usage?.promptTokenCount ?? 0,
        outputTokens: usage?.candidatesTokenCount ?? 0,
      };
    },
    async toolCalls(model, prompt) {
      const calls: { name?: string; args?: unknown }[] = [];
      const stream = await client.models.generateContentStream({
        model,
        contents: prompt,
        config: {
          tools: [
            {
              functionDeclarations: [
                {
                  name: 'get_weather',
                  parameters: {
                    type: Type.OBJECT,
                    properties: { location: { type: Type.STRING } },
                    required: ['location'],
                  },
                },
              ],
            },
          ],
        },
      });
      for await (const chunk of stream) calls.push(...(chunk.functionCalls ?? []));
      return calls.map((call) => ({ name: call.name ?? '', args: call.args }));
    },
    isRateLimit: (err) => err instanceof ApiError && err.status === 429,
  };
}

const CLIENTS: Record<string, () => ClientFamily> = {
  'chat completions (openai)': chatClient,
  'responses (openai)': responsesClient,
  'messages (@anthropic-ai/sdk)': anthropicClient,
  'generateContent (@google/genai)': geminiClient,
};

for (const [clientName, makeClient] of Object.entries(CLIENTS)) {
  describe(`${clientName} client`, () => {
    for (const [providerName, model] of Object.entries(PROVIDERS)) {
      describe(`-> ${providerName} (${model})`, () => {
        test('plain reply: the echo and both token counts, served by that provider', async () => {
          const log = upstreamLog(providerName as keyof typeof PROVIDERS);
          const before = log.length;
          const r = await makeClient().plain(model, `hello matrix ${providerName}`);
          assert.equal(log.length, before + 1, 'one upstream request to the provider');
          assert.match(log.at(-1)?.path ?? '', UPSTREAM_PATH[providerName as keyof typeof PROVIDERS]);
          assert.match(r.text, new RegExp(`^Echo: hello matrix ${providerName.split(' ')[0]}`));
          assert.ok(r.inputTokens > 0, `input tokens ${r.inputTokens}`);
          assert.ok(r.outputTokens > 0, `output tokens ${r.outputTokens}`);
        });

        test('stream through the SDK helper: the same text as the plain reply', async () => {
          const client = makeClient();
          const prompt = `stream matrix ${providerName}`;
          const [plain, streamed] = await Promise.all([
            client.plain(model, prompt),
            client.stream(model, prompt),
          ]);
          assert.equal(streamed.text, plain.text);
          assert.ok(streamed.outputTokens > 0, `streamed output tokens ${streamed.outputTokens}`);
        });

        test('streamed tool call: name and arguments arrive whole', async () => {
          const calls = await makeClient().toolCalls(model, WEATHER);
          assert.equal(calls.length, 1);
          assert.equal(calls[0]?.name, 'get_weather');
          assert.equal((calls[0]?.args as { location?: string } | undefined)?.location, 'Kyoto');
        });

        test('upstream 429: the SDK raises its own rate-limit error', async () => {
          const client = makeClient();
          await assert.rejects(client.plain(`${model}-fail-429`, 'rate limited'), (err) => {
            assert.ok(client.isRateLimit(err), `got ${String(err)}`);
            return true;
          });
        });

        test('upstream 429 to a streaming request: the same typed error, from the JSON error body', async () => {
          const client = makeClient();
          await assert.rejects(client.stream(`${model}-fail-429`, 'rate limited'), (err) => {
            assert.ok(client.isRateLimit(err), `got ${String(err)}`);
            assert.match(String((err as Error).message), /Simulated rate limit/);
            return true;
          });
        });

        test('upstream 400, 404, 500, 503: the same status in the SDK, with the upstream message', async () => {
          const client = makeClient();
          for (const status of [400, 404, 500, 503]) {
            await assert.rejects(client.plain(`${model}-fail-${status}`, 'failing'), (err) => {
              assert.equal((err as { status?: number }).status, status, `got ${String(err)}`);
              // The simulator's 404 has no canned text; the others name themselves.
              if (status !== 404) assert.match(String((err as Error).message), /Simulated/);
              return true;
            });
          }
        });

        test('upstream fails mid-stream: the SDK raises, never a clean end', async () => {
          await assert.rejects(makeClient().stream(`${model}-fail-midstream`, 'cut short'));
        });
      });
    }
  });
}

describe("Claude Code's request shape against other vendors' models", () => {
  // Structured system blocks with cache markers, several tools (the last one cache-marked), thinking,
  // metadata, a beta header and a large max_tokens, streamed: what the coding agent sends every turn.
  const body = {
    max_tokens: 32000,
    stream: true as const,
    thinking: { type: 'enabled' as const, budget_tokens: 4000 },
    metadata: { user_id: 'user_abc_account_def_session_123' },
    system: [
      { type: 'text' as const, text: 'You are Claude Code, a coding agent.' },
      {
        type: 'text' as const,
        text: 'Use the tools to read files before answering.',
        cache_control: { type: 'ephemeral' as const },
      },
    ],
    tools: [
      {
        name: 'Read',
        description: 'Read a file',
        input_schema: { type: 'object' as const, properties: { file_path: { type: 'string' } } },
      },
      {
        name: 'get_weather',
        description: 'Weather',
        input_schema: { type: 'object' as const, properties: { location: { type: 'string' } } },
        cache_control: { type: 'ephemeral' as const },
      },
    ],
    messages: [
      {
        role: 'user' as const,
        content: [
          {
            type: 'text' as const,
            text: 'What is the weather in Kyoto?',
            cache_control: { type: 'ephemeral' as const },
          },
        ],
      },
    ],
  };
  for (const model of ['gpt-5.4-mini', 'gemini-3.8-flash', 'deepseek-chat']) {
    test(`${model}: the stream answers with a tool call and the agent's loop can continue`, async () => {
      const client = new Anthropic({
        apiKey: ACCESS_KEY,
        baseURL: stack.url,
        maxRetries: 0,
        defaultHeaders: { 'anthropic-beta': 'interleaved-thinking-2025-05-14' },
      });
      const first = await client.messages.stream({ model, ...body }).finalMessage();
      assert.equal(first.stop_reason, 'tool_use');
      const call = first.content.find((b) => b.type === 'tool_use');
      assert.ok(call?.type === 'tool_use');
      assert.equal(call.name, 'get_weather');
      const second = await client.messages
        .stream({
          model,
          ...body,
          messages: [
            ...body.messages,
            { role: 'assistant', content: first.content },
            {
              role: 'user',
              content: [{ type: 'tool_result', tool_use_id: call.id, content: '21C and sunny' }],
            },
          ],
        })
        .finalMessage();
      assert.equal(second.stop_reason, 'end_turn');
      assert.ok(second.content.some((b) => b.type === 'text' && b.text.length > 0));
    });
  }
});

describe('structured output reaches every provider in the field its vendor reads', () => {
  const schema = {
    type: 'object',
    properties: { city: { type: 'string' }, celsius: { type: 'number' } },
    required: ['city', 'celsius'],
    additionalProperties: false,
  };
  const prompt = 'Kyoto weather as JSON';
  const asked: Record<string, (model: string) => Promise<string>> = {
    'chat completions': async (model) => {
      const client = new OpenAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1`, maxRetries: 0 });
      const r = await client.chat.completions.create({
        model,
        messages: [{ role: 'user', content: prompt }],
        response_format: { type: 'json_schema', json_schema: { name: 'weather', schema, strict: true } },
      });
      return r.choices[0]?.message.content ?? '';
    },
    responses: async (model) => {
      const client = new OpenAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1`, maxRetries: 0 });
      const r = await client.responses.create({
        model,
        input: prompt,
        text: { format: { type: 'json_schema', name: 'weather', schema, strict: true } },
      });
      return r.output_text;
    },
    'anthropic messages': async (model) => {
      const client = new Anthropic({ apiKey: ACCESS_KEY, baseURL: stack.url, maxRetries: 0 });
      const m = await client.messages.create({
        model,
        max_tokens: 500,
        messages: [{ role: 'user', content: prompt }],
        output_config: { format: { type: 'json_schema', schema } },
      });
      return m.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
    },
    'gemini generateContent': async (model) => {
      const client = new GoogleGenAI({ apiKey: ACCESS_KEY, httpOptions: { baseUrl: stack.url } });
      const r = await client.models.generateContent({
        model,
        contents: prompt,
        config: { responseMimeType: 'application/json', responseJsonSchema: schema },
      });
      return r.text ?? '';
    },
  };
  for (const [clientName, ask] of Object.entries(asked)) {
    for (const model of Object.values(PROVIDERS)) {
      test(`${clientName} -> ${model}: JSON of the schema's shape`, async () => {
        assert.deepEqual(JSON.parse(await ask(model)), { city: 'Kyoto weather as JSON', celsius: 42 });
      });
    }
  }
});

describe('reasoning reaches every client family from every provider, with its tokens', () => {
  const prompt = 'why is the sky blue';
  const asked: Record<string, (model: string) => Promise<{ reasoning: string; tokens: number }>> = {
    'chat completions (reasoning_content)': async (model) => {
      const client = new OpenAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1`, maxRetries: 0 });
      const r = await client.chat.completions.create({
        model,
        messages: [{ role: 'user', content: prompt }],
        reasoning_effort: 'low',
      });
      const message = r.choices[0]?.message as { reasoning_content?: string } | undefined;
      return {
        reasoning: message?.reasoning_content ?? '',
        tokens: r.usage?.completion_tokens_details?.reasoning_tokens ?? 0,
      };
    },
    'responses (reasoning item)': async (model) => {
      const client = new OpenAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1`, maxRetries: 0 });
      const r = await client.responses
        .stream({ model, input: prompt, reasoning: { effort: 'low' } })
        .finalResponse();
      const item = r.output.find((o) => o.type === 'reasoning');
      return {
        reasoning: item?.type === 'reasoning' ? item.summary.map((s) => s.text).join('') : '',
        tokens: r.usage?.output_tokens_details.reasoning_tokens ?? 0,
      };
    },
    'anthropic messages (thinking block)': async (model) => {
      const client = new Anthropic({ apiKey: ACCESS_KEY, baseURL: stack.url, maxRetries: 0 });
      const m = await client.messages
        .stream({
          model,
          max_tokens: 8000,
          thinking: { type: 'enabled', budget_tokens: 2048 },
          messages: [{ role: 'user', content: prompt }],
        })
        .finalMessage();
      const block = m.content.find((b) => b.type === 'thinking');
      return {
        reasoning: block?.type === 'thinking' ? block.thinking : '',
        tokens: m.usage.output_tokens_details?.thinking_tokens ?? 0,
      };
    },
    'gemini generateContent (thought parts)': async (model) => {
      const client = new GoogleGenAI({ apiKey: ACCESS_KEY, httpOptions: { baseUrl: stack.url } });
      const r = await client.models.generateContent({
        model,
        contents: prompt,
        config: { thinkingConfig: { includeThoughts: true, thinkingBudget: 1024 } },
      });
      const parts = r.candidates?.[0]?.content?.parts ?? [];
      return {
        reasoning: parts
          .filter((p) => p.thought === true)
          .map((p) => p.text ?? '')
          .join(''),
        tokens: r.usageMetadata?.thoughtsTokenCount ?? 0,
      };
    },
  };
  for (const [clientName, ask] of Object.entries(asked)) {
    for (const model of Object.values(PROVIDERS)) {
      test(`${clientName} <- ${model}`, async () => {
        const { reasoning, tokens } = await ask(model);
        assert.equal(reasoning, 'Thinking about: why is the sky blue.');
        assert.ok(tokens > 0, `reasoning tokens ${tokens}`);
      });
    }
  }
});

describe('parallel tool calls keep their order and arguments across families', () => {
  const question = 'What is the weather in Kyoto and the weather in Paris?';
  const places = ['Kyoto', 'Paris'];
  for (const [clientName, makeClient] of Object.entries(CLIENTS)) {
    for (const model of Object.values(PROVIDERS)) {
      test(`${clientName} <- ${model}: two calls, streamed`, async () => {
        const calls = await makeClient().toolCalls(model, question);
        assert.deepEqual(
          calls.map((c) => [c.name, (c.args as { location?: string }).location]),
          places.map((p) => ['get_weather', p]),
        );
      });
    }
  }
});
