import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { JsonObject } from '../../../../common/types.ts';
import { geminiUsage, KEPT_TRANSCRIBED } from '../../../../hooks/families/gemini/gemini-live-responses.ts';
import { geminiLiveToOpenaiRealtime } from '../../../../hooks/families/gemini/gemini-live-to-openai-realtime.ts';
import { geminiLive } from '../../../../hooks/families/gemini/live.ts';
import { Upsampler16kTo24k } from '../../../../hooks/families/gemini/pcm-resample.ts';
import { REALTIME_TRANSLATORS } from '../../../../hooks/families/index.ts';
import { openaiRealtime } from '../../../../hooks/families/openai/realtime.ts';
import {
  checkRealtimeGolden,
  REALTIME_FIXTURES,
  type RealtimeCaseRun,
  realtimeCaseNames,
} from '../../../fixtures/translators/gemini/realtime-golden.ts';

// biome-ignore lint/suspicious/noExplicitAny: wire messages are read loosely; the assertions check their shape
type Json = Record<string, any>;

const DIRECTION = 'gemini-live-to-openai-realtime';
const ROOT = join(REALTIME_FIXTURES, '..', 'openai');

/** The exchange's entries, read loosely. */
function exchange(r: RealtimeCaseRun): Json[] {
  return r.exchange as Json[];
}

function run(name: string): RealtimeCaseRun {
  return checkRealtimeGolden(geminiLiveToOpenaiRealtime, DIRECTION, name, ROOT);
}

function clientMessages(r: RealtimeCaseRun): Json[] {
  return r.steps.flatMap((s) => s.client) as Json[];
}

function upstreamEvents(r: RealtimeCaseRun): Json[] {
  return r.steps.flatMap((s) => s.upstream) as Json[];
}

/** The kinds of client messages in order, runs of the same kind kept as one. */
function kinds(messages: readonly Json[]): string[] {
  const out: string[] = [];
  for (const m of messages) {
    const content = m.serverContent as Json | undefined;
    const kind =
      content === undefined
        ? Object.keys(m).join('+')
        : Object.keys(content)
            .map((k) => (k === 'modelTurn' ? `modelTurn.${Object.keys(content.modelTurn.parts[0])[0]}` : k))
            .join('+') + (m.usageMetadata === undefined ? '' : '+usageMetadata');
    if (out.at(-1) !== kind) out.push(kind);
  }
  return out;
}

function responseDones(r: RealtimeCaseRun): Json[] {
  return r.exchange.flatMap((e) => (e.upstream?.type === 'response.done' ? [e.upstream] : [])) as Json[];
}

/** What the gateway bills of an upstream message: OpenAI's reader on OpenAI's own message. */
function billed(r: RealtimeCaseRun): Json[] {
  return responseDones(r).flatMap((m) => openaiRealtime.usage(m as JsonObject, 0) ?? []);
}

/** 16 kHz PCM16 of a sine, `ms` long. */
function sine16k(ms: number, phase = 0): Buffer {
  const out = Buffer.alloc(ms * 32);
  for (let i = 0; i < ms * 16; i++)
    out.writeInt16LE(Math.round(8000 * Math.sin(phase + (i * 2 * Math.PI * 440) / 16_000)), i * 2);
  return out;
}

describe('gemini-live-to-openai-realtime golden fixtures', () => {
  for (const name of realtimeCaseNames(DIRECTION, ROOT)) test(name, () => void run(name));
});

