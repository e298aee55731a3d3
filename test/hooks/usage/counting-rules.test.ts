// The gateway's token estimate against the providers' published counting rules
// (test/fixtures/usage/counting-rules.md): OpenAI's cookbook example reproduced exactly, and a coding
// agent's request (test/fixtures/usage/agent-request.json) counted through each serving family within 5%
// of what the upstream simulator, which counts by those rules, reports for the request it receives.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { ApiName, JsonObject } from '../../../common/types.ts';
import { generationTextOf, requestTextOf, TRANSLATORS } from '../../../hooks/families/index.ts';
import { estimateInputTokens } from '../../../hooks/usage/estimate.ts';
import { anthropicRoutes } from '../../../sim/upstream/anthropic.ts';
import { geminiMethods } from '../../../sim/upstream/gemini.ts';
import { readKnobs } from '../../../sim/upstream/knobs.ts';
import { openaiRoutes } from '../../../sim/upstream/openai.ts';
import type { RouteHandler, SimRequest } from '../../../sim/upstream/types.ts';

const fixture = (name: string): JsonObject =>
  JSON.parse(readFileSync(new URL(`../../fixtures/usage/${name}`, import.meta.url), 'utf8')) as JsonObject;

const agent = fixture('agent-request.json')['request'] as JsonObject;
const published = fixture('published-counts.json');

/** What the simulator (standing in for the provider) answers for a body, read from its reply. */
function simulate(handler: RouteHandler, body: JsonObject, model: string, params = {}): JsonObject {
  const json = { ...body, model };
  const req: SimRequest = {
    method: 'POST',
    pathname: '/',
    query: new URLSearchParams(),
    headers: {},
    body: Buffer.from(JSON.stringify(json)),
    json,
    knobs: readKnobs({}, model, 0),
    params,
  };
  const reply = handler(req);
  assert.ok(!(reply instanceof Promise) && reply.kind === 'json');
  return JSON.parse((reply as { body: string }).body) as JsonObject;
}

function translated(name: string, body: JsonObject, model: string): JsonObject {
  const factory = TRANSLATORS.get(name);
  assert.ok(factory, name);
  return factory
    .create({ requestId: 't', model, upstreamModel: model, stream: false, createdAt: 0 })
    .request(body);
}

interface Serving {
  /** The translator the shipped provider files use for an Anthropic client. */
  translator: string | undefined;
  format: string;
  model: string;
  /** The count the provider gives for the body it receives (the simulator, by the published rules). */
  count(body: JsonObject, model: string): number;
}

const SERVING: Record<string, Serving> = {
  anthropic: {
    translator: undefined,
    format: 'anthropic',
    model: 'claude-sonnet-5',
    count: (body, model) =>
      simulate(anthropicRoutes['POST /v1/messages/count_tokens']!, body, model)['input_tokens'] as number,
  },
  openai: {
    translator: 'anthropic_to_openai',
    format: 'openai',
    model: 'gpt-5.4-mini',
    count: (body, model) => {
      const usage = simulate(openaiRoutes['POST /v1/chat/completions']!, body, model)['usage'] as JsonObject;
      return usage['prompt_tokens'] as number;
    },
  },
  gemini: {
    translator: 'anthropic_to_gemini',
    format: 'gemini',
    model: 'gemini-3.8-flash',
    count: (body, model) => {
      const generate = simulate(geminiMethods['generateContent']!, body, model, { model });
      return (generate['usageMetadata'] as JsonObject)['promptTokenCount'] as number;
    },
  },
};

/** The gateway's count of an Anthropic client's body served by a family: translated, in its framing. */
function gatewayCount(serving: Serving, body: JsonObject): { gateway: number; provider: number } {
  const served =
    serving.translator === undefined ? body : translated(serving.translator, body, serving.model);
  const text = generationTextOf(serving.format);
  assert.ok(text, serving.format);
  return {
    gateway: estimateInputTokens(serving.model, text, served),
    provider: serving.count(served, serving.model),
  };
}

test("OpenAI's published tools example is counted exactly, by the gateway and by the simulator", () => {
  const example = published['openai_tools_example'] as JsonObject;
  const body = example['request'] as JsonObject;
  const counts = example['prompt_tokens'] as Record<string, number>;
  for (const [model, expected] of Object.entries(counts)) {
    const gateway = estimateInputTokens(model, requestTextOf('openai', 'chat.completions'), body);
    assert.equal(gateway, expected, `gateway ${model}`);
  }
  // The simulator counts every model with o200k_base, like gpt-4o.
  const usage = simulate(openaiRoutes['POST /v1/chat/completions']!, body, 'gpt-4o')['usage'] as JsonObject;
  assert.equal(usage['prompt_tokens'], counts['gpt-4o']);
});

