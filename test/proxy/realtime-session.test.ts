// Realtime sessions through the gateway, against the upstream simulator's OpenAI Realtime and Gemini
// Live endpoints and the billing simulator: every frame relayed unchanged both ways, one billing event
// per model response with the simulator's usage, the client's key never upstream, refusals at upgrade.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ClientOptions } from 'ws';
import { type BillingStack, startBillingStack } from '../support/billing-stack.ts';
import { type Json, RealtimeClient } from '../support/realtime-client.ts';
import { ACCESS_KEY } from '../support/stack.ts';

const GEMINI_PATH = '/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent';

let stack: BillingStack;
let wsBase: string;

before(async () => {
  // Audio tokens as items of their own, which the audio tests below check (docs/billing.md "Charge items").
  stack = await startBillingStack({ billing: { item_detail: 'detailed' } });
  wsBase = stack.url.replace(/^http/, 'ws');
});

after(async () => {
  await stack?.close();
});

/** A client on the gateway at `path`. */
function openClient(
  path: string,
  opts: ClientOptions = {},
  protocols: string[] = [],
): Promise<RealtimeClient> {
  return RealtimeClient.open(`${wsBase}${path}`, opts, protocols);
}

const bearer = { headers: { authorization: `Bearer ${ACCESS_KEY}` } };

/**
 * Once the simulator's session of the closed client has closed too: what the client got is what the
 * upstream sent, and what the upstream got is `sent`, frame for frame. Returns that upstream session.
 */
async function relayedUnchanged(client: RealtimeClient, sent: readonly string[]) {
  const upstream = stack.upstream.realtime.sessions.at(-1)!;
  await stack.upstream.waitFor(() => upstream.closed !== undefined);
  assert.deepEqual(
    client.texts.map((t) => JSON.parse(t)),
    upstream.sent,
  );
  assert.deepEqual(
    upstream.received,
    sent.map((t) => JSON.parse(t)),
  );
  return upstream;
}