describe('gemini-live-to-openai-realtime', () => {
  test('registered by its DSL name, billed from the upstream', () => {
    assert.equal(REALTIME_TRANSLATORS.get('gemini_live_to_openai_realtime'), geminiLiveToOpenaiRealtime);
    assert.equal(geminiLiveToOpenaiRealtime.from, 'native.live');
    assert.equal(geminiLiveToOpenaiRealtime.to, 'realtime');
    assert.equal(geminiLiveToOpenaiRealtime.usageFrom, 'upstream');
  });

  test('session start: the setup waits for session.created, then one session.update; session.updated is setupComplete', () => {
    const r = run('text-turn');
    assert.deepEqual(r.open, { upstream: [], client: [] });
    assert.equal(r.exchange[0]!.upstream?.type, 'session.created', 'OpenAI speaks first');
    assert.deepEqual(r.steps[0], { upstream: [], client: [] });
    assert.deepEqual(r.steps[1]!.upstream, [
      {
        event_id: 'event_1',
        type: 'session.update',
        session: {
          type: 'realtime',
          output_modalities: ['text'],
          max_output_tokens: 200,
          instructions: 'Answer briefly.',
          audio: {
            input: {
              format: { type: 'audio/pcm', rate: 24000 },
              turn_detection: { type: 'server_vad', create_response: true, interrupt_response: true },
            },
            output: { format: { type: 'audio/pcm', rate: 24000 } },
          },
        },
      },
    ]);
    assert.deepEqual(r.steps[2]!.client, [{ setupComplete: {} }]);
  });

  test('a text turn: clientContent is an item and response.create; deltas are modelTurn text; usage at turnComplete', () => {
    const r = run('text-turn');
    assert.deepEqual(upstreamEvents(r).slice(1), [
      {
        type: 'conversation.item.create',
        item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hello openai' }] },
      },
      { event_id: 'event_2', type: 'response.create' },
    ]);
    const messages = clientMessages(r);
    assert.deepEqual(kinds(messages), [
      'setupComplete',
      'modelTurn.text',
      'generationComplete',
      'turnComplete+usageMetadata',
    ]);
    const text = messages
      .flatMap((m) => m.serverContent?.modelTurn?.parts ?? [])
      .map((p: Json) => p.text)
      .join('');
    const done = responseDones(r)[0]!.response;
    assert.equal(text, done.output[0].content[0].text);
    const meta = messages.at(-1)!.usageMetadata;
    assert.deepEqual(meta, geminiUsage(done.usage));
    assert.equal(meta.promptTokenCount, done.usage.input_tokens);
    assert.equal(meta.responseTokenCount, done.usage.output_tokens);
    assert.equal(meta.totalTokenCount, done.usage.total_tokens);
  });

  test('an audio turn without activity detection: 16 kHz upsampled, activityEnd commits and asks a response', () => {
    const r = run('audio-manual-turn');
    const [update, ...sent] = upstreamEvents(r);
    assert.equal(update!.session.audio.input.turn_detection, null);
    assert.deepEqual(update!.session.audio.input.transcription, { model: 'gpt-4o-mini-transcribe' });
    assert.equal(update!.session.audio.output.voice, 'marin');
    assert.deepEqual(update!.session.output_modalities, ['audio']);
    assert.deepEqual(
      sent.map((e) => e.type),
      [
        'input_audio_buffer.append',
        'input_audio_buffer.append',
        'input_audio_buffer.append',
        'input_audio_buffer.commit',
        'response.create',
      ],
    );
    const appended = sent
      .filter((e) => e.type === 'input_audio_buffer.append')
      .reduce((n, e) => n + Buffer.from(e.audio, 'base64').length, 0);
    const given = exchange(r)
      .flatMap((e) => (e.client?.realtimeInput?.audio ? [e.client.realtimeInput.audio.data] : []))
      .reduce((n: number, d: string) => n + Buffer.from(d, 'base64').length, 0);
    assert.equal(appended, (given * 3) / 2, '16 kHz in, 24 kHz out, no sample lost');
    const messages = clientMessages(r);
    assert.deepEqual(kinds(messages), [
      'setupComplete',
      'inputTranscription',
      'outputTranscription',
      'modelTurn.inlineData',
      'outputTranscription',
      'modelTurn.inlineData',
      'outputTranscription',
      'modelTurn.inlineData',
      'outputTranscription',
      'modelTurn.inlineData',
      'outputTranscription',
      'modelTurn.inlineData',
      'outputTranscription',
      'modelTurn.inlineData',
      'outputTranscription',
      'modelTurn.inlineData',
      'outputTranscription',
      'modelTurn.inlineData',
      'generationComplete',
      'turnComplete+usageMetadata',
    ]);
    const audio = messages.find((m) => m.serverContent?.modelTurn)!.serverContent.modelTurn.parts[0]
      .inlineData;
    assert.equal(audio.mimeType, 'audio/pcm;rate=24000');
    const done = responseDones(r)[0]!.response;
    const meta = messages.at(-1)!.usageMetadata;
    assert.deepEqual(meta.promptTokensDetails, [
      { modality: 'TEXT', tokenCount: done.usage.input_token_details.text_tokens },
      { modality: 'AUDIO', tokenCount: done.usage.input_token_details.audio_tokens },
    ]);
    assert.deepEqual(meta.responseTokensDetails, [
      { modality: 'TEXT', tokenCount: done.usage.output_token_details.text_tokens },
      { modality: 'AUDIO', tokenCount: done.usage.output_token_details.audio_tokens },
    ]);
  });

  test('a function call: toolCall with OpenAI call ids and the response usage; toolResponse is the output and a response', () => {
    const r = run('function-call');
    const update = upstreamEvents(r)[0]!;
    assert.deepEqual(update.session.tools, [
      {
        type: 'function',
        name: 'get_weather',
        description: 'The weather of a place',
        parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
      },
    ]);
    const messages = clientMessages(r);
    const call = messages.find((m) => m.toolCall)!;
    const [first] = responseDones(r);
    const item = first!.response.output[0];
    assert.deepEqual(call.toolCall, {
      functionCalls: [{ id: item.call_id, name: 'get_weather', args: JSON.parse(item.arguments) }],
    });
    assert.deepEqual(
      call.usageMetadata,
      geminiUsage(first!.response.usage),
      'the call response is billed with it',
    );
    const answer = r.exchange.findIndex((e) => e.client?.toolResponse !== undefined);
    assert.deepEqual(r.steps[answer]!.upstream, [
      {
        type: 'conversation.item.create',
        item: { type: 'function_call_output', call_id: item.call_id, output: '{"temperature":21}' },
      },
      { event_id: 'event_3', type: 'response.create' },
    ]);
    assert.deepEqual(kinds(messages), [
      'setupComplete',
      'toolCall+usageMetadata',
      'modelTurn.text',
      'generationComplete',
      'turnComplete+usageMetadata',
    ]);
  });

  test('a new client turn interrupts: response.cancel upstream, interrupted to the client, the cut response billed', () => {
    const r = run('client-interrupt');
    const at = exchange(r).findIndex((e) => e.client?.realtimeInput?.text !== undefined);
    assert.deepEqual(r.steps[at]!.client, [{ serverContent: { interrupted: true } }]);
    assert.deepEqual(
      r.steps[at]!.upstream.map((e) => e.type),
      ['response.cancel', 'conversation.item.create', 'response.create'],
    );
    const messages = clientMessages(r);
    assert.deepEqual(kinds(messages), [
      'setupComplete',
      'modelTurn.text',
      'interrupted',
      'turnComplete+usageMetadata',
      'modelTurn.text',
      'generationComplete',
      'turnComplete+usageMetadata',
    ]);
    const [cut, next] = responseDones(r);
    assert.equal(cut!.response.status, 'cancelled');
    assert.deepEqual(
      billed(r).map((b) => b.responseId),
      [cut!.response.id, next!.response.id],
      'each OpenAI response billed once',
    );
  });

  test('activity detection on: speech_started over an answer is interrupted; late deltas dropped; cached audio carried', () => {
    const r = run('vad-interrupted');
    const update = upstreamEvents(r)[0]!;
    assert.deepEqual(update.session.audio.input.turn_detection, {
      type: 'server_vad',
      create_response: true,
      interrupt_response: true,
      prefix_padding_ms: 300,
      silence_duration_ms: 500,
    });
    const messages = clientMessages(r);
    assert.deepEqual(kinds(messages), [
      'setupComplete',
      'inputTranscription',
      'outputTranscription',
      'modelTurn.inlineData',
      'interrupted',
      'turnComplete+usageMetadata',
      'inputTranscription',
      'outputTranscription',
      'modelTurn.inlineData',
      'generationComplete',
      'turnComplete+usageMetadata',
    ]);
    assert.ok(!JSON.stringify(messages).includes('BBBBBBBB'), 'audio after the interruption is not relayed');
    const transcripts = messages.flatMap((m) => m.serverContent?.inputTranscription?.text ?? []);
    assert.deepEqual(
      transcripts,
      ['What time', ' is it?', 'Never mind.'],
      'deltas once, a bare completed whole',
    );
    const last = messages.at(-1)!.usageMetadata;
    assert.equal(last.cachedContentTokenCount, 128);
    assert.deepEqual(last.cacheTokensDetails, [
      { modality: 'TEXT', tokenCount: 64 },
      { modality: 'AUDIO', tokenCount: 64 },
    ]);
    // Audio the detector committed is not committed again at the stream's end.
    assert.deepEqual(r.steps.at(-1), { upstream: [], client: [] });
  });

  test('what OpenAI cannot carry closes the session (1008) naming the field; bad messages close with 1007', () => {
    const r = run('refusals');
    const closes = r.steps.map((s) => s.close);
    const expected: [number, RegExp][] = [
      [1008, /^setup\.generationConfig\.temperature: /],
      [
        1008,
        /^setup\.generationConfig\.speechConfig\.voiceConfig\.prebuiltVoiceConfig\.voiceName: Puck is not OpenAI's/,
      ],
      [1008, /^setup\.generationConfig\.speechConfig\.languageCode: /],
      [1008, /^setup\.generationConfig\.responseModalities: /],
      [1008, /^setup\.sessionResumption: /],
      [1008, /^setup\.contextWindowCompression: /],
      [1008, /^setup\.tools\[0\]\.googleSearch: /],
      [1008, /^setup\.tools\[0\]\.functionDeclarations\[0\]\.behavior: /],
      [1008, /^setup\.realtimeInputConfig\.automaticActivityDetection\.startOfSpeechSensitivity: /],
      [1008, /^setup\.systemInstruction\.parts\[0\]: /],
      [1007, /^setup\.generationConfig\.maxOutputTokens: /],
    ];
    for (const [i, [code, reason]] of expected.entries()) {
      assert.equal(closes[i]?.code, code, `step ${i}`);
      assert.match(closes[i]!.reason, reason);
      assert.deepEqual(r.steps[i]!.upstream, [], 'a refused setup sends nothing');
    }
    // The next setup is taken (a refused one changes nothing), as the session goes on in this replay.
    assert.equal(closes[11], undefined);
    assert.deepEqual(upstreamEvents(r)[0]!.session.tool_choice, 'required');
    const after: [number, RegExp][] = [
      [1008, /^realtimeInput\.video: /],
      [1008, /^realtimeInput\.mediaChunks\[0\]\.mimeType: /],
      [1008, /^realtimeInput\.audio\.mimeType: /],
      [1007, /^realtimeInput\.audio\.data: /],
      [1007, /^realtimeInput\.activityStart: needs automatic activity detection disabled/],
      [1008, /^clientContent\.turns\[0\]\.parts\[0\]\.fileData: /],
      [1008, /^clientContent\.turns\[0\]\.parts\[0\]\.inlineData: /],
      [1007, /^clientContent\.turns\[0\]\.role: /],
      [1007, /^toolResponse\.functionResponses\[0\]\.id: /],
      [1007, /^setup: setup was already sent/],
      [1007, /^sessionResumptionUpdate: unknown message/],
      [1007, /^clientContent, realtimeInput: /],
      [1007, /^Invalid JSON payload/],
    ];
    const start = r.exchange.findIndex((e) => e.upstream?.type === 'session.updated') + 1;
    for (const [j, [code, reason]] of after.entries()) {
      const step = r.steps[start + j]!;
      assert.equal(step.close?.code, code, `step ${start + j}`);
      assert.match(step.close!.reason, reason);
      assert.deepEqual(step.upstream, [], 'nothing of a refused message goes upstream');
    }
    // JSON in a binary frame is read (the Live API takes both).
    assert.equal(r.steps.at(-1)!.close, undefined);
    assert.equal(r.steps.at(-1)!.upstream.at(-1)!.type, 'response.create');
    for (const close of closes.filter((c) => c !== undefined))
      assert.ok(Buffer.byteLength(close.reason) <= 123, `fits a close frame: ${close.reason}`);
    assert.ok(!JSON.stringify(closes).includes('Be a pirate'), 'no prompt text in a reason');
  });

  test("OpenAI's errors: those answering the translator's own events harmlessly are dropped, the rest close", () => {
    const r = run('upstream-errors');
    const at = (code: string) => exchange(r).findIndex((e) => e.upstream?.error?.code === code);
    assert.deepEqual(r.steps[at('response_cancel_not_active')], { upstream: [], client: [] });
    assert.deepEqual(r.steps[at('conversation_already_has_active_response')], { upstream: [], client: [] });
    const refused = r.steps[at('invalid_value')]!.close!;
    assert.equal(refused.code, 1007);
    assert.match(refused.reason, /^OpenAI Realtime refused the setup: Invalid value: 'fable'/);
    assert.deepEqual(r.steps[at('server_error')]!.close, {
      code: 1011,
      reason: 'OpenAI Realtime failed: The server had an error while processing your request.',
    });
    // A response the client interrupted that had already completed upstream: no generationComplete.
    const done = r.exchange.findIndex((e) => e.upstream?.type === 'response.done');
    assert.deepEqual(kinds(r.steps[done]!.client as Json[]), ['turnComplete+usageMetadata']);
  });

  test('usageMetadata read by the Live reader gives what OpenAI’s reader bills (no cached audio)', () => {
    const usage = {
      total_tokens: 300,
      input_tokens: 200,
      output_tokens: 100,
      input_token_details: {
        text_tokens: 120,
        audio_tokens: 80,
        image_tokens: 0,
        cached_tokens: 64,
        cached_tokens_details: { text_tokens: 64, audio_tokens: 0, image_tokens: 0 },
      },
      output_token_details: { text_tokens: 30, audio_tokens: 70 },
    };
    const openai = openaiRealtime.usage({ type: 'response.done', response: { id: 'resp_1', usage } }, 1)!;
    const live = geminiLive.usage({ usageMetadata: geminiUsage(usage) }, 1)!;
    assert.deepEqual(live.usage, openai.usage);
  });
});

