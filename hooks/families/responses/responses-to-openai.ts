// A Responses API client (`POST /v1/responses`) talking to a chat.completions upstream: the pivot format,
// so every other provider family is one more hop away (hooks/translators/compose.ts).
//
// Decisions worth knowing (docs/translation.md has the whole table):
// - `instructions` and system/developer items become system messages; function_call items join the
//   assistant message before them (parallel calls stay one turn); function_call_output items become
//   tool messages.
// - State: the gateway stores every reply (unless `store: false`) and resolves `previous_response_id`
//   and `item_reference` items before this translator runs (hooks/families/responses/stored.ts);
//   `conversation` and `background` are refused with a 400 naming the field, never dropped. Reasoning
//   items in the input are opaque to other providers and are not sent.
// - Hosted tools (web_search, file_search, ...) have no chat counterpart: refused by name.
// - Streams: chat chunks become the Responses event sequence. Unlike the other translators, this one
//   keeps the output text of the reply: the `.done` events and `response.completed` repeat it whole.

import { withRequestId } from '../../../common/errors.ts';
import type { JsonObject, JsonValue, SseOut } from '../../../common/types.ts';
import { asString, isObject, parseJsonObject, readUpstreamError } from '../../translators/json.ts';
import { defineTranslator, type Translator, type TranslatorInit } from '../../translators/types.ts';
import { openaiErrorType } from '../openai/errors.ts';
import { readPivotUsage } from '../openai/request-fields.ts';
import { translateRequest } from './responses-request.ts';

// ---------------------------------------------------------------------------------------------------
// Reply

function responsesUsage(usage: JsonValue | undefined): JsonObject | null {
  const counts = readPivotUsage(usage);
  if (counts === undefined) return null;
  return {
    input_tokens: counts.prompt,
    input_tokens_details: { cached_tokens: counts.cached ?? 0 },
    output_tokens: counts.completion,
    output_tokens_details: { reasoning_tokens: counts.reasoning ?? 0 },
    total_tokens: counts.total ?? counts.prompt + counts.completion,
  };
}

/** finish_reason -> status and incomplete_details. */
function outcome(reason: JsonValue | undefined): { status: string; incomplete: JsonObject | null } {
  if (reason === 'length') return { status: 'incomplete', incomplete: { reason: 'max_output_tokens' } };
  if (reason === 'content_filter') return { status: 'incomplete', incomplete: { reason: 'content_filter' } };
  return { status: 'completed', incomplete: null };
}

function safeId(text: string): string {
  return text.replace(/[^A-Za-z0-9_-]/g, '');
}

function messageItem(id: string, text: string, status: string): JsonObject {
  return {
    type: 'message',
    id,
    status,
    role: 'assistant',
    content: [{ type: 'output_text', text, annotations: [], logprobs: [] }],
  };
}

function functionItem(callId: string, name: string, args: string, status: string): JsonObject {
  return {
    type: 'function_call',
    id: `fc_${safeId(callId)}`,
    call_id: callId,
    name,
    arguments: args,
    status,
  };
}

function reasoningItem(id: string, text: string): JsonObject {
  return { type: 'reasoning', id, summary: text === '' ? [] : [{ type: 'summary_text', text }] };
}

/** The Response envelope around `output`, echoing what the client asked for. */
function envelope(body: JsonObject, init: TranslatorInit, id: string, model: string | undefined): JsonObject {
  const tools = Array.isArray(body.tools) ? body.tools : [];
  return {
    id,
    object: 'response',
    created_at: init.createdAt,
    status: 'in_progress',
    error: null,
    incomplete_details: null,
    instructions: asString(body.instructions) ?? null,
    max_output_tokens: typeof body.max_output_tokens === 'number' ? body.max_output_tokens : null,
    model: model ?? init.model ?? '',
    output: [],
    parallel_tool_calls: body.parallel_tool_calls !== false,
    previous_response_id: null,
    reasoning: { effort: isObject(body.reasoning) ? (body.reasoning.effort ?? null) : null, summary: null },
    store: false,
    temperature: typeof body.temperature === 'number' ? body.temperature : null,
    text: isObject(body.text) ? body.text : { format: { type: 'text' } },
    tool_choice: body.tool_choice ?? 'auto',
    tools,
    top_p: typeof body.top_p === 'number' ? body.top_p : null,
    truncation: 'disabled',
    usage: null,
    user: asString(body.user) ?? null,
    metadata: isObject(body.metadata) ? body.metadata : {},
  };
}

