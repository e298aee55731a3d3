// Gemini Live clients on an OpenAI Realtime model (docs/realtime.md "Across families"): a plain WebSocket
// client and the @google/genai SDK's ai.live.connect against the gateway, the upstream simulator's
// OpenAI Realtime endpoint behind it, and the billing simulator. Each OpenAI response reaches the client
// as Live API messages and is billed once, from OpenAI's own response.done, with the OpenAI model and its
// audio tokens apart; a client that leaves mid-response gets it cancelled upstream and its partial usage
// billed; what OpenAI cannot carry closes the session naming the field.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Modality } from '@google/genai';
import { type BillingStack, startBillingStack } from '../support/billing-stack.ts';
import { liveTextTurn } from '../support/genai-live.ts';
import { type Json, RealtimeClient } from '../support/realtime-client.ts';
import { ACCESS_KEY } from '../support/stack.ts';

const MODEL = 'gpt-realtime';
const GEMINI_PATH = '/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent';

let stack: BillingStack;

before(async () => {
  // Audio tokens as items of their own, which the audio tests below check (docs/billing.md "Charge items").
  stack = await startBillingStack({ billing: { item_detail: 'detailed' } });
});

after(async () => {
  await stack?.close();
});

/** A Live API client whose setup has been answered (setupComplete). */
async function openLive(rid: string, setup: Json): Promise<RealtimeClient> {
  const client = await RealtimeClient.open(
    `${stack.url.replace(/^http/, 'ws')}${GEMINI_PATH}?key=${ACCESS_KEY}`,
    {
      headers: { 'x-router-request-id': rid },
    },
  );
  client.send({ setup: { model: `models/${MODEL}`, ...setup } });
  await client.until((m) => m.setupComplete !== undefined);
  return client;
}

/** Every message up to and including the first that matches. */
async function collect(client: RealtimeClient, last: (m: Json) => boolean): Promise<Json[]> {
  const seen: Json[] = [];
  for (;;) {
    const m = await client.next();
    seen.push(m);
    if (last(m)) return seen;
  }
}

const turnComplete = (m: Json) => m.serverContent?.turnComplete === true;

/** The simulator's OpenAI session of the last client, once it has closed. */
async function upstreamSession() {
  const upstream = stack.upstream.realtime.sessions.findLast((s) => s.provider === 'openai')!;
  await stack.upstream.waitFor(() => upstream.closed !== undefined);
  return upstream;
}

function dones(sent: readonly unknown[]): Json[] {
  return (sent as Json[]).filter((m) => m.type === 'response.done').map((m) => m.response);
}

function eventsOf(rid: string) {
  return stack.billing.events.filter((e) => e.external_event_id.startsWith(`${rid}:`));
}

/** 16 kHz PCM16 (a quiet sawtooth), base64. */
function speech16k(ms: number): string {
  const out = Buffer.alloc(ms * 32);
  for (let i = 0; i + 1 < out.length; i += 2) out.writeInt16LE(((i >> 1) % 64) * 8 - 256, i);
  return out.toString('base64');
}

function text(messages: readonly Json[]): string {
  return messages
    .flatMap((m) => m.serverContent?.modelTurn?.parts ?? [])
    .map((p: Json) => p.text ?? '')
    .join('');
}

