// Where completion-style request bodies hold the text the model reads, and the chat framing around it:
// what usage estimation counts when a reply reports no usage (hooks/usage/estimate.ts).

import type { JsonObject, JsonValue } from '../../../common/types.ts';
import { encodingForModel } from '../../usage/estimate.ts';
import { openaiImageTokens, urlImageSize } from '../../usage/image-tokens.ts';
import type { PromptParts } from '../../usage/types.ts';
import type { FamilyRequestText } from '../types.ts';
import { toolListParts } from './tool-text.ts';

/** Per-message framing of OpenAI's chat format: 3 tokens plus about 1 for the role. */
const TOKENS_PER_MESSAGE = 4;
/** Every reply is primed with <|start|>assistant<|message|>. */
const REPLY_PRIMING = 3;

/** OpenAI's documented chat framing for that many messages; other chat formats frame them alike. */
export function chatFraming(messages: number): number {
  return messages > 0 ? messages * TOKENS_PER_MESSAGE + REPLY_PRIMING : 0;
}

/** Each call of an assistant's tool_calls is framed like a message (3 tokens; not published). */
function toolCallFraming(messages: JsonValue | undefined): number {
  let calls = 0;
  if (Array.isArray(messages)) {
    for (const m of messages) {
      const toolCalls =
        typeof m === 'object' && m !== null && !Array.isArray(m) ? m['tool_calls'] : undefined;
      calls += arrayLength(toolCalls);
    }
  }
  return 3 * calls;
}

export function arrayLength(value: JsonValue | undefined): number {
  return Array.isArray(value) ? value.length : 0;
}

function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Images in messages (chat's image_url parts) or input items (Responses' input_image parts). */
function imageTokens(items: JsonValue | undefined): number {
  let tokens = 0;
  if (!Array.isArray(items)) return tokens;
  for (const item of items) {
    const content = isObject(item) ? item['content'] : undefined;
    if (!Array.isArray(content)) continue;
    for (const part of content) {
      if (!isObject(part)) continue;
      const chat =
        part['type'] === 'image_url' && isObject(part['image_url']) ? part['image_url'] : undefined;
      const image = chat ?? (part['type'] === 'input_image' ? part : undefined);
      if (image === undefined) continue;
      const url = chat === undefined ? image['image_url'] : image['url'];
      const detail = image['detail'];
      const size = typeof url === 'string' ? urlImageSize(url) : undefined;
      tokens += openaiImageTokens(size, typeof detail === 'string' ? detail : undefined);
    }
  }
  return tokens;
}

/**
 * The `tools` of a body, counted by OpenAI's published recipe for function definitions (tool-text.ts),
 * and its images by OpenAI's published rule for images (hooks/usage/image-tokens.ts).
 */
export function toolDefinitionParts(body: JsonObject, model: string): PromptParts {
  const out: PromptParts = { texts: [], tokens: 0 };
  toolListParts(body['tools'], encodingForModel(model) === 'cl100k_base', out);
  out.tokens += imageTokens(body['messages'] ?? body['input']);
  return out;
}

export const openaiRequestText: FamilyRequestText = {
  keys: ['messages', 'content', 'text', 'name', 'tool_calls', 'function', 'arguments', 'refusal', 'prompt'],
  mediaTypes: ['image_url', 'input_audio', 'file'],
  mediaKeys: ['image_url', 'input_audio'],
  apis: {
    'chat.completions': {
      fields: ['messages'],
      framing: (body) => chatFraming(arrayLength(body['messages'])) + toolCallFraming(body['messages']),
      parts: toolDefinitionParts,
    },
    completions: { fields: ['prompt'] },
    'images.generations': { fields: ['prompt'] },
    'images.edits': { fields: ['prompt'] },
    embeddings: { fields: ['input'] },
    'audio.speech': { fields: ['input'] },
  },
};
