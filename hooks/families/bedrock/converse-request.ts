// The request half of openai_to_bedrock_converse: a chat.completions body -> a Converse body
// (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html). The model and
// the stream flag are the path's (`/model/{modelId}/converse` or `/converse-stream`), not the body's.

import type { JsonObject, JsonValue } from '../../../common/types.ts';
import { asString, isObject } from '../../translators/json.ts';
import { TranslationError, type TranslatorInit } from '../../translators/types.ts';
import { byEffort, CHAT_FIELDS, IGNORABLE_CHAT_FIELDS, refuseUnservable } from '../openai/request-fields.ts';
import { bedrockBaseModelId } from './model-id.ts';

type Role = 'user' | 'assistant';
interface Turn {
  role: Role;
  content: JsonObject[];
}

const WHERE = 'by this provider (Bedrock Converse)';

/** Converse's image formats by media type. */
const IMAGE_FORMATS: Readonly<Record<string, string>> = {
  'image/png': 'png',
  'image/jpeg': 'jpeg',
  'image/jpg': 'jpeg',
  'image/gif': 'gif',
  'image/webp': 'webp',
};

function texts(content: JsonValue | undefined, path: string): string[] {
  if (content === undefined || content === null) return [];
  if (typeof content === 'string') return [content];
  if (!Array.isArray(content)) throw new TranslationError(`${path} must be a string or an array`, path);
  return content.map((part, i) => {
    const text = isObject(part) ? (asString(part.text) ?? asString(part.refusal)) : undefined;
    if (text === undefined) throw new TranslationError(`${path}[${i}] must be a text part`, `${path}[${i}]`);
    return text;
  });
}

/** Converse takes image bytes (base64 in JSON) or S3 locations: data URLs carry over, web URLs do not. */
function imageBlock(part: JsonObject, path: string): JsonObject {
  const image = part.image_url;
  const url = isObject(image) ? asString(image.url) : asString(image);
  const data = url === undefined ? null : /^data:([^;,]+);base64,(.*)$/s.exec(url);
  if (!data) {
    throw new TranslationError(`${path}.image_url.url must be a base64 data URL ${WHERE}`, path);
  }
  const format = IMAGE_FORMATS[data[1]!.toLowerCase()];
  if (format === undefined)
    throw new TranslationError(`${path}: ${data[1]} images are not supported ${WHERE}`, path);
  return { image: { format, source: { bytes: data[2]! } } };
}

function userBlocks(content: JsonValue | undefined, path: string): JsonObject[] {
  if (typeof content === 'string') return content === '' ? [] : [{ text: content }];
  if (!Array.isArray(content)) throw new TranslationError(`${path} must be a string or an array`, path);
  const blocks: JsonObject[] = [];
  content.forEach((part, i) => {
    const at = `${path}[${i}]`;
    if (!isObject(part)) throw new TranslationError(`${at} must be an object`, at);
    if (part.type === 'text') {
      const text = asString(part.text);
      if (text === undefined) throw new TranslationError(`${at}.text must be a string`, `${at}.text`);
      if (text !== '') blocks.push({ text });
    } else if (part.type === 'image_url') {
      blocks.push(imageBlock(part, at));
    } else {
      throw new TranslationError(
        `${at}.type ${JSON.stringify(part.type)} is not supported ${WHERE}`,
        `${at}.type`,
      );
    }
  });
  return blocks;
}

