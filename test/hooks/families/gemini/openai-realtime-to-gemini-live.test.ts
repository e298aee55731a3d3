import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { JsonObject } from '../../../../common/types.ts';
import { KEPT_CALLS, openaiUsage } from '../../../../hooks/families/gemini/openai-realtime-responses.ts';
import { openaiRealtimeToGeminiLive } from '../../../../hooks/families/gemini/openai-realtime-to-gemini-live.ts';
import { openaiRealtime } from '../../../../hooks/families/openai/realtime.ts';
import type { RealtimeOutput } from '../../../../hooks/families/types.ts';
import {
  checkRealtimeGolden,
  type RealtimeCaseRun,
  realtimeCaseNames,
} from '../../../fixtures/translators/gemini/realtime-golden.ts';

// biome-ignore lint/suspicious/noExplicitAny: wire messages are read loosely; the assertions check their shape
type Json = Record<string, any>;

const DIRECTION = 'openai-realtime-to-gemini-live';

function run(name: string): RealtimeCaseRun {
  return checkRealtimeGolden(openaiRealtimeToGeminiLive, DIRECTION, name);
}

function clientEvents(r: RealtimeCaseRun): Json[] {
  return r.steps.flatMap((s) => s.client) as Json[];
}

function upstreamMessages(r: RealtimeCaseRun): Json[] {
  return r.steps.flatMap((s) => s.upstream) as Json[];
}

function types(events: readonly Json[]): string[] {
  const out: string[] = [];
  for (const e of events) if (out.at(-1) !== e.type || !String(e.type).endsWith('.delta')) out.push(e.type);
  return out;
}

function dones(r: RealtimeCaseRun): Json[] {
  return clientEvents(r)
    .filter((e) => e.type === 'response.done')
    .map((e) => e.response);
}

function usageReports(r: RealtimeCaseRun): Json[] {
  return r.exchange.flatMap((e) =>
    e.upstream?.usageMetadata !== undefined ? [e.upstream.usageMetadata] : [],
  ) as Json[];
}

describe('openai-realtime-to-gemini-live golden fixtures', () => {
  for (const name of realtimeCaseNames(DIRECTION)) test(name, () => void run(name));
});

