// A coding agent's request (test/fixtures/usage/agent-request.json: system blocks, ten tools, a tool
// turn) through the shipped configuration, for a model of each serving family: what count_tokens answers
// and what message_start states are within 5% of the input the provider then bills (the simulator counts
// by the published rules, test/fixtures/usage/counting-rules.md), and a difference in tools alone is
// counted.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { ssePayloads } from '../support/client-text.ts';
import { postJson, type Stack, startStack } from '../support/stack.ts';

type Json = Record<string, unknown>;

const agent = (
  JSON.parse(readFileSync(new URL('../fixtures/usage/agent-request.json', import.meta.url), 'utf8')) as {
    request: Json;
  }
).request;
const { model: _model, max_tokens: _max, ...countBody } = agent;

/** One model per serving family of the shipped files; how each count is made. */
const MODELS = {
  'claude-sonnet-5': 'forwarded to Anthropic',
  'gemini-3.8-flash': 'translated to Gemini countTokens',
  'gpt-5.4-mini': 'asked of OpenAI through Responses input_tokens',
  'deepseek-chat': 'counted by the gateway (OpenAI-compatible)',
};
const HEADERS = { 'anthropic-version': '2023-06-01' };

let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(async () => {
  await stack?.close();
});

async function count(model: string, body: Json): Promise<number> {
  const reply = await postJson(`${stack.url}/v1/messages/count_tokens`, { model, ...body }, HEADERS);
  assert.equal(reply.status, 200, reply.text);
  return (reply.json as { input_tokens: number }).input_tokens;
}

async function billed(model: string, body: Json): Promise<number> {
  const reply = await postJson(`${stack.url}/v1/messages`, { model, max_tokens: 256, ...body }, HEADERS);
  assert.equal(reply.status, 200, reply.text);
  return (reply.json as { usage: { input_tokens: number } }).usage.input_tokens;
}

/** message_start's input and the final input of message_delta (or message_start when it has none). */
async function streamed(model: string, body: Json): Promise<{ start: number; final: number }> {
  const reply = await postJson(
    `${stack.url}/v1/messages`,
    { model, max_tokens: 256, stream: true, ...body },
    HEADERS,
  );
  assert.equal(reply.status, 200, reply.text);
  let start: number | undefined;
  let final: number | undefined;
  for (const event of ssePayloads(reply.text) as Json[]) {
    if (event['type'] === 'message_start') {
      start = ((event['message'] as Json)['usage'] as Json)['input_tokens'] as number;
    }
    if (event['type'] === 'message_delta') {
      const input = (event['usage'] as Json | undefined)?.['input_tokens'];
      if (typeof input === 'number') final = input;
    }
  }
  assert.ok(start !== undefined, 'message_start');
  return { start, final: final ?? start };
}

const within = (a: number, b: number, bound = 0.05): boolean => Math.abs(a - b) / b < bound;

for (const [model, how] of Object.entries(MODELS)) {
  test(`${model} (${how}): count_tokens and message_start within 5% of the billed input`, async (t) => {
    const input = await billed(model, countBody);
    const counted = await count(model, countBody);
    const { start, final } = await streamed(model, countBody);
    t.diagnostic(`billed ${input}, count_tokens ${counted}, message_start ${start}, final ${final}`);
    assert.ok(input > 800, `the tools are billed: ${input}`);
    assert.ok(within(counted, input), `count_tokens ${counted} vs billed ${input}`);
    assert.ok(within(start, final), `message_start ${start} vs final ${final}`);
  });
}

test('a difference in tools alone changes the count as much as the billed input', async (t) => {
  const fewer = { ...countBody, tools: (countBody['tools'] as Json[]).slice(0, 3) };
  for (const model of Object.keys(MODELS)) {
    const countDiff = (await count(model, countBody)) - (await count(model, fewer));
    const billedDiff = (await billed(model, countBody)) - (await billed(model, fewer));
    t.diagnostic(`${model}: seven tools more: count +${countDiff}, billed +${billedDiff}`);
    assert.ok(billedDiff > 300, `${model}: billed +${billedDiff}`);
    assert.ok(within(countDiff, billedDiff), `${model}: count +${countDiff} vs billed +${billedDiff}`);
  }
});

test("a Gemini client's count for an OpenAI-served model is framed as the chat the provider bills", async () => {
  const body = {
    contents: [{ role: 'user', parts: [{ text: 'The quick brown fox jumps over the lazy dog.' }] }],
  };
  const base = `${stack.url}/v1beta/models/gpt-5.4-mini`;
  const counted = await postJson(`${base}:countTokens`, body);
  const generated = await postJson(`${base}:generateContent`, body);
  assert.equal(counted.status, 200, counted.text);
  assert.equal(generated.status, 200, generated.text);
  const total = (counted.json as { totalTokens: number }).totalTokens;
  const prompt = (generated.json as { usageMetadata: { promptTokenCount: number } }).usageMetadata
    .promptTokenCount;
  assert.equal(total, prompt);
});

/** A PNG's signature and header chunk: enough for its size to be read (800 x 600). */
function pngHeader(width: number, height: number): string {
  const b = Buffer.alloc(33);
  b.writeUInt32BE(0x89504e47, 0);
  b.writeUInt32BE(0x0d0a1a0a, 4);
  b.writeUInt32BE(13, 8);
  b.write('IHDR', 12, 'latin1');
  b.writeUInt32BE(width, 16);
  b.writeUInt32BE(height, 20);
  return b.toString('base64');
}

test('an image is counted by each serving family as its published image rule says', async (t) => {
  const image = { type: 'base64', media_type: 'image/png', data: pngHeader(800, 600) };
  const body = {
    messages: [
      {
        role: 'user',
        content: [
          { type: 'image', source: image },
          { type: 'text', text: 'What is shown?' },
        ],
      },
    ],
  };
  const text = { messages: [{ role: 'user', content: 'What is shown?' }] };
  for (const model of Object.keys(MODELS)) {
    const input = await billed(model, body);
    const imageTokens = input - (await billed(model, text));
    const { start, final } = await streamed(model, body);
    t.diagnostic(`${model}: billed ${input} (image ${imageTokens}), message_start ${start}`);
    assert.ok(imageTokens > 80, `${model}: the image is billed (${imageTokens})`);
    assert.ok(within(start, final), `${model}: message_start ${start} vs final ${final}`);
    if (model === 'deepseek-chat') continue; // the gateway does not answer a count with media itself
    const counted = await count(model, body);
    assert.ok(within(counted, input), `${model}: count_tokens ${counted} vs billed ${input}`);
  }
});

test("when OpenAI's counting endpoint cannot be reached, the gateway counts itself and says so", async () => {
  // Port 9 (discard) refuses the connection at once.
  const down = await startStack({ baseUrls: { openai: 'http://127.0.0.1:9' } });
  try {
    const reply = await postJson(
      `${down.url}/v1/messages/count_tokens`,
      { model: 'gpt-5.4-mini', ...countBody },
      HEADERS,
    );
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.headers.get('x-router-token-count'), 'estimated');
    const counted = (reply.json as { input_tokens: number }).input_tokens;
    assert.ok(within(counted, await billed('gpt-5.4-mini', countBody)), `estimate ${counted}`);
  } finally {
    await down.close();
  }
});