describe('gemini-live-to-openai-realtime audio edges', () => {
  function opened(setup: Json) {
    const t = geminiLiveToOpenaiRealtime.create({ model: 'gpt-realtime', upstreamModel: 'gpt-realtime' });
    t.fromClient({ setup: { model: 'models/gpt-realtime', ...setup } }, false);
    t.fromUpstream({ type: 'session.created', event_id: 'e1', session: {} });
    t.fromUpstream({ type: 'session.updated', event_id: 'e2', session: {} });
    return t;
  }

  test('a manual turn under 100 ms is padded with silence to OpenAI’s shortest commit', () => {
    const t = opened({ realtimeInputConfig: { automaticActivityDetection: { disabled: true } } });
    t.fromClient({ realtimeInput: { activityStart: {} } }, false);
    const chunk = t.fromClient(
      {
        realtimeInput: { audio: { data: sine16k(20).toString('base64'), mimeType: 'audio/pcm;rate=16000' } },
      },
      false,
    );
    const end = t.fromClient({ realtimeInput: { activityEnd: {} } }, false);
    const sent = [...chunk.upstream, ...end.upstream] as Json[];
    assert.deepEqual(
      sent.map((e) => e.type),
      [
        'input_audio_buffer.append',
        'input_audio_buffer.append',
        'input_audio_buffer.append',
        'input_audio_buffer.commit',
        'response.create',
      ],
    );
    const bytes = sent.filter((e) => e.audio).map((e) => Buffer.from(e.audio, 'base64'));
    assert.equal(bytes[0]!.length + bytes[1]!.length, 20 * 48, '20 ms at 24 kHz');
    assert.equal(Buffer.concat(bytes).length, 4800, '100 ms in all');
    assert.ok(
      bytes[2]!.every((b) => b === 0),
      'the padding is silence',
    );
    assert.deepEqual(
      t.fromClient({ realtimeInput: { activityEnd: {} } }, false).upstream,
      [],
      'no audio, no turn',
    );
  });

  test('16 kHz audio in a clientContent turn is upsampled whole', () => {
    const t = opened({});
    const clip = sine16k(50);
    const out = t.fromClient(
      {
        clientContent: {
          turns: [
            {
              role: 'user',
              parts: [{ inlineData: { mimeType: 'audio/pcm;rate=16000', data: clip.toString('base64') } }],
            },
          ],
          turnComplete: true,
        },
      },
      false,
    );
    const item = (out.upstream[0] as Json).item;
    assert.equal(item.content[0].type, 'input_audio');
    assert.equal(Buffer.from(item.content[0].audio, 'base64').length, (clip.length * 3) / 2);
  });
});

