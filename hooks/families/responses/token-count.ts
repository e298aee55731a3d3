// The Responses API's counting endpoint, POST /v1/responses/input_tokens: a Responses body, answered
// with `{object: "response.input_tokens", input_tokens}`. Only OpenAI serves it, and only for Responses
// bodies: another family's count for an OpenAI model reaches it through the pivot and a chat -> Responses
// request translation (fromPivot; proxy/provider-count.ts).

import type { JsonValue } from '../../../common/types.ts';
import { asCount, isObject } from '../../translators/json.ts';
import type { TokenCount } from '../types.ts';
import { chatToResponsesRequest } from './openai-to-responses-request.ts';

export const responsesTokenCount: TokenCount = {
  api: 'responses.input_tokens',
  countedApi: 'responses',
  reply: (tokens) => ({ object: 'response.input_tokens', input_tokens: tokens }),
  read: (reply: JsonValue) => (isObject(reply) ? asCount(reply.input_tokens) : undefined),
  fromPivot: (chat, upstreamModel) =>
    chatToResponsesRequest(upstreamModel === undefined ? chat : { ...chat, model: upstreamModel }),
};
