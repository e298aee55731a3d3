// The official SDKs' realtime clients straight at the gateway (with billing on): the openai SDK's
// OpenAIRealtimeWS and the @google/genai SDK's live client, each given the access key as its API key and
// the gateway as its base URL. A text response each; the billing event of the response carries the
// usage the client saw; the upstream gets the gateway's credentials, never the access key.

import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Modality } from '@google/genai';
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import { type BillingStack, startBillingStack } from '../support/billing-stack.ts';
import { liveTextTurn } from '../support/genai-live.ts';
import { ACCESS_KEY } from '../support/stack.ts';

// biome-ignore lint/suspicious/noExplicitAny: wire messages are read loosely; the assertions check their shape
type Json = Record<string, any>;

let stack: BillingStack;

before(async () => {
  stack = await startBillingStack();
});

after(async () => {
  await stack?.close();
});

describe('openai SDK, OpenAIRealtimeWS', () => {
  test('a text response: session.update, conversation.item.create, response.create, response.done billed', async () => {
    const rid = 'rt-sdk-openai-1';
    const prompt = 'hello from the openai sdk';
    const client = new OpenAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1` });
    // The SDK always builds a wss:// URL; a plain TCP connection makes it speak ws:// to the gateway.
    const rt = new OpenAIRealtimeWS(
      {
        model: 'gpt-realtime',
        options: {
          createConnection: ((o: net.NetConnectOpts) => net.connect(o)) as typeof net.connect,
          headers: { 'x-router-request-id': rid },
        },
      },
      client,
    );
    const errors: unknown[] = [];
    rt.on('error', (e) => errors.push(e));
    const answered = new Promise<string | undefined>((resolve) =>
      rt.socket.once('upgrade', (res) => resolve(res.headers['x-router-request-id'] as string | undefined)),
    );
    const created = new Promise<Json>((resolve) => rt.on('session.created', (e) => resolve(e.session)));
    const updated = new Promise<Json>((resolve) => rt.on('session.updated', (e) => resolve(e.session)));
    const done = new Promise<Json>((resolve) => rt.on('response.done', (e) => resolve(e.response)));
    let text = '';
    rt.on('response.output_text.delta', (e) => {
      text += e.delta;
    });
    await new Promise<void>((resolve) => rt.socket.once('open', () => resolve()));
    assert.equal(await answered, rid, 'the 101 names the session request id');
    const sessionId = (await created).id as string;
    assert.equal((await created).model, 'gpt-realtime');

    rt.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'] } });
    assert.deepEqual((await updated).output_modalities, ['text']);
    rt.send({
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: prompt }] },
    });
    rt.send({ type: 'response.create' });
    const response = await done;
    assert.equal(response.status, 'completed');
    assert.equal(response.output[0].content[0].text, text);
    assert.ok(text.length > 0);

    const closed = new Promise<number>((resolve) => rt.socket.once('close', (code) => resolve(code)));
    rt.close();
    assert.equal(await closed, 1000);
    assert.deepEqual(errors, []);

    const session = stack.upstream.realtime.sessions.find((s) => s.id === sessionId);
    assert.ok(session, 'the simulator recorded the session');
    await stack.upstream.waitFor(() => session.closed !== undefined);
    assert.equal(session.provider, 'openai');
    assert.equal(session.path, '/v1/realtime?model=gpt-realtime');
    assert.equal(session.headers.authorization, 'Bearer sim-openai-key');
    assert.ok(!JSON.stringify(session.headers).includes(ACCESS_KEY), 'the access key reached the upstream');
    assert.deepEqual(
      session.received.map((m) => (m as Json).type),
      ['session.update', 'conversation.item.create', 'response.create'],
    );
    assert.deepEqual(
      (session.sent.find((m) => (m as Json).type === 'response.done') as Json).response,
      response,
    );

    const event = await stack.eventFor(`${rid}:${response.id}`);
    assert.equal(event.idempotency_key, `router:${rid}:${response.id}`);
    assert.equal(event.raw_json.api, 'realtime');
    assert.equal(event.raw_json.provider, 'openai');
    assert.equal(event.raw_json.model, 'gpt-realtime');
    assert.equal(event.raw_json.usage.input_tokens, response.usage.input_tokens);
    assert.equal(event.raw_json.usage.output_tokens, response.usage.output_tokens);
    assert.equal(event.raw_json.meta.request_id, `${rid}:${response.id}`);
    assert.equal(
      stack.billing.events.filter((e) => e.external_event_id.startsWith(`${rid}:`)).length,
      1,
      'one event for the one response',
    );
  });
});

describe('@google/genai SDK, ai.live.connect', () => {
  test('one text turn: turnComplete with usageMetadata, billed as turn-1', async () => {
    const rid = 'rt-sdk-gemini-1';
    const prompt = 'hello from the genai sdk';
    // The SDK's close() sends a close frame without a code: the client sees 1005 (no status).
    const {
      said: text,
      last,
      closedWith,
      errors,
    } = await liveTextTurn(
      stack.url,
      rid,
      'gemini-live-2.5-flash',
      { responseModalities: [Modality.TEXT] },
      prompt,
    );
    const usage = last.usageMetadata;
    assert.ok(usage, 'turnComplete carries usageMetadata');
    assert.ok(text.length > 0);
    assert.equal(closedWith, 1005);
    assert.deepEqual(errors, []);

    const upstream = stack.upstream.realtime.sessions.findLast((s) => s.provider === 'gemini');
    assert.ok(upstream);
    await stack.upstream.waitFor(() => upstream.closed !== undefined);
    assert.equal(upstream.closed?.by, 'client');
    assert.equal(upstream.model, 'gemini-live-2.5-flash');
    assert.equal(upstream.headers['x-goog-api-key'], 'sim-gemini-key');
    assert.ok(!upstream.path.includes(ACCESS_KEY), 'the access key is not in the upstream query');
    assert.ok(!JSON.stringify(upstream.headers).includes(ACCESS_KEY), 'the access key reached the upstream');
    const turn = upstream.sent.find((m) => (m as Json).serverContent?.turnComplete === true) as Json;
    assert.deepEqual(turn.usageMetadata, usage);

    const event = await stack.eventFor(`${rid}:turn-1`);
    assert.equal(event.idempotency_key, `router:${rid}:turn-1`);
    assert.equal(event.raw_json.api, 'native.live');
    assert.equal(event.raw_json.provider, 'gemini');
    assert.equal(event.raw_json.model, 'gemini-live-2.5-flash');
    assert.equal(event.raw_json.usage.input_tokens, usage.promptTokenCount);
    assert.equal(event.raw_json.usage.output_tokens, usage.responseTokenCount);
    assert.equal(
      stack.billing.events.filter((e) => e.external_event_id.startsWith(`${rid}:`)).length,
      1,
      'one event for the one turn',
    );
  });
});
