// Where Responses request bodies hold the text the model reads, for usage estimation: `input` (a string
// is one message) and `instructions`, framed as chat messages.

import { chatFraming, toolDefinitionParts } from '../openai/request-text.ts';
import type { FamilyRequestText } from '../types.ts';

export const responsesRequestText: FamilyRequestText = {
  keys: ['instructions', 'output', 'content', 'text', 'arguments', 'name'],
  mediaTypes: ['input_image', 'input_file', 'input_audio'],
  apis: {
    responses: {
      fields: ['instructions', 'input'],
      framing: (body) => {
        const input = body['input'];
        const messages = Array.isArray(input) ? input.length : input === undefined ? 0 : 1;
        return chatFraming(messages + (body['instructions'] === undefined ? 0 : 1));
      },
      parts: toolDefinitionParts,
    },
  },
};
