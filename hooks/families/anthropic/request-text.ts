// Where Messages request bodies hold the text the model reads, for usage estimation. The Messages API
// frames messages like OpenAI's chat format (the recorded pairs agree), the system prompt as one more.

import { arrayLength, chatFraming } from '../openai/request-text.ts';
import type { FamilyRequestText } from '../types.ts';

export const anthropicRequestText: FamilyRequestText = {
  keys: ['system', 'messages', 'content', 'text', 'input', 'name'],
  mediaTypes: ['image', 'document'],
  apis: {
    'native.messages': {
      fields: ['system', 'messages'],
      framing: (body) => chatFraming(arrayLength(body['messages']) + (body['system'] === undefined ? 0 : 1)),
    },
  },
};