// ---------------------------------------------------------------------------------------------------
// The per-request translator

interface OpenItem {
  readonly index: number;
  readonly id: string;
  readonly kind: 'message' | 'reasoning' | 'function_call';
  text: string;
  readonly callId?: string;
  readonly name?: string;
}

function createResponsesToOpenai(init: TranslatorInit): Translator {
  return new ResponsesToOpenai(init);
}

/** One request's translator; the stream's state (items open and done, sequence numbers) lives on it. */
class ResponsesToOpenai implements Translator {
  readonly #init: TranslatorInit;
  readonly #base: string;
  #request: JsonObject = {};
  #responseId: string;
  #seq = 0;
  #started = false;
  #finished = false;
  readonly #done: JsonObject[] = [];
  #nextIndex = 0;
  #text: OpenItem | undefined;
  #reasoning: OpenItem | undefined;
  readonly #calls = new Map<number, OpenItem>();
  #finish: JsonValue | undefined;
  #usage: JsonObject | null = null;

  constructor(init: TranslatorInit) {
    this.#init = init;
    this.#base = safeId(init.requestId) || 'gateway';
    this.#responseId = `resp_${this.#base}`;
  }

  request(body: JsonObject): JsonObject {
    this.#request = body;
    return translateRequest(body, this.#init);
  }

  response(body: JsonValue): JsonValue {
    if (!isObject(body)) return body;
    const base = this.#base;
    const choice = Array.isArray(body.choices) && isObject(body.choices[0]) ? body.choices[0] : {};
    const message = isObject(choice.message) ? choice.message : {};
    const id = `resp_${safeId(asString(body.id) ?? '') || base}`;
    const output: JsonObject[] = [];
    const thought = asString(message.reasoning_content) ?? asString(message.reasoning);
    if (thought) output.push(reasoningItem(`rs_${base}_0`, thought));
    const reply = asString(message.content) ?? asString(message.refusal);
    if (reply) output.push(messageItem(`msg_${base}_${output.length}`, reply, 'completed'));
    const toolCalls = Array.isArray(message.tool_calls) ? message.tool_calls : [];
    for (const call of toolCalls) {
      if (!isObject(call) || !isObject(call.function)) continue;
      const callId = asString(call.id) ?? `call_${base}_${output.length}`;
      output.push(
        functionItem(
          callId,
          asString(call.function.name) ?? '',
          asString(call.function.arguments) ?? '{}',
          'completed',
        ),
      );
    }
    const { status, incomplete } = outcome(choice.finish_reason);
    return {
      ...envelope(this.#request, this.#init, id, this.#init.model),
      status,
      incomplete_details: incomplete,
      output,
      usage: responsesUsage(body.usage),
    };
  }

  streamEvent(_event: string | undefined, data: string): SseOut[] {
    if (this.#finished) return [];
    if (data.trim() === '[DONE]') return this.#complete();
    const chunk = parseJsonObject(data);
    return chunk ? this.#onChunk(chunk) : [];
  }

  streamEnd(complete: boolean): SseOut[] {
    if (this.#finished) return [];
    // Some OpenAI-compatible servers end without [DONE]; a finish reason is enough to close cleanly.
    if (complete && this.#finish !== undefined) return this.#complete();
    return this.#fail(
      'upstream stream ended before the response was complete',
      'server_error',
      'server_error',
    );
  }

  error(status: number, body: JsonValue | string): JsonValue {
    const { message, type } = readUpstreamError(status, body);
    const upstream = isObject(body) && isObject(body.error) ? body.error : {};
    return {
      error: {
        message,
        type: type ?? openaiErrorType(status),
        param: asString(upstream.param) ?? null,
        code: asString(upstream.code) ?? null,
      },
    };
  }

  #event(type: string, fields: JsonObject): SseOut {
    return { event: type, data: JSON.stringify({ type, sequence_number: this.#seq++, ...fields }) };
  }

  #start(out: SseOut[]): void {
    if (this.#started) return;
    this.#started = true;
    const response = envelope(this.#request, this.#init, this.#responseId, this.#init.model);
    out.push(
      this.#event('response.created', { response }),
      this.#event('response.in_progress', { response }),
    );
  }

  #openItem(out: SseOut[], kind: OpenItem['kind'], id: string, extra: Partial<OpenItem> = {}): OpenItem {
    const item: OpenItem = { index: this.#nextIndex++, id, kind, text: '', ...extra };
    let added: JsonObject;
    if (kind === 'message')
      added = { type: 'message', id, status: 'in_progress', role: 'assistant', content: [] };
    else if (kind === 'reasoning') added = { type: 'reasoning', id, summary: [] };
    else added = functionItem(item.callId ?? '', item.name ?? '', '', 'in_progress');
    out.push(this.#event('response.output_item.added', { output_index: item.index, item: added }));
    const at = { item_id: id, output_index: item.index };
    if (kind === 'message') {
      const part = { type: 'output_text', text: '', annotations: [], logprobs: [] };
      out.push(this.#event('response.content_part.added', { ...at, content_index: 0, part }));
    } else if (kind === 'reasoning') {
      out.push(
        this.#event('response.reasoning_summary_part.added', {
          ...at,
          summary_index: 0,
          part: { type: 'summary_text', text: '' },
        }),
      );
    }
    return item;
  }

  #closeItem(out: SseOut[], item: OpenItem): void {
    const at = { item_id: item.id, output_index: item.index };
    let full: JsonObject;
    if (item.kind === 'message') {
      out.push(
        this.#event('response.output_text.done', { ...at, content_index: 0, text: item.text, logprobs: [] }),
      );
      const part = { type: 'output_text', text: item.text, annotations: [], logprobs: [] };
      out.push(this.#event('response.content_part.done', { ...at, content_index: 0, part }));
      full = messageItem(item.id, item.text, 'completed');
    } else if (item.kind === 'reasoning') {
      out.push(
        this.#event('response.reasoning_summary_text.done', { ...at, summary_index: 0, text: item.text }),
      );
      out.push(
        this.#event('response.reasoning_summary_part.done', {
          ...at,
          summary_index: 0,
          part: { type: 'summary_text', text: item.text },
        }),
      );
      full = reasoningItem(item.id, item.text);
    } else {
      out.push(
        this.#event('response.function_call_arguments.done', {
          ...at,
          name: item.name ?? '',
          arguments: item.text,
        }),
      );
      full = functionItem(item.callId ?? '', item.name ?? '', item.text, 'completed');
    }
    out.push(this.#event('response.output_item.done', { output_index: item.index, item: full }));
    this.#done[item.index] = full;
  }

  /** Adds to an open item's text and emits the delta event of its kind. */
  #appendDelta(out: SseOut[], item: OpenItem, type: string, fields: JsonObject, delta: string): void {
    item.text += delta;
    out.push(this.#event(type, { item_id: item.id, output_index: item.index, ...fields, delta }));
  }

  #closeOne(out: SseOut[], item: OpenItem): undefined {
    this.#closeItem(out, item);
    return undefined;
  }

  #closeAll(out: SseOut[]): void {
    const open = [this.#reasoning, this.#text, ...this.#calls.values()].filter(
      (i): i is OpenItem => i !== undefined,
    );
    open.sort((a, b) => a.index - b.index);
    for (const item of open) this.#closeItem(out, item);
    this.#reasoning = undefined;
    this.#text = undefined;
    this.#calls.clear();
  }

  #complete(): SseOut[] {
    if (this.#finished) return [];
    this.#finished = true;
    const out: SseOut[] = [];
    this.#start(out);
    this.#closeAll(out);
    const { status, incomplete } = outcome(this.#finish);
    const response = {
      ...envelope(this.#request, this.#init, this.#responseId, this.#init.model),
      status,
      incomplete_details: incomplete,
      output: this.#done.filter((item) => item !== undefined),
      usage: this.#usage,
    };
    out.push(
      this.#event(status === 'completed' ? 'response.completed' : 'response.incomplete', { response }),
    );
    return out;
  }

  #fail(message: string, code: string, errorType: string): SseOut[] {
    if (this.#finished) return [];
    this.#finished = true;
    const text = withRequestId(message, this.#init.requestId);
    const error = { type: errorType, code, message: text, param: null };
    return [this.#event('error', { code, message: text, param: null, error })];
  }

  #onChunk(chunk: JsonObject): SseOut[] {
    const out: SseOut[] = [];
    if (isObject(chunk.error)) {
      const code = asString(chunk.error.code) ?? asString(chunk.error.type) ?? 'server_error';
      return this.#fail(
        asString(chunk.error.message) ?? 'upstream stream error',
        code,
        asString(chunk.error.type) ?? 'server_error',
      );
    }
    const base = this.#base;
    if (!this.#started && typeof chunk.id === 'string') this.#responseId = `resp_${safeId(chunk.id) || base}`;
    this.#start(out);
    if (isObject(chunk.usage)) this.#usage = responsesUsage(chunk.usage);
    const choice = Array.isArray(chunk.choices) && isObject(chunk.choices[0]) ? chunk.choices[0] : undefined;
    const delta = choice && isObject(choice.delta) ? choice.delta : undefined;
    const thought = delta ? (asString(delta.reasoning_content) ?? asString(delta.reasoning)) : undefined;
    if (thought) {
      this.#reasoning ??= this.#openItem(out, 'reasoning', `rs_${base}_${this.#nextIndex}`);
      this.#appendDelta(
        out,
        this.#reasoning,
        'response.reasoning_summary_text.delta',
        { summary_index: 0 },
        thought,
      );
    }
    const content = delta ? asString(delta.content) : undefined;
    if (content) {
      // Items follow each other: reasoning is done once the answer starts.
      if (this.#reasoning) this.#reasoning = this.#closeOne(out, this.#reasoning);
      this.#text ??= this.#openItem(out, 'message', `msg_${base}_${this.#nextIndex}`);
      this.#appendDelta(
        out,
        this.#text,
        'response.output_text.delta',
        { content_index: 0, logprobs: [] },
        content,
      );
    }
    const toolCalls = delta && Array.isArray(delta.tool_calls) ? delta.tool_calls : [];
    for (const call of toolCalls) {
      if (!isObject(call)) continue;
      const index = typeof call.index === 'number' ? call.index : 0;
      const fn = isObject(call.function) ? call.function : {};
      let item = this.#calls.get(index);
      if (item === undefined) {
        if (this.#reasoning) this.#reasoning = this.#closeOne(out, this.#reasoning);
        if (this.#text) this.#text = this.#closeOne(out, this.#text);
        const callId = asString(call.id) ?? `call_${base}_${index}`;
        item = this.#openItem(out, 'function_call', `fc_${safeId(callId)}`, {
          callId,
          name: asString(fn.name) ?? '',
        });
        this.#calls.set(index, item);
      }
      const args = asString(fn.arguments);
      if (args) this.#appendDelta(out, item, 'response.function_call_arguments.delta', {}, args);
    }
    if (choice && typeof choice.finish_reason === 'string') this.#finish = choice.finish_reason;
    return out;
  }
}

export const responsesToOpenai = defineTranslator('responses_to_openai', createResponsesToOpenai);
