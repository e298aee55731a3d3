// What message_start says an Anthropic client's input is, through the shipped configuration, with the
// official @anthropic-ai/sdk streaming to each provider family of the upstream simulator: served by a
// provider that counts (OpenAI through POST /v1/responses/input_tokens, Bedrock Converse through
// CountTokens) or whose stream opens with its count (Gemini and Vertex's Google publisher, Claude on
// Vertex and on Bedrock InvokeModel), message_start's input_tokens is the input the billing simulator
// then receives in the usage event; served by an OpenAI-compatible provider (no counting endpoint) it is
// the gateway's estimate, within the error docs/billing.md states. The count asked alongside is never
// billed and takes nothing of the key's rate limit; completion-style clients ask none. A counting endpoint that never answers: message_start states the estimate once
// limits.early_count_wait_ms have passed (small here), and the log says so without the prompt.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import {
  type BillingStack,
  capturingLogger,
  type LogLine,
  startBillingStack,
} from '../support/billing-stack.ts';
import { cloudSimEnv } from '../support/cloud-sim-env.ts';
import { ACCESS_KEY, type Stack, startStack } from '../support/stack.ts';

type Json = Record<string, unknown>;

const AWS = { accessKeyId: 'AKIDEARLYCOUNT', secretAccessKey: 'early-count-secret', region: 'us-east-1' };

/** Client-facing model -> how message_start learns the input. */
const MODELS = {
  'ec-anthropic': 'Anthropic: its own message_start, passed through',
  'ec-openai': 'OpenAI: POST /v1/responses/input_tokens alongside',
  'ec-gemini': "Gemini: the stream's first chunk",
  'ec-vertex-gemini': "Vertex Google publisher: the stream's first chunk",
  'ec-vertex-claude': "Claude on Vertex: Anthropic's own message_start",
  'ec-bedrock-claude': "Claude on Bedrock InvokeModel: Anthropic's own message_start",
  'ec-converse-claude': 'Claude on Bedrock Converse: CountTokens alongside',
  'ec-converse-nova': 'another Bedrock model on Converse: CountTokens alongside',
} as const;
const ESTIMATED = 'ec-deepseek';

const MODELS_YAML = `models:
  ec-openai: { providers: [{ provider: openai, model: gpt-5.4-mini }] }
  ec-gemini: { providers: [{ provider: gemini, model: gemini-3.8-flash }] }
  ec-vertex-gemini: { providers: [{ provider: vertex, model: gemini-3.8-flash }] }
  ec-vertex-claude: { providers: [{ provider: vertex, model: "claude-sonnet-5@20261001" }] }
  ec-bedrock-claude: { providers: [{ provider: bedrock, model: "us.anthropic.claude-sonnet-5-v1:0" }] }
  ec-converse-claude: { providers: [{ provider: bedrock-converse, model: "us.anthropic.claude-sonnet-5-v1:0" }] }
  ec-converse-nova: { providers: [{ provider: bedrock, model: "amazon.nova-pro-v1:0" }] }
  ec-deepseek: { providers: [{ provider: deepseek, model: deepseek-chat }] }
  ec-anthropic: { providers: [{ provider: anthropic, model: claude-sonnet-5 }] }
  ec-gemini-cached: { providers: [{ provider: gemini, model: gemini-3.8-flash-cached-5 }] }
  ec-openai-hang: { providers: [{ provider: openai, model: gpt-5.4-mini-count-hang }] }
  ec-converse-hang: { providers: [{ provider: bedrock-converse, model: "us.anthropic.claude-count-hang-v1:0" }] }
`;

const agent = (
  JSON.parse(readFileSync(new URL('../fixtures/usage/agent-request.json', import.meta.url), 'utf8')) as {
    request: Json;
  }
).request;
/** A coding agent's request: system blocks, ten tools, a tool turn. */
const { model: _model, max_tokens: _max, ...AGENT } = agent;
const PROMPT = 'zebra-quartz prompt words that must never reach a log line';
const PLAIN: Json = { messages: [{ role: 'user', content: PROMPT }] };
/** The agent's request with the prompt words in a system block of its own. */
const AGENT_PROMPT: Json = {
  ...AGENT,
  system: [...(AGENT['system'] as Json[]), { type: 'text', text: PROMPT }],
};

const AWS_ENV = {
  AWS_ACCESS_KEY_ID: AWS.accessKeyId,
  AWS_SECRET_ACCESS_KEY: AWS.secretAccessKey,
  AWS_REGION: AWS.region,
};

