// The Responses request fields the gateway itself reads, checked so that a wrong type is a 400 naming the
// field; the upstream checks the rest.

import type { JsonSchema, WireFamily } from '../types.ts';

const str: JsonSchema = { type: 'string' };

export const responsesBodySchemas: WireFamily['bodySchemas'] = {
  responses: { type: 'object', required: ['model'], properties: { model: str, stream: { type: 'boolean' } } },
  // The model routes the count, so it is required here although OpenAI's endpoint defaults it.
  'responses.input_tokens': { type: 'object', required: ['model'], properties: { model: str } },
};
