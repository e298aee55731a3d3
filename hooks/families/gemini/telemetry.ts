// GenAI trace attributes of Gemini generateContent requests and replies (a stream's chunks share the
// reply's shape).

import { asObject } from '../../../common/json-guards.ts';
import type { JsonValue } from '../../../common/types.ts';
import { addFinishReason, maxTokensReader, paramsReader, setFact } from '../telemetry-fields.ts';
import type { FamilyTelemetry } from '../types.ts';

const PARAMS: Readonly<Record<string, string>> = {
  maxOutputTokens: 'gen_ai.request.max_tokens',
  temperature: 'gen_ai.request.temperature',
  topP: 'gen_ai.request.top_p',
  topK: 'gen_ai.request.top_k',
  stopSequences: 'gen_ai.request.stop_sequences',
  seed: 'gen_ai.request.seed',
  candidateCount: 'gen_ai.request.choice.count',
  presencePenalty: 'gen_ai.request.presence_penalty',
  frequencyPenalty: 'gen_ai.request.frequency_penalty',
};

const readParams = paramsReader(PARAMS);
const readMaxTokens = maxTokensReader(['maxOutputTokens']);

export const geminiTelemetry: FamilyTelemetry = {
  finishMarker: /"finishReason":\s*"/,
  requestAttributes(body, set) {
    readParams(asObject(body.generationConfig), set);
  },
  maxOutputTokens: (body) => readMaxTokens(asObject(body.generationConfig)),
  readReply(reply: JsonValue, facts) {
    const body = asObject(reply);
    if (body === undefined) return;
    setFact(facts, 'id', body.responseId);
    setFact(facts, 'model', body.modelVersion);
    const candidates = body.candidates;
    if (Array.isArray(candidates))
      for (const candidate of candidates) addFinishReason(facts, asObject(candidate)?.finishReason);
  },
};
