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

import { withRequestId } from '../../../common/errors.ts';
import type { JsonObject, JsonValue, SseOut } from '../../../common/types.ts';
import { isThrottled, THROTTLED_CODE } from '../../translators/json.ts';
import { defineTranslator, type Translator, type TranslatorInit } from '../../translators/types.ts';
import { translateRequest } from './openai-to-anthropic-request.ts';
import {
  anthropicTypeForStatus,
  asCount,
  asString,
  isObject,
  openaiErrorForAnthropicType,
  parseJsonObject,
  readUpstreamError,
} from './translator-shared.ts';

export { DEFAULT_MAX_TOKENS } from './openai-to-anthropic-request.ts';

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

/** `throttled`: a provider's throttling, which keeps the catalogue's code (isThrottled). */
function errorPayload(anthropicType: string, message: string, throttled = false): JsonObject {
  const { type, code } = openaiErrorForAnthropicType(anthropicType);
  return { error: { message, type, code: throttled ? THROTTLED_CODE : code } };
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
  return new OpenaiToAnthropic(init);
}

/** One request's translator. Its stream state: ids and indexes only, never accumulated text. */
class OpenaiToAnthropic implements Translator {
  readonly #init: TranslatorInit;
  #includeUsage = false;
  #clientModel: string | undefined;
  #counts: UsageCounts | undefined;
  #id: string;
  #started = false;
  #blockIsTool = false;
  #toolIndex = -1;
  #finishSent = false;
  #finished = false;
  // Every chunk of a stream shares its envelope: serialized once, not per delta (the hot path).
  #envelope: { key: string; head: string } | undefined;

  constructor(init: TranslatorInit) {
    this.#init = init;
    this.#clientModel = init.model;
    this.#id = completionId(undefined, init.requestId);
  }

