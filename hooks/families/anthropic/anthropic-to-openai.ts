// Over 400 lines: one direction's request, reply, stream and error mappings share per-request state.
// An Anthropic-SDK client (Messages API) talking to an OpenAI-compatible chat.completions upstream.
//
// Decisions worth knowing:
// - Usage: OpenAI's `prompt_tokens` includes cached tokens; Anthropic's `input_tokens` excludes cache
//   reads. The client sees input_tokens = prompt_tokens - cached_tokens and cache_read_input_tokens =
//   cached_tokens, so an Anthropic client that adds them up gets the real prompt size. The normalized
//   `inputTokens` is prompt_tokens (cache reads included), with `cacheReadTokens` separately: the same
//   convention as openai-to-anthropic, so billing sees one meaning of input whatever the upstream.
// - Stop reasons: stop -> end_turn, length -> max_tokens, tool_calls / function_call -> tool_use,
//   content_filter -> refusal (Anthropic's own "the model declined / was stopped by a classifier").
// - Streaming: `stream_options.include_usage` is injected so output usage is known; the usage chunk
//   comes after the finish_reason chunk, so message_delta (carrying stop_reason and usage) is held back
//   until `[DONE]` or the end of the upstream stream. message_start goes out on the first chunk with
//   the gateway's own count of the input (TranslatorInit.inputTokens); the upstream's input_tokens
//   arrive in message_delta (the Anthropic SDK overwrites them there).
// - Reasoning: `thinking` (its budget, by steps) and `output_config.effort` become `reasoning_effort`;
//   the upstream's `reasoning_content` comes back as a thinking block with an empty signature (there is
//   none to give), and reasoning tokens as `output_tokens_details.thinking_tokens`.
// - Structured output: `output_config.format` becomes a strict json_schema `response_format`.
// - `top_k` rides along in the pivot (Gemini and compatible servers take it; OpenAI refuses it itself).
// - Ignored, since they do not change the answer: cache_control markers, service_tier, thinking blocks in
//   the history (other models cannot read Anthropic's signed thinking). tool_result `is_error` has no
//   OpenAI field and is not rewritten into the content. Any other field is refused by name.

import type { JsonObject, JsonValue, SseOut } from '../../../common/types.ts';
import { refuseUnknownFields } from '../../translators/json.ts';
import {
  defineTranslator,
  TranslationError,
  type Translator,
  type TranslatorInit,
} from '../../translators/types.ts';
import { type PivotUsage, readPivotUsage, streamWithUsage } from '../openai/request-fields.ts';
import {
  anthropicTypeForOpenaiError,
  anthropicTypeForStatus,
  asCount,
  asString,
  isObject,
  parseArguments,
  parseJsonObject,
  readUpstreamError,
} from './translator-shared.ts';

// ---------------------------------------------------------------------------------------------------
// Request

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

