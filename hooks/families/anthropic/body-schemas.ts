// The Messages request fields the gateway itself reads, checked so that a wrong type is a 400 naming the
// field; the upstream checks the rest.

import type { JsonSchema, WireFamily } from '../types.ts';

const str: JsonSchema = { type: 'string' };
const messages: JsonSchema = {
  type: 'array',
  items: { type: 'object', required: ['role'], properties: { role: str } },
};

export const anthropicBodySchemas: WireFamily['bodySchemas'] = {
  'native.messages': {
    type: 'object',
    required: ['model', 'messages'],
    properties: {
      model: str,
      stream: { type: 'boolean' },
      max_tokens: { type: 'integer', minimum: 1 },
      messages,
    },
  },
  'messages.count_tokens': {
    type: 'object',
    required: ['model', 'messages'],
    properties: { model: str, messages },
  },
};