describe('Gemini Live client -> OpenAI Realtime', () => {
  test('a text turn: modelTurn text, turnComplete with usageMetadata, billed once with the OpenAI response', async () => {
    const rid = 'rt-l-text';
    const client = await openLive(rid, {
      generationConfig: { responseModalities: ['TEXT'] },
      systemInstruction: { parts: [{ text: 'Answer briefly.' }] },
    });
    client.send({
      clientContent: { turns: [{ role: 'user', parts: [{ text: 'hello openai' }] }], turnComplete: true },
    });
    const messages = await collect(client, turnComplete);
    client.ws.close(1000);
    await client.closed;

    const upstream = await upstreamSession();
    assert.equal(upstream.path, `/v1/realtime?model=${MODEL}`);
    assert.equal(upstream.headers.authorization, 'Bearer sim-openai-key');
    assert.ok(!JSON.stringify(upstream.headers).includes(ACCESS_KEY), 'the access key reached the upstream');
    assert.equal(upstream.protocol, '');
    const received = upstream.received as Json[];
    assert.deepEqual(
      received.map((m) => m.type),
      ['session.update', 'conversation.item.create', 'response.create'],
    );
    assert.deepEqual(received[0]!.session.output_modalities, ['text']);
    assert.equal(received[0]!.session.instructions, 'Answer briefly.');
    const [done] = dones(upstream.sent);
    assert.equal(text(messages), done!.output[0].content[0].text);
    assert.ok(text(messages).length > 0);
    const last = messages.at(-1)!;
    assert.equal(last.usageMetadata.promptTokenCount, done!.usage.input_tokens);
    assert.equal(last.usageMetadata.responseTokenCount, done!.usage.output_tokens);
    assert.equal(last.usageMetadata.totalTokenCount, done!.usage.total_tokens);

    const event = await stack.eventFor(`${rid}:${done!.id}`);
    assert.equal(event.idempotency_key, `router:${rid}:${done!.id}`);
    assert.equal(event.raw_json.api, 'native.live');
    assert.equal(event.raw_json.provider, 'openai');
    assert.equal(event.raw_json.model, MODEL);
    assert.equal(event.raw_json.usage.input_tokens, done!.usage.input_tokens);
    assert.equal(event.raw_json.usage.output_tokens, done!.usage.output_tokens);
    assert.equal(eventsOf(rid).length, 1, 'one event for the one response');
  });

  test('an audio turn without activity detection: 16 kHz upsampled, audio out, audio tokens priced apart', async () => {
    const rid = 'rt-l-audio';
    const client = await openLive(rid, {
      generationConfig: {
        responseModalities: ['AUDIO'],
        speechConfig: { voiceConfig: { prebuiltVoiceConfig: { voiceName: 'marin' } } },
      },
      realtimeInputConfig: { automaticActivityDetection: { disabled: true } },
      inputAudioTranscription: {},
      outputAudioTranscription: {},
    });
    client.send({ realtimeInput: { activityStart: {} } });
    client.send({ realtimeInput: { audio: { data: speech16k(250), mimeType: 'audio/pcm;rate=16000' } } });
    client.send({ realtimeInput: { audio: { data: speech16k(250), mimeType: 'audio/pcm;rate=16000' } } });
    client.send({ realtimeInput: { activityEnd: {} } });
    const messages = await collect(client, turnComplete);
    client.ws.close(1000);
    await client.closed;

    const upstream = await upstreamSession();
    const received = upstream.received as Json[];
    assert.deepEqual(received[0]!.session.audio, {
      input: {
        format: { type: 'audio/pcm', rate: 24000 },
        turn_detection: null,
        transcription: { model: 'gpt-4o-mini-transcribe' },
      },
      output: { format: { type: 'audio/pcm', rate: 24000 }, voice: 'marin' },
    });
    const appended = received
      .filter((m) => m.type === 'input_audio_buffer.append')
      .reduce((n, m) => n + Buffer.from(m.audio, 'base64').length, 0);
    assert.equal(appended, 500 * 48, 'half a second at 24 kHz');
    assert.deepEqual(
      received.slice(-2).map((m) => m.type),
      ['input_audio_buffer.commit', 'response.create'],
    );
    const audio = messages
      .flatMap((m) => m.serverContent?.modelTurn?.parts ?? [])
      .map((p: Json) => p.inlineData);
    assert.ok(audio.length > 0 && audio.every((a) => a.mimeType === 'audio/pcm;rate=24000'));
    assert.ok(messages.some((m) => m.serverContent?.outputTranscription?.text));
    assert.match(
      messages.find((m) => m.serverContent?.inputTranscription)!.serverContent.inputTranscription.text,
      /Simulated transcript of 500 ms/,
    );

    const [done] = dones(upstream.sent);
    const details = done!.usage.input_token_details;
    const inputAudio = details.audio_tokens - details.cached_tokens_details.audio_tokens;
    const outputAudio = done!.usage.output_token_details.audio_tokens;
    assert.ok(inputAudio > 0 && outputAudio > 0);
    const meta = messages.at(-1)!.usageMetadata;
    assert.deepEqual(
      meta.responseTokensDetails.find((d: Json) => d.modality === 'AUDIO'),
      {
        modality: 'AUDIO',
        tokenCount: outputAudio,
      },
    );
    const event = await stack.eventFor(`${rid}:${done!.id}`);
    assert.equal(event.raw_json.model, MODEL);
    assert.equal(event.raw_json.usage.input_audio_tokens, inputAudio);
    assert.equal(event.raw_json.usage.output_audio_tokens, outputAudio);
    const items = Object.fromEntries((event['x-billing']?.items ?? []).map((i) => [i.metric, i.quantity]));
    assert.equal(items.input_audio_tokens, inputAudio);
    assert.equal(items.output_audio_tokens, outputAudio);
    assert.equal(eventsOf(rid).length, 1);
  });

  test('a function call: toolCall with the call ids, toolResponse answered; each OpenAI response billed once', async () => {
    const rid = 'rt-l-tool';
    const client = await openLive(rid, {
      generationConfig: { responseModalities: ['TEXT'] },
      tools: [
        {
          functionDeclarations: [
            {
              name: 'get_weather',
              description: 'The weather of a place',
              parameters: {
                type: 'OBJECT',
                properties: { location: { type: 'STRING' } },
                required: ['location'],
              },
            },
          ],
        },
      ],
    });
    client.send({
      clientContent: {
        turns: [{ role: 'user', parts: [{ text: 'the weather in Paris?' }] }],
        turnComplete: true,
      },
    });
    const call = await client.until((m) => m.toolCall !== undefined);
    const [fc] = call.toolCall.functionCalls;
    assert.equal(fc.name, 'get_weather');
    assert.deepEqual(fc.args, { location: 'Paris', unit: 'celsius' });
    assert.ok(call.usageMetadata, 'the call response reports its usage with the call');
    client.send({
      toolResponse: { functionResponses: [{ id: fc.id, name: fc.name, response: { temperature: 21 } }] },
    });
    const answer = await collect(client, turnComplete);
    client.ws.close(1000);
    await client.closed;
    assert.ok(text(answer).length > 0);

    const upstream = await upstreamSession();
    const received = upstream.received as Json[];
    assert.deepEqual(received[0]!.session.tools, [
      {
        type: 'function',
        name: 'get_weather',
        description: 'The weather of a place',
        parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
      },
    ]);
    assert.deepEqual(received.at(-2), {
      type: 'conversation.item.create',
      item: { type: 'function_call_output', call_id: fc.id, output: '{"temperature":21}' },
    });
    const [first, second] = dones(upstream.sent);
    assert.equal(first!.output[0].call_id, fc.id);
    assert.equal(call.usageMetadata.responseTokenCount, first!.usage.output_tokens);
    const events = [
      await stack.eventFor(`${rid}:${first!.id}`),
      await stack.eventFor(`${rid}:${second!.id}`),
    ];
    assert.deepEqual(
      events.map((e) => e.raw_json.usage.output_tokens),
      [first!.usage.output_tokens, second!.usage.output_tokens],
    );
    assert.equal(eventsOf(rid).length, 2, 'one event per OpenAI response');
  });

  test('a client that leaves mid-response: response.cancel upstream, the partial usage billed', async () => {
    const rid = 'rt-l-leave';
    const model = `${MODEL}-delay-200`;
    const client = await RealtimeClient.open(
      `${stack.url.replace(/^http/, 'ws')}${GEMINI_PATH}?key=${ACCESS_KEY}`,
      {
        headers: { 'x-router-request-id': rid },
      },
    );
    client.send({ setup: { model: `models/${model}`, generationConfig: { responseModalities: ['TEXT'] } } });
    await client.until((m) => m.setupComplete !== undefined);
    client.send({
      clientContent: {
        turns: [{ role: 'user', parts: [{ text: 'tell me a long story' }] }],
        turnComplete: true,
      },
    });
    await client.until((m) => m.serverContent?.modelTurn !== undefined);
    client.ws.close(1000);
    await client.closed;

    const upstream = await upstreamSession();
    assert.ok(
      (upstream.received as Json[]).some((m) => m.type === 'response.cancel'),
      'the gateway cancelled the response',
    );
    const [done] = dones(upstream.sent);
    assert.equal(done!.status, 'cancelled');
    const event = await stack.eventFor(`${rid}:${done!.id}`);
    assert.equal(event.raw_json.usage_stage, 'upstream');
    assert.equal(event.raw_json.model, model);
    assert.equal(event.raw_json.usage.output_tokens, done!.usage.output_tokens);
    assert.ok(done!.usage.output_tokens > 0, 'what was generated before the cancel');
    assert.equal(eventsOf(rid).length, 1);
  });

  test('what OpenAI cannot carry closes the session (1008) naming the field; nothing of it goes upstream', async () => {
    const client = await RealtimeClient.open(
      `${stack.url.replace(/^http/, 'ws')}${GEMINI_PATH}?key=${ACCESS_KEY}`,
    );
    client.send({ setup: { model: `models/${MODEL}`, generationConfig: { temperature: 0.3 } } });
    const closed = await client.closed;
    assert.equal(closed.code, 1008);
    assert.match(closed.reason, /^setup\.generationConfig\.temperature: /);
    const upstream = await upstreamSession();
    assert.deepEqual(upstream.received, []);

    const live = await openLive('rt-l-refused', { generationConfig: { responseModalities: ['TEXT'] } });
    live.send({ realtimeInput: { video: { data: '/9j/4AAQ', mimeType: 'image/jpeg' } } });
    const cut = await live.closed;
    assert.equal(cut.code, 1008);
    assert.match(cut.reason, /^realtimeInput\.video: /);
  });
});

