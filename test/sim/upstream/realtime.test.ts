// The simulator's realtime WebSocket endpoints: OpenAI Realtime (GA events) and Gemini Live, driven by
// a plain `ws` client, the openai SDK's OpenAIRealtimeWS and the genai SDK's live client. Usage numbers
// are checked against the rule in sim/upstream/README.md "Realtime usage".

import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { GoogleGenAI, Modality } from '@google/genai';
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import { type ClientOptions, type RawData, WebSocket } from 'ws';
import { readKnobs } from '../../../sim/upstream/knobs.ts';
import { startUpstreamSim, type UpstreamSim } from '../../../sim/upstream/server.ts';
import { replyText, splitPieces, tokens } from '../../../sim/upstream/text.ts';

// biome-ignore lint/suspicious/noExplicitAny: wire messages are read loosely; the assertions check their shape
type Json = Record<string, any>;

let sim: UpstreamSim;
let wsBase: string;
const knobs = readKnobs({}, '', 0);
const GEMINI_PATH = '/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent';

before(async () => {
  sim = await startUpstreamSim();
  wsBase = sim.url.replace(/^http/, 'ws');
});

after(async () => {
  await sim.close();
});

/** A `ws` client whose messages are read in order with next()/until(): no timing assumptions. */
class Client {
  readonly ws: WebSocket;
  readonly binary: boolean[] = [];
  private readonly queue: Json[] = [];
  private readonly waiting: Array<(m: Json) => void> = [];
  readonly closed: Promise<{ code: number; reason: string }>;

  private constructor(ws: WebSocket) {
    this.ws = ws;
    ws.on('message', (data: RawData, isBinary: boolean) => {
      this.binary.push(isBinary);
      const msg = JSON.parse(String(data)) as Json;
      const w = this.waiting.shift();
      if (w) w(msg);
      else this.queue.push(msg);
    });
    this.closed = new Promise((resolve) =>
      ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })),
    );
  }

  static open(path: string, opts: ClientOptions = {}, protocols: string[] = []): Promise<Client> {
    const ws = new WebSocket(`${wsBase}${path}`, protocols, opts);
    const client = new Client(ws);
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(client));
      ws.once('error', reject);
    });
  }

  next(): Promise<Json> {
    const m = this.queue.shift();
    return m ? Promise.resolve(m) : new Promise((resolve) => this.waiting.push(resolve));
  }

  /** Messages up to and including the first one that matches. */
  async until(match: (m: Json) => boolean): Promise<Json[]> {
    const out: Json[] = [];
    for (;;) {
      const m = await this.next();
      out.push(m);
      if (match(m)) return out;
    }
  }

  send(message: unknown): void {
    this.ws.send(JSON.stringify(message));
  }
}

/** A handshake the simulator refuses: the HTTP status and JSON body instead of a 101. */
function refused(path: string, opts: ClientOptions = {}): Promise<{ status: number; body: Json }> {
  const ws = new WebSocket(`${wsBase}${path}`, [], opts);
  ws.on('error', () => {});
  return new Promise((resolve) => {
    ws.on('unexpected-response', (_req, res: IncomingMessage) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Json });
        ws.terminate();
      });
    });
  });
}

const auth = { headers: { authorization: 'Bearer sk-test' } };
const types = (events: Json[]): string[] => events.map((e) => e.type as string);

function recorded(path: string) {
  const session = sim.realtime.sessions.findLast((s) => s.path === path);
  assert.ok(session, `no recorded session for ${path}`);
  return session;
}

function userText(text: string) {
  return {
    type: 'conversation.item.create',
    item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] },
  };
}

