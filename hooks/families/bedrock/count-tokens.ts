// Bedrock's CountTokens (`POST /model/{modelId}/count-tokens`) as the provider side of the counting
// translators (`<client>_count_to_bedrock_invoke`, `<client>_count_to_bedrock_converse`): the body the
// model call would send, wrapped as CountTokens takes it, and its `inputTokens` read back.

import { asObject } from '../../../common/json-guards.ts';
import type { JsonObject, JsonValue } from '../../../common/types.ts';
import { asCount } from '../../translators/json.ts';
import type { WireTokenCount } from '../types.ts';

function inputTokens(reply: JsonValue): number | undefined {
  return asCount(asObject(reply)?.inputTokens);
}

/** The fields of a Converse body CountTokens' `converse` input takes (it refuses the others). */
const CONVERSE_COUNTED = ['messages', 'system', 'toolConfig', 'additionalModelRequestFields'] as const;

export const bedrockCounts: readonly WireTokenCount[] = [
  {
    format: 'bedrock_invoke',
    requestFor(generation) {
      // InvokeModel's body needs max_tokens, which a counting request does not carry; it does not change
      // the count.
      const body: JsonObject = { ...generation, max_tokens: generation.max_tokens ?? 1 };
      return { input: { invokeModel: { body: Buffer.from(JSON.stringify(body)).toString('base64') } } };
    },
    read: inputTokens,
  },
  {
    format: 'bedrock_converse',
    requestFor(generation) {
      const converse: JsonObject = {};
      for (const field of CONVERSE_COUNTED) {
        const value = generation[field];
        if (value !== undefined) converse[field] = value;
      }
      return { input: { converse } };
    },
    read: inputTokens,
  },
];
