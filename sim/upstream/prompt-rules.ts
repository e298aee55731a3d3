// The parts of a prompt the providers publish counting rules for beyond plain text: tool definitions,
// tool calls and tool results, images (test/fixtures/usage/counting-rules.md names the sources). The rules are
// the gateway's own (hooks/families/*): the simulator stands in for the providers that publish them.
// Tokens are o200k_base, like the rest of the simulator.

import type { JsonValue } from '../../common/types.ts';
import { toolSystemPromptTokens } from '../../hooks/families/anthropic/request-text.ts';
import { toolListParts } from '../../hooks/families/openai/tool-text.ts';
import {
  anthropicImageTokens,
  base64ImageSize,
  geminiImageTokens,
  openaiImageTokens,
  urlImageSize,
} from '../../hooks/usage/image-tokens.ts';
import type { PromptParts } from '../../hooks/usage/types.ts';
import { asArray, asObject, asString, tokens } from './text.ts';

function partsTokens(parts: PromptParts): number {
  let n = parts.tokens;
  for (const text of parts.texts) n += tokens(text);
  return n;
}

/** OpenAI's cookbook recipe for function definitions (chat's nested or Responses' flat tools). */
export function openaiToolTokens(tools: unknown, model: string): number {
  const out: PromptParts = { texts: [], tokens: 0 };
  const cl100k = /^(gpt-3\.5|gpt-4(?![o.]))/.test(model);
  toolListParts(tools as JsonValue, cl100k, out);
  return partsTokens(out);
}

/** An assistant message's tool calls: each call's name and arguments, framed like a message. */
export function chatToolCallTokens(toolCalls: unknown): number {
  let n = 0;
  for (const call of asArray(toolCalls)) {
    const fn = asObject(asObject(call)?.function);
    n += 3 + tokens(asString(fn?.name) ?? '') + tokens(asString(fn?.arguments) ?? '');
  }
  return n;
}

/** Anthropic's tools: the tool-use system prompt for the model and tool_choice, and each definition. */
export function anthropicToolTokens(body: Record<string, unknown>, model: string): number {
  const tools = asArray(body.tools);
  if (tools.length === 0) return 0;
  let n = toolSystemPromptTokens(model, body.tool_choice as JsonValue);
  for (const tool of tools) {
    const t = asObject(tool);
    const definition =
      t?.input_schema === undefined
        ? tool
        : {
            name: t.name,
            ...(t.description === undefined ? {} : { description: t.description }),
            input_schema: t.input_schema,
          };
    n += tokens(JSON.stringify(definition));
  }
  return n;
}

/** The text of an Anthropic content block list: text blocks, tool_use inputs and tool_result contents. */
export function anthropicContentTokens(content: unknown): number {
  if (typeof content === 'string') return tokens(content);
  let n = 0;
  for (const b of asArray(content)) {
    const block = asObject(b);
    if (block?.type === 'tool_use') {
      n += tokens(asString(block.name) ?? '') + tokens(JSON.stringify(block.input ?? {}));
    } else if (block?.type === 'tool_result') {
      n += anthropicContentTokens(block.content);
    } else if (block?.type === 'image') {
      const source = asObject(block.source);
      const data = source?.type === 'base64' ? asString(source.data) : undefined;
      n += anthropicImageTokens(data === undefined ? undefined : base64ImageSize(data));
    } else {
      n += tokens(asString(block?.text) ?? '');
    }
  }
  return n;
}

/**
 * Gemini's parts beyond text: function calls and responses (name and JSON of the arguments or the
 * response) and images (inline data, by Gemini's image rule).
 */
export function geminiPartTokens(parts: unknown): number {
  let n = 0;
  for (const p of asArray(parts)) {
    const part = asObject(p);
    const call = asObject(part?.functionCall);
    const reply = asObject(part?.functionResponse);
    if (call) n += tokens(asString(call.name) ?? '') + tokens(JSON.stringify(call.args ?? {}));
    if (reply) n += tokens(asString(reply.name) ?? '') + tokens(JSON.stringify(reply.response ?? {}));
    const inline = asObject(part?.inlineData);
    const mime = asString(inline?.mimeType);
    if (mime?.startsWith('image/')) {
      const data = asString(inline?.data);
      n += geminiImageTokens(data === undefined ? undefined : base64ImageSize(data));
    }
  }
  return n;
}

/** Images among chat content parts (image_url) or Responses ones (input_image), by OpenAI's rule. */
export function openaiImagePartTokens(content: unknown): number {
  let n = 0;
  for (const p of asArray(content)) {
    const part = asObject(p);
    const chat = part?.type === 'image_url' ? asObject(part.image_url) : undefined;
    const image = chat ?? (part?.type === 'input_image' ? part : undefined);
    if (image === undefined) continue;
    const url = asString(chat === undefined ? image.image_url : image.url);
    n += openaiImageTokens(url === undefined ? undefined : urlImageSize(url), asString(image.detail));
  }
  return n;
}
