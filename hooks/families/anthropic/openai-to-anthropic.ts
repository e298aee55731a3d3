// Over 400 lines: one direction's request, reply, stream and error mappings share per-request state.
// A completion-style (OpenAI chat.completions) client talking to an Anthropic Messages upstream.
//
// Decisions worth knowing:
// - system and developer messages are hoisted, in order, into the top-level `system` (Anthropic has no
//   mid-conversation system turns).
// - Consecutive turns of the same Anthropic role are merged, so consecutive `tool` messages become one
//   user turn of tool_result blocks (tool results first, as Anthropic requires).
// - Usage: Anthropic's `input_tokens` excludes cache reads and cache writes, OpenAI's `prompt_tokens`
//   includes them. Client-visible `prompt_tokens` and the normalized `inputTokens` are therefore
//   input + cache_read + cache_creation, with the cache parts also reported separately.
// - Stop reasons: end_turn, stop_sequence, pause_turn -> stop; max_tokens and
//   model_context_window_exceeded -> length; tool_use -> tool_calls; refusal -> content_filter.
// - Reasoning: reasoning_effort becomes extended thinking with a budget by steps (below max_tokens);
//   thinking comes back as `reasoning_content`, thinking tokens as `reasoning_tokens`. Signatures and
//   redacted thinking have no completion-style counterpart: dropped.
// - Structured output: a json_schema response_format becomes `output_config.format`.
// - Citations and server-tool blocks have no completion-style counterpart: dropped.
// - Refused rather than silently changed: n > 1, logprobs, json_object response_format (no schema-less
//   JSON mode), non-text modalities, legacy functions, temperature or top_p above 1 (Anthropic's range
//   is 0..1), reasoning_effort with max_tokens too small for a thinking budget.
// - `user` (or `safety_identifier`, or `metadata.user`) becomes Anthropic's metadata.user_id.

import type { JsonObject, JsonValue, SseOut } from '../../../common/types.ts';
import {
  defineTranslator,
  TranslationError,
  type Translator,
  type TranslatorInit,
} from '../../translators/types.ts';
import { byEffort, CHAT_FIELDS, IGNORABLE_CHAT_FIELDS, refuseUnservable } from '../openai/request-fields.ts';
import {
  anthropicTypeForStatus,
  asCount,
  asString,
  isObject,
  openaiErrorForAnthropicType,
  parseArguments,
  parseJsonObject,
  readUpstreamError,
} from './translator-shared.ts';

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

