// Anthropic's counting endpoint, POST /v1/messages/count_tokens: a Messages body without the sampling
// fields, answered with `{input_tokens}`.

import type { JsonObject, JsonValue } from '../../../common/types.ts';
import { asCount, isObject } from '../../translators/json.ts';
import type { TokenCount } from '../types.ts';

/** What count_tokens accepts of a Messages body; max_tokens, stream and sampling options are refused there. */
const COUNTED_FIELDS = ['messages', 'system', 'tools', 'tool_choice', 'thinking'] as const;

export const anthropicTokenCount: TokenCount = {
  api: 'messages.count_tokens',
  countedApi: 'native.messages',
  reply: (tokens) => ({ input_tokens: tokens }),
  read: (reply: JsonValue) => (isObject(reply) ? asCount(reply.input_tokens) : undefined),
  requestFor(generation, upstreamModel) {
    const out: JsonObject = { model: upstreamModel ?? generation.model ?? null };
    for (const field of COUNTED_FIELDS) {
      const value = generation[field];
      if (value !== undefined) out[field] = value;
    }
    return out;
  },
};
