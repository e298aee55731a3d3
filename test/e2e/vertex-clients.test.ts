// Claude and Gemini on Google Vertex AI through the shipped vertex.conf, with each official client (openai
// chat and Responses, @anthropic-ai/sdk, @google/genai): plain, streamed, a tool call and structured
// output against both publishers of a simulator that accepts only the access tokens its own token
// endpoint issued to the service account. Every reply is billed with the usage the upstream reported
// (the upstream request is sent again to the simulator, whose replies are deterministic); counting goes
// to Vertex's counting endpoints and is never billed; upstream errors reach each client in its own shape.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { ApiError, GoogleGenAI, Type } from '@google/genai';
import OpenAI from 'openai';
import type { RecordedRequest } from '../../sim/upstream/types.ts';
import { type BillingStack, startBillingStack } from '../support/billing-stack.ts';
import { cloudSimEnv, SIM_LOCATION, SIM_PROJECT } from '../support/cloud-sim-env.ts';
import { ACCESS_KEY } from '../support/stack.ts';

const PROJECT = SIM_PROJECT;
const LOCATION = SIM_LOCATION;
const CLAUDE = 'claude-sonnet-5@20261001';
const GEMINI = 'gemini-3.8-flash';
const MODELS_YAML = `models:
  vertex-claude: { providers: [{ provider: vertex, model: "${CLAUDE}" }] }
  vertex-gemini: { providers: [{ provider: vertex, model: ${GEMINI} }] }
  vertex-embedding: { providers: [{ provider: vertex, model: gemini-embedding-001 }] }
  "claude-*": { providers: [vertex] }
  "gemini-*": { providers: [vertex] }
`;
/** Client-facing model -> the publisher path prefix its requests must reach. */
const MODELS = {
  'vertex-claude': `/v1/projects/${PROJECT}/locations/${LOCATION}/publishers/anthropic/models/${CLAUDE}:`,
  'vertex-gemini': `/v1/projects/${PROJECT}/locations/${LOCATION}/publishers/google/models/${GEMINI}:`,
} as const;
type Model = keyof typeof MODELS;

let stack: BillingStack;
let seq = 0;

before(async () => {
  stack = await startBillingStack({
    modelsYaml: MODELS_YAML,
    simEnv: cloudSimEnv,
  });
});
after(async () => {
  await stack?.close();
});

function nextId(): string {
  return `vertex-e2e-${++seq}-${Date.now()}`;
}

// --- the four clients --------------------------------------------------------------------------------

interface Outcome {
  readonly text: string;
  readonly calls: { name: string; args: unknown }[];
}
type Mode = 'plain' | 'stream' | 'tools' | 'structured';

const weatherSchema = {
  type: 'object',
  properties: { location: { type: 'string' } },
  required: ['location'],
};
const jsonSchema = {
  type: 'object',
  properties: { city: { type: 'string' }, celsius: { type: 'number' } },
  required: ['city', 'celsius'],
  additionalProperties: false,
};
const PROMPT: Record<Mode, string> = {
  plain: 'hello vertex plain',
  stream: 'hello vertex stream',
  tools: 'What is the weather in Kyoto?',
  structured: 'Kyoto weather as JSON',
};

interface VertexClient {
  run(mode: Mode, model: string, rid: string): Promise<Outcome>;
  count(model: string, rid: string): Promise<number>;
  /** The error's status and the gateway's code when it has one, checking the client's own shape. */
  failed(err: unknown): { status: number; code: unknown };
}