function translateRequest(body: JsonObject, init: TranslatorInit): JsonObject {
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

// ---------------------------------------------------------------------------------------------------
// Response

function mapStopReason(reason: JsonValue | undefined): string | null {
  switch (reason) {
    case undefined:
    case null:
      return null;
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'refusal':
      return 'content_filter';
    default:
      // end_turn, stop_sequence, pause_turn and anything newer.
      return 'stop';
  }
}

/** Counts kept per request; a cache field stays undefined until the upstream reports it. */
interface UsageCounts {
  input: number;
  output: number;
  cacheRead: number | undefined;
  cacheCreation: number | undefined;
  thinking: number | undefined;
}

/** Anthropic reports cumulative totals; later events overwrite the fields they carry. */
function mergeUsage(counts: UsageCounts | undefined, usage: JsonValue | undefined): UsageCounts | undefined {
  if (!isObject(usage)) return counts;
  const next: UsageCounts = counts ?? {
    input: 0,
    output: 0,
    cacheRead: undefined,
    cacheCreation: undefined,
    thinking: undefined,
  };
  next.input = asCount(usage.input_tokens) ?? next.input;
  next.output = asCount(usage.output_tokens) ?? next.output;
  next.cacheRead = asCount(usage.cache_read_input_tokens) ?? next.cacheRead;
  next.cacheCreation = asCount(usage.cache_creation_input_tokens) ?? next.cacheCreation;
  const details = isObject(usage.output_tokens_details) ? usage.output_tokens_details : {};
  next.thinking = asCount(details.thinking_tokens) ?? next.thinking;
  return next;
}

function promptTokens(counts: UsageCounts): number {
  return counts.input + (counts.cacheRead ?? 0) + (counts.cacheCreation ?? 0);
}

function openaiUsage(counts: UsageCounts): JsonObject {
  const prompt = promptTokens(counts);
  return {
    prompt_tokens: prompt,
    completion_tokens: counts.output,
    total_tokens: prompt + counts.output,
    prompt_tokens_details: { cached_tokens: counts.cacheRead ?? 0 },
    ...(counts.thinking === undefined
      ? {}
      : { completion_tokens_details: { reasoning_tokens: counts.thinking } }),
  };
}

function completionId(upstreamId: string | undefined, requestId: string): string {
  return `chatcmpl-${upstreamId === undefined ? requestId : upstreamId.replace(/^msg_/, '')}`;
}

function errorPayload(anthropicType: string, message: string): JsonObject {
  const { type, code } = openaiErrorForAnthropicType(anthropicType);
  return { error: { message, type, code } };
}

const TEXT_DELTA_HEAD = '{"type":"content_block_delta","index":';
const TEXT_DELTA_MARK = ',"delta":{"type":"text_delta","text":';

/**
 * The text of a text_delta event as Anthropic writes it, as its JSON string literal, without parsing the
 * whole event: most events of a stream are these, and the literal goes into the client's chunk as it is.
 * Undefined for any other event or layout (the caller then parses the event).
 */
function textDeltaLiteral(data: string): string | undefined {
  if (!data.startsWith(TEXT_DELTA_HEAD) || !data.endsWith('}}')) return undefined;
  const mark = data.indexOf(TEXT_DELTA_MARK, TEXT_DELTA_HEAD.length);
  if (mark < 0 || !/^\d+$/.test(data.slice(TEXT_DELTA_HEAD.length, mark))) return undefined;
  const literal = data.slice(mark + TEXT_DELTA_MARK.length, -2);
  try {
    // Exactly one JSON string: anything else after the text (another field) makes this throw.
    return typeof JSON.parse(literal) === 'string' ? literal : undefined;
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------------
// The per-request translator

function createOpenaiToAnthropic(init: TranslatorInit): Translator {
  let includeUsage = false;
  let clientModel: string | undefined = init.model;
  let counts: UsageCounts | undefined;
  // Stream state: ids and indexes only, never accumulated text.
  let id = completionId(undefined, init.requestId);
  let started = false;
  let blockIsTool = false;
  let toolIndex = -1;
  let finishSent = false;
  let finished = false;

  function chunk(delta: JsonObject, finishReason: string | null): SseOut {
    return chunkJson(JSON.stringify(delta), finishReason);
  }

  // Every chunk of a stream shares its envelope: serialized once, not per delta (the hot path).
  let envelope: { key: string; head: string } | undefined;
  function chunkJson(delta: string, finishReason: string | null): SseOut {
    const model = clientModel ?? '';
    const key = `${id}\u0000${model}`;
    if (envelope?.key !== key) {
      const head = `{"id":${JSON.stringify(id)},"object":"chat.completion.chunk","created":${init.createdAt},"model":${JSON.stringify(model)},"choices":[{"index":0,"delta":`;
      envelope = { key, head };
    }
    const tail = finishReason === null ? 'null' : JSON.stringify(finishReason);
    return { data: `${envelope.head}${delta},"logprobs":null,"finish_reason":${tail}}]}` };
  }

  function start(out: SseOut[]): void {
    if (started) return;
    started = true;
    out.push(chunk({ role: 'assistant', content: '' }, null));
  }

  function trailer(): SseOut[] {
    finished = true;
    const out: SseOut[] = [];
    if (includeUsage) {
      const usage = openaiUsage(
        counts ?? {
          input: 0,
          output: 0,
          cacheRead: undefined,
          cacheCreation: undefined,
          thinking: undefined,
        },
      );
      const body = {
        id,
        object: 'chat.completion.chunk',
        created: init.createdAt,
        model: clientModel ?? '',
        choices: [],
        usage,
      };
      out.push({ data: JSON.stringify(body) });
    }
    out.push({ data: '[DONE]' });
    return out;
  }

  function fail(anthropicType: string, message: string): SseOut[] {
    finished = true;
    return [
      { data: JSON.stringify(errorPayload(anthropicType, `${message} (request id: ${init.requestId})`)) },
    ];
  }

  function onEvent(type: string, event: JsonObject): SseOut[] {
    const out: SseOut[] = [];
    switch (type) {
      case 'message_start': {
        const message = isObject(event.message) ? event.message : {};
        const upstreamId = asString(message.id);
        if (upstreamId !== undefined && !started) id = completionId(upstreamId, init.requestId);
        counts = mergeUsage(counts, message.usage);
        start(out);
        break;
      }
      case 'content_block_start': {
        start(out);
        const block = isObject(event.content_block) ? event.content_block : {};
        blockIsTool = block.type === 'tool_use';
        if (block.type === 'text') {
          const text = asString(block.text) ?? '';
          if (text !== '') out.push(chunk({ content: text }, null));
        } else if (blockIsTool) {
          toolIndex += 1;
          const call = {
            index: toolIndex,
            id: asString(block.id) ?? `call_${init.requestId}_${toolIndex}`,
            type: 'function',
            function: { name: asString(block.name) ?? '', arguments: '' },
          };
          out.push(chunk({ tool_calls: [call] }, null));
        }
        break;
      }
      case 'content_block_delta': {
        const delta = isObject(event.delta) ? event.delta : {};
        if (delta.type === 'text_delta') {
          const text = asString(delta.text) ?? '';
          if (text !== '') out.push(chunk({ content: text }, null));
        } else if (delta.type === 'thinking_delta') {
          const thought = asString(delta.thinking) ?? '';
          if (thought !== '') out.push(chunk({ reasoning_content: thought }, null));
        } else if (delta.type === 'input_json_delta' && blockIsTool) {
          const partial = asString(delta.partial_json) ?? '';
          if (partial !== '')
            out.push(chunk({ tool_calls: [{ index: toolIndex, function: { arguments: partial } }] }, null));
        }
        break;
      }
      case 'content_block_stop':
        blockIsTool = false;
        break;
      case 'message_delta': {
        counts = mergeUsage(counts, event.usage);
        const delta = isObject(event.delta) ? event.delta : {};
        start(out);
        out.push(chunk({}, mapStopReason(delta.stop_reason) ?? 'stop'));
        finishSent = true;
        break;
      }
      case 'message_stop':
        start(out);
        if (!finishSent) out.push(chunk({}, 'stop'));
        out.push(...trailer());
        break;
      case 'error': {
        const error = isObject(event.error) ? event.error : {};
        return fail(asString(error.type) ?? 'api_error', asString(error.message) ?? 'upstream stream error');
      }
      default:
        // ping and event types added after this was written.
        break;
    }
    return out;
  }

  return {
    request(body) {
      const options = body.stream_options;
      includeUsage = isObject(options) && options.include_usage === true;
      clientModel = init.model ?? asString(body.model);
      return translateRequest(body, init);
    },

    response(body) {
      if (!isObject(body)) return body;
      counts = mergeUsage(undefined, body.usage);
      const texts: string[] = [];
      const thoughts: string[] = [];
      const toolCalls: JsonObject[] = [];
      for (const block of Array.isArray(body.content) ? body.content : []) {
        if (!isObject(block)) continue;
        if (block.type === 'text') texts.push(asString(block.text) ?? '');
        else if (block.type === 'thinking') thoughts.push(asString(block.thinking) ?? '');
        else if (block.type === 'tool_use') {
          toolCalls.push({
            id: asString(block.id) ?? `call_${init.requestId}_${toolCalls.length}`,
            type: 'function',
            function: { name: asString(block.name) ?? '', arguments: JSON.stringify(block.input ?? {}) },
          });
        }
      }
      const message: JsonObject = {
        role: 'assistant',
        content: texts.length > 0 ? texts.join('') : null,
        refusal: null,
      };
      if (toolCalls.length > 0) message.tool_calls = toolCalls;
      if (thoughts.length > 0) message.reasoning_content = thoughts.join('');
      const completion: JsonObject = {
        id: completionId(asString(body.id), init.requestId),
        object: 'chat.completion',
        created: init.createdAt,
        model: clientModel ?? asString(body.model) ?? '',
        choices: [
          { index: 0, message, logprobs: null, finish_reason: mapStopReason(body.stop_reason) ?? 'stop' },
        ],
      };
      if (counts) completion.usage = openaiUsage(counts);
      return completion;
    },

    streamEvent(event, data) {
      if (finished) return [];
      const literal = event === 'content_block_delta' && started ? textDeltaLiteral(data) : undefined;
      if (literal !== undefined) return literal === '""' ? [] : [chunkJson(`{"content":${literal}}`, null)];
      const parsed = parseJsonObject(data);
      if (!parsed) return event === 'error' ? fail('api_error', 'upstream stream error') : [];
      return onEvent(asString(parsed.type) ?? event ?? '', parsed);
    },

    streamEnd(complete) {
      if (finished) return [];
      // An Anthropic stream is whole only with message_stop; tolerate a missing one after message_delta.
      if (complete && finishSent) return trailer();
      return fail('api_error', 'upstream stream ended before the message was complete');
    },

    error(status, body) {
      const { message, type } = readUpstreamError(status, body);
      return errorPayload(type ?? anthropicTypeForStatus(status), message);
    },
  };
}

export const openaiToAnthropic = defineTranslator('openai_to_anthropic', createOpenaiToAnthropic);
