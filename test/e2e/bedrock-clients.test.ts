// Claude on AWS Bedrock through the shipped bedrock.conf (InvokeModel) and bedrock-converse.conf
// (Converse), with each official client (openai chat and Responses, @anthropic-ai/sdk, @google/genai):
// plain, streamed (AWS event streams relayed as the client's SSE), a tool call and structured output,
// against a simulator that refuses any request whose SigV4 signature it cannot verify. Every reply is
// billed with the usage the upstream reported (the signed upstream request is sent again to the
// simulator, whose replies are deterministic); throttling is 429 upstream_rate_limited and a validation
// error 400 in each client's shape; a mid-stream exception ends the stream with the client's error and
// is billed by the mid-stream rule; counting goes to CountTokens and is never billed.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { ApiError, GoogleGenAI, Type } from '@google/genai';
import { EventStreamCodec } from '@smithy/eventstream-codec';
import { fromUtf8, toUtf8 } from '@smithy/util-utf8';
import OpenAI from 'openai';
import type { RecordedRequest } from '../../sim/upstream/types.ts';
import { type BillingStack, startBillingStack } from '../support/billing-stack.ts';
import { ACCESS_KEY, type Stack, startStack } from '../support/stack.ts';

const AWS = { accessKeyId: 'AKIDBEDROCKE2E', secretAccessKey: 'bedrock-e2e-secret', region: 'us-east-1' };
const CLAUDE = 'us.anthropic.claude-sonnet-5-v1:0';
/** The two shipped providers and the API each sends Claude to. */
const ROUTES = {
  bedrock: { invoke: 'invoke', stream: 'invoke-with-response-stream' },
  'bedrock-converse': { invoke: 'converse', stream: 'converse-stream' },
} as const;
type Route = keyof typeof ROUTES;

function awsEnv(secret: string): Record<string, string> {
  return {
    AWS_ACCESS_KEY_ID: AWS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: secret,
    AWS_REGION: AWS.region,
  };
}

let stack: BillingStack;
let seq = 0;

before(async () => {
  stack = await startBillingStack({
    sim: { aws: AWS },
    env: awsEnv(AWS.secretAccessKey),
    simEnv: async (sim) => ({
      ROUTER_PROVIDER_BEDROCK_BASE_URL: sim.url,
      ROUTER_PROVIDER_BEDROCK_CONVERSE_BASE_URL: sim.url,
    }),
  });
});
after(async () => {
  await stack?.close();
});

function nextId(): string {
  return `bedrock-e2e-${++seq}-${Date.now()}`;
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
  plain: 'hello bedrock plain',
  stream: 'hello bedrock stream',
  tools: 'What is the weather in Kyoto?',
  structured: 'Kyoto weather as JSON',
};

interface Call {
  readonly route: Route;
  readonly rid: string;
}

interface BedrockClient {
  run(mode: Mode, model: string, call: Call): Promise<Outcome>;
  count(model: string, call: Call): Promise<number>;
  /** The error's status and catalogue code, checking it is in this client's own shape. */
  failed(err: unknown): { status: number; code: string | undefined };
}

const headers = (call: Call) => ({ 'x-router-request-id': call.rid, 'x-router-provider': call.route });

function openai(call: Call): OpenAI {
  return new OpenAI({
    apiKey: ACCESS_KEY,
    baseURL: `${stack.url}/v1`,
    maxRetries: 0,
    defaultHeaders: headers(call),
  });
}

function openaiFailed(err: unknown): { status: number; code: string | undefined } {
  assert.ok(err instanceof OpenAI.APIError, String(err));
  assert.equal(typeof (err.error as { message?: unknown }).message, 'string');
  return { status: err.status ?? 0, code: err.code ?? undefined };
}

function chatClient(): BedrockClient {
  return {
    async run(mode, model, call) {
      const messages = [{ role: 'user' as const, content: PROMPT[mode] }];
      const c = openai(call);
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
      const calls = (r.choices[0]?.message.tool_calls ?? []).flatMap((c) =>
        c.type === 'function' ? [{ name: c.function.name, args: JSON.parse(c.function.arguments) }] : [],
      );
      return { text: r.choices[0]?.message.content ?? '', calls };
    },
    count: () => Promise.reject(new Error('chat completions has no counting endpoint')),
    failed: openaiFailed,
  };
}

