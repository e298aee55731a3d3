// x-router-provider may name only a provider the gateway offers: one it holds the credentials for, and a
// keyless local server only when the registry routes to it or its base URL variable is set. Any other
// name is the client's 400 provider_not_offered in each family's shape (the official SDKs raise it),
// never a 5xx that would count against the provider's error rate. A keyless provider the registry
// chooses stays the operator's 503 provider_key_missing.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { ApiError, GoogleGenAI } from '@google/genai';
import OpenAI from 'openai';
import { capturingLogger, type LogLine } from '../support/billing-stack.ts';
import { ACCESS_KEY, postJson, type Stack, startStack } from '../support/stack.ts';

const ERROR_LEVEL = 50;

/** A provider file whose rules send no credential (no auth block), at an address nothing listens on. */
function keylessProvider(name: string): string {
  return `syntax "next-router/0.1";
provider "${name}" {
  defaults {
    upstream_config { base_url = "http://127.0.0.1:1"; }
    response { resp_passthrough; }
    metrics { usage_extract openai_chat_completions; }
  }
  match api = "chat.completions" { upstream { set_path "/v1/chat/completions"; } }
}
`;
}

function chat(model: string): Record<string, unknown> {
  return { model, messages: [{ role: 'user', content: 'hi' }] };
}

interface OpenAiError {
  message: string;
  type: string;
  param?: string;
  code: string;
}

function errorOf(json: unknown): OpenAiError {
  return (json as { error: OpenAiError }).error;
}

let stack: Stack;
const logs: LogLine[] = [];

before(async () => {
  stack = await startStack({
    providers: {
      // Routed by the registry, no base URL variable: offered (its address is the operator's choice).
      routedlocal: keylessProvider('routedlocal'),
      // Not routed, but its base URL variable is set (to the simulator, by the stack): offered.
      pointedlocal: keylessProvider('pointedlocal'),
    },
    modelsYaml: [
      'models:',
      '  "gpt-*": { providers: [openai] }',
      '  "mistral-*": { providers: [mistral] }',
      '  local-model: { providers: [routedlocal] }',
      '',
    ].join('\n'),
    // Empty variables count as unset.
    env: {
      // Routed by the registry, no key.
      ROUTER_PROVIDER_MISTRAL_API_KEY: '',
      // Not routed, no key.
      ROUTER_PROVIDER_GROQ_API_KEY: '',
      // auth_none, not routed, no base URL variable: not offered.
      ROUTER_PROVIDER_OLLAMA_BASE_URL: '',
      ROUTER_PROVIDER_ROUTEDLOCAL_BASE_URL: '',
    },
    sim: { requireAuth: false },
    logger: capturingLogger(logs, 'info'),
  });
});
after(() => stack?.close());

async function viaHeader(provider: string, model = 'some-model') {
  return postJson(`${stack.url}/v1/chat/completions`, chat(model), { 'x-router-provider': provider });
}