function chatClient(): VertexClient {
  const client = (rid: string) =>
    new OpenAI({
      apiKey: ACCESS_KEY,
      baseURL: `${stack.url}/v1`,
      maxRetries: 0,
      defaultHeaders: { 'x-router-request-id': rid },
    });
  return {
    async run(mode, model, rid) {
      const messages = [{ role: 'user' as const, content: PROMPT[mode] }];
      const c = client(rid);
      if (mode === 'plain' || mode === 'structured') {
        const r = await c.chat.completions.create({
          model,
          messages,
          ...(mode === 'structured'
            ? {
                response_format: {
                  type: 'json_schema' as const,
                  json_schema: { name: 'weather', schema: jsonSchema, strict: true },
                },
              }
            : {}),
        });
        return { text: r.choices[0]?.message.content ?? '', calls: [] };
      }
      const r = await c.chat.completions
        .stream({
          model,
          messages,
          stream_options: { include_usage: true },
          ...(mode === 'tools'
            ? { tools: [{ type: 'function', function: { name: 'get_weather', parameters: weatherSchema } }] }
            : {}),
        })
        .finalChatCompletion();
      const calls = (r.choices[0]?.message.tool_calls ?? []).flatMap((call) =>
        call.type === 'function'
          ? [{ name: call.function.name, args: JSON.parse(call.function.arguments) }]
          : [],
      );
      return { text: r.choices[0]?.message.content ?? '', calls };
    },
    count: () => Promise.reject(new Error('chat completions has no counting endpoint')),
    failed(err) {
      assert.ok(err instanceof OpenAI.APIError, String(err));
      assert.equal(typeof (err.error as { message?: unknown }).message, 'string');
      return { status: err.status ?? 0, code: err.code };
    },
  };
}

function responsesClient(): VertexClient {
  const client = (rid: string) =>
    new OpenAI({
      apiKey: ACCESS_KEY,
      baseURL: `${stack.url}/v1`,
      maxRetries: 0,
      defaultHeaders: { 'x-router-request-id': rid },
    });
  return {
    async run(mode, model, rid) {
      const c = client(rid);
      const input = PROMPT[mode];
      let r: OpenAI.Responses.Response;
      if (mode === 'plain') r = await c.responses.create({ model, input });
      else if (mode === 'structured')
        r = await c.responses.create({
          model,
          input,
          text: { format: { type: 'json_schema', name: 'weather', schema: jsonSchema, strict: true } },
        });
      else
        r = await c.responses
          .stream({
            model,
            input,
            ...(mode === 'tools'
              ? {
                  tools: [
                    {
                      type: 'function' as const,
                      name: 'get_weather',
                      parameters: weatherSchema,
                      strict: false,
                    },
                  ],
                }
              : {}),
          })
          .finalResponse();
      assert.equal(r.status, 'completed');
      const calls = r.output.flatMap((item) =>
        item.type === 'function_call' ? [{ name: item.name, args: JSON.parse(item.arguments) }] : [],
      );
      return { text: r.output_text, calls };
    },
    async count(model, rid) {
      const r = await client(rid).responses.inputTokens.count({ model, input: PROMPT.plain });
      return r.input_tokens;
    },
    failed(err) {
      assert.ok(err instanceof OpenAI.APIError, String(err));
      assert.equal(typeof (err.error as { message?: unknown }).message, 'string');
      return { status: err.status ?? 0, code: err.code };
    },
  };
}

function anthropicClient(): VertexClient {
  const client = (rid: string) =>
    new Anthropic({
      apiKey: ACCESS_KEY,
      baseURL: stack.url,
      maxRetries: 0,
      defaultHeaders: { 'x-router-request-id': rid },
    });
  const text = (m: Anthropic.Message) => m.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
  return {
    async run(mode, model, rid) {
      const c = client(rid);
      const base = { model, max_tokens: 500, messages: [{ role: 'user' as const, content: PROMPT[mode] }] };
      if (mode === 'plain') return { text: text(await c.messages.create(base)), calls: [] };
      if (mode === 'structured')
        return {
          text: text(
            await c.messages.create({
              ...base,
              output_config: { format: { type: 'json_schema', schema: jsonSchema } },
            }),
          ),
          calls: [],
        };
      const m = await c.messages
        .stream({
          ...base,
          ...(mode === 'tools'
            ? { tools: [{ name: 'get_weather', input_schema: weatherSchema as Anthropic.Tool.InputSchema }] }
            : {}),
        })
        .finalMessage();
      const calls = m.content.flatMap((b) =>
        b.type === 'tool_use' ? [{ name: b.name, args: b.input }] : [],
      );
      return { text: text(m), calls };
    },
    async count(model, rid) {
      const r = await client(rid).messages.countTokens({
        model,
        messages: [{ role: 'user', content: PROMPT.plain }],
      });
      return r.input_tokens;
    },
    failed(err) {
      assert.ok(err instanceof Anthropic.APIError, String(err));
      const body = err.error as { type?: unknown; error?: { code?: unknown } };
      assert.equal(body.type, 'error');
      return { status: err.status ?? 0, code: body.error?.code };
    },
  };
}

