// The input of an interrupted stream's usage event is the provider's own count wherever one arrived
// before the end (docs/billing.md "Interrupted streams"), through the shipped configuration, the official
// SDKs (@anthropic-ai/sdk, openai chat and Responses, @google/genai), the upstream simulator and the
// billing simulator, for every client on every provider family whose stream states the input before its
// end: an Anthropic client on OpenAI and on Bedrock Converse (the count asked alongside the generation);
// every client on Gemini and Gemini on Vertex (the first chunk's usageMetadata), on Anthropic, Claude on
// Vertex and Claude on Bedrock InvokeModel (message_start's usage). Each stream is cut three ways: an
// in-stream error (upstream_error), a stream that simply stops (upstream_cut) and a client that leaves
// at its first text while the simulator holds the rest (client_gone). The billed input is the count the
// simulator gives for that prompt: its whole stream's final usage, and the counting endpoint's answer
// for the very body the gateway asked it about. The output stays the estimate of what was delivered.
// Where no count arrives (an OpenAI-compatible provider without a counting endpoint, a counting endpoint
// that does not answer in time) the input is the gateway's estimate, as message_start stated it; so it
// is when the count came for a candidate that then refused and another provider served.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { type Content, GoogleGenAI, type Tool } from '@google/genai';
import OpenAI from 'openai';
import type { UsageEvent } from '../../billing/event/usage-event.ts';
import type { JsonObject } from '../../common/types.ts';
import { TRANSLATORS } from '../../hooks/families/index.ts';
import type { UpstreamSim } from '../../sim/upstream/server.ts';
import type { RecordedRequest } from '../../sim/upstream/types.ts';
import { type BillingStack, startBillingStack } from '../support/billing-stack.ts';
import { cloudSimEnv } from '../support/cloud-sim-env.ts';
import { ACCESS_KEY } from '../support/stack.ts';

type Json = Record<string, unknown>;
type Client = 'anthropic' | 'chat' | 'responses' | 'gemini';
const CLIENTS: readonly Client[] = ['anthropic', 'chat', 'responses', 'gemini'];

const AWS = { accessKeyId: 'AKIDCUTSTREAM', secretAccessKey: 'cut-stream-secret', region: 'us-east-1' };

/** A provider that states the input before its stream's end, for `clients` (every client when absent). */
interface Provider {
  readonly name: string;
  readonly how: string;
  /** The upstream model; `{knob}` is where the simulator's knob goes. */
  readonly model: string;
  /** The counting endpoint the gateway asks alongside the generation, when it asks one. */
  readonly counted?: RegExp;
  readonly clients?: readonly Client[];
}

const PROVIDERS: readonly Provider[] = [
  {
    name: 'openai',
    how: 'responses/input_tokens alongside',
    model: 'gpt-5.4-mini{knob}',
    counted: /^\/v1\/responses\/input_tokens$/,
    clients: ['anthropic'],
  },
  {
    name: 'bedrock-converse',
    how: 'CountTokens alongside',
    model: 'us.anthropic.claude-sonnet-5{knob}-v1:0',
    counted: /\/count-tokens$/,
    clients: ['anthropic'],
  },
  { name: 'gemini', how: "the first chunk's usageMetadata", model: 'gemini-3.8-flash{knob}' },
  {
    name: 'vertex',
    how: "Gemini on Vertex: the first chunk's usageMetadata",
    model: 'gemini-3.8-flash{knob}',
  },
  { name: 'anthropic', how: "message_start's usage", model: 'claude-sonnet-5{knob}' },
  { name: 'vertex', how: "Claude on Vertex: message_start's usage", model: 'claude-sonnet-5@20261001{knob}' },
  {
    name: 'bedrock',
    how: "Claude on Bedrock InvokeModel: message_start's usage",
    model: 'us.anthropic.claude-sonnet-5{knob}-v1:0',
  },
];

interface Route {
  readonly client: Client;
  readonly provider: Provider;
}

const ROUTES: readonly Route[] = PROVIDERS.flatMap((provider) =>
  (provider.clients ?? CLIENTS).map((client) => ({ client, provider })),
);

/** How the stream is cut: the simulator's model knob, and the end reason the event names. */
const CUTS = [
  { knob: '-fail-midstream', reason: 'upstream_error' },
  { knob: '-fail-midstream-end', reason: 'upstream_cut' },
  { knob: '-hold-6', reason: 'client_gone' },
] as const;

/** The route whose provider's count differs from the gateway's estimate of the agent request. */
const CONVERSE = ROUTES.findIndex((r) => r.provider.name === 'bedrock-converse');
const clientModel = (route: number, knob: string): string => `cut-${route}${knob}`;
const upstreamModel = (provider: Provider, knob: string): string => provider.model.replace('{knob}', knob);