describe('OpenAI Realtime', () => {
  test('text session: events in GA order, usage from the rule, cached prefix on the next turn, recording', async () => {
    const path = '/v1/realtime?model=gpt-realtime';
    const c = await Client.open(path, auth);
    const created = await c.next();
    assert.equal(created.type, 'session.created');
    assert.match(created.session.id, /^sess_/);
    assert.equal(created.session.model, 'gpt-realtime');
    assert.equal(created.session.type, 'realtime');
    assert.deepEqual(created.session.output_modalities, ['audio']);

    c.send({
      type: 'session.update',
      session: { type: 'realtime', output_modalities: ['text'], instructions: 'Be brief.' },
    });
    const updated = await c.next();
    assert.equal(updated.type, 'session.updated');
    assert.deepEqual(updated.session.output_modalities, ['text']);
    assert.equal(updated.session.instructions, 'Be brief.');
    assert.equal(updated.session.id, created.session.id);

    const prompt1 = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');
    c.send(userText(prompt1));
    const [added, done] = [await c.next(), await c.next()];
    assert.equal(added.type, 'conversation.item.added');
    assert.equal(added.item.role, 'user');
    assert.equal(added.previous_item_id, null);
    assert.equal(done.type, 'conversation.item.done');

    c.send({ type: 'response.create' });
    const first = await c.until((e) => e.type === 'rate_limits.updated');
    assert.deepEqual(types(first), [
      'response.created',
      'response.output_item.added',
      'conversation.item.added',
      'response.content_part.added',
      ...Array<string>(8).fill('response.output_text.delta'),
      'response.output_text.done',
      'response.content_part.done',
      'conversation.item.done',
      'response.output_item.done',
      'response.done',
      'rate_limits.updated',
    ]);
    const reply1 = replyText(prompt1, knobs);
    const deltas = first.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta);
    assert.deepEqual(deltas, splitPieces(reply1, 8));
    assert.equal(first.find((e) => e.type === 'response.output_text.done')?.text, reply1);
    const r1 = first.find((e) => e.type === 'response.done')!.response;
    assert.match(r1.id, /^resp_/);
    assert.equal(r1.id, first[0]!.response.id);
    assert.equal(r1.status, 'completed');
    assert.deepEqual(r1.output[0].content, [{ type: 'output_text', text: reply1 }]);
    const input1 = tokens('Be brief.') + tokens(prompt1);
    const out1 = tokens(reply1);
    assert.ok(input1 >= 64, 'the first prompt is long enough to leave a cached prefix');
    assert.deepEqual(r1.usage, {
      total_tokens: input1 + out1,
      input_tokens: input1,
      output_tokens: out1,
      input_token_details: {
        text_tokens: input1,
        audio_tokens: 0,
        image_tokens: 0,
        cached_tokens: 0,
        cached_tokens_details: { text_tokens: 0, audio_tokens: 0, image_tokens: 0 },
      },
      output_token_details: { text_tokens: out1, audio_tokens: 0 },
    });

    // Second turn: the context is instructions + both user items + the first reply; the previous
    // response's input, rounded down to 64, is reported as cached.
    const prompt2 = 'and now a second question';
    c.send(userText(prompt2));
    await c.until((e) => e.type === 'conversation.item.done');
    c.send({ type: 'response.create' });
    const second = await c.until((e) => e.type === 'response.done');
    const r2 = second.at(-1)!.response;
    const reply2 = replyText(prompt2, knobs);
    const input2 = input1 + out1 + tokens(prompt2);
    const cached = Math.floor(input1 / 64) * 64;
    assert.notEqual(r2.id, r1.id);
    assert.equal(r2.usage.input_tokens, input2);
    assert.equal(r2.usage.output_tokens, tokens(reply2));
    assert.equal(r2.usage.input_token_details.cached_tokens, cached);
    assert.deepEqual(r2.usage.input_token_details.cached_tokens_details, {
      text_tokens: cached,
      audio_tokens: 0,
      image_tokens: 0,
    });
    await c.next(); // rate_limits.updated

    c.ws.close(1000, 'done');
    await sim.waitFor((s) => s.realtime.sessions.some((r) => r.path === path && r.closed !== undefined));
    const rec = recorded(path);
    assert.equal(rec.provider, 'openai');
    assert.equal(rec.status, 101);
    assert.equal(rec.model, 'gpt-realtime');
    assert.equal(rec.id, created.session.id);
    assert.equal(rec.headers.authorization, 'Bearer sk-test');
    assert.deepEqual(
      rec.received.map((e) => (e as Json).type),
      [
        'session.update',
        'conversation.item.create',
        'response.create',
        'conversation.item.create',
        'response.create',
      ],
    );
    assert.equal((rec.sent.find((e) => (e as Json).type === 'response.done') as Json).response.id, r1.id);
    assert.equal(rec.counts.sent, rec.sent.length);
    assert.equal(rec.counts.responses, 2);
    assert.deepEqual(rec.closed, { code: 1000, reason: 'done', by: 'client' });
  });

  test('audio in, audio out: committed buffer, interleaved transcript/audio deltas, audio token usage', async () => {
    const c = await Client.open('/v1/realtime?model=gpt-realtime&x-sim-chunks=4', auth);
    await c.next(); // session.created
    const chunk = Buffer.alloc(9600).toString('base64'); // 200 ms of 24 kHz PCM16
    for (let i = 0; i < 3; i++) c.send({ type: 'input_audio_buffer.append', audio: chunk });
    c.send({ type: 'input_audio_buffer.commit' });
    const committed = await c.until((e) => e.type === 'conversation.item.done');
    assert.deepEqual(types(committed), [
      'input_audio_buffer.committed',
      'conversation.item.added',
      'conversation.item.done',
    ]);
    assert.deepEqual(committed[1]!.item.content, [{ type: 'input_audio', transcript: null }]);

    c.send({ type: 'response.create' });
    const events = await c.until((e) => e.type === 'response.done');
    assert.deepEqual(types(events), [
      'response.created',
      'response.output_item.added',
      'conversation.item.added',
      'response.content_part.added',
      ...Array.from({ length: 4 }, () => [
        'response.output_audio_transcript.delta',
        'response.output_audio.delta',
      ]).flat(),
      'response.output_audio.done',
      'response.output_audio_transcript.done',
      'response.content_part.done',
      'conversation.item.done',
      'response.output_item.done',
      'response.done',
    ]);
    const transcript = replyText('(audio 600 ms)', knobs);
    assert.equal(
      events.find((e) => e.type === 'response.output_audio_transcript.done')?.transcript,
      transcript,
    );
    const audioBytes = events
      .filter((e) => e.type === 'response.output_audio.delta')
      .reduce((n, e) => n + Buffer.from(e.delta, 'base64').length, 0);
    const textTokens = tokens(transcript);
    assert.equal(audioBytes, textTokens * 4800, '100 ms of 24 kHz PCM16 per transcript token');
    const r = events.at(-1)!.response;
    assert.deepEqual(r.output_modalities, ['audio']);
    assert.deepEqual(r.output[0].content, [{ type: 'output_audio', transcript }]);
    assert.deepEqual(r.usage, {
      total_tokens: 6 + textTokens * 3,
      input_tokens: 6,
      output_tokens: textTokens * 3,
      input_token_details: {
        text_tokens: 0,
        audio_tokens: 6,
        image_tokens: 0,
        cached_tokens: 0,
        cached_tokens_details: { text_tokens: 0, audio_tokens: 0, image_tokens: 0 },
      },
      output_token_details: { text_tokens: textTokens, audio_tokens: textTokens * 2 },
    });
    c.ws.close();
    await c.closed;
  });

  test('transcription session (?intent=transcription): commit answers with a transcript and its usage', async () => {
    const c = await Client.open('/v1/realtime?intent=transcription', auth);
    const created = await c.next();
    assert.equal(created.session.type, 'transcription');
    c.send({
      type: 'session.update',
      session: {
        type: 'transcription',
        audio: { input: { transcription: { model: 'gpt-4o-mini-transcribe' } } },
      },
    });
    assert.equal((await c.next()).type, 'session.updated');
    c.send({ type: 'input_audio_buffer.append', audio: Buffer.alloc(48_000).toString('base64') }); // 1 s
    c.send({ type: 'input_audio_buffer.commit' });
    const events = await c.until((e) => e.type === 'conversation.item.input_audio_transcription.completed');
    assert.deepEqual(types(events), [
      'input_audio_buffer.committed',
      'conversation.item.added',
      'conversation.item.done',
      'conversation.item.input_audio_transcription.completed',
    ]);
    const done = events.at(-1)!;
    assert.equal(done.transcript, 'Simulated transcript of 1000 ms of audio.');
    const out = tokens(done.transcript);
    assert.deepEqual(done.usage, {
      type: 'tokens',
      total_tokens: 10 + out,
      input_tokens: 10,
      input_token_details: { text_tokens: 0, audio_tokens: 10 },
      output_tokens: out,
    });
    c.ws.close();
    await c.closed;
  });

  test('response.cancel mid-stream: cancelled with the partial text and its usage', async () => {
    // delay-60000: the first delta goes out with the opening events, the next one a minute later.
    const c = await Client.open('/v1/realtime?model=gpt-realtime-delay-60000', auth);
    await c.next();
    c.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'] } });
    c.send(userText('please stop me'));
    c.send({ type: 'response.create' });
    const head = await c.until((e) => e.type === 'response.output_text.delta');
    const delta = head.at(-1)!.delta as string;
    assert.equal(delta, splitPieces(replyText('please stop me', knobs), 8)[0]);
    c.send({ type: 'response.cancel' });
    const tail = await c.until((e) => e.type === 'response.done');
    assert.deepEqual(types(tail), [
      'response.output_text.done',
      'response.content_part.done',
      'conversation.item.done',
      'response.output_item.done',
      'response.done',
    ]);
    const r = tail.at(-1)!.response;
    assert.equal(r.status, 'cancelled');
    assert.deepEqual(r.status_details, { type: 'cancelled', reason: 'client_cancelled' });
    assert.equal(r.output[0].status, 'incomplete');
    assert.deepEqual(r.output[0].content, [{ type: 'output_text', text: delta }]);
    assert.equal(r.usage.output_tokens, tokens(delta));
    assert.equal(r.usage.input_tokens, tokens('please stop me'));
    await c.next(); // rate_limits.updated
    c.send({ type: 'response.cancel' });
    const err = await c.next();
    assert.equal(err.type, 'error');
    assert.equal(err.error.code, 'response_cancel_not_active');
    c.ws.close();
    await c.closed;
  });

  test('fail-midstream: half the deltas, an error event, then close 1011', async () => {
    const injected = sim.stats.injected;
    const path = '/v1/realtime?model=gpt-realtime-fail-midstream-chunks-4';
    const c = await Client.open(path, auth);
    await c.next();
    c.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'] } });
    c.send(userText('hello'));
    c.send({ type: 'response.create' });
    const events = await c.until((e) => e.type === 'error');
    assert.equal(events.filter((e) => e.type === 'response.output_text.delta').length, 2);
    assert.equal(events.at(-1)!.error.type, 'server_error');
    assert.deepEqual(await c.closed, { code: 1011, reason: 'server_error' });
    assert.equal(sim.stats.injected, injected + 1);
    await sim.waitFor(() => recorded(path).closed !== undefined);
    assert.deepEqual(recorded(path).closed, { code: 1011, reason: 'server_error', by: 'server' });
  });

  test('fail-midstream-reset drops the connection without a close frame', async () => {
    const c = await Client.open('/v1/realtime?model=gpt-realtime&x-sim-fail=midstream-reset', auth);
    await c.next();
    c.send(userText('hello'));
    c.send({ type: 'response.create' });
    assert.equal((await c.closed).code, 1006);
  });

  test('credentials: 401 without them; the browser subprotocols are accepted; injected status refuses', async () => {
    const path = '/v1/realtime?model=gpt-realtime&refused=1';
    const denied = await refused(path);
    assert.equal(denied.status, 401);
    assert.equal(denied.body.error.code, 'invalid_api_key');
    assert.equal(recorded(path).status, 401);

    const browser = await Client.open('/v1/realtime?model=gpt-realtime-mini', {}, [
      'realtime',
      'openai-insecure-api-key.sk-browser',
      'openai-beta.realtime-v1',
    ]);
    assert.equal(browser.ws.protocol, 'realtime');
    assert.equal((await browser.next()).type, 'session.created');
    browser.ws.close();
    await browser.closed;

    const azure = await Client.open('/openai/realtime?api-version=2025-04-01-preview&deployment=rt-dep', {
      headers: { 'api-key': 'az-key' },
    });
    assert.equal((await azure.next()).session.model, 'rt-dep');
    azure.ws.close();
    await azure.closed;

    const limited = await refused('/v1/realtime?model=gpt-realtime', {
      headers: { authorization: 'Bearer sk-test', 'x-sim-fail': '429' },
    });
    assert.equal(limited.status, 429);
    assert.equal(limited.body.error.code, 'rate_limit_exceeded');
  });

  test('protocol errors: missing model is fatal (4000); bad frames are answered with error events', async () => {
    const noModel = await Client.open('/v1/realtime', auth);
    const err = await noModel.next();
    assert.equal(err.error.code, 'missing_model');
    assert.deepEqual(await noModel.closed, { code: 4000, reason: 'invalid_request_error.missing_model' });

    const c = await Client.open('/v1/realtime?model=gpt-realtime', auth);
    await c.next();
    c.ws.send(Buffer.from('{}'), { binary: true });
    c.ws.send('not json');
    c.send({ type: 'nope', event_id: 'evt_1' });
    const errors = [await c.next(), await c.next(), await c.next()];
    assert.deepEqual(
      errors.map((e) => e.error.code),
      ['invalid_event', 'invalid_json', 'invalid_value'],
    );
    assert.equal(errors[2]!.error.event_id, 'evt_1');
    c.send({ type: 'response.create', response: { output_modalities: ['text'] } });
    const r = (await c.until((e) => e.type === 'response.done')).at(-1)!.response;
    assert.equal(r.status, 'completed');
    c.ws.close();
    await c.closed;
  });

  test('the openai SDK (OpenAIRealtimeWS) talks to the simulator and gets usage', async () => {
    const client = new OpenAI({ apiKey: 'sk-sdk', baseURL: `${sim.url}/v1` });
    // The SDK always builds a wss:// URL; a plain TCP connection makes it speak ws:// to the simulator.
    const rt = new OpenAIRealtimeWS(
      {
        model: 'gpt-realtime',
        options: { createConnection: ((o: net.NetConnectOpts) => net.connect(o)) as typeof net.connect },
      },
      client,
    );
    const errors: unknown[] = [];
    rt.on('error', (e) => errors.push(e));
    const done = new Promise<Json>((resolve) => rt.on('response.done', (e) => resolve(e.response)));
    let text = '';
    rt.on('response.output_text.delta', (e) => {
      text += e.delta;
    });
    await new Promise<void>((resolve) => rt.socket.once('open', () => resolve()));
    rt.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'] } });
    rt.send({
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hello from the sdk' }] },
    });
    rt.send({ type: 'response.create' });
    const response = await done;
    const reply = replyText('hello from the sdk', knobs);
    assert.equal(text, reply);
    assert.equal(response.status, 'completed');
    assert.equal(response.usage.input_tokens, tokens('hello from the sdk'));
    assert.equal(response.usage.output_tokens, tokens(reply));
    assert.equal(response.usage.total_tokens, tokens('hello from the sdk') + tokens(reply));
    const closed = new Promise<void>((resolve) => rt.socket.once('close', () => resolve()));
    rt.close();
    await closed;
    assert.deepEqual(errors, []);
    const rec = sim.realtime.sessions.findLast((s) => s.headers.authorization === 'Bearer sk-sdk');
    assert.equal(rec?.path, '/v1/realtime?model=gpt-realtime');
    assert.match(String(rec?.headers['user-agent']), /^OpenAI\/JS /);
  });
});

