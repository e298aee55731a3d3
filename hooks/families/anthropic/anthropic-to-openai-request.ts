// The request half of anthropic_to_openai (hooks/families/anthropic/anthropic-to-openai.ts): a Messages
// API body -> a chat.completions body. The decisions it follows: that file's header.

import type { JsonObject, JsonValue } from '../../../common/types.ts';
import { refuseUnknownFields } from '../../translators/json.ts';
import { TranslationError, type TranslatorInit } from '../../translators/types.ts';
import { streamWithUsage } from '../openai/request-fields.ts';
import { asCount, asString, isObject } from './translator-shared.ts';

function blockText(block: JsonObject, path: string): string {
  const text = asString(block.text);
  if (text === undefined) throw new TranslationError(`${path}.text must be a string`, `${path}.text`);
  return text;
}

function systemText(system: JsonValue): string {
  if (typeof system === 'string') return system;
  if (!Array.isArray(system)) throw new TranslationError('system must be a string or an array', 'system');
  return system
    .map((block, i) => {
      if (!isObject(block) || block.type !== 'text') {
        throw new TranslationError(`system[${i}] must be a text block`, `system[${i}]`);
      }
      return blockText(block, `system[${i}]`);
    })
    .join('\n\n');
}

function imagePart(block: JsonObject, path: string): JsonObject {
  const source = isObject(block.source) ? block.source : undefined;
  if (source?.type === 'base64') {
    const mediaType = asString(source.media_type);
    const data = asString(source.data);
    if (mediaType === undefined || data === undefined) {
      throw new TranslationError(`${path}.source needs media_type and data`, `${path}.source`);
    }
    return { type: 'image_url', image_url: { url: `data:${mediaType};base64,${data}` } };
  }
  const url = source?.type === 'url' ? asString(source.url) : undefined;
  if (url === undefined) {
    throw new TranslationError(`${path}.source must be a base64 or url image source`, `${path}.source`);
  }
  return { type: 'image_url', image_url: { url } };
}

function toolResultContent(content: JsonValue | undefined, path: string): string {
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw new TranslationError(`${path} must be a string or an array`, path);
  return content
    .map((block, i) => {
      // OpenAI tool messages carry text only.
      if (!isObject(block) || block.type !== 'text') {
        throw new TranslationError(
          `${path}[${i}]: only text tool results are supported`,
          `${path}[${i}].type`,
        );
      }
      return blockText(block, `${path}[${i}]`);
    })
    .join('\n');
}

/** The blocks of a message's content array, each checked to be an object, with its path. */
function contentBlocks(content: JsonValue | undefined, path: string): { block: JsonObject; at: string }[] {
  if (!Array.isArray(content)) throw new TranslationError(`${path} must be a string or an array`, path);
  return content.map((block, i) => {
    const at = `${path}[${i}]`;
    if (!isObject(block)) throw new TranslationError(`${at} must be an object`, at);
    return { block, at };
  });
}

/** One Anthropic user turn -> tool messages (first, as OpenAI wants them right after the call) + user. */
function userMessages(content: JsonValue | undefined, path: string): JsonObject[] {
  if (typeof content === 'string') return [{ role: 'user', content }];
  const tools: JsonObject[] = [];
  const parts: JsonObject[] = [];
  for (const { block, at } of contentBlocks(content, path)) {
    switch (block.type) {
      case 'text':
        parts.push({ type: 'text', text: blockText(block, at) });
        break;
      case 'image':
        parts.push(imagePart(block, at));
        break;
      case 'tool_result': {
        const id = asString(block.tool_use_id);
        if (id === undefined) throw new TranslationError(`${at}.tool_use_id must be a string`, at);
        tools.push({
          role: 'tool',
          tool_call_id: id,
          content: toolResultContent(block.content, `${at}.content`),
        });
        break;
      }
      default:
        throw new TranslationError(`${at}.type ${JSON.stringify(block.type)} is not supported`, `${at}.type`);
    }
  }
  if (parts.length === 0) return tools;
  const only = parts.length === 1 ? parts[0] : undefined;
  // A lone text part as a plain string: understood by every OpenAI-compatible server.
  const userContent = only?.type === 'text' ? (only.text ?? '') : parts;
  return [...tools, { role: 'user', content: userContent }];
}