function geminiClient(): VertexClient {
  const client = (rid: string) =>
    new GoogleGenAI({
      apiKey: ACCESS_KEY,
      httpOptions: { baseUrl: stack.url, headers: { 'x-router-request-id': rid } },
    });
  return {
    async run(mode, model, rid) {
      const c = client(rid);
      const contents = PROMPT[mode];
      if (mode === 'plain') {
        const r = await c.models.generateContent({ model, contents });
        return { text: r.text ?? '', calls: [] };
      }
      if (mode === 'structured') {
        const r = await c.models.generateContent({
          model,
          contents,
          config: { responseMimeType: 'application/json', responseJsonSchema: jsonSchema },
        });
        return { text: r.text ?? '', calls: [] };
      }
      const config =
        mode === 'tools'
          ? {
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
            }
          : {};
      let text = '';
      const calls: { name: string; args: unknown }[] = [];
      for await (const chunk of await c.models.generateContentStream({ model, contents, config })) {
        text += chunk.text ?? '';
        for (const call of chunk.functionCalls ?? []) calls.push({ name: call.name ?? '', args: call.args });
      }
      return { text, calls };
    },
    async count(model, rid) {
      const r = await client(rid).models.countTokens({ model, contents: PROMPT.plain });
      return r.totalTokens ?? -1;
    },
    failed(err) {
      assert.ok(err instanceof ApiError, String(err));
      const body = JSON.parse(err.message) as {
        error?: { status?: unknown; details?: { reason?: unknown }[] };
      };
      assert.equal(typeof body.error?.status, 'string');
      return { status: err.status, code: body.error?.details?.[0]?.reason };
    },
  };
}

const CLIENTS: Record<string, () => VertexClient> = {
  'chat completions (openai)': chatClient,
  'responses (openai)': responsesClient,
  'messages (@anthropic-ai/sdk)': anthropicClient,
  'generateContent (@google/genai)': geminiClient,
};

// --- what the upstream reported ----------------------------------------------------------------------

interface Counts {
  input: number;
  output: number;
  cacheRead: number;
}
type Json = Record<string, unknown>;

const num = (v: unknown): number => (typeof v === 'number' ? v : 0);
const rec = (v: unknown): Json =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Json) : {};

/** Usage as Anthropic's and Gemini's wires report it, read independently of the gateway's presets. */
function reportedCounts(text: string, contentType: string): Counts {
  const docs = contentType.includes('event-stream')
    ? text
        .split(/\r?\n/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => rec(JSON.parse(l.slice(5))))
    : [rec(JSON.parse(text))];
  const c: Counts = { input: 0, output: 0, cacheRead: 0 };
  for (const doc of docs) {
    const a = doc.type === 'message_start' ? rec(rec(doc.message).usage) : rec(doc.usage);
    if ('input_tokens' in a) {
      c.input = num(a.input_tokens);
      c.cacheRead = num(a.cache_read_input_tokens);
    }
    if ('output_tokens' in a) c.output = num(a.output_tokens);
    const g = rec(doc.usageMetadata);
    if ('promptTokenCount' in g) {
      c.input = num(g.promptTokenCount);
      c.output = num(g.candidatesTokenCount) + num(g.thoughtsTokenCount);
      c.cacheRead = num(g.cachedContentTokenCount);
    }
  }
  return c;
}

/** The last request the gateway sent to Vertex. */
function lastVertexRequest(): RecordedRequest {
  const found = stack.upstream.requests.findLast((r) => r.path.startsWith('/v1/projects/'));
  assert.ok(found, 'the gateway called Vertex');
  return found;
}

/** The same upstream request sent again, straight to the simulator (same token, same bytes). */
async function replay(recorded: RecordedRequest): Promise<Response> {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(recorded.headers)) {
    if (['host', 'content-length', 'connection', 'transfer-encoding'].includes(k)) continue;
    if (typeof v === 'string') headers[k] = v;
  }
  return fetch(`${stack.upstream.url}${recorded.path}`, {
    method: recorded.method,
    headers,
    body: new Uint8Array(recorded.body),
  });
}

