// Where Gemini request bodies hold the text the model reads, for usage estimation. Gemini adds one token
// per turn: its countTokens answers 10 for "The quick brown fox jumps over the lazy dog." and
// generateContent reports promptTokenCount 11 for the same single-turn prompt.
//
// Gemini's token guide counts function declarations and function call and response parts among the
// input (countTokens takes them in generateContentRequest) without publishing a per-declaration rule:
// declarations, call arguments and responses are counted as their JSON.

import type { JsonObject, JsonValue } from '../../../common/types.ts';
import type { PromptParts } from '../../usage/types.ts';
import type { ApiRequestText, FamilyRequestText } from '../types.ts';

function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function contentsParts(body: JsonObject): PromptParts {
  const out: PromptParts = { texts: [], tokens: 0 };
  const tools = body['tools'];
  if (Array.isArray(tools)) out.texts.push(JSON.stringify(tools));
  const contents = body['contents'];
  if (!Array.isArray(contents)) return out;
  for (const content of contents) {
    const parts = isObject(content) ? content['parts'] : undefined;
    if (!Array.isArray(parts)) continue;
    for (const part of parts) {
      if (!isObject(part)) continue;
      const call = part['functionCall'] ?? part['function_call'];
      const reply = part['functionResponse'] ?? part['function_response'];
      if (isObject(call)) out.texts.push(String(call['name'] ?? ''), JSON.stringify(call['args'] ?? {}));
      if (isObject(reply))
        out.texts.push(String(reply['name'] ?? ''), JSON.stringify(reply['response'] ?? {}));
    }
  }
  return out;
}

const generate: ApiRequestText = {
  // embedContent / batchEmbedContents bodies use `content` / `requests`.
  fields: ['systemInstruction', 'system_instruction', 'contents', 'content', 'requests'],
  framing: (body: JsonObject) => {
    const system = body['systemInstruction'] ?? body['system_instruction'];
    const contents = body['contents'];
    return (Array.isArray(contents) ? contents.length : 0) + (system === undefined ? 0 : 1);
  },
  parts: contentsParts,
};

export const geminiRequestText: FamilyRequestText = {
  keys: ['contents', 'parts', 'text', 'systemInstruction', 'system_instruction', 'content', 'requests'],
  mediaKeys: ['inlineData', 'inline_data', 'fileData', 'file_data'],
  apis: { 'native.generateContent': generate, 'native.streamGenerateContent': generate },
};
