// The request half of openai_to_anthropic (hooks/families/anthropic/openai-to-anthropic.ts): a
// chat.completions body -> an Anthropic Messages body. The decisions it follows: that file's header.

import type { JsonObject, JsonValue } from '../../../common/types.ts';
import { TranslationError, type TranslatorInit } from '../../translators/types.ts';
import { byEffort, CHAT_FIELDS, IGNORABLE_CHAT_FIELDS, refuseUnservable } from '../openai/request-fields.ts';
import { asString, isObject, parseArguments } from './translator-shared.ts';

/** Anthropic requires max_tokens; completion-style clients may omit it. */
export const DEFAULT_MAX_TOKENS = 4096;

type AnthropicRole = 'user' | 'assistant';
interface Turn {
  role: AnthropicRole;
  content: JsonObject[];
}

// ---------------------------------------------------------------------------------------------------
// Request

function textOf(content: JsonValue | undefined, path: string): string[] {
  if (content === undefined || content === null) return [];
  if (typeof content === 'string') return [content];
  if (!Array.isArray(content)) throw new TranslationError(`${path} must be a string or an array`, path);
  return content.map((part, i) => {
    if (!isObject(part) || (part.type !== 'text' && part.type !== 'refusal')) {
      throw new TranslationError(`${path}[${i}] must be a text part`, `${path}[${i}]`);
    }
    const text = asString(part.text) ?? asString(part.refusal);
    if (text === undefined)
      throw new TranslationError(`${path}[${i}].text must be a string`, `${path}[${i}]`);
    return text;
  });
}

function textBlock(text: string, part?: JsonObject): JsonObject {
  const block: JsonObject = { type: 'text', text };
  // Prompt caching markers some clients already attach to completion-style parts.
  if (part && isObject(part.cache_control)) block.cache_control = part.cache_control;
  return block;
}

