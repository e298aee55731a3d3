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
//   the best count of the input by then (TranslatorInit.inputCount: the upstream's, the serving
//   provider's count asked alongside, or the gateway's estimate); the upstream's final input_tokens
//   arrive in message_delta (the Anthropic SDK overwrites them there).
// - Reasoning: `thinking` (its budget, by steps) and `output_config.effort` become `reasoning_effort`;
//   the upstream's `reasoning_content` comes back as a thinking block with an empty signature (there is
//   none to give), and reasoning tokens as `output_tokens_details.thinking_tokens`.
// - Structured output: `output_config.format` becomes a strict json_schema `response_format`.
// - `top_k` rides along in the pivot (Gemini and compatible servers take it; OpenAI refuses it itself).
// - Ignored, since they do not change the answer: cache_control markers, service_tier, thinking blocks in
//   the history (other models cannot read Anthropic's signed thinking). tool_result `is_error` has no
//   OpenAI field and is not rewritten into the content. Any other field is refused by name.

import { GatewayError, withRequestId } from '../../../common/errors.ts';
import type { JsonObject, JsonValue, SseOut } from '../../../common/types.ts';
import { isThrottled, THROTTLED_CODE } from '../../translators/json.ts';
import { defineTranslator, type Translator, type TranslatorInit } from '../../translators/types.ts';
import { type PivotUsage, readPivotUsage } from '../openai/request-fields.ts';
import { translateRequest } from './anthropic-to-openai-request.ts';
import { anthropicErrorEvent } from './errors.ts';
import {
  anthropicTypeForOpenaiError,
  anthropicTypeForStatus,
  asString,
  isObject,
  parseArguments,
  parseJsonObject,
  readUpstreamError,
} from './translator-shared.ts';

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
  return new AnthropicToOpenai(init);
}

/** One request's translator. Its stream state: ids, indexes and the tool -> block map; never text. */
class AnthropicToOpenai implements Translator {
  readonly #init: TranslatorInit;
  #clientModel: string | undefined;
  #counts: UsageCounts | undefined;
  #id: string;
  #started = false;
  #nextBlock = 0;
  #open: { index: number; kind: BlockKind } | undefined;
  /** OpenAI tool index -> Anthropic block index. */
  readonly #toolBlocks = new Map<number, number>();
  #stopReason: string | undefined;
  #finished = false;

  constructor(init: TranslatorInit) {
    this.#init = init;
    this.#clientModel = init.model;
    this.#id = messageId(undefined, init.requestId);
  }