let seq = 0;
function nextId(): string {
  return `early-count-${++seq}-${Date.now()}`;
}

interface Streamed {
  /** message_start's usage.input_tokens. */
  readonly start: number;
  /** The input of the final message (message_delta's, which the SDK keeps). */
  readonly final: number;
  /** message_start's and the final message's cache reads. */
  readonly startCached: number;
  readonly finalCached: number;
}

/** Streams through the Anthropic SDK; message_start's input as the first event gave it. */
async function stream(url: string, model: string, body: Json, rid: string): Promise<Streamed> {
  const client = new Anthropic({
    apiKey: ACCESS_KEY,
    baseURL: url,
    maxRetries: 0,
    defaultHeaders: { 'x-router-request-id': rid },
  });
  const s = client.messages.stream({
    model,
    max_tokens: 256,
    ...(body as Omit<Anthropic.MessageStreamParams, 'model' | 'max_tokens'>),
  });
  let start: number | undefined;
  let startCached = 0;
  for await (const event of s) {
    if (event.type === 'message_start' && start === undefined) {
      start = event.message.usage.input_tokens;
      startCached = event.message.usage.cache_read_input_tokens ?? 0;
    }
  }
  const message = await s.finalMessage();
  assert.ok(start !== undefined, `${model}: message_start`);
  return {
    start,
    final: message.usage.input_tokens,
    startCached,
    finalCached: message.usage.cache_read_input_tokens ?? 0,
  };
}

const within = (a: number, b: number, bound: number): boolean => Math.abs(a - b) / b <= bound;

