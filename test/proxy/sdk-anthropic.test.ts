// End to end with @anthropic-ai/sdk: Messages to a Claude model (native passthrough) and to an
// OpenAI-compatible provider through the anthropic_to_openai translator.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { createReplyLog, type ReplyLog, UPSTREAM_KEY_RE } from '../support/sim-providers.ts';
import { ACCESS_KEY, type Stack, startStack } from '../support/stack.ts';

let stack: Stack;
/** DeepSeek's shipped file uses `/chat/completions` below its base URL; this simulator sits at `/v1`. */
let compat: UpstreamSim;
let claude: Anthropic;
let viaDeepseek: Anthropic;
let log: ReplyLog;

const weatherTool = {
  name: 'get_weather',
  description: 'Current weather for a place',
  input_schema: { type: 'object' as const, properties: { location: { type: 'string' } } },
};

before(async () => {
  compat = await startUpstreamSim();
  stack = await startStack({ baseUrls: { deepseek: compat.url } });
  log = createReplyLog();
  claude = new Anthropic({ apiKey: ACCESS_KEY, baseURL: stack.url, maxRetries: 0, fetch: log.fetch });
  viaDeepseek = new Anthropic({
    apiKey: ACCESS_KEY,
    baseURL: stack.url,
    maxRetries: 0,
    fetch: log.fetch,
    defaultHeaders: { 'x-router-provider': 'deepseek' },
  });
});
after(async () => {
  await stack.close();
  await compat.close();
});

describe('Claude model (native passthrough)', () => {
  test('messages.create: echo reply, usage, the upstream got the provider key and not the access key', async () => {
    const msg = await claude.messages.create({
      model: 'claude-sonnet-5',
      max_tokens: 500,
      messages: [{ role: 'user', content: 'hello from the anthropic sdk' }],
    });
    const block = msg.content[0];
    assert.ok(block!.type === 'text');
    assert.match(block.text, /^Echo: hello from the anthropic sdk\./);
    assert.equal(msg.stop_reason, 'end_turn');
    assert.ok(msg.usage.input_tokens > 0 && msg.usage.output_tokens > 0);
    const up = stack.sim.requests.findLast((r) => r.path === '/v1/messages');
    assert.equal(up?.headers['x-api-key'], 'sim-anthropic-key');
    assert.ok(up?.headers['anthropic-version']);
    assert.doesNotMatch(JSON.stringify(up?.headers), new RegExp(ACCESS_KEY));
  });

  test('messages.stream().finalMessage(): text and a tool_use input accumulate', async () => {
    const stream = claude.messages.stream({
      model: 'claude-sonnet-5',
      max_tokens: 500,
      tools: [weatherTool],
      messages: [{ role: 'user', content: 'What is the weather in Kyoto?' }],
    });
    const events: string[] = [];
    stream.on('streamEvent', (e) => events.push(e.type));
    const final = await stream.finalMessage();
    assert.equal(final.stop_reason, 'tool_use');
    const tool = final.content.find((b) => b.type === 'tool_use');
    assert.ok(tool && tool.type === 'tool_use');
    assert.equal(tool.name, 'get_weather');
    assert.deepEqual(tool.input, { location: 'Kyoto', unit: 'celsius' });
    assert.ok(final.usage.output_tokens > 1);
    assert.equal(events[0], 'message_start');
    assert.equal(events.at(-1), 'message_stop');
  });

  test('streamed text equals the plain reply', async () => {
    const params = {
      model: 'claude-sonnet-5',
      max_tokens: 500,
      messages: [{ role: 'user' as const, content: 'stream and plain agree' }],
    };
    const plain = await claude.messages.create(params);
    const text = await claude.messages.stream(params).finalText();
    const block = plain.content[0];
    assert.ok(block!.type === 'text');
    assert.equal(text, block.text);
  });
});

describe('OpenAI-compatible provider through anthropic_to_openai (x-router-provider: deepseek)', () => {
  test('messages.create is translated to chat completions and back', async () => {
    const before = stack.sim.requests.length;
    const msg = await viaDeepseek.messages.create({
      model: 'deepseek-chat',
      max_tokens: 500,
      system: 'be brief',
      messages: [{ role: 'user', content: 'hello deepseek via anthropic' }],
    });
    const block = msg.content[0];
    assert.ok(block!.type === 'text');
    assert.match(block.text, /^Echo: hello deepseek via anthropic\./);
    assert.equal(msg.stop_reason, 'end_turn');
    assert.equal(msg.model, 'deepseek-chat');
    assert.ok(msg.usage.input_tokens > 0 && msg.usage.output_tokens > 0);
    const up = compat.requests.at(-1);
    assert.equal(up?.path, '/v1/chat/completions');
    assert.equal(up?.headers.authorization, 'Bearer sim-deepseek-key');
    const body = up?.json as { model: string; messages: { role: string; content: unknown }[] };
    assert.equal(body.model, 'deepseek-chat');
    assert.equal(body.messages[0]!.role, 'system');
    assert.equal(stack.sim.requests.length, before, 'nothing went to the Claude upstream');
  });

  test('messages.stream().finalMessage(): streamed text and a tool call come back as Anthropic events', async () => {
    const params = {
      model: 'deepseek-chat',
      max_tokens: 500,
      messages: [{ role: 'user' as const, content: 'stream deepseek via anthropic' }],
    };
    const plain = await viaDeepseek.messages.create(params);
    const text = await viaDeepseek.messages.stream(params).finalText();
    const block = plain.content[0];
    assert.ok(block!.type === 'text');
    assert.equal(text, block.text);
    const upBody = compat.requests.at(-1)?.json as { stream: boolean; stream_options?: unknown };
    assert.equal(upBody.stream, true);

    const final = await viaDeepseek.messages
      .stream({
        model: 'deepseek-chat',
        max_tokens: 500,
        tools: [weatherTool],
        messages: [{ role: 'user', content: 'What is the weather in Oslo?' }],
      })
      .finalMessage();
    assert.equal(final.stop_reason, 'tool_use');
    const tool = final.content.find((b) => b.type === 'tool_use');
    assert.ok(tool && tool.type === 'tool_use');
    assert.equal(tool.name, 'get_weather');
    assert.deepEqual(tool.input, { location: 'Oslo', unit: 'celsius' });
    assert.ok(final.usage.output_tokens > 0, 'usage from the final chunk reached message_delta');
  });
});

test('no reply of this suite carries an upstream key', async () => {
  const replies = await log.settled();
  assert.ok(replies.length >= 6);
  for (const r of replies) {
    assert.doesNotMatch(r.headers, UPSTREAM_KEY_RE, `headers of ${r.url}`);
    assert.doesNotMatch(r.body, UPSTREAM_KEY_RE, `body of ${r.url}`);
  }
});

describe('model listing in the Anthropic shape (the SDK lists with its x-api-key)', () => {
  test('models.list() and models.retrieve(): every model a Messages client can call', async () => {
    const ids: string[] = [];
    for await (const m of claude.models.list()) {
      assert.equal(m.type, 'model');
      assert.ok(!Number.isNaN(Date.parse(m.created_at)));
      ids.push(m.id);
    }
    // Every listed model of the registry is callable from a Messages client now (translated or native).
    for (const id of ['claude-sonnet-5', 'gpt-5.4-mini', 'gemini-3.8-flash']) assert.ok(ids.includes(id), id);
    const one = await claude.models.retrieve('claude-sonnet-5');
    assert.equal(one.id, 'claude-sonnet-5');
    assert.equal(one.display_name, 'claude-sonnet-5');
  });
});
