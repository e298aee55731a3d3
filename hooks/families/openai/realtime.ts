// OpenAI Realtime sessions (`GET /v1/realtime?model=...` upgraded): the model in the query, the key in
// `Authorization` or, from browsers, the `openai-insecure-api-key.<key>` subprotocol; every
// `response.done` reports the usage of one model response.

import { asObject } from '../../../common/json-guards.ts';
import type { JsonObject, Usage } from '../../../common/types.ts';
import type { RealtimeDialect } from '../types.ts';

function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : 0;
}

/** OpenAI refuses to commit less than 100 ms of input audio (PCM16 at 24 kHz). */
export const MIN_COMMIT_BYTES = 4800;

/** OpenAI Realtime's voice names (Gemini Live has none of them). */
export const OPENAI_VOICES: ReadonlySet<string> = new Set([
  'alloy',
  'ash',
  'ballad',
  'cedar',
  'coral',
  'echo',
  'fable',
  'marin',
  'nova',
  'onyx',
  'sage',
  'shimmer',
  'verse',
]);

export const openaiRealtime: RealtimeDialect = {
  api: 'realtime',
  matches: (path) => path === '/v1/realtime',
  modelIn: 'query',
  keyProtocolPrefix: 'openai-insecure-api-key.',
  responseMarkers: ['"response.created"'],
  // The server answers with response.done (status cancelled) and the usage of what it generated.
  cancelMessage: { type: 'response.cancel' },
  usageMarkers: ['"response.done"'],
  usage(message: JsonObject) {
    if (message.type !== 'response.done') return undefined;
    const response = asObject(message.response);
    const id = response?.id;
    const reported = asObject(response?.usage);
    if (typeof id !== 'string' || reported === undefined) return undefined;
    const input = count(reported.input_tokens);
    const output = count(reported.output_tokens);
    const usage: Usage = { inputTokens: input, outputTokens: output, totalTokens: input + output };
    const inputDetails = asObject(reported.input_token_details);
    const cached = count(inputDetails?.cached_tokens);
    if (cached > 0) usage.cacheReadTokens = cached;
    // Audio tokens apart (they cost more than text); cached ones are priced as cached.
    const cachedAudio = count(asObject(inputDetails?.cached_tokens_details)?.audio_tokens);
    const inputAudio = Math.max(0, count(inputDetails?.audio_tokens) - cachedAudio);
    const outputAudio = count(asObject(reported.output_token_details)?.audio_tokens);
    if (inputAudio > 0) usage.inputAudioTokens = inputAudio;
    if (outputAudio > 0) usage.outputAudioTokens = outputAudio;
    return { responseId: id, usage };
  },
};
