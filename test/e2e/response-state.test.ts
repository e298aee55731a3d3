// Stored responses end to end (docs/translation.md "Stored responses"): the Vercel AI SDK's default
// Responses multi-turn chat (which sends earlier assistant turns back as `item_reference` items) against
// claude-* and gemini-* models, three turns with a tool on the second, in file mode and in shared-store
// mode (each turn on the other of two gateways sharing one Redis); `previous_response_id` resolved for
// any provider; another subject's ids and a `store: false` response are not found.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, jsonSchema, type ModelMessage, stepCountIs, streamText, tool } from 'ai';
import { type RedisServer, startRedis } from '../support/redis.ts';
import { ACCESS_KEY, MASTER_KEY, postJson, type Stack, startStack } from '../support/stack.ts';

(globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS = false;

const OTHER_KEY = 'ak_test_client_b_secret';
const MODELS = { anthropic: 'claude-sonnet-5', gemini: 'gemini-3.8-flash' } as const;

const weather = tool({
  description: 'Current weather for a place',
  inputSchema: jsonSchema<{ location: string }>({
    type: 'object',
    properties: { location: { type: 'string' } },
    required: ['location'],
  }),
  execute: async ({ location }) => ({ location, forecast: 'sunny', celsius: 21 }),
});

/** What the gateway received upstream, as the simulator recorded it: the requests' JSON bodies. */
interface Turns {
  /** The gateway each turn goes to (shared-store mode alternates between two). */
  readonly urls: readonly string[];
}

/** Records the request bodies the AI SDK sends, so the test can see the references it used. */
function recordingFetch(sent: unknown[]): typeof fetch {
  return async (input, init) => {
    if (typeof init?.body === 'string') sent.push(JSON.parse(init.body));
    return fetch(input, init);
  };
}

function client(url: string, sent: unknown[], key = ACCESS_KEY) {
  return createOpenAI({ apiKey: key, baseURL: `${url}/v1`, fetch: recordingFetch(sent) });
}

function referencesIn(body: unknown): string[] {
  const input = (body as { input?: unknown }).input;
  if (!Array.isArray(input)) return [];
  return input.flatMap((item) =>
    (item as { type?: string }).type === 'item_reference' ? [String((item as { id: unknown }).id)] : [],
  );
}

/** The last body the gateway sent upstream (to any gateway's simulator) that contains `marker`. */
function upstreamBody(gateways: readonly Stack[], marker: string): string {
  const bodies = gateways.flatMap((g) => g.sim.requests.map((r) => r.body.toString('utf8')));
  const found = bodies.filter((b) => b.includes(marker)).at(-1);
  assert.ok(found !== undefined, `no upstream request contains ${marker}`);
  return found;
}

/** Three turns of the SDK's default chat; the second calls the tool and answers from its result. */
async function threeTurns(
  turns: Turns,
  model: string,
  stream: boolean,
): Promise<{ sent: unknown[]; firstReply: string }> {
  let firstReply = '';
  const sent: unknown[] = [];
  const messages: ModelMessage[] = [];
  const prompts = ['hello there', 'What is the weather in Kyoto?', 'thank you'];
  for (const [i, prompt] of prompts.entries()) {
    const url = turns.urls[i % turns.urls.length]!;
    messages.push({ role: 'user', content: prompt });
    const options = {
      model: client(url, sent).responses(model),
      messages,
      tools: { get_weather: weather },
      stopWhen: stepCountIs(3),
      maxRetries: 0,
    };
    let responseMessages: ModelMessage[];
    if (stream) {
      const s = streamText({ ...options, onError: ({ error }) => assert.fail(String(error)) });
      assert.match(await s.text, /\S/);
      responseMessages = await s.responseMessages;
      if (i === 0) firstReply = await s.text;
      if (i === 1) assert.equal((await s.steps)[0]?.toolCalls[0]?.toolName, 'get_weather');
    } else {
      const r = await generateText(options);
      assert.match(r.text, /\S/);
      responseMessages = r.responseMessages;
      if (i === 0) firstReply = r.text;
      if (i === 1) assert.equal(r.steps[0]?.toolCalls[0]?.toolName, 'get_weather');
    }
    messages.push(...responseMessages);
  }
  return { sent, firstReply };
}

function modeTests(name: string, setup: () => Promise<{ turns: Turns; gateways: Stack[] }>): void {
  describe(name, () => {
    let turns: Turns;
    let gateways: Stack[];
    before(async () => {
      ({ turns, gateways } = await setup());
    });
    after(async () => {
      for (const g of gateways ?? []) await g.close();
    });

    for (const [family, model] of Object.entries(MODELS)) {
      for (const stream of [false, true]) {
        test(`AI SDK three-turn chat with a tool on turn 2 -> ${family} (${stream ? 'streamText' : 'generateText'})`, async () => {
          const { sent, firstReply } = await threeTurns(turns, model, stream);
          // The SDK's default path: the earlier assistant turns went back as references...
          const last = sent.at(-1);
          assert.ok(referencesIn(last).length >= 2, `references in ${JSON.stringify(last)}`);
          // ... and the provider got the whole conversation: turn 1's reply, turn 2's tool call and result.
          const upstream = upstreamBody(gateways, 'thank you');
          assert.ok(upstream.includes(firstReply.slice(0, 40)), 'turn 1 reply sent upstream on turn 3');
          assert.match(upstream, /get_weather/);
          assert.match(upstream, /sunny/);
          assert.doesNotMatch(upstream, /item_reference|previous_response_id/);
        });
      }

      test(`previous_response_id continues a conversation -> ${family}`, async () => {
        const [first, second] = [turns.urls[0]!, turns.urls.at(-1)!];
        const one = await postJson(`${first}/v1/responses`, { model, input: 'my name is Ada' });
        assert.equal(one.status, 200, one.text);
        const id = (one.json as { id: string }).id;
        const two = await postJson(`${second}/v1/responses`, {
          model,
          previous_response_id: id,
          input: [{ role: 'user', content: 'what is my name?' }],
        });
        assert.equal(two.status, 200, two.text);
        // The provider got the first turn (question and answer) before the new one.
        const upstream = upstreamBody(gateways, 'what is my name?');
        assert.match(upstream, /my name is Ada[\s\S]*Echo[\s\S]*what is my name\?/);
        const got = await fetch(`${second}/v1/responses/${(two.json as { id: string }).id}`, {
          headers: { authorization: `Bearer ${ACCESS_KEY}` },
        });
        assert.equal(got.status, 200);
        const stored = (await got.json()) as { previous_response_id: string; output: unknown[] };
        assert.equal(stored.previous_response_id, id);
        assert.ok(stored.output.length > 0);
      });
    }

    test('one conversation over three provider families: Anthropic, OpenAI itself, Gemini', async () => {
      const [first, second] = [turns.urls[0]!, turns.urls.at(-1)!];
      const one = await postJson(`${first}/v1/responses`, { model: MODELS.anthropic, input: 'ping one' });
      assert.equal(one.status, 200, one.text);
      // OpenAI's own Responses API gets the conversation resolved too, without the gateway's ids.
      const two = await postJson(`${second}/v1/responses`, {
        model: 'gpt-5.4-mini',
        previous_response_id: (one.json as { id: string }).id,
        input: 'ping two',
        stream: true,
      });
      assert.equal(two.status, 200, two.text);
      const toOpenai = JSON.parse(upstreamBody(gateways, 'ping two')) as { input: unknown[] };
      assert.equal((toOpenai as { previous_response_id?: unknown }).previous_response_id, undefined);
      assert.equal(toOpenai.input.length, 3);
      assert.doesNotMatch(JSON.stringify(toOpenai.input), /"id":|item_reference/);
      // OpenAI's streamed reply was stored from its response.completed event: Gemini continues from it.
      const twoId = /"type":"response.completed".*?"id":"([^"]+)"/.exec(two.text)?.[1];
      assert.ok(twoId !== undefined, two.text);
      const three = await postJson(`${first}/v1/responses`, {
        model: MODELS.gemini,
        previous_response_id: twoId,
        input: 'ping three',
      });
      assert.equal(three.status, 200, three.text);
      assert.match(upstreamBody(gateways, 'ping three'), /ping one[\s\S]*ping two[\s\S]*ping three/);
    });

    test("another subject's response id and items are 404 in the Responses error shape", async () => {
      const url = turns.urls[0]!;
      const one = await postJson(`${url}/v1/responses`, { model: MODELS.anthropic, input: 'private' });
      assert.equal(one.status, 200, one.text);
      const body = one.json as { id: string; output: { id: string }[] };
      const other = { authorization: `Bearer ${OTHER_KEY}` };
      const prev = await postJson(
        `${url}/v1/responses`,
        { model: MODELS.gemini, previous_response_id: body.id, input: 'and now?' },
        other,
      );
      assert.equal(prev.status, 404, prev.text);
      assert.deepEqual(
        {
          type: (prev.json as { error: { type: string } }).error.type,
          code: (prev.json as { error: { code: string } }).error.code,
          param: (prev.json as { error: { param: string } }).error.param,
        },
        { type: 'invalid_request_error', code: 'previous_response_not_found', param: 'previous_response_id' },
      );
      const item = await postJson(
        `${url}/v1/responses`,
        { model: MODELS.gemini, input: [{ type: 'item_reference', id: body.output[0]!.id }] },
        other,
      );
      assert.equal(item.status, 404, item.text);
      assert.equal((item.json as { error: { code: string } }).error.code, 'item_not_found');
      assert.equal((item.json as { error: { param: string } }).error.param, 'input');
      const get = await fetch(`${url}/v1/responses/${body.id}`, { headers: other });
      assert.equal(get.status, 404);
      const del = await fetch(`${url}/v1/responses/${body.id}`, { method: 'DELETE', headers: other });
      assert.equal(del.status, 404);
      // The owner still has it, and may delete it.
      const own = { authorization: `Bearer ${ACCESS_KEY}` };
      assert.equal((await fetch(`${url}/v1/responses/${body.id}`, { headers: own })).status, 200);
      const deleted = await fetch(`${url}/v1/responses/${body.id}`, { method: 'DELETE', headers: own });
      assert.deepEqual(await deleted.json(), { id: body.id, object: 'response', deleted: true });
      assert.equal((await fetch(`${url}/v1/responses/${body.id}`, { headers: own })).status, 404);
    });

    test('a store: false response is not found, streamed or not; unknown ids are 404', async () => {
      const url = turns.urls[0]!;
      const own = { authorization: `Bearer ${ACCESS_KEY}` };
      const plain = await postJson(`${url}/v1/responses`, {
        model: MODELS.anthropic,
        input: 'forget me',
        store: false,
      });
      assert.equal(plain.status, 200, plain.text);
      const plainId = (plain.json as { id: string }).id;
      const got = await fetch(`${url}/v1/responses/${plainId}`, { headers: own });
      assert.equal(got.status, 404);
      assert.equal(((await got.json()) as { error: { code: string } }).error.code, 'response_not_found');
      const streamed = await postJson(`${url}/v1/responses`, {
        model: MODELS.gemini,
        input: 'forget me too',
        store: false,
        stream: true,
      });
      const streamedId = /"id":"(resp_[^"]+)"/.exec(streamed.text)?.[1];
      assert.ok(streamedId !== undefined, streamed.text);
      assert.equal((await fetch(`${url}/v1/responses/${streamedId}`, { headers: own })).status, 404);
      const next = await postJson(`${url}/v1/responses`, {
        model: MODELS.anthropic,
        previous_response_id: plainId,
        input: 'hello?',
      });
      assert.equal(next.status, 404, next.text);
      assert.equal((next.json as { error: { code: string } }).error.code, 'previous_response_not_found');
    });

    test('master-key requests with no fallback subject are not stored', async () => {
      const url = turns.urls[0]!;
      const master = { authorization: `Bearer ${MASTER_KEY}` };
      const one = await postJson(`${url}/v1/responses`, { model: MODELS.anthropic, input: 'hi' }, master);
      assert.equal(one.status, 200, one.text);
      const id = (one.json as { id: string }).id;
      assert.equal((await fetch(`${url}/v1/responses/${id}`, { headers: master })).status, 404);
    });
  });
}

const KEYS_ENV = { ROUTER_ACCESS_KEY_CLIENT_B: OTHER_KEY };

modeTests('file mode', async () => {
  const stack = await startStack({ env: KEYS_ENV });
  return { turns: { urls: [stack.url] }, gateways: [stack] };
});

let redis: RedisServer | undefined;
after(async () => {
  await redis?.close();
});

modeTests('shared-store mode (two gateways, one Redis)', async () => {
  redis = await startRedis();
  const storeYaml = [
    'store:',
    '  enabled: true',
    `  addr: ${redis.url}`,
    `  key_prefix: "resp-e2e-${process.pid}:"`,
    '  access_key_hash_secret: responses-e2e-secret',
    '  access_key_mode: file_only',
  ].join('\n');
  const a = await startStack({ env: KEYS_ENV, extraYaml: storeYaml });
  const b = await startStack({ env: KEYS_ENV, extraYaml: storeYaml });
  return { turns: { urls: [a.url, b.url] }, gateways: [a, b] };
});