describe('@google/genai SDK, ai.live.connect, on an OpenAI model', () => {
  test('a text turn: modelTurn text, turnComplete with usageMetadata, billed with the OpenAI model', async () => {
    const rid = 'rt-l-sdk';
    const { said, last, closedWith, errors } = await liveTextTurn(
      stack.url,
      rid,
      MODEL,
      { responseModalities: [Modality.TEXT], systemInstruction: 'Answer briefly.' },
      'hello from the genai sdk',
    );
    assert.ok(said.length > 0);
    assert.equal(closedWith, 1005);
    assert.deepEqual(errors, []);

    const upstream = await upstreamSession();
    assert.equal(upstream.model, MODEL);
    assert.equal(upstream.closed?.by, 'client');
    assert.equal((upstream.received[0] as Json).session.instructions, 'Answer briefly.');
    const [done] = dones(upstream.sent);
    assert.equal(said, done!.output[0].content[0].text);
    assert.equal(last.usageMetadata?.promptTokenCount, done!.usage.input_tokens);
    assert.equal(last.usageMetadata?.responseTokenCount, done!.usage.output_tokens);
    const event = await stack.eventFor(`${rid}:${done!.id}`);
    assert.equal(event.raw_json.provider, 'openai');
    assert.equal(event.raw_json.model, MODEL);
    assert.equal(event.raw_json.usage.input_tokens, done!.usage.input_tokens);
    assert.equal(eventsOf(rid).length, 1);
  });
});
