// Where completion-style request bodies hold the text the model reads, and the chat framing around it:
// what usage estimation counts when a reply reports no usage (hooks/usage/estimate.ts).

import type { JsonValue } from '../../../common/types.ts';
import type { FamilyRequestText } from '../types.ts';

/** Per-message framing of OpenAI's chat format: 3 tokens plus about 1 for the role. */
const TOKENS_PER_MESSAGE = 4;
/** Every reply is primed with <|start|>assistant<|message|>. */
const REPLY_PRIMING = 3;

/** OpenAI's documented chat framing for that many messages; other chat formats frame them alike. */
export function chatFraming(messages: number): number {
  return messages > 0 ? messages * TOKENS_PER_MESSAGE + REPLY_PRIMING : 0;
}

export function arrayLength(value: JsonValue | undefined): number {
  return Array.isArray(value) ? value.length : 0;
}

export const openaiRequestText: FamilyRequestText = {
  keys: [
    'messages',
    'content',
    'text',
    'name',
    'tool_calls',
    'function',
    'arguments',
    'refusal',
    'prompt',
    'input',
  ],
  mediaTypes: ['image_url', 'input_audio', 'file'],
  mediaKeys: ['image_url', 'input_audio'],
  apis: {
    'chat.completions': {
      fields: ['messages'],
      framing: (body) => chatFraming(arrayLength(body['messages'])),
    },
    completions: { fields: ['prompt'] },
    'images.generations': { fields: ['prompt'] },
    'images.edits': { fields: ['prompt'] },
    embeddings: { fields: ['input'] },
    'audio.speech': { fields: ['input'] },
  },
};
