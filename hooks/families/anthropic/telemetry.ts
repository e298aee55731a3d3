// GenAI trace attributes of Anthropic Messages requests and replies (whole, or message_start and
// message_delta events of a stream).

import { asObject } from '../../../common/json-guards.ts';
import type { JsonValue } from '../../../common/types.ts';
import { addFinishReason, maxTokensReader, paramsReader, setFact } from '../telemetry-fields.ts';
import type { FamilyTelemetry } from '../types.ts';

const PARAMS: Readonly<Record<string, string>> = {
  max_tokens: 'gen_ai.request.max_tokens',
  temperature: 'gen_ai.request.temperature',
  top_p: 'gen_ai.request.top_p',
  top_k: 'gen_ai.request.top_k',
  stop_sequences: 'gen_ai.request.stop_sequences',
};

export const anthropicTelemetry: FamilyTelemetry = {
  finishMarker: /"stop_reason":\s*"/,
  requestAttributes: paramsReader(PARAMS),
  maxOutputTokens: maxTokensReader(['max_tokens']),
  readReply(reply: JsonValue, facts) {
    const body = asObject(reply);
    if (body === undefined) return;
    const message = asObject(body.message) ?? body;
    setFact(facts, 'id', message.id);
    setFact(facts, 'model', message.model);
    addFinishReason(facts, message.stop_reason ?? asObject(body.delta)?.stop_reason);
  },
};
