// GenAI trace attributes of completion-style requests and replies (chat chunks share the reply's shape).

import { asObject } from '../../../common/json-guards.ts';
import type { JsonValue } from '../../../common/types.ts';
import { addFinishReason, maxTokensReader, paramsReader, setFact } from '../telemetry-fields.ts';
import type { FamilyTelemetry } from '../types.ts';

const PARAMS: Readonly<Record<string, string>> = {
  max_tokens: 'gen_ai.request.max_tokens',
  max_completion_tokens: 'gen_ai.request.max_tokens',
  temperature: 'gen_ai.request.temperature',
  top_p: 'gen_ai.request.top_p',
  frequency_penalty: 'gen_ai.request.frequency_penalty',
  presence_penalty: 'gen_ai.request.presence_penalty',
  stop: 'gen_ai.request.stop_sequences',
  seed: 'gen_ai.request.seed',
  n: 'gen_ai.request.choice.count',
  dimensions: 'gen_ai.embeddings.dimension.count',
};

export const openaiTelemetry: FamilyTelemetry = {
  finishMarker: /"finish_reason":\s*"/,
  requestAttributes: paramsReader(PARAMS),
  maxOutputTokens: maxTokensReader(['max_completion_tokens', 'max_tokens']),
  readReply(reply: JsonValue, facts) {
    const body = asObject(reply);
    if (body === undefined) return;
    setFact(facts, 'id', body.id);
    setFact(facts, 'model', body.model);
    const choices = body.choices;
    if (Array.isArray(choices))
      for (const choice of choices) addFinishReason(facts, asObject(choice)?.finish_reason);
  },
};