function assistantMessage(content: JsonValue | undefined, path: string): JsonObject {
  if (typeof content === 'string') return { role: 'assistant', content };
  const texts: string[] = [];
  const toolCalls: JsonObject[] = [];
  for (const { block, at } of contentBlocks(content, path)) {
    if (block.type === 'text') texts.push(blockText(block, at));
    else if (block.type === 'tool_use') {
      const id = asString(block.id);
      const name = asString(block.name);
      if (id === undefined || name === undefined)
        throw new TranslationError(`${at} needs an id and a name`, at);
      toolCalls.push({
        id,
        type: 'function',
        function: { name, arguments: JSON.stringify(block.input ?? {}) },
      });
    } else if (block.type !== 'thinking' && block.type !== 'redacted_thinking') {
      throw new TranslationError(`${at}.type ${JSON.stringify(block.type)} is not supported`, `${at}.type`);
    }
  }
  const message: JsonObject = { role: 'assistant', content: texts.length > 0 ? texts.join('') : null };
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  return message;
}

function translateTools(tools: JsonValue): JsonObject[] {
  if (!Array.isArray(tools)) throw new TranslationError('tools must be an array', 'tools');
  return tools.map((tool, i) => {
    const name = isObject(tool) ? asString(tool.name) : undefined;
    // Server tools (web_search_..., bash_..., ...) run at Anthropic and cannot be forwarded.
    if (!isObject(tool) || name === undefined || (tool.type !== undefined && tool.type !== 'custom')) {
      throw new TranslationError(`tools[${i}] must be a custom tool with a name`, `tools[${i}]`);
    }
    const fn: JsonObject = { name };
    const description = asString(tool.description);
    if (description !== undefined) fn.description = description;
    fn.parameters = isObject(tool.input_schema) ? tool.input_schema : { type: 'object', properties: {} };
    return { type: 'function', function: fn };
  });
}

function translateToolChoice(choice: JsonValue): JsonValue {
  if (!isObject(choice)) throw new TranslationError('tool_choice must be an object', 'tool_choice');
  switch (choice.type) {
    case 'auto':
      return 'auto';
    case 'any':
      return 'required';
    case 'none':
      return 'none';
    case 'tool': {
      const name = asString(choice.name);
      if (name === undefined)
        throw new TranslationError('tool_choice.name must be a string', 'tool_choice.name');
      return { type: 'function', function: { name } };
    }
    default:
      throw new TranslationError(
        `tool_choice.type ${JSON.stringify(choice.type)} is not supported`,
        'tool_choice',
      );
  }
}

/** Anthropic's thinking budget -> the pivot's reasoning_effort, by the same steps in both directions. */
function effortForBudget(budget: number): string {
  if (budget < 4096) return 'low';
  return budget < 16384 ? 'medium' : 'high';
}

/** Efforts beyond OpenAI's scale (xhigh, max) ask for its highest. */
const EFFORTS: Readonly<Record<string, string>> = {
  low: 'low',
  medium: 'medium',
  high: 'high',
  xhigh: 'high',
  max: 'high',
};

