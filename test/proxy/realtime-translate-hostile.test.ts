// Hostile but JSON-valid client messages through the realtime translators (docs/realtime.md "Across
// families"): prototype keys, values of the wrong type where a name is read, nesting beyond any event.
// Each is answered in the client's own protocol (an OpenAI `error` event, a Live API close naming the
// field), never a translator fault (which ends the session 1011).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  geminiLiveToOpenaiRealtime,
  MAX_WAITING_BYTES,
} from '../../hooks/families/gemini/gemini-live-to-openai-realtime.ts';
import { openaiRealtimeToGeminiLive } from '../../hooks/families/gemini/openai-realtime-to-gemini-live.ts';
import type { RealtimeTranslatorFactory } from '../../hooks/families/types.ts';
import { FrameTranslator, MAX_CLIENT_DEPTH, nestedDeeperThan } from '../../proxy/realtime-translate.ts';

// biome-ignore lint/suspicious/noExplicitAny: wire messages are read loosely; the assertions check their shape
type Json = Record<string, any>;

function frames(factory: RealtimeTranslatorFactory): FrameTranslator {
  return new FrameTranslator(
    { factory, upstreamDialect: { responseMarkers: [], usageMarkers: [] } as never },
    'm',
    'm',
  );
}

/** What one client text frame becomes, parsed. */
function fromClient(t: FrameTranslator, text: string) {
  const out = t.fromClient(text, false);
  return { ...out, client: out.client.map((m) => JSON.parse(m) as Json) };
}

/** An object with no usable string conversion (String() throws on it). */
const NO_STRING = '{"toString":1,"valueOf":1}';

test('OpenAI client: wrong types and prototype names are answered with an error event', () => {
  const t = frames(openaiRealtimeToGeminiLive);
  t.open();
  const cases: [string, string][] = [
    [
      `{"type":"session.update","session":{"audio":{"input":{"turn_detection":{"type":"server_vad","eagerness":${NO_STRING}}}}}}`,
      'session.audio.input.turn_detection.eagerness',
    ],
    ['{"type":"constructor"}', 'type'],
    ['{"type":"__proto__"}', 'type'],
    [`{"type":"conversation.item.create","item":{"type":${NO_STRING}}}`, 'item.type'],
    [
      `{"type":"conversation.item.create","item":{"type":"message","role":${NO_STRING},"content":[{"type":${NO_STRING}}]}}`,
      'item.role',
    ],
  ];
  for (const [text, param] of cases) {
    const out = fromClient(t, text);
    const error = out.client.find((m) => m.type === 'error')?.error;
    assert.equal(error?.param, param, text);
    assert.doesNotMatch(error.message, /function|\[object Object\]|native code/, text);
  }
  const unknown = fromClient(t, '{"type":"toString"}').client[0]!.error;
  assert.equal(unknown.code, 'invalid_value');
});

test('Gemini Live client: a prototype name or an unconvertible value in the setup closes 1007/1008 naming the field', () => {
  const setups: [string, number, string][] = [
    ['{"toolConfig":{"functionCallingConfig":{"mode":"constructor"}}}', 1008, 'setup.toolConfig'],
    ['{"toolConfig":{"functionCallingConfig":{"mode":"__proto__"}}}', 1008, 'setup.toolConfig'],
    [`{"toolConfig":{"functionCallingConfig":{"mode":${NO_STRING}}}}`, 1008, 'setup.toolConfig'],
    [`{"generationConfig":{"responseModalities":[${NO_STRING}]}}`, 1008, 'setup.generationConfig'],
    [`{"realtimeInputConfig":{"activityHandling":${NO_STRING}}}`, 1007, 'setup.realtimeInputConfig'],
    [`{"realtimeInputConfig":{"turnCoverage":${NO_STRING}}}`, 1008, 'setup.realtimeInputConfig'],
    [
      `{"realtimeInputConfig":{"automaticActivityDetection":{"endOfSpeechSensitivity":${NO_STRING}}}}`,
      1008,
      'setup.realtimeInputConfig',
    ],
  ];
  for (const [setup, code, field] of setups) {
    const out = frames(geminiLiveToOpenaiRealtime).fromClient(`{"setup":${setup}}`, false);
    assert.equal(out.close?.code, code, setup);
    assert.equal(typeof out.close?.reason, 'string', setup);
    assert.ok(out.close!.reason.startsWith(field), `${setup}: ${out.close!.reason}`);
    assert.deepEqual(out.upstream, []);
  }
});

test('a message nested deeper than any event is answered as malformed, in either protocol', () => {
  let deep = '1';
  for (let i = 0; i < 100_000; i++) deep = `{"a":${deep}}`;
  const a = frames(openaiRealtimeToGeminiLive);
  a.open();
  const out = fromClient(
    a,
    `{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"x","extra":${deep}}]}}`,
  );
  assert.equal(out.client[0]!.type, 'error');
  assert.equal(out.client[0]!.error.code, 'invalid_json');
  assert.deepEqual(out.upstream, []);
  const b = frames(geminiLiveToOpenaiRealtime);
  assert.equal(b.fromClient(`{"setup":{"tools":[${deep}]}}`, false).close?.code, 1007);
  // The limit leaves room for real events (a tool's JSON Schema a few dozen levels deep).
  let ok = '1';
  for (let i = 1; i < MAX_CLIENT_DEPTH; i++) ok = `[${ok}]`;
  assert.equal(nestedDeeperThan(JSON.parse(`{"a":${ok}}`), MAX_CLIENT_DEPTH), false);
  assert.equal(nestedDeeperThan(JSON.parse(`{"a":[${ok}]}`), MAX_CLIENT_DEPTH), true);
});

test('Gemini Live client: more than the gateway holds before OpenAI opens the session closes 1008', () => {
  const t = frames(geminiLiveToOpenaiRealtime);
  assert.equal(t.fromClient('{"setup":{"model":"models/m"}}', false).close, undefined);
  // Each append is a quarter of the limit (24 kHz audio passes as it is), plus its JSON.
  const audio = Buffer.alloc((MAX_WAITING_BYTES / 4 / 4) * 3).toString('base64');
  const chunk = JSON.stringify({
    realtimeInput: { audio: { data: audio, mimeType: 'audio/pcm;rate=24000' } },
  });
  for (let i = 0; i < 3; i++) assert.deepEqual(t.fromClient(chunk, false), { upstream: [], client: [] });
  const out = t.fromClient(chunk, false);
  assert.equal(out.close?.code, 1008);
  assert.match(out.close!.reason, /^more than 16 MiB sent before OpenAI Realtime opened the session$/);
  assert.deepEqual(out.upstream, []);
  assert.equal(t.fromClient('{"realtimeInput":{"text":"x"}}', false).close?.code, 1008, 'and after it');
  // Nothing of it is left to send.
  const created = t.fromUpstream(Buffer.from('{"type":"session.created","session":{}}'));
  assert.deepEqual(
    created.upstream.map((m) => JSON.parse(m).type),
    ['session.update'],
  );
});
