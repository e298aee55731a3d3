// Where Gemini request bodies hold the text the model reads, for usage estimation. Gemini adds one token
// per turn: its countTokens answers 10 for "The quick brown fox jumps over the lazy dog." and
// generateContent reports promptTokenCount 11 for the same single-turn prompt.
//
// Gemini's token guide counts function declarations and function call and response parts among the
// input (countTokens takes them in generateContentRequest) without publishing a per-declaration rule:
// declarations, call arguments and responses are counted as their JSON.

import type { JsonObject, JsonValue } from '../../../common/types.ts';
import { base64ImageSize, geminiImageTokens } from '../../usage/image-tokens.ts';
import type { PromptParts } from '../../usage/types.ts';
import type { ApiRequestText, FamilyRequestText } from '../types.ts';

function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** An image part by Gemini's image rule (inline data has a size; a file reference is assumed typical). */
function imageTokens(part: JsonObject): number {
  const inline = part['inlineData'] ?? part['inline_data'];
  const file = part['fileData'] ?? part['file_data'];
  const media = isObject(inline) ? inline : isObject(file) ? file : undefined;
  const mime = media?.['mimeType'] ?? media?.['mime_type'];
  if (media === undefined || typeof mime !== 'string' || !mime.startsWith('image/')) return 0;
  const data = media['data'];
  return geminiImageTokens(typeof data === 'string' ? base64ImageSize(data) : undefined);
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
      out.tokens += imageTokens(part);
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
