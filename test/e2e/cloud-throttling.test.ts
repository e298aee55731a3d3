// A cloud provider's throttling, for every client family on every cloud route (Bedrock InvokeModel,
// Bedrock Converse, Claude and Gemini on Vertex AI), with each official SDK and its retries off. Before
// the stream starts it is the gateway's 429 `upstream_rate_limited`, which each SDK raises as its own
// rate-limit error and which counts in router_requests_total under the provider (the series of
// RouterUpstreamThrottled); within a stream (a Bedrock `throttlingException` frame, Claude's
// `rate_limit_error` event, a Gemini 429 RESOURCE_EXHAUSTED chunk) the stream ends with the family's
// error event carrying that code, and the request is billed by the mid-stream rule.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { ApiError, GoogleGenAI } from '@google/genai';
import OpenAI from 'openai';
import { type BillingStack, startBillingStack, waitUntil } from '../support/billing-stack.ts';
import { cloudSimEnv } from '../support/cloud-sim-env.ts';
import { ACCESS_KEY } from '../support/stack.ts';

const AWS = { accessKeyId: 'AKIDTHROTTLEE2E', secretAccessKey: 'throttle-e2e-secret', region: 'us-east-1' };
const CODE = 'upstream_rate_limited';

/** Each cloud route: the provider the request names, and its model id before the simulator's knob. */
const ROUTES = {
  bedrock: { provider: 'bedrock', model: (knob: string) => `us.anthropic.claude-sonnet-5-${knob}-v1:0` },
  'bedrock-converse': {
    provider: 'bedrock-converse',
    model: (knob: string) => `us.anthropic.claude-sonnet-5-${knob}-v1:0`,
  },
  'vertex anthropic': { provider: 'vertex', model: (knob: string) => `claude-sonnet-5-${knob}` },
  'vertex gemini': { provider: 'vertex', model: (knob: string) => `gemini-3.8-flash-${knob}` },
} as const;
type Route = keyof typeof ROUTES;

let stack: BillingStack;
let seq = 0;

before(async () => {
  stack = await startBillingStack({
    sim: { aws: AWS },
    env: {
      AWS_ACCESS_KEY_ID: AWS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: AWS.secretAccessKey,
      AWS_REGION: AWS.region,
    },
    simEnv: cloudSimEnv,
  });
});
after(async () => {
  await stack?.close();
});

// --- the four clients --------------------------------------------------------------------------------

interface Call {
  readonly model: string;
  readonly provider: string;
  readonly rid: string;
}

/** What a failed call showed: the SDK's error, and whether the stream had delivered text before it. */
interface Failure {
  readonly err: unknown;
  readonly delivered: string;
}

interface ThrottledClient {
  /** Runs the call, plain or streamed, to its error. */
  fail(call: Call, stream: boolean): Promise<Failure>;
  /** Asserts the SDK's own rate-limit error of a 429 answered before any stream. */
  preStream(err: unknown): void;
  /** Asserts the family's error event of a stream that was throttled mid-way. */
  midStream(err: unknown): void;
}

const headers = (call: Call) => ({ 'x-router-request-id': call.rid, 'x-router-provider': call.provider });
const PROMPT = 'hello throttled cloud';

async function failure(run: (delivered: (text: string) => void) => Promise<unknown>): Promise<Failure> {
  let delivered = '';
  try {
    await run((text) => {
      delivered += text;
    });
  } catch (err) {
    return { err, delivered };
  }
  return assert.fail('the call succeeded');
}

function openai(call: Call): OpenAI {
  return new OpenAI({
    apiKey: ACCESS_KEY,
    baseURL: `${stack.url}/v1`,
    maxRetries: 0,
    defaultHeaders: headers(call),
  });
}

function openaiPreStream(err: unknown): void {
  assert.ok(err instanceof OpenAI.RateLimitError, String(err));
  assert.equal(err.status, 429);
  assert.equal(err.code, CODE);
}

/** A mid-stream error raised from the stream's error object: no HTTP status, the gateway's code. */
function openaiMidStream(err: unknown): void {
  assert.ok(err instanceof OpenAI.APIError, String(err));
  assert.equal(err.status, undefined, 'raised from within the stream');
  assert.equal(err.code, CODE);
  assert.equal(err.type, 'rate_limit_error');
}

const chatClient: ThrottledClient = {
  fail: (call, stream) =>
    failure(async (delivered) => {
      const c = openai(call);
      const messages = [{ role: 'user' as const, content: PROMPT }];
      if (!stream) return c.chat.completions.create({ model: call.model, messages });
      const s = await c.chat.completions.create({
        model: call.model,
        messages,
        stream: true,
        stream_options: { include_usage: true },
      });
      for await (const chunk of s) delivered(chunk.choices[0]?.delta.content ?? '');
    }),
  preStream: openaiPreStream,
  midStream: openaiMidStream,
};

const responsesClient: ThrottledClient = {
  fail: (call, stream) =>
    failure(async (delivered) => {
      const c = openai(call);
      if (!stream) return c.responses.create({ model: call.model, input: PROMPT });
      const s = await c.responses.create({ model: call.model, input: PROMPT, stream: true });
      for await (const event of s) if (event.type === 'response.output_text.delta') delivered(event.delta);
    }),
  preStream: openaiPreStream,
  midStream: openaiMidStream,
};

