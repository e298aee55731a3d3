// The counting endpoints of the three client families against every provider family, through the
// shipped configuration: forwarded to the provider's own endpoint where it has one (translated across
// families), counted by the gateway where it has none, refused (never made up) when the gateway cannot
// count the input, and never billed.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import OpenAI from 'openai';
import { type BillingStack, startBillingStack } from '../support/billing-stack.ts';
import { ACCESS_KEY } from '../support/stack.ts';

let stack: BillingStack;
let anthropic: Anthropic;
let gemini: GoogleGenAI;
let openai: OpenAI;
/** Request ids of counting calls that succeeded; none may ever reach the billing service. */
const countIds: string[] = [];

before(async () => {
  stack = await startBillingStack();
  anthropic = new Anthropic({
    apiKey: ACCESS_KEY,
    baseURL: stack.url,
    maxRetries: 0,
    fetch: async (input, init) => {
      const reply = await fetch(input, init);
      if (reply.ok && String(input).includes('count_tokens'))
        countIds.push(reply.headers.get('x-router-request-id') ?? '');
      return reply;
    },
  });
  gemini = new GoogleGenAI({ apiKey: ACCESS_KEY, httpOptions: { baseUrl: stack.url } });
  openai = new OpenAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1`, maxRetries: 0 });
});
after(async () => {
  await stack?.close();
});

/** Where a provider family's counting request must land, or undefined: the gateway counts itself. */
const FORWARDED: Record<string, RegExp | undefined> = {
  'claude-sonnet-5': /^\/v1\/messages\/count_tokens$/,
  'gemini-3.8-flash': /^\/v1beta\/models\/gemini-3\.8-flash:countTokens$/,
  // OpenAI counts Responses bodies only: reached through the pivot and a chat -> Responses translation.
  'gpt-5.4-mini': /^\/v1\/responses\/input_tokens$/,
  'deepseek-chat': undefined,
};

/** Claude Code's request shape: structured system blocks with cache control, and tools. */
const claudeCodeShape = {
  system: [
    { type: 'text' as const, text: 'You are a coding agent.', cache_control: { type: 'ephemeral' as const } },
    { type: 'text' as const, text: 'Answer briefly.' },
  ],
  tools: [
    {
      name: 'read_file',
      description: 'Read a file',
      input_schema: { type: 'object' as const, properties: { path: { type: 'string' } }, required: ['path'] },
    },
  ],
  messages: [{ role: 'user' as const, content: 'How many tokens is this conversation so far?' }],
};

function lastUpstreamPath(before: number): string | undefined {
  const requests = stack.upstream.requests;
  return requests.length > before ? requests.at(-1)?.path : undefined;
}

describe('Anthropic count_tokens (Claude Code calls it every turn, with ?beta=true)', () => {
  for (const [model, forwarded] of Object.entries(FORWARDED)) {
    test(`${model}: a real count, ${forwarded ? 'from the provider' : 'from the gateway'}`, async () => {
      const before = stack.upstream.requests.length;
      const count = await anthropic.beta.messages.countTokens({ model, ...claudeCodeShape });
      assert.ok(count.input_tokens > 10, `input_tokens ${count.input_tokens}`);
      const path = lastUpstreamPath(before);
      if (forwarded) assert.match(path ?? '', forwarded);
      else assert.equal(path, undefined, 'counted by the gateway, nothing sent upstream');
    });
  }

  test('the same conversation counts more with a longer message', async () => {
    const short = await anthropic.messages.countTokens({
      model: 'gpt-5.4-mini',
      messages: [{ role: 'user', content: 'hi' }],
    });
    const long = await anthropic.messages.countTokens({
      model: 'gpt-5.4-mini',
      messages: [{ role: 'user', content: 'hi '.repeat(200) }],
    });
    assert.ok(long.input_tokens > short.input_tokens + 150, `${short.input_tokens} -> ${long.input_tokens}`);
  });

  test('the count says who made it: x-router-token-count provider or estimated', async () => {
    for (const [model, forwarded] of Object.entries(FORWARDED)) {
      const reply = await fetch(`${stack.url}/v1/messages/count_tokens`, {
        method: 'POST',
        headers: {
          'x-api-key': ACCESS_KEY,
          'anthropic-version': '2023-06-01',
          'content-type': 'application/json',
        },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
      });
      assert.equal(reply.status, 200, model);
      assert.equal(reply.headers.get('x-router-token-count'), forwarded ? 'provider' : 'estimated', model);
    }
  });

  test('an image is counted by a provider that can count it, through the pivot', async () => {
    const image = { type: 'base64' as const, media_type: 'image/png' as const, data: 'iVBORw0KGgo=' };
    const before = stack.upstream.requests.length;
    const count = await anthropic.messages.countTokens({
      model: 'gpt-5.4-mini',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image', source: image },
            { type: 'text', text: 'What is it?' },
          ],
        },
      ],
    });
    assert.ok(count.input_tokens > 3, `input_tokens ${count.input_tokens}`);
    assert.match(lastUpstreamPath(before) ?? '', /^\/v1\/responses\/input_tokens$/);
  });

  test('input the gateway cannot count is refused, never answered with a made-up number', async () => {
    const image = { type: 'base64' as const, media_type: 'image/png' as const, data: 'iVBORw0KGgo=' };
    await assert.rejects(
      anthropic.messages.countTokens({
        model: 'deepseek-chat',
        messages: [{ role: 'user', content: [{ type: 'image', source: image }] }],
      }),
      (err) => {
        assert.ok(err instanceof Anthropic.UnprocessableEntityError, `got ${String(err)}`);
        assert.match(err.message, /cannot count/);
        return true;
      },
    );
  });
});

describe('Gemini countTokens', () => {
  for (const [model, forwarded] of Object.entries({
    ...FORWARDED,
    'claude-sonnet-5': /^\/v1\/messages\/count_tokens$/,
  })) {
    test(`${model}: totalTokens ${forwarded ? 'from the provider' : 'from the gateway'}`, async () => {
      const before = stack.upstream.requests.length;
      const count = await gemini.models.countTokens({
        model,
        contents: 'The quick brown fox jumps over the lazy dog.',
      });
      assert.ok((count.totalTokens ?? 0) > 5, `totalTokens ${count.totalTokens}`);
      const path = lastUpstreamPath(before);
      if (forwarded) assert.match(path ?? '', forwarded);
      else assert.equal(path, undefined);
    });
  }
});

describe('Responses input_tokens', () => {
  for (const [model, forwarded] of Object.entries({
    ...FORWARDED,
    'gpt-5.4-mini': /^\/v1\/responses\/input_tokens$/,
  })) {
    test(`${model}: input_tokens ${forwarded ? 'from the provider' : 'from the gateway'}`, async () => {
      const before = stack.upstream.requests.length;
      const count = await openai.responses.inputTokens.count({
        model,
        instructions: 'Be brief.',
        input: [{ role: 'user', content: 'The quick brown fox jumps over the lazy dog.' }],
      });
      assert.equal(count.object, 'response.input_tokens');
      assert.ok(count.input_tokens > 5, `input_tokens ${count.input_tokens}`);
      const path = lastUpstreamPath(before);
      if (forwarded) assert.match(path ?? '', forwarded);
      else assert.equal(path, undefined);
    });
  }
});

test('counting calls are never billed; a model call next to them is', async () => {
  const { response } = await openai.chat.completions
    .create({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'bill me' }] })
    .withResponse();
  const chat = response.headers.get('x-router-request-id');
  assert.ok(chat);
  assert.ok(countIds.length >= 4, 'the counting tests above ran first');
  // Events are delivered in the order they were queued: once the model call's is in, so is any before it.
  for (let n = 1; !stack.billing.events.some((e) => e.external_event_id === chat); n++) {
    await stack.billing.waitForEvents(n, 10_000);
  }
  const billed = stack.billing.events.map((e) => e.external_event_id);
  assert.ok(billed.includes(chat), 'the model call is billed');
  for (const id of countIds) assert.ok(!billed.includes(id), `count ${id} was billed`);
});