test("Anthropic's documented tool-use system prompt: by model and tool_choice, in the simulator and the gateway", () => {
  const tools = [{ name: 'ping', description: 'Check the host answers.', input_schema: { type: 'object' } }];
  const bare = { messages: [{ role: 'user', content: 'Is it up?' }] };
  const count = (model: string, extra: JsonObject): number =>
    simulate(anthropicRoutes['POST /v1/messages/count_tokens']!, { ...bare, ...extra }, model)[
      'input_tokens'
    ] as number;
  const estimate = (model: string, extra: JsonObject): number =>
    estimateInputTokens(model, requestTextOf('anthropic', 'native.messages'), { ...bare, ...extra });
  const definition = count('claude-sonnet-5', { tools }) - count('claude-sonnet-5', {}) - 346;
  assert.ok(definition > 10 && definition < 40, `definition ${definition}`);
  for (const [model, choice, prompt] of [
    ['claude-sonnet-5', undefined, 346],
    ['claude-sonnet-5', { type: 'auto' }, 346],
    ['claude-sonnet-5', { type: 'none' }, 346],
    ['claude-opus-4-1', { type: 'any' }, 313],
    ['claude-sonnet-5', { type: 'tool', name: 'ping' }, 313],
    ['claude-3-opus-20240229', undefined, 530],
    ['claude-3-opus-20240229', { type: 'any' }, 281],
    ['claude-3-haiku-20240307', undefined, 264],
    ['claude-3-5-haiku-20241022', { type: 'tool', name: 'ping' }, 340],
  ] as const) {
    const extra: JsonObject = choice === undefined ? { tools } : { tools, tool_choice: { ...choice } };
    assert.equal(
      count(model, extra) - count(model, {}),
      prompt + definition,
      `${model} ${JSON.stringify(choice)}`,
    );
    assert.equal(estimate(model, extra) - estimate(model, {}), prompt + definition, `estimate ${model}`);
  }
});

test('the agent request is counted through each serving family within 5% of the provider count', (t) => {
  for (const [family, serving] of Object.entries(SERVING)) {
    const { gateway, provider } = gatewayCount(serving, agent);
    const error = Math.abs(gateway - provider) / provider;
    t.diagnostic(`${family}: gateway ${gateway}, provider ${provider}, error ${(error * 100).toFixed(2)}%`);
    assert.ok(provider > 800, `${family}: the tools are counted (${provider})`);
    assert.ok(error < 0.05, `${family}: ${gateway} vs ${provider}`);
  }
});

test('a difference in tools alone is counted, as much as the provider counts it', (t) => {
  const { tools, ...withoutTools } = agent;
  const fewer = { ...agent, tools: (tools as JsonObject[]).slice(0, 3) };
  for (const [family, serving] of Object.entries(SERVING)) {
    const all = gatewayCount(serving, agent);
    // A tool turn needs its tool declared in some families: keep the first three.
    const some = gatewayCount(serving, fewer);
    const gatewayDiff = all.gateway - some.gateway;
    const providerDiff = all.provider - some.provider;
    t.diagnostic(`${family}: seven tools more: gateway +${gatewayDiff}, provider +${providerDiff}`);
    assert.ok(providerDiff > 300, `${family} provider +${providerDiff}`);
    assert.ok(Math.abs(gatewayDiff - providerDiff) / providerDiff < 0.05, `${family}: +${gatewayDiff}`);
  }
  // Without any tool, the Anthropic count drops by the definitions and the tool-use system prompt.
  const none = gatewayCount(SERVING['anthropic']!, withoutTools as JsonObject);
  const all = gatewayCount(SERVING['anthropic']!, agent);
  assert.ok(all.gateway - none.gateway > 346 + 700, `${none.gateway} -> ${all.gateway}`);
});

test('a Responses body: flat function tools and function call items are counted', () => {
  const text = requestTextOf('responses', 'responses' as ApiName);
  const body: JsonObject = {
    input: [
      { role: 'user', content: 'Weather in Oslo?' },
      { type: 'function_call', call_id: 'c1', name: 'get_weather', arguments: '{"city":"Oslo"}' },
      { type: 'function_call_output', call_id: 'c1', output: 'Rain, 7 degrees' },
    ],
  };
  const tools = [
    {
      type: 'function',
      name: 'get_weather',
      description: 'Current weather for a city.',
      parameters: { type: 'object', properties: { city: { type: 'string', description: 'City name' } } },
    },
  ];
  const without = estimateInputTokens('gpt-5.4-mini', text, body);
  const withTools = estimateInputTokens('gpt-5.4-mini', text, { ...body, tools });
  const sim = (b: JsonObject): number =>
    simulate(openaiRoutes['POST /v1/responses/input_tokens']!, b, 'gpt-5.4-mini')['input_tokens'] as number;
  assert.equal(withTools - without, sim({ ...body, tools }) - sim(body));
  assert.ok(withTools - without > 15, `${without} -> ${withTools}`);
});