interface AnthropicErrorBody {
  type?: unknown;
  error?: { type?: unknown; code?: unknown; message?: unknown };
}

const anthropicClient: ThrottledClient = {
  fail: (call, stream) =>
    failure(async (delivered) => {
      const c = new Anthropic({
        apiKey: ACCESS_KEY,
        baseURL: stack.url,
        maxRetries: 0,
        defaultHeaders: headers(call),
      });
      const body = {
        model: call.model,
        max_tokens: 300,
        messages: [{ role: 'user' as const, content: PROMPT }],
      };
      if (!stream) return c.messages.create(body);
      const s = await c.messages.create({ ...body, stream: true });
      for await (const event of s)
        if (event.type === 'content_block_delta' && event.delta.type === 'text_delta')
          delivered(event.delta.text);
    }),
  preStream(err) {
    assert.ok(err instanceof Anthropic.RateLimitError, String(err));
    const body = err.error as AnthropicErrorBody;
    assert.equal(body.error?.type, 'rate_limit_error');
    assert.equal(body.error?.code, CODE);
  },
  midStream(err) {
    assert.ok(err instanceof Anthropic.APIError, String(err));
    assert.equal(err.status, undefined, 'raised from within the stream');
    const body = err.error as AnthropicErrorBody;
    assert.equal(body.type, 'error');
    assert.equal(body.error?.type, 'rate_limit_error');
    assert.equal(body.error?.code, CODE);
    assert.equal(typeof body.error?.message, 'string');
  },
};

/** The Gemini error object an ApiError carries (a whole reply's body, or a stream's error chunk). */
function googleError(err: ApiError): { status?: unknown; details?: { reason?: unknown }[] } {
  const text = err.message.slice(err.message.indexOf('{'));
  return (JSON.parse(text) as { error: { status?: unknown; details?: { reason?: unknown }[] } }).error;
}

function assertGoogleThrottled(err: unknown): void {
  assert.ok(err instanceof ApiError, String(err));
  assert.equal(err.status, 429);
  const error = googleError(err);
  assert.equal(error.status, 'RESOURCE_EXHAUSTED');
  assert.ok(
    error.details?.some((d) => d.reason === CODE),
    `ErrorInfo reason ${CODE}: ${JSON.stringify(error)}`,
  );
}

const geminiClient: ThrottledClient = {
  fail: (call, stream) =>
    failure(async (delivered) => {
      const c = new GoogleGenAI({
        apiKey: ACCESS_KEY,
        httpOptions: { baseUrl: stack.url, headers: headers(call) },
      });
      if (!stream) return c.models.generateContent({ model: call.model, contents: PROMPT });
      for await (const chunk of await c.models.generateContentStream({ model: call.model, contents: PROMPT }))
        delivered(chunk.text ?? '');
    }),
  preStream: assertGoogleThrottled,
  midStream: assertGoogleThrottled,
};

const CLIENTS: Record<string, ThrottledClient> = {
  'chat completions (openai)': chatClient,
  'responses (openai)': responsesClient,
  'messages (@anthropic-ai/sdk)': anthropicClient,
  'generateContent (@google/genai)': geminiClient,
};

// --- what the gateway recorded -----------------------------------------------------------------------

/** router_requests_total of one provider with status 429. */
async function throttledCount(provider: string): Promise<number> {
  const text = await (await fetch(`${stack.url}/metrics`)).text();
  return text
    .split('\n')
    .filter(
      (l) => l.startsWith(`router_requests_total{provider="${provider}",`) && l.includes('status="429"'),
    )
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

// --- the matrix --------------------------------------------------------------------------------------

for (const [clientName, client] of Object.entries(CLIENTS)) {
  describe(`${clientName}: a throttling cloud`, () => {
    for (const route of Object.keys(ROUTES) as Route[]) {
      const { provider, model } = ROUTES[route];

      for (const stream of [false, true]) {
        test(`${route}, ${stream ? 'streamed' : 'plain'}: 429 before the stream is the SDK's rate-limit error, counted under the provider`, async () => {
          const before = await throttledCount(provider);
          const rid = `throttle-${++seq}-${Date.now()}`;
          const { err } = await client.fail({ model: model('fail-429'), provider, rid }, stream);
          client.preStream(err);
          assert.match(String((err as Error).message), /Simulated/, "the provider's message");
          await waitUntil(
            async () => (await throttledCount(provider)) === before + 1,
            `router_requests_total{provider="${provider}",status="429"} to count the request`,
          );
        });
      }

      test(`${route}, streamed: a throttle mid-stream ends the stream with the family's error event, billed as delivered`, async () => {
        const rid = `throttle-${++seq}-${Date.now()}`;
        const { err, delivered } = await client.fail(
          { model: model('fail-midstream-429'), provider, rid },
          true,
        );
        assert.notEqual(delivered, '', 'text arrived before the throttle');
        client.midStream(err);
        assert.match(String((err as Error).message), /Simulated/, "the provider's message");
        const event = await stack.eventFor(rid);
        assert.equal(event.raw_json.provider, provider);
        assert.equal(event.raw_json.meta.end_reason, 'upstream_error');
        assert.equal(event.raw_json.usage_stage, 'estimated');
        assert.ok(event.raw_json.usage.input_tokens > 0);
        assert.ok(event.raw_json.usage.output_tokens > 0, 'the text delivered so far');
      });
    }
  });
}