describe('gemini-live-to-openai-realtime bounds', () => {
  test('input transcriptions: a failed one is forgotten; the latest KEPT_TRANSCRIBED items at most', () => {
    const t = geminiLiveToOpenaiRealtime.create({ model: 'gpt-realtime', upstreamModel: 'gpt-realtime' });
    t.fromClient({ setup: { model: 'models/gpt-realtime', inputAudioTranscription: {} } }, false);
    // The set is private; its size is what this bound is about.
    const kept = () => (t as unknown as { responses: { transcribed: Set<string> } }).responses.transcribed;
    const delta = (item: string) =>
      t.fromUpstream({
        type: 'conversation.item.input_audio_transcription.delta',
        item_id: item,
        delta: 'hi',
      });
    const completed = (item: string) =>
      t.fromUpstream({
        type: 'conversation.item.input_audio_transcription.completed',
        item_id: item,
        transcript: 'hi',
      }).client;
    delta('item_a');
    const failed = t.fromUpstream({
      type: 'conversation.item.input_audio_transcription.failed',
      item_id: 'item_a',
      error: { type: 'transcription_error', message: 'failed' },
    });
    assert.deepEqual(failed, { upstream: [], client: [] });
    assert.equal(kept().size, 0);
    for (let i = 0; i <= KEPT_TRANSCRIBED; i++) delta(`item_${i}`);
    assert.equal(kept().size, KEPT_TRANSCRIBED);
    assert.deepEqual(
      completed('item_0'),
      [{ serverContent: { inputTranscription: { text: 'hi' } } }],
      'forgotten: whole',
    );
    assert.deepEqual(completed(`item_${KEPT_TRANSCRIBED}`), [], 'kept: its deltas said it');
  });
});