describe('Gemini Live', () => {
  const setupText = {
    setup: {
      model: 'models/gemini-2.0-flash-live-001',
      generationConfig: { responseModalities: ['TEXT'] },
      systemInstruction: { parts: [{ text: 'Be brief.' }] },
    },
  };
  const userTurn = (text: string) => ({
    clientContent: { turns: [{ role: 'user', parts: [{ text }] }], turnComplete: true },
  });

  test('text turns: setupComplete, modelTurn parts, generationComplete, turnComplete with usage', async () => {
    const path = `${GEMINI_PATH}?key=gm-test&x-sim-chunks=3`;
    const c = await Client.open(path);
    c.send(setupText);
    assert.deepEqual(await c.next(), { setupComplete: {} });

    const p1 = 'hello gemini live';
    c.send(userTurn(p1));
    const turn1 = await c.until((m) => m.serverContent?.turnComplete === true);
    const reply1 = replyText(p1, knobs);
    assert.deepEqual(
      turn1.slice(0, 3).map((m) => m.serverContent.modelTurn.parts[0].text),
      splitPieces(reply1, 3),
    );
    assert.deepEqual(turn1[3], { serverContent: { generationComplete: true } });
    const prompt1 = tokens('Be brief.') + tokens(p1);
    assert.deepEqual(turn1[4], {
      serverContent: { turnComplete: true },
      usageMetadata: {
        promptTokenCount: prompt1,
        responseTokenCount: tokens(reply1),
        totalTokenCount: prompt1 + tokens(reply1),
        promptTokensDetails: [{ modality: 'TEXT', tokenCount: prompt1 }],
        responseTokensDetails: [{ modality: 'TEXT', tokenCount: tokens(reply1) }],
      },
    });

    const p2 = 'and a second turn';
    c.send(userTurn(p2));
    const turn2 = await c.until((m) => m.serverContent?.turnComplete === true);
    const usage2 = turn2.at(-1)!.usageMetadata;
    assert.equal(usage2.promptTokenCount, prompt1 + tokens(reply1) + tokens(p2));
    assert.equal(usage2.responseTokenCount, tokens(replyText(p2, knobs)));

    c.ws.close(1000, 'bye');
    await sim.waitFor(() => recorded(path).closed !== undefined);
    const rec = recorded(path);
    assert.equal(rec.provider, 'gemini');
    assert.equal(rec.model, 'gemini-2.0-flash-live-001');
    assert.match(rec.id, /^live_/);
    assert.deepEqual(rec.received[0], setupText);
    assert.equal(rec.counts.responses, 2);
    assert.deepEqual(rec.sent[0], { setupComplete: {} });
    assert.deepEqual(rec.closed, { code: 1000, reason: 'bye', by: 'client' });
  });

  test('audio in, audio out: realtimeInput audio, transcriptions, inlineData PCM and modality usage', async () => {
    const c = await Client.open(`${GEMINI_PATH}?x-sim-chunks=2`, {
      headers: { 'x-goog-api-key': 'gm-test' },
    });
    c.send({
      setup: {
        model: 'models/gemini-live-2.5-flash-preview',
        generationConfig: { responseModalities: ['AUDIO'] },
        inputAudioTranscription: {},
        outputAudioTranscription: {},
      },
    });
    await c.next();
    const second = Buffer.alloc(32_000).toString('base64'); // 1 s of 16 kHz PCM16
    c.send({ realtimeInput: { audio: { data: second, mimeType: 'audio/pcm;rate=16000' } } });
    c.send({ realtimeInput: { audioStreamEnd: true } });
    const turn = await c.until((m) => m.serverContent?.turnComplete === true);
    assert.deepEqual(turn[0], {
      serverContent: { inputTranscription: { text: 'Simulated transcript of 1000 ms of audio.' } },
    });
    const reply = replyText('(audio 1000 ms)', knobs);
    const audio = turn.filter((m) => m.serverContent?.modelTurn);
    assert.equal(audio.length, 2);
    assert.equal(audio[0]!.serverContent.modelTurn.parts[0].inlineData.mimeType, 'audio/pcm;rate=24000');
    const bytes = audio.reduce(
      (n, m) => n + Buffer.from(m.serverContent.modelTurn.parts[0].inlineData.data, 'base64').length,
      0,
    );
    assert.equal(bytes, tokens(reply) * 4800, '100 ms of 24 kHz PCM16 per reply token');
    const transcript = turn
      .filter((m) => m.serverContent?.outputTranscription)
      .map((m) => m.serverContent.outputTranscription.text)
      .join('');
    assert.equal(transcript, reply);
    const responseTokens = Math.ceil((tokens(reply) * 100 * 32) / 1000);
    assert.deepEqual(turn.at(-1)!.usageMetadata, {
      promptTokenCount: 32,
      responseTokenCount: responseTokens,
      totalTokenCount: 32 + responseTokens,
      promptTokensDetails: [
        { modality: 'TEXT', tokenCount: 0 },
        { modality: 'AUDIO', tokenCount: 32 },
      ],
      responseTokensDetails: [{ modality: 'AUDIO', tokenCount: responseTokens }],
    });
    c.ws.close();
    await c.closed;
  });

  test('a new client turn interrupts the answer; binary frames on request', async () => {
    const c = await Client.open(`${GEMINI_PATH}?access_token=tok&x-sim-binary=1`);
    c.send({ setup: { ...setupText.setup, model: 'models/gemini-live-delay-60000' } });
    await c.next();
    assert.equal(c.binary[0], true, 'x-sim-binary sends JSON in binary frames, as Google does');
    c.send(userTurn('first question here'));
    const first = await c.next();
    const piece = first.serverContent.modelTurn.parts[0].text;
    assert.equal(piece, splitPieces(replyText('first question here', knobs), 8)[0]!);
    c.send(userTurn('second question'));
    assert.deepEqual(await c.next(), { serverContent: { interrupted: true } });
    const partial = await c.next();
    assert.equal(partial.serverContent.turnComplete, true);
    assert.equal(partial.usageMetadata.responseTokenCount, tokens(piece));
    const next = await c.next();
    assert.equal(
      next.serverContent.modelTurn.parts[0].text,
      splitPieces(replyText('second question', knobs), 8)[0]!,
    );
    c.ws.close();
    await c.closed;
  });

  test('credentials and protocol errors: 401 without a key; setup must come first; fail-midstream closes 1011', async () => {
    const denied = await refused(`${GEMINI_PATH}?x=1`);
    assert.equal(denied.status, 401);
    assert.equal(denied.body.error.status, 'UNAUTHENTICATED');

    const early = await Client.open(`${GEMINI_PATH}?key=k`);
    early.send(userTurn('too early'));
    assert.equal((await early.closed).code, 1007);

    const failing = await Client.open(
      `/ws/google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateContent?key=k`,
    );
    failing.send({ setup: { ...setupText.setup, model: 'models/gemini-live-fail-midstream-chunks-4' } });
    await failing.next();
    failing.send(userTurn('hello'));
    const parts = [await failing.next(), await failing.next()];
    assert.ok(parts.every((m) => m.serverContent.modelTurn));
    assert.deepEqual(await failing.closed, { code: 1011, reason: 'Internal error encountered.' });
  });

  test('the genai SDK live client connects and completes a turn', async () => {
    const ai = new GoogleGenAI({ apiKey: 'gm-sdk', httpOptions: { baseUrl: sim.url } });
    let turnDone!: (usage: Json | undefined) => void;
    const usage = new Promise<Json | undefined>((resolve) => {
      turnDone = resolve;
    });
    let text = '';
    const session = await ai.live.connect({
      model: 'gemini-live-2.5-flash-preview',
      config: { responseModalities: [Modality.TEXT] },
      callbacks: {
        onmessage: (m) => {
          for (const part of m.serverContent?.modelTurn?.parts ?? []) text += part.text ?? '';
          if (m.serverContent?.turnComplete) turnDone(m.usageMetadata as Json | undefined);
        },
      },
    });
    session.sendClientContent({ turns: [{ role: 'user', parts: [{ text: 'hello sdk live' }] }] });
    const u = await usage;
    const reply = replyText('hello sdk live', knobs);
    assert.equal(text, reply);
    assert.equal(u?.promptTokenCount, tokens('hello sdk live'));
    assert.equal(u?.responseTokenCount, tokens(reply));
    session.close();
  });
});
