// The completion-style request fields the gateway itself reads (routing, metering, translation), checked
// so that a wrong type is a 400 naming the field; the upstream checks the rest.

import type { JsonSchema, WireFamily } from '../types.ts';

const str: JsonSchema = { type: 'string' };
const bool: JsonSchema = { type: 'boolean' };
const messages: JsonSchema = {
  type: 'array',
  items: { type: 'object', required: ['role'], properties: { role: str } },
};

export const openaiBodySchemas: WireFamily['bodySchemas'] = {
  'chat.completions': {
    type: 'object',
    required: ['model', 'messages'],
    properties: {
      model: str,
      stream: bool,
      messages,
      stream_options: { type: ['object', 'null'], properties: { include_usage: bool } },
    },
  },
  completions: { type: 'object', required: ['model'], properties: { model: str, stream: bool } },
  embeddings: { type: 'object', required: ['model', 'input'], properties: { model: str } },
  'images.generations': { type: 'object', required: ['prompt'], properties: { model: str, prompt: str } },
  'audio.speech': { type: 'object', required: ['model', 'input'], properties: { model: str, input: str } },
};
