// Gemini Live sessions (`BidiGenerateContent` over a WebSocket): the key in `?key=`, `access_token` or
// `x-goog-api-key`; the model in the client's first message (`setup.model`, "models/<id>"); a server
// message with `usageMetadata` reports the usage of one turn (turns have no ids: they are numbered).

import { asObject } from '../../../common/json-guards.ts';
import type { JsonObject, JsonValue, Usage } from '../../../common/types.ts';
import { countTokens } from '../../usage/estimate.ts';
import type { RealtimeDialect } from '../types.ts';

// v1 (the genai SDK's default), v1beta, v1alpha; the Constrained method takes ephemeral tokens.
const PATH =
  /^\/ws\/google\.ai\.generativelanguage\.v1(alpha|beta)?\.GenerativeService\.BidiGenerateContent(Constrained)?$/;

function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : 0;
}

export const geminiLive: RealtimeDialect = {
  api: 'native.live',
  matches: (path) => PATH.test(path),
  modelIn: 'first-message',
  firstMessageModel(message) {
    const model = asObject(message.setup)?.model;
    if (typeof model !== 'string' || model === '') return undefined;
    return model.startsWith('models/') ? model.slice('models/'.length) : model;
  },
  withModel(message, model) {
    const setup = asObject(message.setup) ?? {};
    return { ...message, setup: { ...setup, model: `models/${model}` } };
  },
  keyQuery: ['key', 'access_token'],
  estimateCut(relayed, model, previous) {
    let text = '';
    let audioMs = 0;
    for (const message of relayed) {
      const parts = asObject(asObject(message.serverContent)?.modelTurn)?.parts;
      if (!Array.isArray(parts)) continue;
      for (const part of parts) {
        const p = asObject(part);
        if (typeof p?.text === 'string') text += p.text;
        const inline = asObject(p?.inlineData);
        if (typeof inline?.data === 'string') audioMs += pcmMs(inline.data, inline.mimeType);
      }
    }
    // Audio is 32 tokens a second (the Live API's rate); the context is at least the last turn's.
    const output = countTokens(text, model) + Math.ceil((audioMs * 32) / 1000);
    const input = previous === undefined ? 0 : previous.inputTokens + previous.outputTokens;
    return { inputTokens: input, outputTokens: output, totalTokens: input + output };
  },
  responseMarkers: ['"modelTurn"'],
  usageMarkers: ['"usageMetadata"'],
  usage(message: JsonObject, turn: number) {
    const meta = asObject(message.usageMetadata);
    if (meta === undefined) return undefined;
    const input = count(meta.promptTokenCount);
    const output = count(meta.responseTokenCount ?? meta.candidatesTokenCount);
    const usage: Usage = { inputTokens: input, outputTokens: output, totalTokens: input + output };
    const cached = count(meta.cachedContentTokenCount);
    if (cached > 0) usage.cacheReadTokens = cached;
    const inputAudio = audioTokens(meta.promptTokensDetails);
    const outputAudio = audioTokens(meta.responseTokensDetails);
    if (inputAudio > 0) usage.inputAudioTokens = inputAudio;
    if (outputAudio > 0) usage.outputAudioTokens = outputAudio;
    return { responseId: `turn-${turn}`, usage };
  },
};

/** Milliseconds of base64 PCM16 audio at the rate its MIME type names (24 kHz when it names none). */
function pcmMs(base64: string, mimeType: JsonValue | undefined): number {
  const rate = Number(/rate=(\d+)/.exec(typeof mimeType === 'string' ? mimeType : '')?.[1] ?? 24_000);
  const bytes = Math.floor((base64.length * 3) / 4);
  return rate > 0 ? (bytes / (rate * 2)) * 1000 : 0;
}

/** The AUDIO entry of a Live API modality breakdown (`[{modality, tokenCount}]`). */
function audioTokens(details: JsonValue | undefined): number {
  if (!Array.isArray(details)) return 0;
  let n = 0;
  for (const d of details) {
    const o = asObject(d);
    if (o?.modality === 'AUDIO') n += count(o.tokenCount);
  }
  return n;
}