describe('openai-realtime-to-gemini-live', () => {
  test('session start: session.created at once; the first session.update is the setup; setupComplete answers it', () => {
    const r = run('text-turn');
    assert.deepEqual(r.open.upstream, []);
    assert.equal(r.open.client[0]!.type, 'session.created');
    assert.equal((r.open.client[0] as Json).session.model, 'gemini-live-2.5-flash');
    assert.deepEqual(r.steps[0]!.upstream, [
      {
        setup: {
          model: 'models/gemini-live-2.5-flash',
          generationConfig: { responseModalities: ['TEXT'], maxOutputTokens: 200 },
          systemInstruction: { parts: [{ text: 'Answer briefly.' }] },
        },
      },
    ]);
    assert.deepEqual(r.steps[0]!.client, [], 'answered when Gemini has taken it');
    const updated = r.steps[1]!.client[0] as Json;
    assert.equal(updated.type, 'session.updated');
    assert.equal(updated.session.instructions, 'Answer briefly.');
  });

  test('a text turn: the OpenAI event sequence and usage from usageMetadata', () => {
    const r = run('text-turn');
    assert.deepEqual(upstreamMessages(r).slice(1), [
      {
        clientContent: { turns: [{ role: 'user', parts: [{ text: 'hello gemini' }] }], turnComplete: false },
      },
      { clientContent: { turnComplete: true } },
    ]);
    assert.deepEqual(types(clientEvents(r)), [
      'session.updated',
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
    const [done] = dones(r) as [Json];
    const [meta] = usageReports(r);
    assert.equal(done.status, 'completed');
    assert.deepEqual(done.metadata, { topic: 'greeting' });
    assert.equal(done.usage.input_tokens, meta!.promptTokenCount);
    assert.equal(done.usage.output_tokens, meta!.responseTokenCount);
    assert.equal(done.usage.total_tokens, meta!.promptTokenCount + meta!.responseTokenCount);
    // The gateway bills it with the OpenAI reader.
    const billed = openaiRealtime.usage({ type: 'response.done', response: done }, 1);
    assert.deepEqual(billed, {
      responseId: done.id,
      usage: {
        inputTokens: meta!.promptTokenCount,
        outputTokens: meta!.responseTokenCount,
        totalTokens: meta!.promptTokenCount + meta!.responseTokenCount,
      },
    });
  });

  test('an audio turn without turn detection: activityStart/End, response.create adds nothing', () => {
    const r = run('audio-manual-turn');
    const setup = (upstreamMessages(r)[0] as Json).setup;
    assert.deepEqual(setup.realtimeInputConfig, { automaticActivityDetection: { disabled: true } });
    assert.deepEqual(setup.inputAudioTranscription, {});
    assert.deepEqual(setup.outputAudioTranscription, {});
    assert.deepEqual(setup.generationConfig.speechConfig, {
      voiceConfig: { prebuiltVoiceConfig: { voiceName: 'Kore' } },
    });
    const sent = upstreamMessages(r).slice(1) as Json[];
    assert.deepEqual(
      sent.map((m) => Object.keys(m.realtimeInput)[0]),
      ['activityStart', 'audio', 'audio', 'activityEnd'],
    );
    assert.equal(sent[1]!.realtimeInput.audio.mimeType, 'audio/pcm;rate=24000');
    const events = clientEvents(r);
    const committed = events.find((e) => e.type === 'input_audio_buffer.committed')!;
    const transcript = events.find(
      (e) => e.type === 'conversation.item.input_audio_transcription.completed',
    )!;
    assert.equal(transcript.item_id, committed.item_id);
    assert.ok(events.some((e) => e.type === 'response.output_audio.delta'));
    assert.ok(events.some((e) => e.type === 'response.output_audio_transcript.delta'));
    const [done] = dones(r) as [Json];
    const [meta] = usageReports(r);
    const audio = (details: Json[]) => details.find((d) => d.modality === 'AUDIO')?.tokenCount ?? 0;
    assert.equal(done.usage.input_token_details.audio_tokens, audio(meta!.promptTokensDetails));
    assert.equal(done.usage.output_token_details.audio_tokens, audio(meta!.responseTokensDetails));
    assert.equal(done.usage.input_token_details.cached_tokens, meta!.cachedContentTokenCount);
    const billed = openaiRealtime.usage({ type: 'response.done', response: done }, 1)!.usage;
    assert.equal(billed.inputAudioTokens, audio(meta!.promptTokensDetails));
    assert.equal(billed.outputAudioTokens, audio(meta!.responseTokensDetails));
    assert.equal(billed.cacheReadTokens, meta!.cachedContentTokenCount);
  });

  test('turn detection on: the audio is committed when Gemini answers; an interruption cancels the response', () => {
    const r = run('vad-interrupted');
    assert.deepEqual(Object.keys((upstreamMessages(r)[0] as Json).setup), [
      'model',
      'generationConfig',
      'outputAudioTranscription',
    ]);
    assert.deepEqual(
      (upstreamMessages(r).slice(1, 3) as Json[]).map((m) => Object.keys(m.realtimeInput)[0]),
      ['audio', 'audioStreamEnd'],
    );
    const [cut, next] = dones(r) as [Json, Json];
    assert.equal(cut.status, 'cancelled');
    assert.deepEqual(cut.status_details, { type: 'cancelled', reason: 'turn_detected' });
    assert.equal(cut.output[0].status, 'incomplete');
    assert.equal(cut.usage.output_tokens, usageReports(r)[0]!.responseTokenCount);
    assert.equal(next.status, 'completed');
    assert.equal(next.usage.input_tokens, usageReports(r)[1]!.promptTokenCount);
  });

  test('a function call: its response ends without usage; the answer to it bills the whole turn', () => {
    const r = run('function-call');
    const setup = (upstreamMessages(r)[0] as Json).setup;
    assert.equal(setup.tools[0].functionDeclarations[0].name, 'get_weather');
    assert.equal(setup.tools[0].functionDeclarations[0].parameters.additionalProperties, undefined);
    const args = clientEvents(r).find((e) => e.type === 'response.function_call_arguments.done')!;
    assert.equal(args.call_id, 'fc_sim000005');
    assert.deepEqual(JSON.parse(args.arguments), { location: 'Paris', unit: 'celsius' });
    const [call, answer] = dones(r) as [Json, Json];
    assert.equal(call.usage, null);
    assert.equal(call.output[0].type, 'function_call');
    assert.deepEqual(upstreamMessages(r).at(-1), {
      toolResponse: {
        functionResponses: [{ id: 'fc_sim000005', name: 'get_weather', response: { temperature_c: 21 } }],
      },
    });
    assert.equal(answer.usage.output_tokens, usageReports(r)[0]!.responseTokenCount);
    assert.equal(
      upstreamMessages(r).filter((m) => (m as Json).clientContent?.turnComplete === true).length,
      1,
    );
  });

  test('response.cancel: the closing events at once, nothing more relayed, response.done with the turn usage', () => {
    const r = run('client-cancel');
    const at = r.exchange.findIndex((e) => e.client?.type === 'response.cancel');
    assert.deepEqual(r.steps[at]!.upstream, [], 'Gemini has no cancel');
    assert.deepEqual(types(r.steps[at]!.client), [
      'response.output_text.done',
      'response.content_part.done',
      'conversation.item.done',
      'response.output_item.done',
    ]);
    const after = r.steps.slice(at + 1).flatMap((s) => s.client) as Json[];
    assert.deepEqual(types(after), ['response.done']);
    const done = after[0]!.response;
    assert.equal(done.status, 'cancelled');
    assert.deepEqual(done.status_details, { type: 'cancelled', reason: 'client_cancelled' });
    assert.equal(done.usage.output_tokens, usageReports(r)[0]!.responseTokenCount);
  });

  test('what is not carried: an invalid_request_error naming the event or field, nothing sent', () => {
    const r = run('refusals');
    const errors = r.steps.map((s, i) => ({ entry: r.exchange[i]!, step: s }));
    const refused = (eventId: string | undefined, index?: number) => {
      const found = errors.find(({ entry }, i) =>
        index !== undefined ? i === index : entry.client?.event_id === eventId,
      )!;
      assert.deepEqual(found.step.upstream, [], `${eventId ?? index} sent nothing upstream`);
      const [error] = found.step.client as [Json];
      assert.equal(error.type, 'error');
      assert.equal(error.error.type, 'invalid_request_error');
      return error.error;
    };
    assert.equal(refused(undefined, 0).code, 'invalid_event');
    assert.equal(refused(undefined, 1).code, 'invalid_json');
    assert.equal(refused('evt_1').param, 'session.audio.input.format');
    assert.equal(refused('evt_2').param, 'session.temperature');
    assert.match(refused('evt_2b').message, /session\.audio\.output\.voice: alloy is OpenAI's/);
    const setup = errors.find(({ entry }) => entry.client?.event_id === 'evt_3')!.step.upstream[0] as Json;
    assert.deepEqual(
      setup.setup.systemInstruction,
      { parts: [{ text: 'Be brief.' }] },
      'the first valid update',
    );
    assert.equal(
      (errors.find(({ entry }) => entry.client?.event_id === 'evt_4')!.step.client[0] as Json).type,
      'session.updated',
      'an update that changes nothing',
    );
    assert.equal(refused('evt_5').param, 'session.audio.output.voice');
    assert.equal(refused('evt_6').param, 'item.role');
    const image = errors.find(({ entry }) => entry.client?.event_id === 'evt_7')!.step;
    assert.deepEqual(image.upstream, [
      {
        clientContent: {
          turns: [
            {
              role: 'user',
              parts: [
                { text: 'What is this?' },
                { inlineData: { mimeType: 'image/png', data: 'iVBORw0KGgo=' } },
              ],
            },
          ],
          turnComplete: false,
        },
      },
    ]);
    assert.equal(refused('evt_8').param, 'previous_item_id');
    assert.equal(refused('evt_9').param, 'item.call_id');
    assert.equal(refused('evt_10').param, 'item.content[0].type');
    for (const [id, type] of [
      ['evt_11', 'conversation.item.truncate'],
      ['evt_12', 'conversation.item.delete'],
    ] as const) {
      const error = refused(id);
      assert.equal(error.code, 'unsupported_event');
      assert.equal(error.param, 'type');
      assert.match(error.message, new RegExp(type.replace(/\./g, '\\.')));
      assert.equal(error.event_id, id);
    }
    assert.equal(refused('evt_13').code, 'invalid_value');
    assert.equal(refused('evt_14').code, 'response_cancel_not_active');
    assert.equal(refused('evt_15').param, 'response.conversation');
    assert.equal(refused('evt_16').param, 'response.output_modalities');
    assert.equal(refused('evt_17').param, 'response.input');
    assert.equal(refused('evt_18').code, 'input_audio_buffer_commit_empty');
    assert.equal(refused('evt_19').param, 'audio');
    const clear = refused('evt_21');
    assert.equal(clear.code, 'unsupported_event');
    assert.match(clear.message, /input_audio_buffer\.clear/);
  });

  test('a usage report outside any response gets a response of its own (each report billed once)', () => {
    let n = 0;
    const t = openaiRealtimeToGeminiLive.create({
      model: 'm',
      upstreamModel: 'm',
      newId: (p) => `${p}${++n}`,
    });
    t.fromClient({ type: 'input_audio_buffer.append', audio: 'AAAA' }, false);
    const call: RealtimeOutput = t.fromUpstream({
      toolCall: { functionCalls: [{ id: 'c1', name: 'f', args: {} }] },
    });
    const first = (call.client.at(-1) as Json).response;
    assert.equal(first.usage, null);
    assert.equal(t.responseInProgress, first.id, 'a cut turn is billed under the response the client saw');
    const usage = { promptTokenCount: 10, responseTokenCount: 2 };
    const late = t.fromUpstream({ serverContent: { turnComplete: true }, usageMetadata: usage });
    assert.deepEqual(
      late.client.map((e) => e.type),
      ['response.created', 'response.done'],
    );
    const done = (late.client[1] as Json).response;
    assert.equal(done.usage.input_tokens, 10);
    assert.deepEqual(done.output, []);
    assert.equal(t.responseInProgress, undefined);
  });

  test('function calls are kept until answered, the latest KEPT_CALLS at most; other outputs are refused', () => {
    const t = openaiRealtimeToGeminiLive.create({ model: 'm', upstreamModel: 'm' });
    t.fromClient({ type: 'response.create' }, false);
    const functionCalls = Array.from({ length: KEPT_CALLS + 1 }, (_, i) => ({
      id: `c${i}`,
      name: 'f',
      args: {},
    }));
    t.fromUpstream({ toolCall: { functionCalls } });
    const answer = (callId: string) =>
      t.fromClient(
        {
          type: 'conversation.item.create',
          item: { type: 'function_call_output', call_id: callId, output: '{}' },
        },
        false,
      );
    const refusal = (out: RealtimeOutput) => {
      assert.deepEqual(out.upstream, []);
      const error = (out.client[0] as Json).error;
      assert.equal(error.param, 'item.call_id');
      return error.code;
    };
    assert.equal(refusal(answer('c0')), 'unsupported_parameter', 'the oldest was forgotten');
    assert.equal(refusal(answer('unknown')), 'unsupported_parameter', 'as an unknown call is refused');
    assert.deepEqual(answer('c1').upstream, [
      { toolResponse: { functionResponses: [{ id: 'c1', name: 'f', response: {} }] } },
    ]);
    assert.equal(refusal(answer('c1')), 'unsupported_parameter', 'an answered call is forgotten');
    assert.equal(answer(`c${KEPT_CALLS}`).upstream.length, 1);
  });

  test('a response.create after a cancel asks for a new turn; what follows the interruption is relayed', () => {
    const t = openaiRealtimeToGeminiLive.create({ model: 'm', upstreamModel: 'm' });
    t.fromClient({ type: 'response.create' }, false);
    const first = (
      t.fromUpstream({ serverContent: { modelTurn: { parts: [{ text: 'one' }] } } }).client[0] as Json
    ).response.id;
    t.fromClient({ type: 'response.cancel' }, false);
    assert.deepEqual(
      t.fromUpstream({ serverContent: { modelTurn: { parts: [{ text: 'two' }] } } }).client,
      [],
    );
    assert.deepEqual(t.fromClient({ type: 'response.create' }, false).upstream, [
      { clientContent: { turnComplete: true } },
    ]);
    assert.deepEqual(t.fromUpstream({ serverContent: { interrupted: true } }).client, []);
    const cut = t.fromUpstream({
      serverContent: { turnComplete: true },
      usageMetadata: { promptTokenCount: 3, responseTokenCount: 2 },
    }).client as Json[];
    assert.deepEqual(
      cut.map((e) => [e.type, e.response.id, e.response.status, e.response.status_details.reason]),
      [['response.done', first, 'cancelled', 'client_cancelled']],
    );
    const next = t.fromUpstream({ serverContent: { modelTurn: { parts: [{ text: 'three' }] } } })
      .client as Json[];
    assert.equal(next[0]!.type, 'response.created');
    assert.notEqual(next[0]!.response.id, first);
    assert.equal(next.at(-1)!.delta, 'three');
  });

  test('usage: audio, image and cached tokens by modality; several reports in one turn add up', () => {
    const meta: JsonObject = {
      promptTokenCount: 100,
      responseTokenCount: 40,
      cachedContentTokenCount: 30,
      promptTokensDetails: [
        { modality: 'TEXT', tokenCount: 50 },
        { modality: 'AUDIO', tokenCount: 40 },
        { modality: 'IMAGE', tokenCount: 10 },
      ],
      cacheTokensDetails: [
        { modality: 'TEXT', tokenCount: 20 },
        { modality: 'AUDIO', tokenCount: 10 },
      ],
      responseTokensDetails: [{ modality: 'AUDIO', tokenCount: 40 }],
    };
    assert.deepEqual(openaiUsage(meta), {
      total_tokens: 140,
      input_tokens: 100,
      output_tokens: 40,
      input_token_details: {
        text_tokens: 50,
        audio_tokens: 40,
        image_tokens: 10,
        cached_tokens: 30,
        cached_tokens_details: { text_tokens: 20, audio_tokens: 10, image_tokens: 0 },
      },
      output_token_details: { text_tokens: 0, audio_tokens: 40 },
    });
    const t = openaiRealtimeToGeminiLive.create({ model: 'm', upstreamModel: 'm' });
    t.fromClient({ type: 'response.create' }, false);
    t.fromUpstream({ serverContent: { modelTurn: { parts: [{ text: 'hi' }] } }, usageMetadata: meta });
    const out = t.fromUpstream({ serverContent: { turnComplete: true }, usageMetadata: meta });
    const done = (out.client.at(-1) as Json).response;
    assert.equal(done.usage.input_tokens, 200);
    assert.equal(done.usage.input_token_details.cached_tokens_details.audio_tokens, 20);
  });
});
