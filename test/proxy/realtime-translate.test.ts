// OpenAI Realtime clients on a Gemini Live model (docs/realtime.md "Across families"): a plain WebSocket
// client and the openai SDK's OpenAIRealtimeWS against the gateway, the upstream simulator's Gemini Live
// endpoint behind it, and the billing simulator. Each Gemini turn reaches the client as OpenAI events
// and is billed once, from the translated response.done, with the Gemini model and its audio tokens
// apart; a turn the client cuts is billed as an estimate; what Gemini cannot carry is an OpenAI error.

import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import { type BillingStack, startBillingStack } from '../support/billing-stack.ts';
import { type Json, RealtimeClient } from '../support/realtime-client.ts';
import { ACCESS_KEY } from '../support/stack.ts';

const MODEL = 'gemini-live-2.5-flash';
const GEMINI_PATH = '/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent';
// The reverse cell, Gemini Live clients on an OpenAI model: realtime-translate-live.test.ts.

let stack: BillingStack;

before(async () => {
  // Audio tokens as items of their own, which the audio tests below check (docs/billing.md "Charge items").
  stack = await startBillingStack({ billing: { item_detail: 'detailed' } });
});

after(async () => {
  await stack?.close();
});

async function openClient(rid: string, model = MODEL): Promise<RealtimeClient> {
  const client = await RealtimeClient.open(`${stack.url.replace(/^http/, 'ws')}/v1/realtime?model=${model}`, {
    headers: { authorization: `Bearer ${ACCESS_KEY}`, 'x-router-request-id': rid },
  });
  await client.until((m) => m.type === 'session.created');
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

/** The simulator's session of the last client, once it has closed. */
async function upstreamSession() {
  const upstream = stack.upstream.realtime.sessions.findLast((s) => s.provider === 'gemini')!;
  await stack.upstream.waitFor(() => upstream.closed !== undefined);
  return upstream;
}

/** The Gemini messages of the simulator's session that carry usage, in order. */
function usageReports(sent: readonly unknown[]): Json[] {
  return sent.filter((m) => (m as Json).usageMetadata !== undefined) as Json[];
}

function eventsOf(rid: string) {
  return stack.billing.events.filter((e) => e.external_event_id.startsWith(`${rid}:`));
}

/** Types in order, with runs of the same delta type kept as one. */
function shape(events: readonly Json[]): string[] {
  const out: string[] = [];
  for (const e of events) if (out.at(-1) !== e.type || !String(e.type).endsWith('.delta')) out.push(e.type);
  return out;
}

function audioTokensOf(details: unknown): number {
  return ((details ?? []) as Json[])
    .filter((d) => d.modality === 'AUDIO')
    .reduce((n, d) => n + d.tokenCount, 0);
}

/** Half a second of 24 kHz PCM16 (a quiet sawtooth), base64. */
function speech(ms: number): string {
  const out = Buffer.alloc(ms * 48);
  for (let i = 0; i + 1 < out.length; i += 2) out.writeInt16LE(((i >> 1) % 64) * 8 - 256, i);
  return out.toString('base64');
}

describe('OpenAI Realtime client -> Gemini Live', () => {
  test('a text turn: the OpenAI event sequence, billed once with the Gemini usage', async () => {
    const rid = 'rt-x-text';
    const client = await openClient(rid);
    client.send({
      type: 'session.update',
      session: { type: 'realtime', output_modalities: ['text'], instructions: 'Answer briefly.' },
    });
    const updated = await client.until((m) => m.type === 'session.updated');
    assert.deepEqual(updated.session.output_modalities, ['text']);
    client.send({
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hello gemini' }] },
    });
    client.send({ type: 'response.create' });
    const events = await collect(client, (m) => m.type === 'response.done');
    client.ws.close(1000);
    await client.closed;

    assert.deepEqual(shape(events), [
      'conversation.item.added',
      'conversation.item.done',
      'response.created',
      'response.output_item.added',
      'conversation.item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'conversation.item.done',
      'response.output_item.done',
      'response.done',
    ]);
    const done = events.at(-1)!.response;
    const text = events
      .filter((e) => e.type === 'response.output_text.delta')
      .map((e) => e.delta)
      .join('');
    assert.ok(text.length > 0);
    assert.equal(done.status, 'completed');
    assert.equal(done.output[0].content[0].text, text);
    assert.match(done.id, /^resp_/);
    assert.ok(events.every((e) => /^event_/.test(e.event_id)));

    const upstream = await upstreamSession();
    assert.equal(upstream.headers['x-goog-api-key'], 'sim-gemini-key');
    assert.ok(!JSON.stringify(upstream.headers).includes(ACCESS_KEY));
    assert.equal(upstream.protocol, '');
    assert.deepEqual(upstream.received, [
      {
        setup: {
          model: `models/${MODEL}`,
          generationConfig: { responseModalities: ['TEXT'] },
          systemInstruction: { parts: [{ text: 'Answer briefly.' }] },
        },
      },
      {
        clientContent: { turns: [{ role: 'user', parts: [{ text: 'hello gemini' }] }], turnComplete: false },
      },
      { clientContent: { turnComplete: true } },
    ]);
    const [report] = usageReports(upstream.sent);
    assert.equal(done.usage.input_tokens, report!.usageMetadata.promptTokenCount);
    assert.equal(done.usage.output_tokens, report!.usageMetadata.responseTokenCount);

    const event = await stack.eventFor(`${rid}:${done.id}`);
    assert.equal(event.idempotency_key, `router:${rid}:${done.id}`);
    assert.equal(event.raw_json.api, 'realtime');
    assert.equal(event.raw_json.provider, 'gemini');
    assert.equal(event.raw_json.model, MODEL);
    assert.equal(event.raw_json.usage.input_tokens, report!.usageMetadata.promptTokenCount);
    assert.equal(event.raw_json.usage.output_tokens, report!.usageMetadata.responseTokenCount);
    assert.equal(eventsOf(rid).length, 1, 'one event for the one turn');
  });

  test('an audio turn without turn detection: activity start and end, audio tokens priced apart', async () => {
    const rid = 'rt-x-audio';
    const client = await openClient(rid);
    client.send({
      type: 'session.update',
      session: {
        type: 'realtime',
        audio: {
          input: { turn_detection: null, transcription: { model: 'gpt-4o-mini-transcribe' } },
          output: { voice: 'Kore' },
        },
      },
    });
    await client.until((m) => m.type === 'session.updated');
    client.send({ type: 'input_audio_buffer.append', audio: speech(250) });
    client.send({ type: 'input_audio_buffer.append', audio: speech(250) });
    client.send({ type: 'input_audio_buffer.commit' });
    client.send({ type: 'response.create' });
    const events = await collect(
      client,
      (m) => m.type === 'conversation.item.input_audio_transcription.completed',
    );
    client.ws.close(1000);
    await client.closed;

    // Audio and its transcript interleave, one pair per chunk Gemini sends.
    const deltas = ['response.output_audio.delta', 'response.output_audio_transcript.delta'];
    assert.deepEqual(shape(events.filter((e) => !deltas.includes(e.type))), [
      'input_audio_buffer.committed',
      'conversation.item.added',
      'conversation.item.done',
      'conversation.item.input_audio_transcription.delta',
      'response.created',
      'response.output_item.added',
      'conversation.item.added',
      'response.content_part.added',
      'response.output_audio.done',
      'response.output_audio_transcript.done',
      'response.content_part.done',
      'conversation.item.done',
      'response.output_item.done',
      'response.done',
      'conversation.item.input_audio_transcription.completed',
    ]);
    const between = events.slice(
      events.findIndex((e) => e.type === 'response.content_part.added') + 1,
      events.findIndex((e) => e.type === 'response.output_audio.done'),
    );
    assert.ok(between.length >= 2 && between.every((e, i) => e.type === deltas[i % 2]));
    const committed = events[0]!;
    assert.equal(events.at(-1)!.item_id, committed.item_id, 'the transcript is the committed item’s');
    const done = events.find((e) => e.type === 'response.done')!.response;
    assert.equal(done.output[0].content[0].type, 'output_audio');
    assert.ok(done.output[0].content[0].transcript.length > 0);

    const upstream = await upstreamSession();
    const received = upstream.received as Json[];
    assert.deepEqual(received[0], {
      setup: {
        model: `models/${MODEL}`,
        generationConfig: {
          responseModalities: ['AUDIO'],
          speechConfig: { voiceConfig: { prebuiltVoiceConfig: { voiceName: 'Kore' } } },
        },
        realtimeInputConfig: { automaticActivityDetection: { disabled: true } },
        inputAudioTranscription: {},
        outputAudioTranscription: {},
      },
    });
    assert.deepEqual(
      received.slice(1).map((m) => Object.keys(m.realtimeInput ?? m)[0]),
      ['activityStart', 'audio', 'audio', 'activityEnd'],
      'response.create asks Gemini for nothing more: activityEnd already ends the turn',
    );
    assert.equal(received[2]!.realtimeInput.audio.mimeType, 'audio/pcm;rate=24000');

    const [report] = usageReports(upstream.sent);
    const meta = report!.usageMetadata;
    const inputAudio = audioTokensOf(meta.promptTokensDetails);
    const outputAudio = audioTokensOf(meta.responseTokensDetails);
    assert.ok(inputAudio > 0 && outputAudio > 0);
    assert.equal(done.usage.input_token_details.audio_tokens, inputAudio);
    assert.equal(done.usage.output_token_details.audio_tokens, outputAudio);

    const event = await stack.eventFor(`${rid}:${done.id}`);
    assert.equal(event.raw_json.model, MODEL);
    assert.equal(event.raw_json.usage.input_audio_tokens, inputAudio);
    assert.equal(event.raw_json.usage.output_audio_tokens, outputAudio);
    const items = Object.fromEntries((event['x-billing']?.items ?? []).map((i) => [i.metric, i.quantity]));
    assert.equal(items.input_audio_tokens, inputAudio);
    assert.equal(items.output_audio_tokens, outputAudio);
    assert.equal(items.prompt_tokens ?? 0, meta.promptTokenCount - inputAudio);
    assert.ok(event['x-billing']?.pricing_hints?.output_audio_tokens, 'the audio price is hinted');
    assert.equal(eventsOf(rid).length, 1);
  });

  test('an audio turn with turn detection: the commit ends the audio stream', async () => {
    const rid = 'rt-x-vad';
    const client = await openClient(rid);
    client.send({ type: 'input_audio_buffer.append', audio: speech(300) });
    client.send({ type: 'input_audio_buffer.commit' });
    const done = await client.until((m) => m.type === 'response.done');
    client.ws.close(1000);
    await client.closed;
    const upstream = await upstreamSession();
    const received = upstream.received as Json[];
    assert.deepEqual(received[0], {
      setup: {
        model: `models/${MODEL}`,
        generationConfig: { responseModalities: ['AUDIO'] },
        outputAudioTranscription: {},
      },
    });
    assert.deepEqual(
      received.slice(1).map((m) => Object.keys(m.realtimeInput)[0]),
      ['audio', 'audioStreamEnd'],
    );
    const event = await stack.eventFor(`${rid}:${done.response.id}`);
    assert.equal(
      event.raw_json.usage.output_audio_tokens,
      done.response.usage.output_token_details.audio_tokens,
    );
  });

  test('a function call: its response ends unbilled, the turn is billed once with the answer', async () => {
    const rid = 'rt-x-tool';
    const client = await openClient(rid);
    client.send({
      type: 'session.update',
      session: {
        type: 'realtime',
        output_modalities: ['text'],
        tools: [
          {
            type: 'function',
            name: 'get_weather',
            description: 'The weather of a place',
            parameters: {
              type: 'object',
              properties: { location: { type: 'string' } },
              required: ['location'],
            },
          },
        ],
      },
    });
    await client.until((m) => m.type === 'session.updated');
    client.send({
      type: 'conversation.item.create',
      item: {
        type: 'message',
        role: 'user',
        content: [{ type: 'input_text', text: 'the weather in Paris?' }],
      },
    });
    client.send({ type: 'response.create' });
    const first = await collect(client, (m) => m.type === 'response.done');
    const args = first.find((e) => e.type === 'response.function_call_arguments.done')!;
    assert.equal(args.name, 'get_weather');
    assert.deepEqual(JSON.parse(args.arguments), { location: 'Paris', unit: 'celsius' });
    const call = first.at(-1)!.response;
    assert.equal(call.status, 'completed');
    assert.equal(call.output[0].type, 'function_call');
    assert.equal(call.usage, null, 'Gemini reports the turn’s usage at its end');

    client.send({
      type: 'conversation.item.create',
      item: { type: 'function_call_output', call_id: args.call_id, output: '{"temperature": 21}' },
    });
    client.send({ type: 'response.create' });
    const answer = (await client.until((m) => m.type === 'response.done')).response;
    client.ws.close(1000);
    await client.closed;
    assert.equal(answer.status, 'completed');
    assert.equal(answer.output[0].type, 'message');

    const upstream = await upstreamSession();
    const received = upstream.received as Json[];
    assert.deepEqual(received[0]!.setup.tools, [
      {
        functionDeclarations: [
          {
            name: 'get_weather',
            description: 'The weather of a place',
            parameters: {
              type: 'object',
              properties: { location: { type: 'string' } },
              required: ['location'],
            },
          },
        ],
      },
    ]);
    assert.deepEqual(received.at(-1), {
      toolResponse: {
        functionResponses: [{ id: args.call_id, name: 'get_weather', response: { temperature: 21 } }],
      },
    });
    const reports = usageReports(upstream.sent);
    assert.equal(reports.length, 1);
    assert.equal(answer.usage.output_tokens, reports[0]!.usageMetadata.responseTokenCount);
    const event = await stack.eventFor(`${rid}:${answer.id}`);
    assert.equal(event.raw_json.usage.output_tokens, reports[0]!.usageMetadata.responseTokenCount);
    assert.deepEqual(
      eventsOf(rid).map((e) => e.external_event_id),
      [`${rid}:${answer.id}`],
      'one event for the one Gemini turn',
    );
  });

  test('what Gemini cannot carry is an invalid_request_error naming it; the session goes on', async () => {
    const rid = 'rt-x-refused';
    const client = await openClient(rid);
    client.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'] } });
    await client.until((m) => m.type === 'session.updated');
    client.send({ type: 'conversation.item.delete', item_id: 'item_x', event_id: 'evt_1' });
    const deleted = await client.next();
    assert.equal(deleted.type, 'error');
    assert.equal(deleted.error.type, 'invalid_request_error');
    assert.equal(deleted.error.event_id, 'evt_1');
    assert.match(deleted.error.message, /conversation\.item\.delete/);
    client.send({ type: 'session.update', session: { type: 'realtime', instructions: 'Be a pirate.' } });
    const changed = await client.next();
    assert.equal(changed.type, 'error');
    assert.equal(changed.error.param, 'session.instructions');
    client.send({ type: 'response.create', response: { instructions: 'Be a pirate.' } });
    assert.equal((await client.next()).error.param, 'response.instructions');
    client.send({
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'still there?' }] },
    });
    client.send({ type: 'response.create' });
    const done = await client.until((m) => m.type === 'response.done');
    assert.equal(done.response.status, 'completed');
    client.ws.close(1000);
    await client.closed;
    const upstream = await upstreamSession();
    assert.equal(upstream.closed?.by, 'client');
    assert.equal(
      upstream.received.length,
      3,
      'the setup, the item and the turn: nothing of the refused events',
    );
  });

  test('response.cancel: the response ends cancelled once the turn ends, billed once', async () => {
    const rid = 'rt-x-cancel';
    const client = await openClient(rid, `${MODEL}-delay-100`);
    client.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'] } });
    await client.until((m) => m.type === 'session.updated');
    client.send({
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'talk for a while' }] },
    });
    client.send({ type: 'response.create' });
    await client.until((m) => m.type === 'response.output_text.delta');
    client.send({ type: 'response.cancel' });
    const rest = await collect(client, (m) => m.type === 'response.done');
    client.ws.close(1000);
    await client.closed;
    assert.deepEqual(shape(rest).slice(-5), [
      'response.output_text.done',
      'response.content_part.done',
      'conversation.item.done',
      'response.output_item.done',
      'response.done',
    ]);
    const done = rest.at(-1)!.response;
    assert.equal(done.status, 'cancelled');
    assert.deepEqual(done.status_details, { type: 'cancelled', reason: 'client_cancelled' });
    assert.equal(done.output[0].status, 'incomplete');
    const upstream = await upstreamSession();
    const [report] = usageReports(upstream.sent);
    assert.equal(
      done.usage.output_tokens,
      report!.usageMetadata.responseTokenCount,
      'Gemini generated it all',
    );
    await stack.eventFor(`${rid}:${done.id}`);
    assert.equal(eventsOf(rid).length, 1);
  });

  test('a client that leaves mid-turn: the turn is billed as an estimate, no cancel sent', async () => {
    const rid = 'rt-x-leave';
    const client = await openClient(rid, `${MODEL}-delay-200`);
    client.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'] } });
    await client.until((m) => m.type === 'session.updated');
    client.send({
      type: 'conversation.item.create',
      item: {
        type: 'message',
        role: 'user',
        content: [{ type: 'input_text', text: 'tell me a long story' }],
      },
    });
    client.send({ type: 'response.create' });
    const created = await client.until((m) => m.type === 'response.created');
    await client.until((m) => m.type === 'response.output_text.delta');
    client.ws.close(1000);
    await client.closed;

    const event = await stack.eventFor(`${rid}:${created.response.id}`);
    assert.equal(event.raw_json.usage_stage, 'estimated');
    assert.equal(event.raw_json.model, `${MODEL}-delay-200`);
    assert.ok(event.raw_json.usage.output_tokens > 0, 'the relayed text is counted');
    const upstream = await upstreamSession();
    assert.equal(upstream.closed?.by, 'client');
    assert.equal(usageReports(upstream.sent).length, 0, 'the turn never completed upstream');
    assert.ok(!JSON.stringify(upstream.received).includes('cancel'), 'nothing OpenAI-shaped went upstream');
    assert.equal(eventsOf(rid).length, 1);
  });
});

