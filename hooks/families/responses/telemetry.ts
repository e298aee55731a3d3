// GenAI trace attributes of Responses API requests and replies (whole, or the response object the
// stream's lifecycle events carry).

import { asObject } from '../../../common/json-guards.ts';
import type { JsonValue } from '../../../common/types.ts';
import { addFinishReason, maxTokensReader, paramsReader, setFact } from '../telemetry-fields.ts';
import type { FamilyTelemetry } from '../types.ts';

const PARAMS: Readonly<Record<string, string>> = {
  max_output_tokens: 'gen_ai.request.max_tokens',
  temperature: 'gen_ai.request.temperature',
  top_p: 'gen_ai.request.top_p',
};

export const responsesTelemetry: FamilyTelemetry = {
  finishMarker: /"type":\s*"response\.(?:completed|incomplete|failed)"/,
  requestAttributes: paramsReader(PARAMS),
  maxOutputTokens: maxTokensReader(['max_output_tokens']),
  readReply(reply: JsonValue, facts) {
    const body = asObject(reply);
    if (body === undefined) return;
    const response = asObject(body.response) ?? body;
    if (response.object !== 'response' && body.response === undefined) return;
    setFact(facts, 'id', response.id);
    setFact(facts, 'model', response.model);
    // A finished response says why it stopped only when it did not complete.
    const status = response.status;
    if (status === 'completed') addFinishReason(facts, 'stop');
    else if (status === 'incomplete')
      addFinishReason(facts, asObject(response.incomplete_details)?.reason ?? 'incomplete');
    else if (status === 'failed') addFinishReason(facts, 'error');
  },
};
