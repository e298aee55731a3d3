// The input of an interrupted stream's usage event is the provider's own count wherever one arrived
// before the end (docs/billing.md "Interrupted streams"), through the shipped configuration, the official
// SDKs, the upstream simulator and the billing simulator: an Anthropic client on OpenAI and on Bedrock
// Converse (the count asked alongside the generation), on Gemini (the first chunk's usageMetadata); an
// OpenAI chat client on Anthropic (message_start's usage) and on Gemini. Each stream is cut three ways:
// an in-stream error (upstream_error), a stream that simply stops (upstream_cut) and a client that
// leaves at its first text while the simulator holds the rest (client_gone). The billed input is the
// count the simulator gives for that prompt: its whole stream's final usage, and the counting endpoint's
// answer for the very body the gateway asked it about. The output stays the estimate of what was
// delivered. Where no count arrives (an OpenAI-compatible provider without a counting endpoint, a
// counting endpoint that does not answer in time) the input is the gateway's estimate, as message_start
// stated it; so it is when the count came for a candidate that then refused and another provider served.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import type { UsageEvent } from '../../billing/event/usage-event.ts';
import type { JsonObject } from '../../common/types.ts';
import { TRANSLATORS } from '../../hooks/families/index.ts';
import type { UpstreamSim } from '../../sim/upstream/server.ts';
import type { RecordedRequest } from '../../sim/upstream/types.ts';
import { type BillingStack, startBillingStack } from '../support/billing-stack.ts';
import { ACCESS_KEY } from '../support/stack.ts';

type Json = Record<string, unknown>;
type Client = 'anthropic' | 'chat';

const AWS = { accessKeyId: 'AKIDCUTSTREAM', secretAccessKey: 'cut-stream-secret', region: 'us-east-1' };

interface Route {
  readonly name: string;
  readonly client: Client;
  readonly provider: string;
  /** The upstream model; `{knob}` is where the simulator's knob goes. */
  readonly model: string;
  /** The counting endpoint the gateway asks alongside the generation, when it asks one. */
  readonly counted?: RegExp;
}

const ROUTES: readonly Route[] = [
  {
    name: 'Anthropic client on OpenAI (responses/input_tokens alongside)',
    client: 'anthropic',
    provider: 'openai',
    model: 'gpt-5.4-mini{knob}',
    counted: /^\/v1\/responses\/input_tokens$/,
  },
  {
    name: "Anthropic client on Gemini (the first chunk's usageMetadata)",
    client: 'anthropic',
    provider: 'gemini',
    model: 'gemini-3.8-flash{knob}',
  },
  {
    name: 'Anthropic client on Bedrock Converse (CountTokens alongside)',
    client: 'anthropic',
    provider: 'bedrock-converse',
    model: 'us.anthropic.claude-sonnet-5{knob}-v1:0',
    counted: /\/count-tokens$/,
  },
  {
    name: "OpenAI chat client on Anthropic (message_start's usage)",
    client: 'chat',
    provider: 'anthropic',
    model: 'claude-sonnet-5{knob}',
  },
  {
    name: "OpenAI chat client on Gemini (the first chunk's usageMetadata)",
    client: 'chat',
    provider: 'gemini',
    model: 'gemini-3.8-flash{knob}',
  },
];

/** How the stream is cut: the simulator's model knob, and the end reason the event names. */
const CUTS = [
  { knob: '-fail-midstream', reason: 'upstream_error' },
  { knob: '-fail-midstream-end', reason: 'upstream_cut' },
  { knob: '-hold-6', reason: 'client_gone' },
] as const;

/** The route whose provider's count differs from the gateway's estimate of the agent request. */
const CONVERSE = 2;
const clientModel = (route: number, knob: string): string => `cut-${route}${knob}`;
const upstreamModel = (route: Route, knob: string): string => route.model.replace('{knob}', knob);

const MODELS_YAML = [
  'models:',
  ...ROUTES.flatMap((route, i) =>
    ['', ...CUTS.map((c) => c.knob)].map(
      (knob) =>
        `  ${clientModel(i, knob)}: { providers: [{ provider: ${route.provider}, model: "${upstreamModel(route, knob)}" }] }`,
    ),
  ),
  '  cut-deepseek: { providers: [{ provider: deepseek, model: deepseek-chat-fail-midstream }] }',
  '  cut-converse-hang: { providers: [{ provider: bedrock-converse, model: "us.anthropic.claude-sonnet-5-count-hang-fail-midstream-v1:0" }] }',
  '',
].join('\n');

const agent = (
  JSON.parse(readFileSync(new URL('../fixtures/usage/agent-request.json', import.meta.url), 'utf8')) as {
    request: Json;
  }
).request;
/**
 * A coding agent's request (system blocks, ten tools, a tool turn): the gateway's estimate of it differs
 * from every simulated provider's count, so the billed input says which one it is.
 */
