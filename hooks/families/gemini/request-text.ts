// Where Gemini request bodies hold the text the model reads, for usage estimation. Gemini adds one token
// per turn: its countTokens answers 10 for "The quick brown fox jumps over the lazy dog." and
// generateContent reports promptTokenCount 11 for the same single-turn prompt.

import type { JsonObject } from '../../../common/types.ts';
import type { ApiRequestText, FamilyRequestText } from '../types.ts';

const generate: ApiRequestText = {
  // embedContent / batchEmbedContents bodies use `content` / `requests`.
  fields: ['systemInstruction', 'system_instruction', 'contents', 'content', 'requests'],
  framing: (body: JsonObject) => {
    const system = body['systemInstruction'] ?? body['system_instruction'];
    const contents = body['contents'];
    return (Array.isArray(contents) ? contents.length : 0) + (system === undefined ? 0 : 1);
  },
};

export const geminiRequestText: FamilyRequestText = {
  keys: ['contents', 'parts', 'text', 'systemInstruction', 'system_instruction', 'content', 'requests'],
  mediaKeys: ['inlineData', 'inline_data', 'fileData', 'file_data'],
  apis: { 'native.generateContent': generate, 'native.streamGenerateContent': generate },
};
