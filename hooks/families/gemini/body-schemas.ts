// The Gemini request fields the gateway itself reads, checked so that a wrong type is a 400 naming the
// field; the upstream checks the rest. The model is in the path.

import type { JsonSchema, WireFamily } from '../types.ts';

const obj: JsonSchema = { type: 'object' };
const generate: JsonSchema = {
  type: 'object',
  required: ['contents'],
  properties: { contents: { type: 'array', items: obj } },
};

export const geminiBodySchemas: WireFamily['bodySchemas'] = {
  'native.generateContent': generate,
  'native.streamGenerateContent': generate,
  'native.countTokens': {
    type: 'object',
    properties: { contents: { type: 'array', items: obj }, generateContentRequest: obj },
  },
};