async function assertBilledAsReported(rid: string, model: string, recorded: RecordedRequest): Promise<void> {
  const res = await replay(recorded);
  assert.equal(res.status, 200);
  const counts = reportedCounts(await res.text(), res.headers.get('content-type') ?? '');
  assert.ok(counts.input > 0 && counts.output > 0, JSON.stringify(counts));
  const event = await stack.eventFor(rid);
  assert.equal(event.raw_json.provider, 'vertex');
  assert.equal(event.raw_json.model, model);
  assert.equal(event.raw_json.usage_stage, 'upstream');
  const usage = event.raw_json.usage as unknown as Record<string, number | undefined>;
  assert.equal(usage.input_tokens, counts.input, 'input tokens as the upstream reported');
  assert.equal(usage.output_tokens, counts.output, 'output tokens as the upstream reported');
  assert.equal(usage.cache_read_tokens ?? 0, counts.cacheRead);
  assert.ok(event['x-billing']?.pricing_hints, 'priced by the shipped pricing file');
}

// --- the matrix --------------------------------------------------------------------------------------

const SUFFIX: Record<Mode, RegExp> = {
  plain: /:(rawPredict|generateContent)$/,
  structured: /:(rawPredict|generateContent)$/,
  stream: /:(streamRawPredict|streamGenerateContent\?alt=sse)$/,
  tools: /:(streamRawPredict|streamGenerateContent\?alt=sse)$/,
};

for (const [clientName, makeClient] of Object.entries(CLIENTS)) {
  describe(`${clientName} client on Vertex`, () => {
    for (const model of Object.keys(MODELS) as Model[]) {
      test(`${model}: plain, streamed, tool call and structured output, each billed as the upstream reported`, async () => {
        const client = makeClient();
        for (const mode of ['plain', 'stream', 'tools', 'structured'] as const) {
          const rid = nextId();
          const out = await client.run(mode, model, rid);
          const recorded = lastVertexRequest();
          assert.ok(recorded.path.startsWith(MODELS[model]), `${mode}: ${recorded.path}`);
          assert.match(recorded.path, SUFFIX[mode], mode);
          assert.match(recorded.headers.authorization ?? '', /^Bearer ya29\.sim\./);
          if (mode === 'plain' || mode === 'stream')
            assert.match(out.text, new RegExp(`^Echo: ${PROMPT[mode]}\\.`), mode);
          if (mode === 'tools') {
            assert.deepEqual(
              out.calls.map((c) => [c.name, (c.args as { location?: string }).location]),
              [['get_weather', 'Kyoto']],
            );
          }
          if (mode === 'structured')
            assert.deepEqual(JSON.parse(out.text), { city: PROMPT.structured, celsius: 42 });
          await assertBilledAsReported(rid, model, recorded);
        }
      });

      test(`${model}: upstream 400, 429, 500, 503 and a mid-stream failure in the client's own error shape, with the upstream's message`, async () => {
        const client = makeClient();
        const failing = model === 'vertex-claude' ? 'claude-sonnet-5' : GEMINI;
        for (const status of [400, 429, 500, 503]) {
          for (const mode of ['plain', 'stream'] as const) {
            const err = await client.run(mode, `${failing}-fail-${status}`, nextId()).then(
              () => assert.fail(`fail-${status} ${mode} succeeded`),
              (e: unknown) => e,
            );
            const failed = client.failed(err);
            assert.equal(failed.status, status, `${mode} ${status}`);
            assert.match(String((err as Error).message), /Simulated/);
            // Vertex's RESOURCE_EXHAUSTED is the provider throttling, told apart from the gateway's limits.
            if (status === 429) assert.equal(failed.code, 'upstream_rate_limited', mode);
          }
        }
        // A stream the upstream fails mid-way (its in-stream error event) is an error, never a clean end.
        await assert.rejects(client.run('stream', `${failing}-fail-midstream`, nextId()));
      });
    }
  });
}

