// Gemini's counting endpoint, models/{model}:countTokens: a generateContent body wrapped in
// `generateContentRequest` (the only form that also counts the system instruction and tools), answered
// with `{totalTokens}`.

import type { JsonObject, JsonValue } from '../../../common/types.ts';
import { asCount, isObject } from '../../translators/json.ts';
import type { TokenCount } from '../types.ts';

export const geminiTokenCount: TokenCount = {
  api: 'native.countTokens',
  countedApi: 'native.generateContent',
  reply: (tokens) => ({ totalTokens: tokens }),
  generationBody: (request) => {
    const inner = request.generateContentRequest;
    return isObject(inner) ? inner : request;
  },
  read: (reply: JsonValue) => (isObject(reply) ? asCount(reply.totalTokens) : undefined),
  requestFor(generation, upstreamModel) {
    const request: JsonObject = { model: `models/${upstreamModel ?? ''}` };
    for (const field of ['contents', 'systemInstruction', 'tools', 'toolConfig'] as const) {
      const value = generation[field];
      if (value !== undefined) request[field] = value;
    }
    return { generateContentRequest: request };
  },
};