const { model: _model, max_tokens: _max, ...AGENT } = agent;
/** The same conversation as a chat client sends it. */
const CHAT = TRANSLATORS.get('anthropic_to_openai')!
  .create({ requestId: 'cut', model: 'm', upstreamModel: 'm', stream: true, createdAt: 0 })
  .request({ ...(AGENT as JsonObject), model: 'm', max_tokens: 256 });

let seq = 0;
function nextId(): string {
  return `cut-input-${++seq}-${Date.now()}`;
}

interface Streamed {
  /** message_start's input (Anthropic client). */
  readonly start: number | undefined;
  readonly text: string;
}

/**
 * Streams with the client's official SDK. `leave`: hang up at the first text. Errors the SDK raises for
 * an upstream failure are the point of the cut, not a test failure.
 */
async function stream(
  url: string,
  client: Client,
  model: string,
  rid: string,
  leave: boolean,
): Promise<Streamed> {
  const controller = new AbortController();
  const headers = { 'x-router-request-id': rid };
  let start: number | undefined;
  let text = '';
  try {
    if (client === 'anthropic') {
      const anthropic = new Anthropic({
        apiKey: ACCESS_KEY,
        baseURL: url,
        maxRetries: 0,
        defaultHeaders: headers,
      });
      const s = await anthropic.messages.create(
        {
          model,
          max_tokens: 256,
          stream: true,
          ...(AGENT as Omit<Anthropic.MessageCreateParamsStreaming, 'model' | 'max_tokens' | 'stream'>),
        },
        { signal: controller.signal },
      );
      for await (const ev of s) {
        if (ev.type === 'message_start') start = ev.message.usage.input_tokens;
        if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
        if (leave && text !== '') break;
      }
    } else {
      const openai = new OpenAI({
        apiKey: ACCESS_KEY,
        baseURL: `${url}/v1`,
        maxRetries: 0,
        defaultHeaders: headers,
      });
      const s = await openai.chat.completions.create(
        { ...(CHAT as unknown as OpenAI.ChatCompletionCreateParamsStreaming), model, stream: true },
        { signal: controller.signal },
      );
      for await (const chunk of s) {
        text += chunk.choices[0]?.delta?.content ?? '';
        if (leave && text !== '') break;
      }
    }
  } catch (err) {
    if (leave) throw err;
  }
  if (leave) {
    controller.abort();
    assert.notEqual(text, '', 'the client read text before it left');
  }
  return { start, text };
}