describe('openai SDK, OpenAIRealtimeWS, on a Gemini model', () => {
  test('a text response: session.updated, text deltas, response.done billed with the Gemini model', async () => {
    const rid = 'rt-x-sdk';
    const client = new OpenAI({ apiKey: ACCESS_KEY, baseURL: `${stack.url}/v1` });
    // The SDK always builds a wss:// URL; a plain TCP connection makes it speak ws:// to the gateway.
    const rt = new OpenAIRealtimeWS(
      {
        model: MODEL,
        options: {
          createConnection: ((o: net.NetConnectOpts) => net.connect(o)) as typeof net.connect,
          headers: { 'x-router-request-id': rid },
        },
      },
      client,
    );
    const errors: unknown[] = [];
    rt.on('error', (e) => errors.push(e));
    const created = new Promise<Json>((resolve) => rt.on('session.created', (e) => resolve(e.session)));
    const updated = new Promise<Json>((resolve) => rt.on('session.updated', (e) => resolve(e.session)));
    const done = new Promise<Json>((resolve) => rt.on('response.done', (e) => resolve(e.response)));
    let text = '';
    rt.on('response.output_text.delta', (e) => {
      text += e.delta;
    });
    await new Promise<void>((resolve) => rt.socket.once('open', () => resolve()));
    assert.equal((await created).model, MODEL);
    rt.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'] } });
    assert.deepEqual((await updated).output_modalities, ['text']);
    rt.send({
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hello from the sdk' }] },
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

    const upstream = await upstreamSession();
    assert.equal(upstream.path, GEMINI_PATH);
    const event = await stack.eventFor(`${rid}:${response.id}`);
    assert.equal(event.raw_json.provider, 'gemini');
    assert.equal(event.raw_json.model, MODEL);
    assert.equal(event.raw_json.usage.input_tokens, response.usage.input_tokens);
    assert.equal(event.raw_json.usage.output_tokens, response.usage.output_tokens);
    assert.equal(eventsOf(rid).length, 1);
  });
});