describe('OpenAI Realtime', () => {
  test('every frame relayed unchanged; one billing event per response with the usage reported', async () => {
    const rid = 'rt-openai-1';
    const client = await openClient('/v1/realtime?model=gpt-realtime', {
      headers: { ...bearer.headers, 'x-router-request-id': rid },
    });
    await client.until((m) => m.type === 'session.created');
    const sent = await client.textConversation('hello there');
    sent.push(client.send({ type: 'response.create' }));
    const first = await client.until((m) => m.type === 'response.done');
    sent.push(client.send({ type: 'response.create' }));
    const second = await client.until((m) => m.type === 'response.done');
    await client.until((m) => m.type === 'rate_limits.updated');
    client.ws.close(1000, 'bye');
    await client.closed;

    // Both directions, frame for frame.
    const upstream = await relayedUnchanged(client, sent);
    assert.equal(upstream.closed?.code, 1000);
    // The gateway's credentials upstream, never the client's key.
    assert.equal(upstream.headers.authorization, 'Bearer sim-openai-key');
    assert.ok(!JSON.stringify(upstream.headers).includes(ACCESS_KEY));
    assert.match(upstream.path, /^\/v1\/realtime\?model=gpt-realtime$/);

    for (const done of [first, second]) {
      const event = await stack.eventFor(`${rid}:${done.response.id}`);
      assert.equal(event.idempotency_key, `router:${rid}:${done.response.id}`);
      assert.equal(event.raw_json.api, 'realtime');
      assert.equal(event.raw_json.model, 'gpt-realtime');
      assert.equal(event.raw_json.usage.input_tokens, done.response.usage.input_tokens);
      assert.equal(event.raw_json.usage.output_tokens, done.response.usage.output_tokens);
    }
    assert.equal(
      stack.billing.events.filter((e) => e.external_event_id.startsWith(`${rid}:`)).length,
      2,
      'one event per response',
    );
  });

  test('an audio response: audio and text tokens are priced apart', async () => {
    const rid = 'rt-openai-audio';
    const client = await openClient('/v1/realtime?model=gpt-realtime', {
      headers: { ...bearer.headers, 'x-router-request-id': rid },
    });
    await client.until((m) => m.type === 'session.created');
    client.send({
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'say something' }] },
    });
    client.send({ type: 'response.create' });
    const done = await client.until((m) => m.type === 'response.done');
    client.ws.close(1000);
    const usage = done.response.usage;
    const audioOut = usage.output_token_details.audio_tokens;
    assert.ok(audioOut > 0, 'the simulator spoke');
    const event = await stack.eventFor(`${rid}:${done.response.id}`);
    assert.equal(event.raw_json.usage.output_audio_tokens, audioOut);
    const items = Object.fromEntries((event['x-billing']?.items ?? []).map((i) => [i.metric, i.quantity]));
    assert.equal(items.output_audio_tokens, audioOut);
    assert.equal(items.completion_tokens, usage.output_tokens - audioOut);
    assert.ok(event['x-billing']?.pricing_hints?.output_audio_tokens, 'the audio price is hinted');
  });

  test('a key in the browser subprotocol is accepted and never forwarded', async () => {
    const client = await openClient('/v1/realtime?model=gpt-realtime', {}, [
      'realtime',
      `openai-insecure-api-key.${ACCESS_KEY}`,
    ]);
    assert.equal(client.ws.protocol, 'realtime');
    await client.until((m) => m.type === 'session.created');
    client.ws.close(1000);
    await client.closed;
    const upstream = stack.upstream.realtime.sessions.at(-1)!;
    assert.ok(!JSON.stringify(upstream.headers).includes(ACCESS_KEY));
    assert.equal(upstream.protocol, 'realtime');
  });

  test('an unknown key is refused at the upgrade with 401 in the OpenAI error shape', async () => {
    const before = stack.upstream.realtime.sessions.length;
    await assert.rejects(
      openClient('/v1/realtime?model=gpt-realtime', { headers: { authorization: 'Bearer nope' } }),
      (err: { status?: number; body?: string }) => {
        assert.equal(err.status, 401);
        assert.equal(JSON.parse(err.body ?? '{}').error?.code, 'invalid_api_key');
        return true;
      },
    );
    assert.equal(stack.upstream.realtime.sessions.length, before, 'nothing reached the upstream');
  });

  test('an upstream that refuses the session: 502 at the upgrade; an unknown path: 404', async () => {
    await assert.rejects(
      // The simulator fails the session by the model's name; the header routes the unlisted model.
      openClient('/v1/realtime?model=gpt-realtime-fail-503', {
        headers: { ...bearer.headers, 'x-router-provider': 'openai' },
      }),
      (err: { status?: number }) => err.status === 502,
    );
    await assert.rejects(
      openClient('/v1/elsewhere', bearer),
      (err: { status?: number }) => err.status === 404,
    );
  });
});