describe('native pairs change only what Vertex needs', () => {
  test('Anthropic Messages on Claude: path, anthropic_version and the token; anthropic-beta as it is', async () => {
    const body = {
      model: 'vertex-claude',
      max_tokens: 300,
      system: 'You are terse.',
      temperature: 0.2,
      metadata: { user_id: 'u-1' },
      messages: [{ role: 'user', content: 'native vertex claude' }],
    };
    const res = await fetch(`${stack.url}/v1/messages`, {
      method: 'POST',
      headers: {
        'x-api-key': ACCESS_KEY,
        'anthropic-version': '2023-06-01',
        'anthropic-beta': 'context-1m-2025-08-07',
        'content-type': 'application/json',
      },
      body: JSON.stringify(body),
    });
    assert.equal(res.status, 200);
    const reply = (await res.json()) as { model: string; content: { text: string }[] };
    assert.match(reply.content[0]!.text, /^Echo: native vertex claude\./);
    const recorded = lastVertexRequest();
    assert.equal(recorded.path, `${MODELS['vertex-claude']}rawPredict`);
    const { model: _model, ...rest } = body;
    assert.deepEqual(recorded.json, { ...rest, anthropic_version: 'vertex-2023-10-16' });
    assert.equal(recorded.headers['anthropic-beta'], 'context-1m-2025-08-07');
    assert.equal(recorded.headers['x-api-key'], undefined, "the client's key never goes upstream");
  });

  test('Gemini generateContent on Gemini: the body as sent, the reply as Vertex answered', async () => {
    const body = {
      contents: [{ role: 'user', parts: [{ text: 'native vertex gemini' }] }],
      generationConfig: { temperature: 0.1, maxOutputTokens: 200 },
      safetySettings: [{ category: 'HARM_CATEGORY_HARASSMENT', threshold: 'BLOCK_NONE' }],
    };
    const res = await fetch(`${stack.url}/v1beta/models/vertex-gemini:generateContent`, {
      method: 'POST',
      headers: { 'x-goog-api-key': ACCESS_KEY, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    assert.equal(res.status, 200);
    const text = await res.text();
    const recorded = lastVertexRequest();
    assert.equal(recorded.path, `${MODELS['vertex-gemini']}generateContent`);
    assert.deepEqual(recorded.json, body);
    assert.equal(recorded.headers['x-goog-api-key'], undefined, "the client's key never goes upstream");
    const direct = await replay(recorded);
    const upstream = (await direct.json()) as Json;
    const served = JSON.parse(text) as Json;
    delete upstream.responseId;
    delete served.responseId;
    assert.deepEqual(served, upstream);
  });
});

test('embeddings through :predict: vectors of the asked dimensions, billed with the token counts Vertex reported', async () => {
  const rid = nextId();
  const client = new OpenAI({
    apiKey: ACCESS_KEY,
    baseURL: `${stack.url}/v1`,
    maxRetries: 0,
    defaultHeaders: { 'x-router-request-id': rid },
  });
  const input = ['the first text to embed', 'a second one'];
  // The SDK asks for base64 and decodes it.
  const r = await client.embeddings.create({ model: 'vertex-embedding', input, dimensions: 8 });
  assert.deepEqual(
    r.data.map((d) => [d.index, d.embedding.length]),
    [
      [0, 8],
      [1, 8],
    ],
  );
  const recorded = lastVertexRequest();
  assert.equal(
    recorded.path,
    `/v1/projects/${PROJECT}/locations/${LOCATION}/publishers/google/models/gemini-embedding-001:predict`,
  );
  assert.deepEqual(recorded.json, {
    instances: input.map((content) => ({ content })),
    parameters: { outputDimensionality: 8 },
  });
  const reply = (await (await replay(recorded)).json()) as {
    predictions: { embeddings: { statistics: { token_count: number }; values: number[] } }[];
  };
  const tokens = reply.predictions.reduce((sum, p) => sum + p.embeddings.statistics.token_count, 0);
  assert.ok(tokens > 0);
  assert.equal(r.usage.prompt_tokens, tokens);
  const first = new Float32Array(reply.predictions[0]!.embeddings.values);
  assert.deepEqual(r.data[0]!.embedding, [...first], 'the vector Vertex sent');
  const event = await stack.eventFor(rid);
  assert.equal(event.raw_json.usage_stage, 'upstream');
  assert.equal((event.raw_json.usage as unknown as Record<string, number>).input_tokens, tokens);
  assert.ok(event['x-billing']?.pricing_hints, 'priced by the shipped pricing file');
});

describe("Claude Code's turn on Vertex: thinking, cache markers, tools, a beta, then the tool's result", () => {
  const body = {
    max_tokens: 32000,
    stream: true as const,
    thinking: { type: 'enabled' as const, budget_tokens: 4000 },
    metadata: { user_id: 'user_abc_account_def_session_123' },
    system: [
      { type: 'text' as const, text: 'You are Claude Code, a coding agent.' },
      { type: 'text' as const, text: 'Read files first.', cache_control: { type: 'ephemeral' as const } },
    ],
    tools: [
      {
        name: 'get_weather',
        description: 'Weather',
        input_schema: { type: 'object' as const, properties: { location: { type: 'string' } } },
        cache_control: { type: 'ephemeral' as const },
      },
    ],
    messages: [{ role: 'user' as const, content: 'What is the weather in Kyoto?' }],
  };
  for (const model of Object.keys(MODELS) as Model[]) {
    test(model, async () => {
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
      const turn = {
        ...body,
        messages: [
          ...body.messages,
          { role: 'assistant' as const, content: first.content },
          {
            role: 'user' as const,
            content: [{ type: 'tool_result' as const, tool_use_id: call.id, content: '21C and sunny' }],
          },
        ],
      };
      const second = await client.messages.stream({ model, ...turn }).finalMessage();
      assert.equal(second.stop_reason, 'end_turn');
      if (model === 'vertex-claude') {
        // Claude gets the turn as the agent sent it: thinking blocks with their signatures included.
        const recorded = lastVertexRequest();
        assert.deepEqual(
          recorded.json,
          JSON.parse(JSON.stringify({ ...turn, anthropic_version: 'vertex-2023-10-16' })),
        );
        assert.equal(recorded.headers['anthropic-beta'], 'interleaved-thinking-2025-05-14');
        assert.ok(first.content.some((b) => b.type === 'thinking' && b.signature.length > 0));
      }
      const counted = await client.messages.countTokens({
        model,
        messages: turn.messages,
        tools: body.tools,
      });
      assert.ok(counted.input_tokens > 0);
    });
  }
});

describe("counting: Vertex's counting endpoints, never billed", () => {
  for (const [clientName, makeClient] of Object.entries(CLIENTS)) {
    if (clientName.startsWith('chat')) continue;
    for (const model of Object.keys(MODELS) as Model[]) {
      test(`${clientName} -> ${model}: the upstream's count`, async () => {
        const rid = nextId();
        const tokens = await makeClient().count(model, rid);
        const recorded = lastVertexRequest();
        assert.equal(
          recorded.path,
          model === 'vertex-claude'
            ? `/v1/projects/${PROJECT}/locations/${LOCATION}/publishers/anthropic/models/count-tokens:rawPredict`
            : `${MODELS[model]}countTokens`,
        );
        const reply = (await (await replay(recorded)).json()) as {
          input_tokens?: number;
          totalTokens?: number;
        };
        assert.ok(tokens > 0);
        assert.equal(tokens, reply.input_tokens ?? reply.totalTokens);
        if (model === 'vertex-claude') {
          const sent = recorded.json as Json;
          assert.equal(sent.model, CLAUDE);
          assert.equal(sent.anthropic_version, 'vertex-2023-10-16');
        } else assert.equal((recorded.json as Json).generateContentRequest, undefined);
        // Events go out in order: once a later request's event is in, a count's would have been too.
        const later = nextId();
        await makeClient().run('plain', model, later);
        await stack.eventFor(later);
        assert.equal(
          stack.billing.events.some((e) => e.external_event_id === rid),
          false,
          'a count is not billed',
        );
      });
    }
  }
});

test("Vertex's throttling counts in router_requests_total under the provider (RouterUpstreamThrottled's series)", async () => {
  const text = await (await fetch(`${stack.url}/metrics`)).text();
  const throttled = text
    .split('\n')
    .filter((l) => l.startsWith('router_requests_total{provider="vertex",') && l.includes('status="429"'))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  // Plain and streamed, per client and publisher, in the error tests above.
  assert.equal(throttled, 2 * 2 * Object.keys(CLIENTS).length);
});

test('no access token or key material in the logs', () => {
  const text = JSON.stringify(stack.logs);
  assert.doesNotMatch(text, /ya29\./);
  assert.doesNotMatch(text, /PRIVATE KEY/);
});