function responsesClient(): BedrockClient {
  return {
    async run(mode, model, call) {
      const c = openai(call);
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
    async count(model, call) {
      return (await openai(call).responses.inputTokens.count({ model, input: PROMPT.plain })).input_tokens;
    },
    failed: openaiFailed,
  };
}

function anthropicClient(): BedrockClient {
  const client = (call: Call) =>
    new Anthropic({ apiKey: ACCESS_KEY, baseURL: stack.url, maxRetries: 0, defaultHeaders: headers(call) });
  const text = (m: Anthropic.Message) => m.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
  return {
    async run(mode, model, call) {
      const c = client(call);
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
    async count(model, call) {
      const r = await client(call).messages.countTokens({
        model,
        messages: [{ role: 'user', content: PROMPT.plain }],
      });
      return r.input_tokens;
    },
    failed(err) {
      assert.ok(err instanceof Anthropic.APIError, String(err));
      const body = err.error as { type?: unknown; error?: { code?: string } };
      assert.equal(body.type, 'error');
      return { status: err.status ?? 0, code: body.error?.code };
    },
  };
}

function geminiClient(): BedrockClient {
  const client = (call: Call) =>
    new GoogleGenAI({ apiKey: ACCESS_KEY, httpOptions: { baseUrl: stack.url, headers: headers(call) } });
  return {
    async run(mode, model, call) {
      const c = client(call);
      const contents = PROMPT[mode];
      if (mode === 'plain')
        return { text: (await c.models.generateContent({ model, contents })).text ?? '', calls: [] };
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
        for (const fc of chunk.functionCalls ?? []) calls.push({ name: fc.name ?? '', args: fc.args });
      }
      return { text, calls };
    },
    async count(model, call) {
      return (await client(call).models.countTokens({ model, contents: PROMPT.plain })).totalTokens ?? -1;
    },
    failed(err) {
      assert.ok(err instanceof ApiError, String(err));
      const body = JSON.parse(err.message) as {
        error?: { status?: unknown; details?: { reason?: string }[] };
      };
      assert.equal(typeof body.error?.status, 'string');
      return { status: err.status, code: body.error?.details?.find((d) => d.reason)?.reason };
    },
  };
}

const CLIENTS: Record<string, () => BedrockClient> = {
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
  cacheWrite: number;
}
type Json = Record<string, unknown>;

const num = (v: unknown): number => (typeof v === 'number' ? v : 0);
const rec = (v: unknown): Json =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Json) : {};
const codec = new EventStreamCodec(toUtf8, fromUtf8);

/** The JSON payloads of an AWS event stream's messages; a `chunk`'s is the Anthropic event it carries. */
function eventStreamPayloads(bytes: Buffer): Json[] {
  const out: Json[] = [];
  for (let at = 0; at < bytes.length; ) {
    const length = bytes.readUInt32BE(at);
    const { headers, body } = codec.decode(bytes.subarray(at, at + length));
    at += length;
    const payload = rec(JSON.parse(Buffer.from(body).toString('utf8')));
    out.push(
      headers[':event-type']?.value === 'chunk'
        ? rec(JSON.parse(Buffer.from(String(payload.bytes), 'base64').toString('utf8')))
        : payload,
    );
  }
  return out;
}