/** Sends a recorded upstream request to the simulator again, as it was (signature included). */
function resend(sim: UpstreamSim, recorded: RecordedRequest): Promise<Json> {
  const { host: _host, 'content-length': _length, connection: _c, ...headers } = recorded.headers;
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${sim.url}${recorded.path}`,
      { method: recorded.method, headers: { ...headers, 'content-length': recorded.body.length } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200) reject(new Error(`count answered ${res.statusCode}: ${text}`));
          else resolve(JSON.parse(text) as Json);
        });
      },
    );
    req.on('error', reject);
    req.end(recorded.body);
  });
}

/** The input count in a counting endpoint's answer (OpenAI's input_tokens, Bedrock's inputTokens). */
function countIn(answer: Json): number {
  const n = answer['input_tokens'] ?? answer['inputTokens'];
  assert.equal(typeof n, 'number', `a count in ${JSON.stringify(answer)}`);
  return n as number;
}

function assertCut(event: UsageEvent, reason: string): void {
  assert.equal(event.raw_json.meta.end_reason, reason);
  assert.equal(event.raw_json.usage_stage, 'estimated', 'the final usage did not arrive');
  assert.ok(event.raw_json.usage.output_tokens > 0, 'the delivered output is billed');
  assert.equal(
    event.raw_json.usage.total_tokens,
    event.raw_json.usage.input_tokens + event.raw_json.usage.output_tokens,
  );
}

describe("an interrupted stream bills the provider's input count", () => {
  let stack: BillingStack;
  before(async () => {
    stack = await startBillingStack({
      modelsYaml: MODELS_YAML,
      sim: { aws: AWS },
      env: {
        AWS_ACCESS_KEY_ID: AWS.accessKeyId,
        AWS_SECRET_ACCESS_KEY: AWS.secretAccessKey,
        AWS_REGION: AWS.region,
      },
      simEnv: async (sim: UpstreamSim) => ({
        ROUTER_PROVIDER_BEDROCK_CONVERSE_BASE_URL: sim.url,
        ROUTER_PROVIDER_BEDROCK_BASE_URL: sim.url,
      }),
    });
  });
  after(async () => {
    await stack?.close();
  });

  ROUTES.forEach((route, i) => {
    test(route.name, async (t) => {
      // The provider's count of the prompt: its whole stream's final usage.
      const whole = nextId();
      await stream(stack.url, route.client, clientModel(i, ''), whole, false);
      const final = await stack.eventFor(whole);
      assert.equal(final.raw_json.usage_stage, 'upstream');
      const count = final.raw_json.usage.input_tokens;

      for (const cut of CUTS) {
        const rid = nextId();
        const from = stack.upstream.requests.length;
        const aborted = stack.upstream.stats.aborted;
        const leave = cut.reason === 'client_gone';
        const { start } = await stream(stack.url, route.client, clientModel(i, cut.knob), rid, leave);
        if (leave) await stack.upstream.waitFor((s) => s.stats.aborted > aborted, 10_000);
        const event = await stack.eventFor(rid);
        assertCut(event, cut.reason);
        const billed = event.raw_json.usage.input_tokens;
        t.diagnostic(`${cut.reason}: billed input ${billed}, the provider's count ${count}`);
        assert.equal(billed, count, `${cut.reason}: the provider's count, not the estimate`);
        if (start !== undefined) assert.equal(start, billed, 'message_start stated it');
        if (route.counted !== undefined) {
          const asked = stack.upstream.requests.slice(from).filter((r) => route.counted!.test(r.path));
          assert.equal(asked.length, 1, 'the count was asked alongside');
          assert.equal(
            countIn(await resend(stack.upstream, asked[0]!)),
            billed,
            "the counting endpoint's answer",
          );
        }
      }
    });
  });

  test('an OpenAI-compatible provider without a counting endpoint: the estimate, as message_start stated it', async () => {
    const rid = nextId();
    const from = stack.upstream.requests.length;
    const { start } = await stream(stack.url, 'anthropic', 'cut-deepseek', rid, false);
    const event = await stack.eventFor(rid);
    assertCut(event, 'upstream_error');
    assert.ok(start !== undefined && start > 0);
    assert.equal(event.raw_json.usage.input_tokens, start);
    assert.deepEqual(
      stack.upstream.requests.slice(from).map((r) => r.path),
      ['/v1/chat/completions'],
      'no count asked',
    );
  });

  test("a count that does not come in time: the estimate, which is not the provider's count", async () => {
    const whole = nextId();
    await stream(stack.url, 'anthropic', clientModel(CONVERSE, ''), whole, false);
    const count = (await stack.eventFor(whole)).raw_json.usage.input_tokens;
    const rid = nextId();
    const from = stack.upstream.requests.length;
    const { start } = await stream(stack.url, 'anthropic', 'cut-converse-hang', rid, false);
    const event = await stack.eventFor(rid);
    assertCut(event, 'upstream_error');
    assert.ok(
      stack.upstream.requests.slice(from).some((r) => r.path.endsWith('/count-tokens')),
      'the count was asked',
    );
    assert.equal(event.raw_json.usage.input_tokens, start, 'the estimate message_start stated');
    assert.notEqual(start, count, "the estimate is not the provider's count");
  });
});

/**
 * An OpenAI upstream that counts every input as COUNTED and refuses every generation with 503, answered
 * once the count asked alongside it has been answered: the count arrives, then the attempt fails.
 */
const COUNTED = 4242;
async function refusingOpenAi(): Promise<{ url: string; close(): Promise<void> }> {
  let counted: () => void = () => {};
  let answered = new Promise<void>((resolve) => {
    counted = resolve;
  });
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/v1/responses/input_tokens') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ object: 'response.input_tokens', input_tokens: COUNTED }), counted);
        return;
      }
      void answered.then(() => {
        answered = new Promise<void>((resolve) => {
          counted = resolve;
        });
        res.writeHead(503, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'overloaded', type: 'server_error', code: null } }));
      });
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

describe('a count asked for an attempt that did not serve', () => {
  let openai: Awaited<ReturnType<typeof refusingOpenAi>>;
  let stack: BillingStack;
  before(async () => {
    openai = await refusingOpenAi();
    stack = await startBillingStack({
      modelsYaml: [
        'models:',
        '  cut-retry:',
        '    providers:',
        '      - { provider: openai, model: gpt-5.4-mini }',
        '      - { provider: deepseek, model: deepseek-chat-fail-midstream }',
        '',
      ].join('\n'),
      env: { ROUTER_PROVIDER_OPENAI_BASE_URL: openai.url },
    });
  });
  after(async () => {
    await stack?.close();
    await openai?.close();
  });

  test("is not the serving provider's: the next candidate's cut stream bills its own estimate", async () => {
    const rid = nextId();
    const { start } = await stream(stack.url, 'anthropic', 'cut-retry', rid, false);
    const event = await stack.eventFor(rid);
    assertCut(event, 'upstream_error');
    assert.equal(event.raw_json.provider, 'deepseek');
    assert.notEqual(start, COUNTED, 'message_start states the estimate');
    assert.equal(event.raw_json.usage.input_tokens, start);
  });
});