  request(body: JsonObject): JsonObject {
    this.#clientModel = this.#init.model ?? asString(body.model);
    return translateRequest(body, this.#init);
  }

  response(body: JsonValue): JsonValue {
    if (!isObject(body)) return body;
    const requestId = this.#init.requestId;
    this.#counts = readPivotUsage(body.usage);
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
        id: asString(call.id) ?? `toolu_${requestId}_${i}`,
        name: asString(fn.name) ?? '',
        input: toolInput(asString(fn.arguments) ?? ''),
      });
    });
    return {
      id: messageId(asString(body.id), requestId),
      type: 'message',
      role: 'assistant',
      model: this.#clientModel ?? asString(body.model) ?? '',
      content,
      stop_reason: mapFinishReason(choice.finish_reason),
      stop_sequence: null,
      usage: anthropicUsage(this.#counts),
    };
  }

  streamEvent(event: string | undefined, data: string): SseOut[] {
    if (this.#finished) return [];
    if (data.trim() === '[DONE]') {
      if (this.#stopReason !== undefined) return this.#finish();
      return this.#fail('api_error', 'upstream stream ended without a finish reason');
    }
    const chunk = parseJsonObject(data);
    if (chunk && isObject(chunk.error)) {
      const error = chunk.error;
      const message = asString(error.message) ?? 'upstream stream error';
      if (isThrottled(error)) {
        this.#finished = true;
        return [anthropicErrorEvent(new GatewayError(THROTTLED_CODE, message), this.#init.requestId)];
      }
      const type = anthropicTypeForOpenaiError(asString(error.type), asString(error.code));
      return this.#fail(type, message);
    }
    if (event === 'error') return this.#fail('api_error', 'upstream stream error');
    return chunk ? this.#onChunk(chunk) : [];
  }

  streamEnd(complete: boolean): SseOut[] {
    if (this.#finished) return [];
    // Some OpenAI-compatible servers end without [DONE]; a finish reason is enough to close cleanly.
    if (complete && this.#stopReason !== undefined) return this.#finish();
    return this.#fail('api_error', 'upstream stream ended before the message was complete');
  }

  error(status: number, body: JsonValue | string): JsonValue {
    return errorBody(anthropicTypeForStatus(status), readUpstreamError(status, body).message);
  }

  #start(out: SseOut[], chunk: JsonObject): void {
    if (this.#started) return;
    this.#started = true;
    this.#id = messageId(asString(chunk.id), this.#init.requestId);
    const message = {
      id: this.#id,
      type: 'message',
      role: 'assistant',
      model: this.#clientModel ?? asString(chunk.model) ?? '',
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: this.#counts === undefined ? this.#inputUsage() : anthropicUsage(this.#counts),
    };
    out.push(sse({ type: 'message_start', message }));
  }

  /**
   * message_start comes before the upstream's final counts: it carries the best count of the input there
   * is by then (TranslatorInit.inputCount: the upstream's own, the provider's count asked alongside, or
   * the gateway's estimate; clients such as LangChain read it there); message_delta then carries the
   * upstream's final numbers, which are billed.
   */
  #inputUsage(): JsonObject {
    const count = this.#init.inputCount?.();
    const cached = Math.min(count?.cacheRead ?? 0, count?.tokens ?? 0);
    return anthropicUsage({
      prompt: count?.tokens ?? 0,
      cached,
      completion: 0,
      total: undefined,
      reasoning: undefined,
    });
  }

  #closeBlock(out: SseOut[]): void {
    if (!this.#open) return;
    out.push(sse({ type: 'content_block_stop', index: this.#open.index }));
    this.#open = undefined;
  }

  #openBlock(out: SseOut[], kind: BlockKind, contentBlock: JsonObject): number {
    this.#closeBlock(out);
    const index = this.#nextBlock++;
    this.#open = { index, kind };
    out.push(sse({ type: 'content_block_start', index, content_block: contentBlock }));
    return index;
  }

  #text(out: SseOut[], value: string): void {
    if (value === '') return;
    if (this.#open?.kind !== 'text') this.#openBlock(out, 'text', { type: 'text', text: '' });
    out.push(
      sse({
        type: 'content_block_delta',
        index: this.#open?.index ?? 0,
        delta: { type: 'text_delta', text: value },
      }),
    );
  }

  #thinking(out: SseOut[], value: string): void {
    if (value === '') return;
    if (this.#open?.kind !== 'thinking')
      this.#openBlock(out, 'thinking', { type: 'thinking', thinking: '', signature: '' });
    out.push(
      sse({
        type: 'content_block_delta',
        index: this.#open?.index ?? 0,
        delta: { type: 'thinking_delta', thinking: value },
      }),
    );
  }

  #toolCall(out: SseOut[], call: JsonObject, position: number): void {
    const toolIndex = typeof call.index === 'number' ? call.index : position;
    const fn = isObject(call.function) ? call.function : {};
    let index = this.#toolBlocks.get(toolIndex);
    if (index === undefined) {
      index = this.#openBlock(out, 'tool', {
        type: 'tool_use',
        id: asString(call.id) ?? `toolu_${this.#init.requestId}_${toolIndex}`,
        name: asString(fn.name) ?? '',
        input: {},
      });
      this.#toolBlocks.set(toolIndex, index);
    }
    // A delta for an earlier, already closed call (interleaving upstreams) still goes to its own block.
    const args = asString(fn.arguments) ?? '';
    if (args !== '')
      out.push(
        sse({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: args } }),
      );
  }

  #finish(): SseOut[] {
    this.#finished = true;
    const out: SseOut[] = [];
    this.#closeBlock(out);
    const usage = anthropicUsage(this.#counts);
    out.push(
      sse({
        type: 'message_delta',
        delta: { stop_reason: this.#stopReason ?? 'end_turn', stop_sequence: null },
        usage,
      }),
    );
    out.push(sse({ type: 'message_stop' }));
    return out;
  }

  #fail(type: string, message: string): SseOut[] {
    this.#finished = true;
    return [sse(errorBody(type, withRequestId(message, this.#init.requestId)))];
  }

  #onChunk(chunk: JsonObject): SseOut[] {
    const out: SseOut[] = [];
    this.#counts = readPivotUsage(chunk.usage) ?? this.#counts;
    const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
    // The trailing usage chunk has no choices; it must not open the message by itself.
    if (choices.length > 0) this.#start(out, chunk);
    for (const choice of choices) {
      // Only the first choice: Anthropic messages have one; n > 1 is never requested by this direction.
      if (!isObject(choice) || (choice.index ?? 0) !== 0) continue;
      const delta = isObject(choice.delta) ? choice.delta : {};
      this.#thinking(out, asString(delta.reasoning_content) ?? asString(delta.reasoning) ?? '');
      this.#text(out, asString(delta.content) ?? '');
      this.#text(out, asString(delta.refusal) ?? '');
      if (Array.isArray(delta.tool_calls)) {
        delta.tool_calls.forEach((call, position) => {
          if (isObject(call)) this.#toolCall(out, call, position);
        });
      }
      const reason = asString(choice.finish_reason);
      if (reason !== undefined) {
        this.#stopReason = mapFinishReason(reason);
        this.#closeBlock(out);
      }
    }
    return out;
  }
}

export const anthropicToOpenai = defineTranslator('anthropic_to_openai', createAnthropicToOpenai);