/** Usage as Bedrock reports it (InvokeModel's Anthropic usage and invocation metrics, Converse usage). */
function reportedCounts(bytes: Buffer, contentType: string): Counts {
  const docs = contentType.includes('eventstream')
    ? eventStreamPayloads(bytes)
    : [rec(JSON.parse(bytes.toString('utf8')))];
  const c: Counts = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 };
  for (const doc of docs) {
    const metrics = rec(doc['amazon-bedrock-invocationMetrics']);
    const usage = doc.type === 'message_start' ? rec(rec(doc.message).usage) : rec(doc.usage);
    if ('inputTokenCount' in metrics) {
      c.input = num(metrics.inputTokenCount);
      c.output = num(metrics.outputTokenCount);
      c.cacheRead = num(metrics.cacheReadInputTokenCount);
      c.cacheWrite = num(metrics.cacheWriteInputTokenCount);
    } else if ('inputTokens' in usage) {
      c.input = num(usage.inputTokens);
      c.output = num(usage.outputTokens);
      c.cacheRead = num(usage.cacheReadInputTokens);
      c.cacheWrite = num(usage.cacheWriteInputTokens);
    } else {
      if ('input_tokens' in usage) {
        c.input = num(usage.input_tokens);
        c.cacheRead = num(usage.cache_read_input_tokens);
        c.cacheWrite = num(usage.cache_creation_input_tokens);
      }
      if ('output_tokens' in usage) c.output = num(usage.output_tokens);
    }
  }
  return c;
}

/**
 * The last call to Bedrock; with `modelCall`, the last model call (an Anthropic client's Converse stream
 * also asks CountTokens alongside, for message_start, and that request may land last).
 */
function lastBedrockRequest(modelCall = false): RecordedRequest {
  const found = stack.upstream.requests.findLast(
    (r) => r.path.startsWith('/model/') && !(modelCall && r.path.endsWith('/count-tokens')),
  );
  assert.ok(found, 'the gateway called Bedrock');
  return found;
}

/** The same signed request sent again, straight to the simulator (it verifies the signature again). */
async function replay(recorded: RecordedRequest): Promise<Response> {
  const h: Record<string, string> = {};
  for (const [k, v] of Object.entries(recorded.headers)) {
    if (['content-length', 'connection', 'transfer-encoding'].includes(k)) continue;
    if (typeof v === 'string') h[k] = v;
  }
  return fetch(`${stack.upstream.url}${recorded.path}`, {
    method: recorded.method,
    headers: h,
    body: new Uint8Array(recorded.body),
  });
}

async function assertBilledAsReported(rid: string, route: Route, recorded: RecordedRequest): Promise<Counts> {
  const res = await replay(recorded);
  assert.equal(res.status, 200);
  const counts = reportedCounts(Buffer.from(await res.arrayBuffer()), res.headers.get('content-type') ?? '');
  assert.ok(counts.input > 0 && counts.output > 0, JSON.stringify(counts));
  const event = await stack.eventFor(rid);
  assert.equal(event.raw_json.provider, route);
  assert.equal(event.raw_json.usage_stage, 'upstream');
  const usage = event.raw_json.usage as unknown as Record<string, number | undefined>;
  // Bedrock's input count leaves the prompt cache out, as Anthropic's does; the event's input is all of it.
  assert.equal(
    usage.input_tokens,
    counts.input + counts.cacheRead + counts.cacheWrite,
    'input tokens as the upstream reported',
  );
  assert.equal(usage.output_tokens, counts.output, 'output tokens as the upstream reported');
  assert.equal(usage.cache_read_tokens ?? 0, counts.cacheRead, 'cache reads');
  assert.equal(usage.cache_creation_tokens ?? 0, counts.cacheWrite, 'cache writes');
  return counts;
}

// --- the matrix --------------------------------------------------------------------------------------

const SEGMENT = encodeURIComponent(CLAUDE);