describe('Gemini Live', () => {
  test('the setup message routes the session; each turn is billed with its usageMetadata', async () => {
    const rid = 'rt-gemini-1';
    const client = await openClient(`${GEMINI_PATH}?key=${ACCESS_KEY}`, {
      headers: { 'x-router-request-id': rid },
    });
    const sent: string[] = [];
    sent.push(
      client.send({
        setup: { model: 'models/gemini-live-2.5-flash', generationConfig: { responseModalities: ['TEXT'] } },
      }),
    );
    // Sent before setupComplete, while the gateway opens the upstream: it goes after the setup.
    sent.push(
      client.send({
        clientContent: { turns: [{ role: 'user', parts: [{ text: 'hello gemini' }] }], turnComplete: true },
      }),
    );
    await client.until((m) => m.setupComplete !== undefined);
    const done = await client.until((m) => m.usageMetadata !== undefined);
    client.ws.close(1000);
    await client.closed;

    const upstream = await relayedUnchanged(client, sent);
    assert.equal(upstream.model, 'gemini-live-2.5-flash');
    assert.ok(!upstream.path.includes(ACCESS_KEY), 'the access key is not in the upstream query');
    assert.equal(upstream.headers['x-goog-api-key'], 'sim-gemini-key');

    const event = await stack.eventFor(`${rid}:turn-1`);
    assert.equal(event.idempotency_key, `router:${rid}:turn-1`);
    assert.equal(event.raw_json.api, 'native.live');
    assert.equal(event.raw_json.usage.input_tokens, done.usageMetadata.promptTokenCount);
    assert.equal(event.raw_json.usage.output_tokens, done.usageMetadata.responseTokenCount);
  });

  test('a first message that is not a setup message closes the session (1008)', async () => {
    const client = await openClient(`${GEMINI_PATH}?key=${ACCESS_KEY}`);
    client.send({ clientContent: { turns: [], turnComplete: true } });
    const closed = await client.closed;
    assert.equal(closed.code, 1008);
    assert.match(closed.reason, /setup/);
  });
});

describe('client secrets', () => {
  async function mint(body: unknown): Promise<{ status: number; json: Json }> {
    const res = await fetch(`${stack.url}/v1/realtime/client_secrets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ACCESS_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, json: (await res.json()) as Json };
  }

  test('a minted secret opens a session for its model, billed to the key subject; nothing else', async () => {
    const before = Math.floor(Date.now() / 1000);
    const minted = await mint({
      expires_after: { anchor: 'created_at', seconds: 60 },
      session: { type: 'realtime', model: 'gpt-realtime' },
    });
    assert.equal(minted.status, 200);
    const secret = String(minted.json.value);
    assert.match(secret, /^ek_router_/);
    assert.ok(minted.json.expires_at >= before + 59 && minted.json.expires_at <= before + 61);
    assert.equal(minted.json.session.model, 'gpt-realtime');

    const rid = 'rt-secret-1';
    const client = await openClient(
      '/v1/realtime?model=gpt-realtime',
      { headers: { 'x-router-request-id': rid } },
      ['realtime', `openai-insecure-api-key.${secret}`],
    );
    await client.until((m) => m.type === 'session.created');
    client.send({ type: 'response.create', response: { output_modalities: ['text'] } });
    const done = await client.until((m) => m.type === 'response.done');
    client.ws.close(1000);
    await client.closed;
    const event = await stack.eventFor(`${rid}:${done.response.id}`);
    assert.equal(event.subject_id, 'client_a');
    assert.ok(!JSON.stringify(stack.upstream.realtime.sessions.at(-1)!.headers).includes(secret));

    // Another model: refused at the upgrade, naming the model it was issued for.
    await assert.rejects(
      openClient('/v1/realtime?model=gpt-realtime-mini', {}, [
        'realtime',
        `openai-insecure-api-key.${secret}`,
      ]),
      (err: { status?: number; body?: string }) =>
        err.status === 401 && /issued for the model 'gpt-realtime'/.test(err.body ?? ''),
    );
    // Not an access key for anything else.
    const chat = await fetch(`${stack.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(chat.status, 401);
    assert.match(((await chat.json()) as Json).error.message, /realtime sessions only/);
    // Forged: the signature does not match.
    const forged = `${secret.slice(0, -4)}AAAA`;
    await assert.rejects(
      openClient('/v1/realtime?model=gpt-realtime', {}, ['realtime', `openai-insecure-api-key.${forged}`]),
      (err: { status?: number }) => err.status === 401,
    );
  });

  test('minting needs an access key and a lifetime within the bounds', async () => {
    const noKey = await fetch(`${stack.url}/v1/realtime/client_secrets`, { method: 'POST', body: '{}' });
    assert.equal(noKey.status, 401);
    const short = await mint({ expires_after: { anchor: 'created_at', seconds: 5 } });
    assert.equal(short.status, 400);
    assert.match(short.json.error.message, /10 to 7200/);
  });
});