describe('Upsampler16kTo24k', () => {
  test('3 samples for 2, chunked or whole alike, close to the same sine sampled at 24 kHz', () => {
    const whole = sine16k(100);
    const one = new Upsampler16kTo24k();
    const all = Buffer.concat([one.push(whole), one.flush()]);
    assert.equal(all.length, (whole.length * 3) / 2);
    const chunked = new Upsampler16kTo24k();
    const parts: Buffer[] = [];
    for (let i = 0; i < whole.length; i += 322) parts.push(chunked.push(whole.subarray(i, i + 322)));
    parts.push(chunked.flush());
    assert.deepEqual(Buffer.concat(parts), all, 'no seam between chunks');
    let worst = 0;
    for (let k = 0; k < all.length / 2 - 1; k++) {
      const ideal = 8000 * Math.sin((k * 2 * Math.PI * 440) / 24_000);
      worst = Math.max(worst, Math.abs(all.readInt16LE(k * 2) - ideal));
    }
    assert.ok(worst < 80, `linear interpolation of a 440 Hz tone stays within 1% (${worst})`);
    assert.equal(all.readInt16LE(0), whole.readInt16LE(0));
    assert.equal(all.readInt16LE(6), whole.readInt16LE(4), 'every third output sample is an input sample');
  });

  test('the output is written in place, not gathered sample by sample in an array', () => {
    const chunk = sine16k(1000);
    const push = Array.prototype.push;
    let pushes = 0;
    Array.prototype.push = function (this: unknown[], ...items: unknown[]) {
      pushes++;
      return push.apply(this, items);
    };
    let out: Buffer;
    try {
      const u = new Upsampler16kTo24k();
      out = Buffer.concat([u.push(chunk), u.flush()]);
    } finally {
      Array.prototype.push = push;
    }
    assert.equal(out.length, (chunk.length * 3) / 2);
    assert.ok(pushes < 10, `${pushes} array pushes for ${out.length / 2} samples`);
  });

  test('flush starts a new stream', () => {
    const u = new Upsampler16kTo24k();
    const a = Buffer.concat([u.push(sine16k(10)), u.flush()]);
    const b = Buffer.concat([u.push(sine16k(10)), u.flush()]);
    assert.deepEqual(a, b);
  });
});