function assistantBlocks(message: JsonObject, path: string): JsonObject[] {
  const blocks: JsonObject[] = texts(message.content, `${path}.content`)
    .filter((text) => text !== '')
    .map((text) => ({ text }));
  const calls = message.tool_calls;
  if (calls === undefined || calls === null) return blocks;
  if (!Array.isArray(calls)) throw new TranslationError(`${path}.tool_calls must be an array`, path);
  calls.forEach((call, i) => {
    const at = `${path}.tool_calls[${i}]`;
    const fn = isObject(call) ? call.function : undefined;
    const id = isObject(call) ? asString(call.id) : undefined;
    const name = isObject(fn) ? asString(fn.name) : undefined;
    if (id === undefined || name === undefined)
      throw new TranslationError(`${at} needs an id and function.name`, at);
    const args = (isObject(fn) ? asString(fn.arguments) : undefined) ?? '';
    let input: JsonValue;
    try {
      input = args.trim() === '' ? {} : (JSON.parse(args) as JsonValue);
    } catch {
      input = null;
    }
    if (!isObject(input)) {
      throw new TranslationError(
        `${at}.function.arguments must be a JSON object`,
        `${at}.function.arguments`,
      );
    }
    blocks.push({ toolUse: { toolUseId: id, name, input } });
  });
  return blocks;
}

function toolResultBlock(message: JsonObject, path: string): JsonObject {
  const id = asString(message.tool_call_id);
  if (id === undefined) throw new TranslationError(`${path}.tool_call_id must be a string`, path);
  const content = texts(message.content, `${path}.content`)
    .filter((text) => text !== '')
    .map((text) => ({ text }));
  return { toolResult: { toolUseId: id, content } };
}

function pushTurn(turns: Turn[], role: Role, blocks: JsonObject[]): void {
  if (blocks.length === 0) return;
  const last = turns.at(-1);
  // Converse wants alternating roles; tool results are user content.
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
        for (const text of texts(message.content, `${path}.content`)) if (text !== '') system.push({ text });
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
    const spec: JsonObject = { name };
    const description = asString(fn.description);
    if (description !== undefined) spec.description = description;
    spec.inputSchema = { json: isObject(fn.parameters) ? fn.parameters : { type: 'object', properties: {} } };
    return { toolSpec: spec };
  });
}

/** tool_choice -> Converse's toolChoice; `none` has no counterpart (undefined: send no tools). */
function translateToolChoice(choice: JsonValue): JsonObject | 'none' {
  if (choice === 'auto') return { auto: {} };
  if (choice === 'required') return { any: {} };
  if (choice === 'none') return 'none';
  if (isObject(choice) && choice.type === 'function' && isObject(choice.function)) {
    const name = asString(choice.function.name);
    if (name !== undefined) return { tool: { name } };
  }
  throw new TranslationError('tool_choice is not supported', 'tool_choice');
}

function hasToolBlocks(turns: readonly Turn[]): boolean {
  return turns.some((turn) => turn.content.some((block) => 'toolUse' in block || 'toolResult' in block));
}

/** response_format json_schema -> outputConfig.textFormat (Converse's structured output). */
function outputConfig(format: JsonValue | undefined): JsonObject | undefined {
  if (!isObject(format) || format.type === 'text') return undefined;
  if (format.type !== 'json_schema') {
    throw new TranslationError(
      `response_format ${JSON.stringify(format.type)} has no equivalent ${WHERE}; use json_schema`,
      'response_format',
    );
  }
  const spec = isObject(format.json_schema) ? format.json_schema : {};
  if (!isObject(spec.schema)) {
    throw new TranslationError('response_format.json_schema.schema must be an object', 'response_format');
  }
  // Converse takes the schema as a JSON string.
  const jsonSchema: JsonObject = {
    schema: JSON.stringify(spec.schema),
    name: asString(spec.name) ?? 'response',
  };
  const description = asString(spec.description);
  if (description !== undefined) jsonSchema.description = description;
  return { textFormat: { type: 'json_schema', structure: { jsonSchema } } };
}

/** Claude's thinking budgets by effort, as openai_to_anthropic steps them. */
const THINKING_BUDGET = byEffort([1024, 2048, 8192, 24576, 32768]);

/**
 * reasoning_effort: Claude models take Anthropic's `thinking` through additionalModelRequestFields;
 * other models' reasoning switches differ by vendor, so it is refused for them.
 */
