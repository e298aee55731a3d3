// The Responses API's counting endpoint, POST /v1/responses/input_tokens: a Responses body, answered
// with `{object: "response.input_tokens", input_tokens}`. Only OpenAI serves it, and only for Responses
// bodies, which the pivot does not produce: other families count locally for OpenAI models.

import type { JsonValue } from '../../../common/types.ts';
import { asCount, isObject } from '../../translators/json.ts';
import type { TokenCount } from '../types.ts';

export const responsesTokenCount: TokenCount = {
  api: 'responses.input_tokens',
  countedApi: 'responses',
  reply: (tokens) => ({ object: 'response.input_tokens', input_tokens: tokens }),
  read: (reply: JsonValue) => (isObject(reply) ? asCount(reply.input_tokens) : undefined),
};