function imageBlock(part: JsonObject, path: string): JsonObject {
  const image = part.image_url;
  const url = isObject(image) ? asString(image.url) : asString(image);
  if (url === undefined) throw new TranslationError(`${path}.image_url.url must be a string`, path);
  const data = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  if (data) return { type: 'image', source: { type: 'base64', media_type: data[1]!, data: data[2]! } };
  if (/^https?:\/\//i.test(url)) return { type: 'image', source: { type: 'url', url } };
  throw new TranslationError(`${path}.image_url.url must be a base64 data URL or an http(s) URL`, path);
}

function userBlocks(content: JsonValue | undefined, path: string): JsonObject[] {
  if (typeof content === 'string') return content === '' ? [] : [textBlock(content)];
  if (!Array.isArray(content)) throw new TranslationError(`${path} must be a string or an array`, path);
  const blocks: JsonObject[] = [];
  content.forEach((part, i) => {
    const at = `${path}[${i}]`;
    if (!isObject(part)) throw new TranslationError(`${at} must be an object`, at);
    if (part.type === 'text') {
      const text = asString(part.text);
      if (text === undefined) throw new TranslationError(`${at}.text must be a string`, `${at}.text`);
      // Anthropic rejects empty text blocks.
      if (text !== '') blocks.push(textBlock(text, part));
    } else if (part.type === 'image_url') {
      blocks.push(imageBlock(part, at));
    } else {
      throw new TranslationError(`${at}.type ${JSON.stringify(part.type)} is not supported`, `${at}.type`);
    }
  });
  return blocks;
}

function assistantBlocks(message: JsonObject, path: string): JsonObject[] {
  const blocks: JsonObject[] = textOf(message.content, `${path}.content`)
    .filter((text) => text !== '')
    .map((text) => textBlock(text));
  const calls = message.tool_calls;
  if (calls === undefined || calls === null) return blocks;
  if (!Array.isArray(calls)) throw new TranslationError(`${path}.tool_calls must be an array`, path);
  calls.forEach((call, i) => {
    const at = `${path}.tool_calls[${i}]`;
    const fn = isObject(call) ? call.function : undefined;
    const id = isObject(call) ? asString(call.id) : undefined;
    const name = isObject(fn) ? asString(fn.name) : undefined;
    if (id === undefined || name === undefined) {
      throw new TranslationError(`${at} needs an id and function.name`, at);
    }
    const input = parseArguments(isObject(fn) ? (asString(fn.arguments) ?? '') : '');
    if (input === undefined) {
      throw new TranslationError(
        `${at}.function.arguments must be a JSON object`,
        `${at}.function.arguments`,
      );
    }
    blocks.push({ type: 'tool_use', id, name, input });
  });
  return blocks;
}

function toolResultBlock(message: JsonObject, path: string): JsonObject {
  const id = asString(message.tool_call_id);
  if (id === undefined) throw new TranslationError(`${path}.tool_call_id must be a string`, path);
  const block: JsonObject = { type: 'tool_result', tool_use_id: id };
  const content = message.content;
  if (typeof content === 'string') {
    if (content !== '') block.content = content;
  } else {
    const texts = textOf(content, `${path}.content`).filter((text) => text !== '');
    if (texts.length > 0) block.content = texts.map((text) => textBlock(text));
  }
  return block;
}

function pushTurn(turns: Turn[], role: AnthropicRole, blocks: JsonObject[]): void {
  if (blocks.length === 0) return;
  const last = turns.at(-1);
  if (last && last.role === role) last.content.push(...blocks);
  else turns.push({ role, content: blocks });
}

function translateMessages(messages: JsonValue | undefined): { system: JsonObject[]; turns: Turn[] } {
  if (!Array.isArray(messages)) throw new TranslationError('messages must be an array', 'messages');
  const system: JsonObject[] = [];
  const turns: Turn[] = [];
  messages.forEach((message, i) => {
    const path = `messages[${i}]`;
    if (!isObject(message)) throw new TranslationError(`${path} must be an object`, path);
    switch (message.role) {
      case 'system':
      case 'developer':
        for (const text of textOf(message.content, `${path}.content`))
          if (text !== '') system.push(textBlock(text));
        break;
      case 'user':
        pushTurn(turns, 'user', userBlocks(message.content, `${path}.content`));
        break;
      case 'assistant':
        pushTurn(turns, 'assistant', assistantBlocks(message, path));
        break;
      case 'tool':
        pushTurn(turns, 'user', [toolResultBlock(message, path)]);
        break;
      default:
        throw new TranslationError(
          `${path}.role ${JSON.stringify(message.role)} is not supported`,
          `${path}.role`,
        );
    }
  });
  return { system, turns };
}

function translateTools(tools: JsonValue): JsonObject[] {
  if (!Array.isArray(tools)) throw new TranslationError('tools must be an array', 'tools');
  return tools.map((tool, i) => {
    const fn = isObject(tool) && tool.type === 'function' ? tool.function : undefined;
    const name = isObject(fn) ? asString(fn.name) : undefined;
    if (!isObject(fn) || name === undefined) {
      throw new TranslationError(`tools[${i}] must be a function tool with a name`, `tools[${i}]`);
    }
    const out: JsonObject = { name };
    const description = asString(fn.description);
    if (description !== undefined) out.description = description;
    out.input_schema = isObject(fn.parameters) ? fn.parameters : { type: 'object', properties: {} };
    return out;
  });
}

function translateToolChoice(choice: JsonValue, parallel: JsonValue | undefined): JsonObject {
  let out: JsonObject;
  if (choice === 'auto') out = { type: 'auto' };
  else if (choice === 'none') return { type: 'none' };
  else if (choice === 'required') out = { type: 'any' };
  else if (isObject(choice) && choice.type === 'function' && isObject(choice.function)) {
    const name = asString(choice.function.name);
    if (name === undefined)
      throw new TranslationError('tool_choice.function.name must be a string', 'tool_choice');
    out = { type: 'tool', name };
  } else {
    throw new TranslationError('tool_choice is not supported', 'tool_choice');
  }
  if (parallel === false) out.disable_parallel_tool_use = true;
  return out;
}

const KNOWN_FIELDS: ReadonlySet<string> = new Set([...CHAT_FIELDS, ...IGNORABLE_CHAT_FIELDS]);

function rejectUnsupported(body: JsonObject): void {
  refuseUnservable(body, KNOWN_FIELDS, 'by this provider');
  if (body.n !== undefined && body.n !== null && body.n !== 1) {
    throw new TranslationError('n other than 1 is not supported by this provider', 'n');
  }
}

/** Thinking budgets for reasoning_effort; anthropic-to-openai maps budgets back by the same steps. */
const THINKING_BUDGET = byEffort([1024, 2048, 8192, 24576, 32768]);

/** The smallest budget Anthropic accepts. */
const MIN_THINKING_BUDGET = 1024;

/** response_format -> output_config.format (Anthropic's structured output); JSON mode has no counterpart. */
function outputFormat(format: JsonValue | undefined): JsonObject | undefined {
  if (!isObject(format) || format.type === 'text') return undefined;
  if (format.type === 'json_schema') {
    const spec = isObject(format.json_schema) ? format.json_schema : {};
    if (!isObject(spec.schema)) {
      throw new TranslationError('response_format.json_schema.schema must be an object', 'response_format');
    }
    return { type: 'json_schema', schema: spec.schema };
  }
  throw new TranslationError(
    `response_format ${JSON.stringify(format.type)} has no equivalent for this provider; use json_schema`,
    'response_format',
  );
}

/**
 * reasoning_effort -> extended thinking with a budget below max_tokens. `none` asks for no thinking. A
 * max_tokens too small for the smallest budget is refused rather than thinking silently dropped.
 */
function thinkingConfig(effort: string | undefined, maxTokens: number): JsonObject | undefined {
  if (effort === undefined || effort === 'none') return undefined;
  const budget = THINKING_BUDGET[effort];
  if (budget === undefined) {
    throw new TranslationError(
      `reasoning_effort ${JSON.stringify(effort)} is not supported`,
      'reasoning_effort',
    );
  }
  const fitted = Math.min(budget, maxTokens - 1);
  if (fitted < MIN_THINKING_BUDGET) {
    throw new TranslationError(
      `reasoning_effort needs max_tokens above ${MIN_THINKING_BUDGET} for this provider`,
      'max_tokens',
    );
  }
  return { type: 'enabled', budget_tokens: fitted };
}

function numberField(body: JsonObject, field: string, max: number): number | undefined {
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || value < 0 || value > max) {
    throw new TranslationError(`${field} must be a number between 0 and ${max} for this provider`, field);
  }
  return value;
}