/** `output_config.format` -> response_format; `output_config.effort` or `thinking` -> reasoning_effort. */
function applyOutputConfig(body: JsonObject, out: JsonObject): void {
  const config = isObject(body.output_config) ? body.output_config : {};
  const format = config.format;
  if (isObject(format)) {
    if (format.type !== 'json_schema' || !isObject(format.schema)) {
      throw new TranslationError(
        'output_config.format must be {type: "json_schema", schema}',
        'output_config.format',
      );
    }
    out.response_format = {
      type: 'json_schema',
      json_schema: { name: 'output', schema: format.schema, strict: true },
    };
  }
  const effort = asString(config.effort);
  if (effort !== undefined) {
    const mapped = EFFORTS[effort];
    if (mapped === undefined) {
      throw new TranslationError(
        `output_config.effort ${JSON.stringify(effort)} is not supported`,
        'output_config.effort',
      );
    }
    out.reasoning_effort = mapped;
    return;
  }
  const thinking = isObject(body.thinking) ? body.thinking : undefined;
  if (thinking?.type === 'enabled') {
    out.reasoning_effort = effortForBudget(asCount(thinking.budget_tokens) ?? 0);
  } else if (thinking?.type === 'adaptive') {
    out.reasoning_effort = 'medium';
  }
}

/**
 * Messages fields this direction translates, and hints it may ignore without making the request
 * invalid: `service_tier` (the upstream's own tiers apply), `context_management` (Anthropic's server-side
 * trimming of old tool results, which coding agents send every turn; other providers see the whole
 * history the client sent) and `cache_control` markers, which live inside blocks. Anything else is
 * refused by name.
 */
const KNOWN_FIELDS: ReadonlySet<string> = new Set([
  'model',
  'messages',
  'max_tokens',
  'system',
  'temperature',
  'top_p',
  'top_k',
  'stop_sequences',
  'stream',
  'tools',
  'tool_choice',
  'metadata',
  'thinking',
  'output_config',
  'service_tier',
  'context_management',
]);

export function translateRequest(body: JsonObject, init: TranslatorInit): JsonObject {
  refuseUnknownFields(
    body,
    KNOWN_FIELDS,
    (field) => new TranslationError(`${field} is not supported for this provider`, field),
  );
  if (!Array.isArray(body.messages)) throw new TranslationError('messages must be an array', 'messages');
  const messages: JsonObject[] = [];
  if (body.system !== undefined && body.system !== null) {
    const text = systemText(body.system);
    if (text !== '') messages.push({ role: 'system', content: text });
  }
  body.messages.forEach((message, i) => {
    const path = `messages[${i}]`;
    if (!isObject(message)) throw new TranslationError(`${path} must be an object`, path);
    if (message.role === 'user') messages.push(...userMessages(message.content, `${path}.content`));
    else if (message.role === 'assistant')
      messages.push(assistantMessage(message.content, `${path}.content`));
    else
      throw new TranslationError(
        `${path}.role ${JSON.stringify(message.role)} is not supported`,
        `${path}.role`,
      );
  });
  const out: JsonObject = { model: init.upstreamModel ?? body.model ?? null, messages };
  if (typeof body.max_tokens === 'number') out.max_tokens = body.max_tokens;
  if (typeof body.temperature === 'number') out.temperature = body.temperature;
  if (typeof body.top_p === 'number') out.top_p = body.top_p;
  // Not an OpenAI field: carried for the upstreams that take it (Gemini's topK, compatible servers).
  if (typeof body.top_k === 'number') out.top_k = body.top_k;
  if (Array.isArray(body.stop_sequences) && body.stop_sequences.length > 0) out.stop = body.stop_sequences;
  if (body.tools !== undefined && body.tools !== null) {
    const tools = translateTools(body.tools);
    if (tools.length > 0) out.tools = tools;
  }
  if (body.tool_choice !== undefined && body.tool_choice !== null) {
    out.tool_choice = translateToolChoice(body.tool_choice);
    if (isObject(body.tool_choice) && body.tool_choice.disable_parallel_tool_use === true && out.tools) {
      out.parallel_tool_calls = false;
    }
  }
  applyOutputConfig(body, out);
  const user = isObject(body.metadata) ? asString(body.metadata.user_id) : undefined;
  if (user !== undefined) out.user = user;
  return streamWithUsage(out, body.stream === true);
}
