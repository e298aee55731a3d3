// Gemini Live sessions (`BidiGenerateContent` over a WebSocket): the key in `?key=`, `access_token` or
// `x-goog-api-key`; the model in the client's first message (`setup.model`, "models/<id>"); a server
// message with `usageMetadata` reports the usage of one turn (turns have no ids: they are numbered).

import type { JsonObject, Usage } from '../../../common/types.ts';
import { objectOf } from '../telemetry-fields.ts';
import type { RealtimeDialect } from '../types.ts';

const PATH = /^\/ws\/google\.ai\.generativelanguage\.v1(alpha|beta)\.GenerativeService\.BidiGenerateContent$/;

function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : 0;
}

export const geminiLive: RealtimeDialect = {
  api: 'native.live',
  matches: (path) => PATH.test(path),
  modelIn: 'first-message',
  firstMessageModel(message) {
    const model = objectOf(message.setup)?.model;
    if (typeof model !== 'string' || model === '') return undefined;
    return model.startsWith('models/') ? model.slice('models/'.length) : model;
  },
  withModel(message, model) {
    const setup = objectOf(message.setup) ?? {};
    return { ...message, setup: { ...setup, model: `models/${model}` } };
  },
  keyQuery: ['key', 'access_token'],
  responseMarkers: ['"modelTurn"'],
  usageMarkers: ['"usageMetadata"'],
  usage(message: JsonObject, turn: number) {
    const meta = objectOf(message.usageMetadata);
    if (meta === undefined) return undefined;
    const input = count(meta.promptTokenCount);
    const output = count(meta.responseTokenCount ?? meta.candidatesTokenCount);
    const usage: Usage = { inputTokens: input, outputTokens: output, totalTokens: input + output };
    const cached = count(meta.cachedContentTokenCount);
    if (cached > 0) usage.cacheReadTokens = cached;
    return { responseId: `turn-${turn}`, usage };
  },
};