describe('message_start states the billed input', () => {
  let stack: BillingStack;
  before(async () => {
    stack = await startBillingStack({
      modelsYaml: MODELS_YAML,
      sim: { aws: AWS },
      env: AWS_ENV,
      simEnv: cloudSimEnv,
    });
  });
  after(async () => {
    await stack?.close();
  });

  async function billedInput(rid: string): Promise<number> {
    const event = await stack.eventFor(rid);
    assert.equal(event.raw_json.usage_stage, 'upstream');
    return event.raw_json.usage.input_tokens;
  }

  for (const [model, how] of Object.entries(MODELS)) {
    test(`${model} (${how})`, async (t) => {
      for (const [name, body] of [
        ['plain', PLAIN],
        ['agent', AGENT],
      ] as const) {
        const rid = nextId();
        const before = stack.upstream.requests.length;
        const { start, final } = await stream(stack.url, model, body, rid);
        const billed = await billedInput(rid);
        t.diagnostic(`${name}: message_start ${start}, message_delta ${final}, billed ${billed}`);
        assert.equal(start, billed, `${model} ${name}: message_start ${start} vs billed ${billed}`);
        assert.equal(final, billed, `${model} ${name}: message_delta ${final} vs billed ${billed}`);
        // Exactly one usage event for the request: the count asked alongside is not billed.
        assert.equal(
          stack.billing.events.filter((e) => e.external_event_id === rid).length,
          1,
          'one event per request',
        );
        const paths = stack.upstream.requests.slice(before).map((r) => r.path);
        t.diagnostic(`upstream: ${paths.join(', ')}`);
      }
    });
  }

  test(`${ESTIMATED} (OpenAI-compatible, no counting endpoint): the estimate, within the stated error`, async (t) => {
    for (const [name, body] of [
      ['plain', PLAIN],
      ['agent', AGENT],
    ] as const) {
      const rid = nextId();
      const { start } = await stream(stack.url, ESTIMATED, body, rid);
      const billed = await billedInput(rid);
      t.diagnostic(`${name}: message_start ${start}, billed ${billed}`);
      // docs/billing.md: 3.53 % mean error over recorded counts (the estimate test fails above 4.5 %).
      assert.ok(within(start, billed, 0.045), `${name}: message_start ${start} vs billed ${billed}`);
    }
  });

  test('an input partly read from the prompt cache: message_start and message_delta each add up to the billed input', async (t) => {
    const rid = nextId();
    const r = await stream(stack.url, 'ec-gemini-cached', AGENT, rid);
    const billed = await billedInput(rid);
    t.diagnostic(
      `message_start ${r.start} + ${r.startCached} cached, message_delta ${r.final} + ${r.finalCached} cached, billed ${billed}`,
    );
    assert.equal(r.finalCached, 5);
    assert.equal(r.start + r.startCached, billed);
    assert.equal(r.final + r.finalCached, billed);
  });

  test('which counting endpoint each stream asked, and that other clients ask none', async () => {
    const counted = (from: number) =>
      stack.upstream.requests
        .slice(from)
        .map((r) => r.path)
        .filter((p) => /input_tokens|count-tokens|countTokens|count_tokens/.test(p));
    let from = stack.upstream.requests.length;
    await stream(stack.url, 'ec-openai', PLAIN, nextId());
    assert.deepEqual(counted(from), ['/v1/responses/input_tokens']);
    from = stack.upstream.requests.length;
    await stream(stack.url, 'ec-converse-claude', PLAIN, nextId());
    assert.deepEqual(counted(from), [
      `/model/${encodeURIComponent('us.anthropic.claude-sonnet-5-v1:0')}/count-tokens`,
    ]);
    for (const model of [
      'ec-gemini',
      'ec-vertex-gemini',
      'ec-vertex-claude',
      'ec-bedrock-claude',
      'ec-anthropic',
      ESTIMATED,
    ]) {
      from = stack.upstream.requests.length;
      await stream(stack.url, model, PLAIN, nextId());
      assert.deepEqual(counted(from), [], `${model} asks no count`);
    }
    // A completion-style stream of the same model: nothing asked, nothing waited for.
    from = stack.upstream.requests.length;
    const openai = new OpenAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1`, maxRetries: 0 });
    const chat = await openai.chat.completions.create({
      model: 'ec-openai-hang',
      messages: [{ role: 'user', content: PROMPT }],
      stream: true,
    });
    for await (const _chunk of chat) {
      // drained
    }
    assert.deepEqual(counted(from), []);
  });
});

describe('a counting endpoint that never answers', () => {
  let stack: Stack;
  const logs: LogLine[] = [];
  before(async () => {
    stack = await startStack({
      modelsYaml: MODELS_YAML,
      sim: { aws: AWS },
      env: AWS_ENV,
      simEnv: cloudSimEnv,
      extraYaml: [
        'limits: { early_count_wait_ms: 50 }',
        'rate_limits: { per_key: { requests_per_minute: 1000 } }',
      ].join('\n'),
      logger: capturingLogger(logs, 'info'),
    });
  });
  after(async () => {
    await stack?.close();
  });

  test("the count asked alongside takes nothing of the key's rate limit", async () => {
    const remaining: number[] = [];
    const counts = () => stack.sim.requests.filter((r) => r.path === '/v1/responses/input_tokens').length;
    const asked = counts();
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${stack.url}/v1/messages`, {
        method: 'POST',
        headers: {
          'x-api-key': ACCESS_KEY,
          'anthropic-version': '2023-06-01',
          'content-type': 'application/json',
        },
        body: JSON.stringify({ model: 'ec-openai', max_tokens: 64, stream: true, ...PLAIN }),
      });
      assert.equal(res.status, 200);
      await res.text();
      remaining.push(Number(res.headers.get('anthropic-ratelimit-requests-remaining')));
    }
    assert.equal(counts() - asked, 2, 'each stream asked its count');
    assert.equal(remaining[0]! - remaining[1]!, 1, `one request each: ${remaining.join(', ')}`);
  });

  for (const model of ['ec-openai-hang', 'ec-converse-hang']) {
    test(`${model}: message_start states the estimate, logged without the prompt; the count is cancelled`, async (t) => {
      const rid = nextId();
      const aborted = stack.sim.stats.aborted;
      const { start, final } = await stream(stack.url, model, AGENT_PROMPT, rid);
      t.diagnostic(`message_start ${start} (estimate), message_delta ${final}`);
      assert.ok(within(start, final, 0.045), `estimate ${start} vs billed ${final}`);
      // The count was asked, never answered, and is cancelled once the wait is over.
      assert.ok(
        stack.sim.requests.some((r) => /input_tokens|count-tokens/.test(r.path)),
        'the count was asked',
      );
      await stack.sim.waitFor((s) => s.stats.aborted > aborted);
      const line = logs.find(
        (l) =>
          l.msg === 'provider count not in time; message_start states the estimate' && l['reqId'] === rid,
      );
      assert.ok(line, 'the fallback is logged');
      assert.equal(line['waitMs'], 50);
      const text = JSON.stringify(logs);
      assert.ok(!text.includes('zebra-quartz'), 'no prompt text in the log');
    });
  }
});