describe('a provider that is not offered, named by x-router-provider', () => {
  const cases: [provider: string, reason: RegExp][] = [
    ['no-such-provider', /no provider of that name exists/],
    ['mistral', /no upstream credentials/],
    ['groq', /no upstream credentials/],
    ['ollama', /local server this gateway is not set up to use/],
  ];
  for (const [provider, reason] of cases) {
    test(`${provider}: 400 provider_not_offered naming the header, the reason and what to do`, async () => {
      const before = logs.length;
      const sent = stack.sim.requests.length;
      const reply = await viaHeader(provider);
      assert.equal(reply.status, 400, reply.text);
      const error = errorOf(reply.json);
      assert.equal(error.code, 'provider_not_offered');
      assert.equal(error.type, 'invalid_request_error');
      assert.equal(error.param, 'x-router-provider');
      assert.match(error.message, new RegExp(`^The x-router-provider header names '${provider}'`));
      assert.match(error.message, reason);
      assert.match(error.message, /name another provider, or leave the header out to route by model/);
      assert.doesNotMatch(reply.text, /ROUTER_PROVIDER|api_key|127\.0\.0\.1/);
      assert.equal(stack.sim.requests.length, sent, 'nothing went upstream');
      const errors = logs.slice(before).filter((l) => l.level >= ERROR_LEVEL);
      assert.deepEqual(errors, [], 'a client fault is not logged as an error');
    });
  }

  test('the openai SDK raises BadRequestError with the code and the param', async () => {
    const openai = new OpenAI({
      apiKey: ACCESS_KEY,
      baseURL: `${stack.url}/v1`,
      maxRetries: 0,
      defaultHeaders: { 'x-router-provider': 'mistral' },
    });
    await assert.rejects(
      openai.chat.completions.create({ model: 'mistral-small', messages: [{ role: 'user', content: 'x' }] }),
      (err: unknown) => {
        assert.ok(err instanceof OpenAI.BadRequestError, String(err));
        assert.equal(err.status, 400);
        assert.equal(err.code, 'provider_not_offered');
        assert.equal(err.param, 'x-router-provider');
        assert.match(err.message, /x-router-provider header names 'mistral'/);
        return true;
      },
    );
    // The Responses family shares the shape.
    await assert.rejects(openai.responses.create({ model: 'mistral-small', input: 'x' }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.BadRequestError, String(err));
      assert.equal(err.code, 'provider_not_offered');
      return true;
    });
  });

  test('the Anthropic SDK raises BadRequestError of type invalid_request_error', async () => {
    const anthropic = new Anthropic({
      apiKey: ACCESS_KEY,
      baseURL: stack.url,
      maxRetries: 0,
      defaultHeaders: { 'x-router-provider': 'no-such-provider' },
    });
    await assert.rejects(
      anthropic.messages.create({
        model: 'claude-sonnet-5',
        max_tokens: 10,
        messages: [{ role: 'user', content: 'x' }],
      }),
      (err: unknown) => {
        assert.ok(err instanceof Anthropic.BadRequestError, String(err));
        const body = err.error as { type: string; error: { type: string; message: string; code: string } };
        assert.equal(body.type, 'error');
        assert.equal(body.error.type, 'invalid_request_error');
        assert.equal(body.error.code, 'provider_not_offered');
        assert.match(body.error.message, /x-router-provider header names 'no-such-provider'/);
        return true;
      },
    );
  });

  test('the Google SDK raises ApiError 400 INVALID_ARGUMENT with the reason', async () => {
    const gemini = new GoogleGenAI({
      apiKey: ACCESS_KEY,
      httpOptions: { baseUrl: stack.url, headers: { 'x-router-provider': 'ollama' } },
    });
    await assert.rejects(
      gemini.models.generateContent({ model: 'gemini-3.8-flash', contents: 'x' }),
      (err: unknown) => {
        assert.ok(err instanceof ApiError, String(err));
        assert.equal(err.status, 400);
        assert.match(err.message, /INVALID_ARGUMENT/);
        assert.match(err.message, /x-router-provider header names 'ollama'/);
        return true;
      },
    );
    const raw = await postJson(
      `${stack.url}/v1beta/models/gemini-3.8-flash:generateContent`,
      { contents: [{ role: 'user', parts: [{ text: 'x' }] }] },
      { 'x-router-provider': 'ollama' },
    );
    const error = (raw.json as { error: { code: number; status: string; details: { reason: string }[] } })
      .error;
    assert.equal(error.code, 400);
    assert.equal(error.status, 'INVALID_ARGUMENT');
    assert.equal(error.details[0]?.reason, 'provider_not_offered');
  });
});

describe('a provider that is offered', () => {
  test('a keyless local server with its base URL variable set is served', async () => {
    const reply = await viaHeader('pointedlocal');
    assert.equal(reply.status, 200, reply.text);
    assert.equal(stack.sim.requests.at(-1)?.path, '/v1/chat/completions');
  });

  test('a keyless local server the registry routes to is offered; unreachable, it stays 502', async () => {
    const reply = await viaHeader('routedlocal');
    assert.equal(reply.status, 502, reply.text);
    assert.equal(errorOf(reply.json).code, 'upstream_unreachable');
  });

  test('a provider with its key is served', async () => {
    const reply = await viaHeader('openai', 'gpt-5.4-mini');
    assert.equal(reply.status, 200, reply.text);
  });
});

test('a keyless provider the registry chooses is still the operator’s 503 provider_key_missing', async () => {
  const reply = await postJson(`${stack.url}/v1/chat/completions`, chat('mistral-small'));
  assert.equal(reply.status, 503, reply.text);
  const error = errorOf(reply.json);
  assert.equal(error.code, 'provider_key_missing');
  assert.match(error.message, /'mistral'/);
});
