// A completion-style client talking to Bedrock's Converse / ConverseStream (DSL name
// `openai_to_bedrock_converse`; the registry composes `anthropic_`, `gemini_` and
// `responses_to_bedrock_converse` through the pivot).
//
// Decisions worth knowing:
// - Requests: converse-request.ts (system hoisted, tool results as user turns, images as bytes only,
//   json_schema as outputConfig.textFormat, reasoning_effort only for Claude models).
// - Usage: Converse's `inputTokens` leaves out cache reads and writes, as Anthropic's does; the client's
//   `prompt_tokens` is input + cacheRead + cacheWrite, `cached_tokens` the reads.
// - Stop reasons: end_turn, stop_sequence -> stop; max_tokens, model_context_window_exceeded -> length;
//   tool_use -> tool_calls; guardrail_intervened, content_filtered -> content_filter.
// - Streams: ConverseStream events arrive named by their event type (the event-stream framing,
//   event-stream.ts); `messageStop` carries the stop reason and `metadata`, sent after it, the usage, so
//   the finish chunk goes out at messageStop and the usage chunk and `[DONE]` at metadata. An exception
//   frame arrives as an `error` event and ends the client's stream with its error chunk.

import type { JsonObject, JsonValue, SseOut } from '../../../common/types.ts';
import { asCount, asString, isObject, parseJsonObject } from '../../translators/json.ts';
import type { Translator, TranslatorFactory, TranslatorInit } from '../../translators/types.ts';
import { anthropicErrorType } from '../anthropic/errors.ts';
import { openaiErrorForAnthropicType } from '../anthropic/translator-shared.ts';
import { translateConverseRequest } from './converse-request.ts';
import { readBedrockError, throwIfThrottled } from './errors.ts';

export function finishReasonOf(stopReason: JsonValue | undefined): string {
  switch (stopReason) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'guardrail_intervened':
    case 'content_filtered':
      return 'content_filter';
    default:
      // end_turn, stop_sequence, malformed_* and anything newer.
      return 'stop';
  }
}

interface Counts {
  input: number;
  output: number;
  cacheRead: number | undefined;
  cacheWrite: number | undefined;
}

function readCounts(usage: JsonValue | undefined): Counts | undefined {
  if (!isObject(usage)) return undefined;
  return {
    input: asCount(usage.inputTokens) ?? 0,
    output: asCount(usage.outputTokens) ?? 0,
    cacheRead: asCount(usage.cacheReadInputTokens),
    cacheWrite: asCount(usage.cacheWriteInputTokens),
  };
}

function pivotUsage(counts: Counts): JsonObject {
  const prompt = counts.input + (counts.cacheRead ?? 0) + (counts.cacheWrite ?? 0);
  return {
    prompt_tokens: prompt,
    completion_tokens: counts.output,
    total_tokens: prompt + counts.output,
    prompt_tokens_details: { cached_tokens: counts.cacheRead ?? 0 },
  };
}

function errorPayload(status: number, message: string): JsonObject {
  const { type, code } = openaiErrorForAnthropicType(anthropicErrorType(status));
  return { error: { message, type, code } };
}

class OpenaiToBedrockConverse implements Translator {
  readonly #init: TranslatorInit;
  #model: string;
  #includeUsage = false;
  readonly #id: string;
  #started = false;
  /** Tool-call index of each open tool block, by Converse's contentBlockIndex. */
  readonly #tools = new Map<number, number>();
  #toolCount = 0;
  #finishSent = false;
  #finished = false;
  #counts: Counts | undefined;

  constructor(init: TranslatorInit) {
    this.#init = init;
    this.#model = init.model ?? '';
    this.#id = `chatcmpl-${init.requestId}`;
  }