function thinking(
  effort: string | undefined,
  model: string,
  maxTokens: number | undefined,
): JsonObject | undefined {
  if (effort === undefined || effort === 'none') return undefined;
  const budget = THINKING_BUDGET[effort];
  if (budget === undefined || !bedrockBaseModelId(model).startsWith('anthropic.')) {
    throw new TranslationError(
      `reasoning_effort ${JSON.stringify(effort)} is not supported ${WHERE}`,
      'reasoning_effort',
    );
  }
  const fitted = maxTokens === undefined ? budget : Math.min(budget, maxTokens - 1);
  if (fitted < 1024)
    throw new TranslationError(`reasoning_effort needs max_tokens above 1024 ${WHERE}`, 'max_tokens');
  return { type: 'enabled', budget_tokens: fitted };
}

function unitNumber(body: JsonObject, field: string): number | undefined {
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || value < 0 || value > 1) {
    throw new TranslationError(`${field} must be a number between 0 and 1 ${WHERE}`, field);
  }
  return value;
}

const KNOWN_FIELDS: ReadonlySet<string> = new Set([...CHAT_FIELDS, ...IGNORABLE_CHAT_FIELDS]);

export function translateConverseRequest(body: JsonObject, init: TranslatorInit): JsonObject {
  refuseUnservable(body, KNOWN_FIELDS, WHERE);
  if (body.n !== undefined && body.n !== null && body.n !== 1) {
    throw new TranslationError(`n other than 1 is not supported ${WHERE}`, 'n');
  }
  const { system, turns } = translateMessages(body.messages);
  const out: JsonObject = {
    messages: turns.map((turn) => ({ role: turn.role, content: turn.content })),
  };
  if (system.length > 0) out.system = system;

  const inference: JsonObject = {};
  const maxTokens = body.max_completion_tokens ?? body.max_tokens;
  if (maxTokens !== undefined && maxTokens !== null) {
    if (typeof maxTokens !== 'number' || maxTokens < 1) {
      throw new TranslationError('max_tokens must be a positive number', 'max_tokens');
    }
    inference.maxTokens = maxTokens;
  }
  const temperature = unitNumber(body, 'temperature');
  if (temperature !== undefined) inference.temperature = temperature;
  const topP = unitNumber(body, 'top_p');
  if (topP !== undefined) inference.topP = topP;
  const stop = body.stop;
  if (typeof stop === 'string') inference.stopSequences = [stop];
  else if (Array.isArray(stop) && stop.length > 0) {
    if (!stop.every((s) => typeof s === 'string')) throw new TranslationError('stop must be strings', 'stop');
    inference.stopSequences = stop;
  }
  if (Object.keys(inference).length > 0) out.inferenceConfig = inference;

  const model = init.upstreamModel ?? asString(body.model) ?? '';
  const extra: JsonObject = {};
  // top_k is not a Converse field: it rides additionalModelRequestFields under Anthropic's name.
  if (typeof body.top_k === 'number') extra.top_k = body.top_k;
  const think = thinking(
    asString(body.reasoning_effort),
    model,
    typeof maxTokens === 'number' ? maxTokens : undefined,
  );
  if (think !== undefined) extra.thinking = think;
  if (Object.keys(extra).length > 0) out.additionalModelRequestFields = extra;

  const choice =
    body.tool_choice === undefined || body.tool_choice === null
      ? undefined
      : translateToolChoice(body.tool_choice);
  const tools = body.tools === undefined || body.tools === null ? [] : translateTools(body.tools);
  if (choice === 'none') {
    // Converse needs the tool definitions while the history holds tool blocks, and has no `none`.
    if (tools.length > 0 && hasToolBlocks(turns)) {
      throw new TranslationError(
        `tool_choice "none" with tool history is not supported ${WHERE}`,
        'tool_choice',
      );
    }
  } else if (tools.length > 0) {
    const toolConfig: JsonObject = { tools };
    if (choice !== undefined) toolConfig.toolChoice = choice;
    out.toolConfig = toolConfig;
  }
  const output = outputConfig(body.response_format);
  if (output !== undefined) out.outputConfig = output;
  return out;
}
