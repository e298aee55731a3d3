// Where Messages request bodies hold the text the model reads, for usage estimation. The Messages API
// frames messages like OpenAI's chat format (the recorded pairs agree), the system prompt as one more.
//
// Tools, by Anthropic's tool-use documentation ("Tool use pricing and tokens"): the input counts the
// `tools` parameter (names, descriptions, schemas), `tool_use` blocks and `tool_result` blocks, plus a
// system prompt the API adds whenever tools are given, whose size depends on the model and on
// tool_choice (test/fixtures/usage/counting-rules.md). Claude's tokenizer is not public: definitions are
// counted as their JSON, tool_use inputs as their JSON, with o200k_base.

import type { JsonObject, JsonValue } from '../../../common/types.ts';
import { anthropicImageTokens, base64ImageSize } from '../../usage/image-tokens.ts';
import type { PromptParts } from '../../usage/types.ts';
import { arrayLength, chatFraming } from '../openai/request-text.ts';
import type { FamilyRequestText } from '../types.ts';

interface ToolPrompt {
  readonly model: RegExp;
  /** tool_choice auto or none. */
  readonly auto: number;
  /** tool_choice any or tool. */
  readonly forced: number;
}

/** The documented tool-use system prompt sizes; models not listed get the current models' sizes. */
const TOOL_PROMPTS: readonly ToolPrompt[] = [
  { model: /claude-3-opus/, auto: 530, forced: 281 },
  { model: /claude-3-sonnet/, auto: 159, forced: 235 },
  { model: /claude-3-(5-)?haiku/, auto: 264, forced: 340 },
];
const CURRENT_TOOL_PROMPT = { auto: 346, forced: 313 };

function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The tool-use system prompt a request with tools costs on a model. */
export function toolSystemPromptTokens(model: string, toolChoice: JsonValue | undefined): number {
  const sizes = TOOL_PROMPTS.find((p) => p.model.test(model.toLowerCase())) ?? CURRENT_TOOL_PROMPT;
  const type = isObject(toolChoice) ? toolChoice['type'] : undefined;
  return type === 'any' || type === 'tool' ? sizes.forced : sizes.auto;
}

/** What the model reads of a definition: not its cache_control or other request options. */
function toolDefinition(tool: JsonValue): JsonValue {
  if (!isObject(tool) || tool['input_schema'] === undefined) return tool;
  const definition: JsonObject = { name: tool['name'] ?? null };
  if (tool['description'] !== undefined) definition['description'] = tool['description'];
  definition['input_schema'] = tool['input_schema'];
  return definition;
}

function messagesParts(body: JsonObject, model: string): PromptParts {
  const out: PromptParts = { texts: [], tokens: 0 };
  const tools = body['tools'];
  if (Array.isArray(tools) && tools.length > 0) {
    out.tokens += toolSystemPromptTokens(model, body['tool_choice']);
    for (const tool of tools) out.texts.push(JSON.stringify(toolDefinition(tool)));
  }
  const messages = body['messages'];
  if (!Array.isArray(messages)) return out;
  for (const message of messages) blockParts(isObject(message) ? message['content'] : undefined, out, 0);
  return out;
}

/** Content blocks: tool_use inputs, and images (also inside tool results) by Anthropic's image rule. */
function blockParts(content: JsonValue | undefined, out: PromptParts, depth: number): void {
  if (!Array.isArray(content) || depth > 2) return;
  for (const block of content) {
    if (!isObject(block)) continue;
    // The key walk counts the block's name; its input is an object of the tool's own keys.
    if (block['type'] === 'tool_use' && block['input'] !== undefined)
      out.texts.push(JSON.stringify(block['input']));
    if (block['type'] === 'tool_result') blockParts(block['content'], out, depth + 1);
    if (block['type'] === 'image') {
      const source = isObject(block['source']) ? block['source'] : {};
      const data = source['type'] === 'base64' ? source['data'] : undefined;
      out.tokens += anthropicImageTokens(typeof data === 'string' ? base64ImageSize(data) : undefined);
    }
  }
}

export const anthropicRequestText: FamilyRequestText = {
  keys: ['system', 'messages', 'content', 'text', 'name'],
  mediaTypes: ['image', 'document'],
  apis: {
    'native.messages': {
      fields: ['system', 'messages'],
      framing: (body) => chatFraming(arrayLength(body['messages']) + (body['system'] === undefined ? 0 : 1)),
      parts: messagesParts,
    },
  },
};