const MODELS_YAML = [
  'models:',
  ...ROUTES.flatMap((route, i) =>
    ['', ...CUTS.map((c) => c.knob)].map(
      (knob) =>
        `  ${clientModel(i, knob)}: { providers: [{ provider: ${route.provider.name}, model: "${upstreamModel(route.provider, knob)}" }] }`,
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
 * from the count of every simulated provider but OpenAI's (whose published rules the estimate follows
 * exactly), so the billed input says which one it is.
 */
const { model: _model, max_tokens: _max, ...AGENT } = agent;
const translator = (name: string) =>
  TRANSLATORS.get(name)!.create({
    requestId: 'cut',
    model: 'm',
    upstreamModel: 'm',
    stream: true,
    createdAt: 0,
  });
/** The same conversation as a chat client sends it. */
const CHAT = translator('anthropic_to_openai').request({
  ...(AGENT as JsonObject),
  model: 'm',
  max_tokens: 256,
});
/** And as a Gemini client sends it. */
const GEMINI = translator('openai_to_gemini').request(CHAT);
/** A Responses client's request: its instructions and a question about the same code. */
const RESPONSES = {
  instructions: (AGENT['system'] as { text: string }[]).map((b) => b.text).join('\n'),
  input: 'Why would the checkout test expect a total of 90.00 and receive 100.00?',
};

let seq = 0;
function nextId(): string {
  return `cut-input-${++seq}-${Date.now()}`;
}

interface Streamed {
  /** message_start's input (Anthropic client). */
  readonly start: number | undefined;
  readonly text: string;
}

/** Reads a stream's text pieces; true once the client should leave. */
type Reader = (piece: string | null | undefined) => boolean;

/** Streams with the Anthropic SDK; `started` is told message_start's input. */
async function anthropicStream(
  url: string,
  model: string,
  headers: Record<string, string>,
  signal: AbortSignal,
  read: Reader,
  started: (input: number) => void,
): Promise<void> {
  const client = new Anthropic({ apiKey: ACCESS_KEY, baseURL: url, maxRetries: 0, defaultHeaders: headers });
  const s = await client.messages.create(
    {
      model,
      max_tokens: 256,
      stream: true,
      ...(AGENT as Omit<Anthropic.MessageCreateParamsStreaming, 'model' | 'max_tokens' | 'stream'>),
    },
    { signal },
  );
  for await (const ev of s) {
    if (ev.type === 'message_start') started(ev.message.usage.input_tokens);
    if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta' && read(ev.delta.text)) break;
  }
}

async function openAiStream(
  url: string,
  client: 'chat' | 'responses',
  model: string,
  headers: Record<string, string>,
  signal: AbortSignal,
  read: Reader,
): Promise<void> {
  const openai = new OpenAI({
    apiKey: ACCESS_KEY,
    baseURL: `${url}/v1`,
    maxRetries: 0,
    defaultHeaders: headers,
  });
  if (client === 'chat') {
    const s = await openai.chat.completions.create(
      { ...(CHAT as unknown as OpenAI.ChatCompletionCreateParamsStreaming), model, stream: true },
      { signal },
    );
    for await (const chunk of s) if (read(chunk.choices[0]?.delta?.content)) break;
    return;
  }
  const s = await openai.responses.create({ ...RESPONSES, model, stream: true }, { signal });
  for await (const ev of s) if (ev.type === 'response.output_text.delta' && read(ev.delta)) break;
}

async function geminiStream(
  url: string,
  model: string,
  headers: Record<string, string>,
  signal: AbortSignal,
  read: Reader,
) {
  const client = new GoogleGenAI({
    apiKey: ACCESS_KEY,
    httpOptions: { baseUrl: url, headers: headers },
  });
  const body = GEMINI as unknown as { contents: Content[]; systemInstruction?: Content; tools?: Tool[] };
  const s = await client.models.generateContentStream({
    model,
    contents: body.contents,
    config: { systemInstruction: body.systemInstruction, tools: body.tools, abortSignal: signal },
  });
  for await (const chunk of s) if (read(chunk.text)) break;
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
  const read: Reader = (piece) => {
    text += piece ?? '';
    return leave && text !== '';
  };
  try {
    if (client === 'anthropic') {
      await anthropicStream(url, model, headers, controller.signal, read, (input) => {
        start = input;
      });
    } else if (client === 'gemini') await geminiStream(url, model, headers, controller.signal, read);
    else await openAiStream(url, client, model, headers, controller.signal, read);
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
      simEnv: cloudSimEnv,
    });
  });
  after(async () => {
    await stack?.close();
  });

  ROUTES.forEach((route, i) => {
    const { client, provider } = route;
    test(`${client} client on ${provider.name} (${provider.how})`, async (t) => {
      // The provider's count of the prompt: its whole stream's final usage.
      const whole = nextId();
      await stream(stack.url, client, clientModel(i, ''), whole, false);
      const final = await stack.eventFor(whole);
      assert.equal(final.raw_json.usage_stage, 'upstream');
      const count = final.raw_json.usage.input_tokens;

      for (const cut of CUTS) {
        const rid = nextId();
        const from = stack.upstream.requests.length;
        const aborted = stack.upstream.stats.aborted;
        const leave = cut.reason === 'client_gone';
        const { start } = await stream(stack.url, client, clientModel(i, cut.knob), rid, leave);
        if (leave) await stack.upstream.waitFor((s) => s.stats.aborted > aborted, 10_000);
        const event = await stack.eventFor(rid);
        assertCut(event, cut.reason);
        const billed = event.raw_json.usage.input_tokens;
        t.diagnostic(`${cut.reason}: billed input ${billed}, the provider's count ${count}`);
        assert.equal(billed, count, `${cut.reason}: the provider's count, not the estimate`);
        if (start !== undefined) assert.equal(start, billed, 'message_start stated it');
        if (provider.counted !== undefined) {
          const counted = provider.counted;
          const asked = stack.upstream.requests.slice(from).filter((r) => counted.test(r.path));
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