for (const [clientName, makeClient] of Object.entries(CLIENTS)) {
  describe(`${clientName} client on Bedrock`, () => {
    for (const route of Object.keys(ROUTES) as Route[]) {
      test(`${route}: plain, streamed, tool call and structured output, signed, billed as reported`, async () => {
        const client = makeClient();
        for (const mode of ['plain', 'stream', 'tools', 'structured'] as const) {
          const rid = nextId();
          const out = await client.run(mode, CLAUDE, { route, rid });
          const recorded = lastBedrockRequest(true);
          const action =
            mode === 'plain' || mode === 'structured' ? ROUTES[route].invoke : ROUTES[route].stream;
          assert.equal(recorded.path, `/model/${SEGMENT}/${action}`, mode);
          assert.match(recorded.headers.authorization ?? '', /^AWS4-HMAC-SHA256 Credential=AKIDBEDROCKE2E\//);
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
          await assertBilledAsReported(rid, route, recorded);
        }
      });

      test(`${route}: throttling is 429 upstream_rate_limited, a validation error 400, in the client's shape`, async () => {
        const client = makeClient();
        for (const [knob, status, code] of [
          ['429', 429, 'upstream_rate_limited'],
          ['400', 400, undefined],
        ] as const) {
          for (const mode of ['plain', 'stream'] as const) {
            const err = await client
              .run(mode, `us.anthropic.claude-fail-${knob}`, { route, rid: nextId() })
              .then(
                () => assert.fail(`fail-${knob} ${mode} succeeded`),
                (e: unknown) => e,
              );
            const seen = client.failed(err);
            assert.equal(seen.status, status, `${mode} ${knob}`);
            if (code !== undefined) assert.equal(seen.code, code, `${mode} ${knob}`);
            else assert.notEqual(seen.code, 'upstream_rate_limited');
            assert.match(String((err as Error).message), /Simulated/);
          }
        }
      });
    }
  });
}

describe('prompt cache reads and writes', () => {
  test('billed as Bedrock reported them, on both APIs, plain and streamed', async () => {
    const model = 'us.anthropic.claude-sonnet-5-cached-7-cachewrite-5-v1:0';
    for (const route of Object.keys(ROUTES) as Route[]) {
      for (const mode of ['plain', 'stream'] as const) {
        const rid = nextId();
        const prompt = 'a prompt long enough for a cache read and a cache write of a few tokens each';
        const c = openai({ route, rid });
        if (mode === 'plain')
          await c.chat.completions.create({ model, messages: [{ role: 'user', content: prompt }] });
        else
          await c.chat.completions
            .stream({
              model,
              messages: [{ role: 'user', content: prompt }],
              stream_options: { include_usage: true },
            })
            .finalChatCompletion();
        const counts = await assertBilledAsReported(rid, route, lastBedrockRequest(true));
        assert.deepEqual([counts.cacheRead, counts.cacheWrite], [7, 5], `${route} ${mode}`);
      }
    }
  });
});

describe('mid-stream exceptions and native requests', () => {
  test('an exception frame ends each client stream with its error and is billed as estimated', async () => {
    for (const [clientName, makeClient] of Object.entries(CLIENTS)) {
      for (const route of Object.keys(ROUTES) as Route[]) {
        const rid = nextId();
        const err = await makeClient()
          .run('stream', 'us.anthropic.claude-fail-midstream', { route, rid })
          .then(
            () => assert.fail(`${clientName} on ${route}: the stream did not fail`),
            (e: unknown) => e,
          );
        assert.match(
          String((err as Error).message),
          /Simulated model stream error/,
          `${clientName} ${route}`,
        );
        const event = await stack.eventFor(rid);
        assert.equal(event.raw_json.usage_stage, 'estimated', `${clientName} ${route}`);
        assert.ok(event.raw_json.usage.input_tokens > 0);
      }
    }
  });

  test('an Anthropic client on InvokeModel: the body as sent but model and stream, anthropic-beta as anthropic_beta', async () => {
    const body = {
      model: CLAUDE,
      max_tokens: 300,
      system: 'You are terse.',
      temperature: 0.2,
      metadata: { user_id: 'u-1' },
      messages: [{ role: 'user', content: 'native bedrock claude' }],
    };
    const res = await fetch(`${stack.url}/v1/messages`, {
      method: 'POST',
      headers: {
        'x-api-key': ACCESS_KEY,
        'anthropic-version': '2023-06-01',
        'anthropic-beta': 'context-1m-2025-08-07, interleaved-thinking-2025-05-14',
        'content-type': 'application/json',
      },
      body: JSON.stringify(body),
    });
    assert.equal(res.status, 200);
    const recorded = lastBedrockRequest();
    assert.equal(recorded.path, `/model/${SEGMENT}/invoke`);
    const { model: _model, ...rest } = body;
    assert.deepEqual(recorded.json, {
      ...rest,
      anthropic_version: 'bedrock-2023-05-31',
      anthropic_beta: ['context-1m-2025-08-07', 'interleaved-thinking-2025-05-14'],
    });
    assert.equal(recorded.headers['x-api-key'], undefined, "the client's key never goes upstream");
  });

  test('bedrock sends a model id that is not Claude through Converse', async () => {
    const model = 'amazon.nova-pro-v1:0';
    for (const mode of ['plain', 'stream'] as const) {
      const rid = nextId();
      const out = await chatClient().run(mode, model, { route: 'bedrock', rid });
      assert.match(out.text, new RegExp(`^Echo: ${PROMPT[mode]}\\.`), mode);
      const recorded = lastBedrockRequest();
      assert.equal(
        recorded.path,
        `/model/${encodeURIComponent(model)}/${mode === 'plain' ? 'converse' : 'converse-stream'}`,
      );
      await assertBilledAsReported(rid, 'bedrock', recorded);
    }
  });

  test('an inference-profile ARN is one percent-encoded, signed path segment', async () => {
    const arn = 'arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-5-v1:0';
    const res = await fetch(`${stack.url}/v1/messages`, {
      method: 'POST',
      headers: {
        'x-api-key': ACCESS_KEY,
        'anthropic-version': '2023-06-01',
        'x-router-provider': 'bedrock',
        'content-type': 'application/json',
      },
      body: JSON.stringify({ model: arn, max_tokens: 50, messages: [{ role: 'user', content: 'arn' }] }),
    });
    assert.equal(res.status, 200, await res.clone().text());
    assert.equal(lastBedrockRequest().path, `/model/${encodeURIComponent(arn)}/invoke`);
  });
});

describe('counting: Bedrock CountTokens, never billed', () => {
  for (const [clientName, makeClient] of Object.entries(CLIENTS)) {
    if (clientName.startsWith('chat')) continue;
    for (const route of Object.keys(ROUTES) as Route[]) {
      test(`${clientName} -> ${route}: the upstream's count`, async () => {
        const rid = nextId();
        const tokens = await makeClient().count(CLAUDE, { route, rid });
        const recorded = lastBedrockRequest();
        assert.equal(recorded.path, `/model/${SEGMENT}/count-tokens`);
        const input = rec(rec(recorded.json).input);
        assert.ok(route === 'bedrock' ? 'invokeModel' in input : 'converse' in input, JSON.stringify(input));
        const reply = (await (await replay(recorded)).json()) as { inputTokens?: number };
        assert.ok(tokens > 0);
        assert.equal(tokens, reply.inputTokens);
        // Events go out in order: once a later request's event is in, a count's would have been too.
        const later = nextId();
        await makeClient().run('plain', CLAUDE, { route, rid: later });
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

describe('a wrong secret', () => {
  let wrong: Stack;
  before(async () => {
    wrong = await startStack({
      sim: { aws: AWS },
      env: awsEnv('not-the-secret'),
      simEnv: async (sim) => ({ ROUTER_PROVIDER_BEDROCK_BASE_URL: sim.url }),
    });
  });
  after(() => wrong?.close());

  test('the upstream refuses the signature: 502 upstream_auth_failed, the secret nowhere in the reply', async () => {
    const res = await fetch(`${wrong.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ACCESS_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: CLAUDE, messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(res.status, 502);
    const text = await res.text();
    assert.equal((JSON.parse(text) as { error: { code: string } }).error.code, 'upstream_auth_failed');
    assert.equal(text.includes('not-the-secret'), false);
    assert.equal(wrong.sim.requests.at(-1)?.path, `/model/${SEGMENT}/invoke`);
  });
});

test("throttling counts in router_requests_total under the provider (RouterUpstreamThrottled's series)", async () => {
  const text = await (await fetch(`${stack.url}/metrics`)).text();
  for (const route of Object.keys(ROUTES)) {
    const throttled = text
      .split('\n')
      .filter((l) => l.startsWith(`router_requests_total{provider="${route}",`) && l.includes('status="429"'))
      .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
    // Two per client (plain and streamed) in the error tests above.
    assert.equal(throttled, 2 * Object.keys(CLIENTS).length, route);
  }
});

test('no secret or signature material in the logs', () => {
  const text = JSON.stringify(stack.logs);
  assert.doesNotMatch(text, new RegExp(AWS.secretAccessKey));
  assert.doesNotMatch(text, /Signature=[0-9a-f]{64}/);
});