function translateRequest(body: JsonObject, init: TranslatorInit): JsonObject {
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

// ---------------------------------------------------------------------------------------------------
// Response

function mapFinishReason(reason: JsonValue | undefined): string {
  switch (reason) {
    case 'length':
      return 'max_tokens';
    case 'tool_calls':
    case 'function_call':
      return 'tool_use';
    case 'content_filter':
      return 'refusal';
    default:
      return 'end_turn';
  }
}

type UsageCounts = PivotUsage;

/**
 * Both cache fields are always present, as on Anthropic's own wire: clients add them up without null
 * checks. OpenAI-compatible upstreams report no cache writes, so cache_creation_input_tokens is 0.
 */
function anthropicUsage(counts: UsageCounts | undefined): JsonObject {
  const prompt = counts?.prompt ?? 0;
  const cached = Math.min(counts?.cached ?? 0, prompt);
  const usage: JsonObject = {
    input_tokens: prompt - cached,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: cached,
    output_tokens: counts?.completion ?? 0,
  };
  if (counts?.reasoning) usage.output_tokens_details = { thinking_tokens: counts.reasoning };
  return usage;
}

function messageId(upstreamId: string | undefined, requestId: string): string {
  const base = (upstreamId ?? requestId).replace(/^chatcmpl-/, '').replace(/[^A-Za-z0-9_-]/g, '');
  return `msg_${base === '' ? requestId.replace(/[^A-Za-z0-9_-]/g, '') : base}`;
}

function toolInput(args: string): JsonObject {
  // The model produced arguments that are not a JSON object; Anthropic's `input` must be one.
  return parseArguments(args) ?? {};
}

function errorBody(type: string, message: string): JsonObject {
  return { type: 'error', error: { type, message } };
}

function sse(data: JsonObject): SseOut {
  return { event: asString(data.type), data: JSON.stringify(data) };
}

// ---------------------------------------------------------------------------------------------------
// The per-request translator

type BlockKind = 'thinking' | 'text' | 'tool';

function createAnthropicToOpenai(init: TranslatorInit): Translator {
  let clientModel = init.model;
  let counts: UsageCounts | undefined;
  // Stream state: ids, indexes and the OpenAI tool index -> Anthropic block index map; never text.
  let id = messageId(undefined, init.requestId);
  let started = false;
  let nextBlock = 0;
  let open: { index: number; kind: BlockKind } | undefined;
  const toolBlocks = new Map<number, number>();
  let stopReason: string | undefined;
  let finished = false;

  function start(out: SseOut[], chunk: JsonObject): void {
    if (started) return;
    started = true;
    id = messageId(asString(chunk.id), init.requestId);
    const message = {
      id,
      type: 'message',
      role: 'assistant',
      model: clientModel ?? asString(chunk.model) ?? '',
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: counts === undefined ? estimatedUsage() : anthropicUsage(counts),
    };
    out.push(sse({ type: 'message_start', message }));
  }

  /**
   * message_start comes before the upstream's counts: it carries the gateway's own count of the input
   * (clients such as LangChain read it there); message_delta then carries the upstream's numbers.
   */
  function estimatedUsage(): JsonObject {
    const usage = anthropicUsage(undefined);
    usage.input_tokens = init.inputTokens?.() ?? 0;
    return usage;
  }

  function closeBlock(out: SseOut[]): void {
    if (!open) return;
    out.push(sse({ type: 'content_block_stop', index: open.index }));
    open = undefined;
  }

  function openBlock(out: SseOut[], kind: BlockKind, contentBlock: JsonObject): number {
    closeBlock(out);
    const index = nextBlock++;
    open = { index, kind };
    out.push(sse({ type: 'content_block_start', index, content_block: contentBlock }));
    return index;
  }

  function text(out: SseOut[], value: string): void {
    if (value === '') return;
    if (open?.kind !== 'text') openBlock(out, 'text', { type: 'text', text: '' });
    out.push(
      sse({
        type: 'content_block_delta',
        index: open?.index ?? 0,
        delta: { type: 'text_delta', text: value },
      }),
    );
  }

  function thinking(out: SseOut[], value: string): void {
    if (value === '') return;
    if (open?.kind !== 'thinking')
      openBlock(out, 'thinking', { type: 'thinking', thinking: '', signature: '' });
    out.push(
      sse({
        type: 'content_block_delta',
        index: open?.index ?? 0,
        delta: { type: 'thinking_delta', thinking: value },
      }),
    );
  }

  function toolCall(out: SseOut[], call: JsonObject, position: number): void {
    const toolIndex = typeof call.index === 'number' ? call.index : position;
    const fn = isObject(call.function) ? call.function : {};
    let index = toolBlocks.get(toolIndex);
    if (index === undefined) {
      index = openBlock(out, 'tool', {
        type: 'tool_use',
        id: asString(call.id) ?? `toolu_${init.requestId}_${toolIndex}`,
        name: asString(fn.name) ?? '',
        input: {},
      });
      toolBlocks.set(toolIndex, index);
    }
    // A delta for an earlier, already closed call (interleaving upstreams) still goes to its own block.
    const args = asString(fn.arguments) ?? '';
    if (args !== '')
      out.push(
        sse({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: args } }),
      );
  }

  function finish(): SseOut[] {
    finished = true;
    const out: SseOut[] = [];
    closeBlock(out);
    const usage = anthropicUsage(counts);
    out.push(
      sse({
        type: 'message_delta',
        delta: { stop_reason: stopReason ?? 'end_turn', stop_sequence: null },
        usage,
      }),
    );
    out.push(sse({ type: 'message_stop' }));
    return out;
  }

  function fail(type: string, message: string): SseOut[] {
    finished = true;
    return [sse(errorBody(type, `${message} (request id: ${init.requestId})`))];
  }

  function onChunk(chunk: JsonObject): SseOut[] {
    const out: SseOut[] = [];
    counts = readPivotUsage(chunk.usage) ?? counts;
    const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
    // The trailing usage chunk has no choices; it must not open the message by itself.
    if (choices.length > 0) start(out, chunk);
    for (const choice of choices) {
      // Only the first choice: Anthropic messages have one; n > 1 is never requested by this direction.
      if (!isObject(choice) || (choice.index ?? 0) !== 0) continue;
      const delta = isObject(choice.delta) ? choice.delta : {};
      thinking(out, asString(delta.reasoning_content) ?? asString(delta.reasoning) ?? '');
      text(out, asString(delta.content) ?? '');
      text(out, asString(delta.refusal) ?? '');
      if (Array.isArray(delta.tool_calls)) {
        delta.tool_calls.forEach((call, position) => {
          if (isObject(call)) toolCall(out, call, position);
        });
      }
      const reason = asString(choice.finish_reason);
      if (reason !== undefined) {
        stopReason = mapFinishReason(reason);
        closeBlock(out);
      }
    }
    return out;
  }

  return {
    request(body) {
      clientModel = init.model ?? asString(body.model);
      return translateRequest(body, init);
    },

    response(body) {
      if (!isObject(body)) return body;
      counts = readPivotUsage(body.usage);
      const choice = Array.isArray(body.choices) && isObject(body.choices[0]) ? body.choices[0] : {};
      const message = isObject(choice.message) ? choice.message : {};
      const content: JsonObject[] = [];
      const reasoning = asString(message.reasoning_content) ?? asString(message.reasoning) ?? '';
      if (reasoning !== '') content.push({ type: 'thinking', thinking: reasoning, signature: '' });
      const textValue = asString(message.content) ?? asString(message.refusal) ?? '';
      if (textValue !== '') content.push({ type: 'text', text: textValue });
      const calls = Array.isArray(message.tool_calls) ? message.tool_calls : [];
      calls.forEach((call, i) => {
        if (!isObject(call)) return;
        const fn = isObject(call.function) ? call.function : {};
        content.push({
          type: 'tool_use',
          id: asString(call.id) ?? `toolu_${init.requestId}_${i}`,
          name: asString(fn.name) ?? '',
          input: toolInput(asString(fn.arguments) ?? ''),
        });
      });
      return {
        id: messageId(asString(body.id), init.requestId),
        type: 'message',
        role: 'assistant',
        model: clientModel ?? asString(body.model) ?? '',
        content,
        stop_reason: mapFinishReason(choice.finish_reason),
        stop_sequence: null,
        usage: anthropicUsage(counts),
      };
    },

    streamEvent(event, data) {
      if (finished) return [];
      if (data.trim() === '[DONE]') {
        if (stopReason !== undefined) return finish();
        return fail('api_error', 'upstream stream ended without a finish reason');
      }
      const chunk = parseJsonObject(data);
      if (chunk && isObject(chunk.error)) {
        const error = chunk.error;
        const type = anthropicTypeForOpenaiError(asString(error.type), asString(error.code));
        return fail(type, asString(error.message) ?? 'upstream stream error');
      }
      if (event === 'error') return fail('api_error', 'upstream stream error');
      return chunk ? onChunk(chunk) : [];
    },

    streamEnd(complete) {
      if (finished) return [];
      // Some OpenAI-compatible servers end without [DONE]; a finish reason is enough to close cleanly.
      if (complete && stopReason !== undefined) return finish();
      return fail('api_error', 'upstream stream ended before the message was complete');
    },

    error(status, body) {
      return errorBody(anthropicTypeForStatus(status), readUpstreamError(status, body).message);
    },
  };
}

export const anthropicToOpenai = defineTranslator('anthropic_to_openai', createAnthropicToOpenai);