  request(body: JsonObject): JsonObject {
    const options = body.stream_options;
    this.#includeUsage = isObject(options) && options.include_usage === true;
    this.#clientModel = this.#init.model ?? asString(body.model);
    return translateRequest(body, this.#init);
  }

  response(body: JsonValue): JsonValue {
    if (!isObject(body)) return body;
    const requestId = this.#init.requestId;
    this.#counts = mergeUsage(undefined, body.usage);
    const texts: string[] = [];
    const thoughts: string[] = [];
    const toolCalls: JsonObject[] = [];
    for (const block of Array.isArray(body.content) ? body.content : []) {
      if (!isObject(block)) continue;
      if (block.type === 'text') texts.push(asString(block.text) ?? '');
      else if (block.type === 'thinking') thoughts.push(asString(block.thinking) ?? '');
      else if (block.type === 'tool_use') {
        toolCalls.push({
          id: asString(block.id) ?? `call_${requestId}_${toolCalls.length}`,
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
      id: completionId(asString(body.id), requestId),
      object: 'chat.completion',
      created: this.#init.createdAt,
      model: this.#clientModel ?? asString(body.model) ?? '',
      choices: [
        { index: 0, message, logprobs: null, finish_reason: mapStopReason(body.stop_reason) ?? 'stop' },
      ],
    };
    if (this.#counts) completion.usage = openaiUsage(this.#counts);
    return completion;
  }

  streamEvent(event: string | undefined, data: string): SseOut[] {
    if (this.#finished) return [];
    const literal = event === 'content_block_delta' && this.#started ? textDeltaLiteral(data) : undefined;
    if (literal !== undefined)
      return literal === '""' ? [] : [this.#chunkJson(`{"content":${literal}}`, null)];
    const parsed = parseJsonObject(data);
    if (!parsed) return event === 'error' ? this.#fail('api_error', 'upstream stream error') : [];
    return this.#onEvent(asString(parsed.type) ?? event ?? '', parsed);
  }

  streamEnd(complete: boolean): SseOut[] {
    if (this.#finished) return [];
    // An Anthropic stream is whole only with message_stop; tolerate a missing one after message_delta.
    if (complete && this.#finishSent) return this.#trailer();
    return this.#fail('api_error', 'upstream stream ended before the message was complete');
  }

  error(status: number, body: JsonValue | string): JsonValue {
    const { message, type } = readUpstreamError(status, body);
    return errorPayload(type ?? anthropicTypeForStatus(status), message);
  }

  #chunk(delta: JsonObject, finishReason: string | null): SseOut {
    return this.#chunkJson(JSON.stringify(delta), finishReason);
  }

  #chunkJson(delta: string, finishReason: string | null): SseOut {
    const model = this.#clientModel ?? '';
    const id = this.#id;
    const key = `${id}\u0000${model}`;
    let envelope = this.#envelope;
    if (envelope?.key !== key) {
      const head = `{"id":${JSON.stringify(id)},"object":"chat.completion.chunk","created":${this.#init.createdAt},"model":${JSON.stringify(model)},"choices":[{"index":0,"delta":`;
      envelope = { key, head };
      this.#envelope = envelope;
    }
    const tail = finishReason === null ? 'null' : JSON.stringify(finishReason);
    return { data: `${envelope.head}${delta},"logprobs":null,"finish_reason":${tail}}]}` };
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
      const usage = openaiUsage(
        this.#counts ?? {
          input: 0,
          output: 0,
          cacheRead: undefined,
          cacheCreation: undefined,
          thinking: undefined,
        },
      );
      const body = {
        id: this.#id,
        object: 'chat.completion.chunk',
        created: this.#init.createdAt,
        model: this.#clientModel ?? '',
        choices: [],
        usage,
      };
      out.push({ data: JSON.stringify(body) });
    }
    out.push({ data: '[DONE]' });
    return out;
  }

  #fail(anthropicType: string, message: string, throttled = false): SseOut[] {
    this.#finished = true;
    const text = withRequestId(message, this.#init.requestId);
    return [{ data: JSON.stringify(errorPayload(anthropicType, text, throttled)) }];
  }

  #onEvent(type: string, event: JsonObject): SseOut[] {
    const out: SseOut[] = [];
    switch (type) {
      case 'message_start': {
        const message = isObject(event.message) ? event.message : {};
        const upstreamId = asString(message.id);
        if (upstreamId !== undefined && !this.#started)
          this.#id = completionId(upstreamId, this.#init.requestId);
        this.#counts = mergeUsage(this.#counts, message.usage);
        this.#start(out);
        break;
      }
      case 'content_block_start': {
        this.#start(out);
        const block = isObject(event.content_block) ? event.content_block : {};
        this.#blockIsTool = block.type === 'tool_use';
        if (block.type === 'text') {
          const text = asString(block.text) ?? '';
          if (text !== '') out.push(this.#chunk({ content: text }, null));
        } else if (this.#blockIsTool) {
          this.#toolIndex += 1;
          const toolIndex = this.#toolIndex;
          const call = {
            index: toolIndex,
            id: asString(block.id) ?? `call_${this.#init.requestId}_${toolIndex}`,
            type: 'function',
            function: { name: asString(block.name) ?? '', arguments: '' },
          };
          out.push(this.#chunk({ tool_calls: [call] }, null));
        }
        break;
      }
      case 'content_block_delta': {
        const delta = isObject(event.delta) ? event.delta : {};
        if (delta.type === 'text_delta') {
          const text = asString(delta.text) ?? '';
          if (text !== '') out.push(this.#chunk({ content: text }, null));
        } else if (delta.type === 'thinking_delta') {
          const thought = asString(delta.thinking) ?? '';
          if (thought !== '') out.push(this.#chunk({ reasoning_content: thought }, null));
        } else if (delta.type === 'input_json_delta' && this.#blockIsTool) {
          const partial = asString(delta.partial_json) ?? '';
          if (partial !== '') {
            const call = { index: this.#toolIndex, function: { arguments: partial } };
            out.push(this.#chunk({ tool_calls: [call] }, null));
          }
        }
        break;
      }
      case 'content_block_stop':
        this.#blockIsTool = false;
        break;
      case 'message_delta': {
        this.#counts = mergeUsage(this.#counts, event.usage);
        const delta = isObject(event.delta) ? event.delta : {};
        this.#start(out);
        out.push(this.#chunk({}, mapStopReason(delta.stop_reason) ?? 'stop'));
        this.#finishSent = true;
        break;
      }
      case 'message_stop':
        this.#start(out);
        if (!this.#finishSent) out.push(this.#chunk({}, 'stop'));
        out.push(...this.#trailer());
        break;
      case 'error': {
        const error = isObject(event.error) ? event.error : {};
        return this.#fail(
          asString(error.type) ?? 'api_error',
          asString(error.message) ?? 'upstream stream error',
          isThrottled(error),
        );
      }
      default:
        // ping and event types added after this was written.
        break;
    }
    return out;
  }
}

export const openaiToAnthropic = defineTranslator('openai_to_anthropic', createOpenaiToAnthropic);