  request(body: JsonObject): JsonObject {
    const options = body.stream_options;
    this.#includeUsage = isObject(options) && options.include_usage === true;
    this.#model = this.#init.model ?? asString(body.model) ?? '';
    return translateConverseRequest(body, this.#init);
  }

  response(body: JsonValue): JsonValue {
    if (!isObject(body)) return body;
    const output = isObject(body.output) ? body.output : {};
    const reply = isObject(output.message) ? output.message : {};
    const texts: string[] = [];
    const thoughts: string[] = [];
    const toolCalls: JsonObject[] = [];
    for (const block of Array.isArray(reply.content) ? reply.content : []) {
      if (!isObject(block)) continue;
      const text = asString(block.text);
      if (text !== undefined) texts.push(text);
      if (isObject(block.toolUse)) {
        const use = block.toolUse;
        toolCalls.push({
          id: asString(use.toolUseId) ?? `call_${this.#init.requestId}_${toolCalls.length}`,
          type: 'function',
          function: { name: asString(use.name) ?? '', arguments: JSON.stringify(use.input ?? {}) },
        });
      }
      const reasoning = isObject(block.reasoningContent) ? block.reasoningContent.reasoningText : undefined;
      if (isObject(reasoning)) thoughts.push(asString(reasoning.text) ?? '');
    }
    const message: JsonObject = {
      role: 'assistant',
      content: texts.length > 0 ? texts.join('') : null,
      refusal: null,
    };
    if (toolCalls.length > 0) message.tool_calls = toolCalls;
    if (thoughts.length > 0) message.reasoning_content = thoughts.join('');
    const completion: JsonObject = {
      id: this.#id,
      object: 'chat.completion',
      created: this.#init.createdAt,
      model: this.#model,
      choices: [{ index: 0, message, logprobs: null, finish_reason: finishReasonOf(body.stopReason) }],
    };
    const counts = readCounts(body.usage);
    if (counts !== undefined) completion.usage = pivotUsage(counts);
    return completion;
  }

  streamEvent(event: string | undefined, data: string): SseOut[] {
    if (this.#finished) return [];
    const payload = parseJsonObject(data);
    if (payload === undefined) return event === 'error' ? this.#fail(500, 'upstream stream error') : [];
    const out: SseOut[] = [];
    switch (event) {
      case 'messageStart':
        this.#start(out);
        break;
      case 'contentBlockStart': {
        this.#start(out);
        const start = isObject(payload.start) ? payload.start : {};
        if (isObject(start.toolUse)) {
          const index = this.#toolCount++;
          this.#tools.set(asCount(payload.contentBlockIndex) ?? -1, index);
          const call = {
            index,
            id: asString(start.toolUse.toolUseId) ?? `call_${this.#init.requestId}_${index}`,
            type: 'function',
            function: { name: asString(start.toolUse.name) ?? '', arguments: '' },
          };
          out.push(this.#chunk({ tool_calls: [call] }, null));
        }
        break;
      }
      case 'contentBlockDelta': {
        this.#start(out);
        const delta = isObject(payload.delta) ? payload.delta : {};
        const text = asString(delta.text);
        if (text !== undefined && text !== '') out.push(this.#chunk({ content: text }, null));
        if (isObject(delta.toolUse)) {
          const index = this.#tools.get(asCount(payload.contentBlockIndex) ?? -1);
          const input = asString(delta.toolUse.input) ?? '';
          if (index !== undefined && input !== '') {
            out.push(this.#chunk({ tool_calls: [{ index, function: { arguments: input } }] }, null));
          }
        }
        const reasoning = isObject(delta.reasoningContent)
          ? asString(delta.reasoningContent.text)
          : undefined;
        if (reasoning !== undefined && reasoning !== '')
          out.push(this.#chunk({ reasoning_content: reasoning }, null));
        break;
      }
      case 'contentBlockStop':
        this.#tools.delete(asCount(payload.contentBlockIndex) ?? -1);
        break;
      case 'messageStop':
        this.#start(out);
        out.push(this.#chunk({}, finishReasonOf(payload.stopReason)));
        this.#finishSent = true;
        break;
      case 'metadata':
        this.#counts = readCounts(payload.usage) ?? this.#counts;
        if (this.#finishSent) out.push(...this.#trailer());
        break;
      case 'error': {
        const error = isObject(payload.error) ? payload.error : {};
        const status = asCount(error.status) ?? 500;
        return this.#fail(status, asString(error.message) ?? 'upstream stream error', asString(error.code));
      }
      default:
        break;
    }
    return out;
  }

  streamEnd(complete: boolean): SseOut[] {
    if (this.#finished) return [];
    // A stream is whole with messageStop; its metadata (usage) may be missing.
    if (complete && this.#finishSent) return this.#trailer();
    return this.#fail(502, 'upstream stream ended before the message was complete');
  }

  error(status: number, body: JsonValue | string): JsonValue {
    throwIfThrottled(status, body);
    return errorPayload(status, readBedrockError(status, body));
  }

  #chunk(delta: JsonObject, finishReason: string | null): SseOut {
    const chunk = {
      id: this.#id,
      object: 'chat.completion.chunk',
      created: this.#init.createdAt,
      model: this.#model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    };
    return { data: JSON.stringify(chunk) };
  }

  #start(out: SseOut[]): void {
    if (this.#started) return;
    this.#started = true;
    out.push(this.#chunk({ role: 'assistant', content: '' }, null));
  }

  #trailer(): SseOut[] {
    this.#finished = true;
    const out: SseOut[] = [];
    if (this.#includeUsage) {
      const usage = pivotUsage(
        this.#counts ?? { input: 0, output: 0, cacheRead: undefined, cacheWrite: undefined },
      );
      const body = {
        id: this.#id,
        object: 'chat.completion.chunk',
        created: this.#init.createdAt,
        model: this.#model,
        choices: [],
        usage,
      };
      out.push({ data: JSON.stringify(body) });
    }
    out.push({ data: '[DONE]' });
    return out;
  }

  #fail(status: number, message: string, code?: string): SseOut[] {
    this.#finished = true;
    const payload = errorPayload(status, `${message} (request id: ${this.#init.requestId})`);
    // A throttled stream keeps the catalogue's code (bedrockExceptionEvent).
    if (code === 'upstream_rate_limited' && isObject(payload.error)) payload.error.code = code;
    return [{ data: JSON.stringify(payload) }];
  }
}

export const openaiToBedrockConverse: TranslatorFactory = {
  name: 'openai_to_bedrock_converse',
  from: 'openai',
  to: 'bedrock_converse',
  create: (init) => new OpenaiToBedrockConverse(init),
};