export function translateRequest(body: JsonObject, init: TranslatorInit): JsonObject {
  rejectUnsupported(body);
  const { system, turns } = translateMessages(body.messages);
  const out: JsonObject = { model: init.upstreamModel ?? body.model ?? null };
  const maxTokens = body.max_completion_tokens ?? body.max_tokens;
  if (maxTokens !== undefined && maxTokens !== null && (typeof maxTokens !== 'number' || maxTokens < 1)) {
    throw new TranslationError('max_tokens must be a positive number', 'max_tokens');
  }
  const effort = asString(body.reasoning_effort);
  // Without a max_tokens of the client's, the thinking budget comes on top of the default answer size.
  const defaultMax = DEFAULT_MAX_TOKENS + (effort === undefined ? 0 : (THINKING_BUDGET[effort] ?? 0));
  out.max_tokens = typeof maxTokens === 'number' ? maxTokens : defaultMax;
  const thinking = thinkingConfig(effort, out.max_tokens);
  if (thinking !== undefined) out.thinking = thinking;
  const format = outputFormat(body.response_format);
  if (format !== undefined) out.output_config = { format };
  const onlySystem = system[0];
  if (system.length === 1 && onlySystem !== undefined && onlySystem.cache_control === undefined)
    out.system = onlySystem.text ?? '';
  else if (system.length > 0) out.system = system;
  out.messages = turns.map((turn) => {
    const only = turn.content.length === 1 ? turn.content[0] : undefined;
    const content =
      only && only.type === 'text' && only.cache_control === undefined ? (only.text ?? '') : turn.content;
    return { role: turn.role, content };
  });
  if (body.tools !== undefined && body.tools !== null) {
    const tools = translateTools(body.tools);
    if (tools.length > 0) out.tools = tools;
  }
  if (body.tool_choice !== undefined && body.tool_choice !== null) {
    out.tool_choice = translateToolChoice(body.tool_choice, body.parallel_tool_calls);
  } else if (body.parallel_tool_calls === false && out.tools !== undefined) {
    out.tool_choice = { type: 'auto', disable_parallel_tool_use: true };
  }
  const stop = body.stop;
  if (typeof stop === 'string') out.stop_sequences = [stop];
  else if (Array.isArray(stop) && stop.length > 0) {
    if (!stop.every((s) => typeof s === 'string')) throw new TranslationError('stop must be strings', 'stop');
    out.stop_sequences = stop;
  }
  // OpenAI accepts temperature up to 2, Anthropic up to 1: refuse rather than silently rescale.
  const temperature = numberField(body, 'temperature', 1);
  if (temperature !== undefined) out.temperature = temperature;
  const topP = numberField(body, 'top_p', 1);
  if (topP !== undefined) out.top_p = topP;
  if (typeof body.top_k === 'number') out.top_k = body.top_k;
  const user =
    asString(body.user) ??
    asString(body.safety_identifier) ??
    (isObject(body.metadata) ? asString(body.metadata.user) : undefined);
  if (user !== undefined) out.metadata = { user_id: user };
  if (body.stream === true) out.stream = true;
  return out;
}
