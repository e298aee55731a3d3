// Over 400 lines: one direction's request, reply, stream and error mappings share per-request state.
// A Responses API client (`POST /v1/responses`) talking to a chat.completions upstream: the pivot format,
// so every other provider family is one more hop away (hooks/translators/compose.ts).
//
// Decisions worth knowing (docs/translation.md has the whole table):
// - `instructions` and system/developer items become system messages; function_call items join the
//   assistant message before them (parallel calls stay one turn); function_call_output items become
//   tool messages.
// - State lives with OpenAI only: `previous_response_id`, `conversation`, `store: true`, `background` and
//   `item_reference` items are refused with a 400 naming the field, never dropped. Reasoning items in the
//   input are opaque to other providers and are not sent.
// - Hosted tools (web_search, file_search, ...) have no chat counterpart: refused by name.
// - Streams: chat chunks become the Responses event sequence. Unlike the other translators, this one
//   keeps the output text of the reply: the `.done` events and `response.completed` repeat it whole.

import type { JsonObject, JsonValue, SseOut } from '../../../common/types.ts';
import {
  asString,
  isObject,
  parseJsonObject,
  readUpstreamError,
  refuseUnknownFields,
} from '../../translators/json.ts';
import {
  defineTranslator,
  TranslationError,
  type Translator,
  type TranslatorInit,
} from '../../translators/types.ts';
import { openaiErrorType } from '../openai/errors.ts';
import { readPivotUsage, streamWithUsage } from '../openai/request-fields.ts';

// ---------------------------------------------------------------------------------------------------
// Request

const REFUSED_FIELDS: Readonly<Record<string, string>> = {
  previous_response_id:
    'previous_response_id is not supported for this provider: the gateway keeps no responses; send the whole conversation in input',
  conversation: 'conversation is not supported for this provider: send the whole conversation in input',
  background: 'background responses are not supported for this provider',
  prompt: 'stored prompts (prompt) are not supported for this provider',
};

function refuse(message: string, field: string): never {
  throw new TranslationError(message, field);
}

function contentText(part: JsonObject, at: string): string {
  const text = asString(part.text) ?? asString(part.refusal);
  if (text === undefined) refuse(`${at}.text must be a string`, `${at}.text`);
  return text;
}

/** Responses content parts -> chat content (a plain string when it is text only). */
function chatContent(content: JsonValue | undefined, at: string): JsonValue {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) refuse(`${at} must be a string or an array`, at);
  const parts = content.map((part, i): JsonObject => {
    const where = `${at}[${i}]`;
    if (!isObject(part)) refuse(`${where} must be an object`, where);
    switch (part.type) {
      case 'input_text':
      case 'output_text':
      case 'refusal':
        return { type: 'text', text: contentText(part, where) };
      case 'input_image': {
        const url = asString(part.image_url);
        if (url === undefined) {
          refuse(
            `${where}: only images given by image_url (a URL or a data: URL) can be sent to this provider`,
            `${where}.image_url`,
          );
        }
        const image: JsonObject = { url };
        const detail = asString(part.detail);
        if (detail !== undefined && detail !== 'auto') image.detail = detail;
        return { type: 'image_url', image_url: image };
      }
      default:
        return refuse(
          `${where}.type ${JSON.stringify(part.type)} is not supported for this provider`,
          `${where}.type`,
        );
    }
  });
  return parts.every((p) => p.type === 'text') ? parts.map((p) => p.text as string).join('') : parts;
}

function toolOutput(output: JsonValue | undefined, at: string): string {
  if (typeof output === 'string') return output;
  const content = chatContent(output, at);
  if (typeof content !== 'string')
    refuse(`${at}: a function_call_output can carry text only for this provider`, at);
  return content;
}

function inputMessages(input: JsonValue | undefined): JsonObject[] {
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  if (!Array.isArray(input)) refuse('input must be a string or an array', 'input');
  const messages: JsonObject[] = [];
  input.forEach((item, i) => {
    const at = `input[${i}]`;
    if (!isObject(item)) refuse(`${at} must be an object`, at);
    const type = item.type ?? 'message';
    if (type === 'message') {
      const role = item.role === 'developer' ? 'system' : item.role;
      if (role !== 'user' && role !== 'assistant' && role !== 'system') {
        refuse(`${at}.role ${JSON.stringify(item.role)} is not supported`, `${at}.role`);
      }
      messages.push({ role, content: chatContent(item.content, `${at}.content`) });
    } else if (type === 'function_call') {
      const callId = asString(item.call_id);
      const name = asString(item.name);
      if (callId === undefined || name === undefined) refuse(`${at} needs a call_id and a name`, at);
      const call = {
        id: callId,
        type: 'function',
        function: { name, arguments: asString(item.arguments) ?? '{}' },
      };
      const last = messages.at(-1);
      if (last?.role === 'assistant') {
        last.tool_calls = [...(Array.isArray(last.tool_calls) ? last.tool_calls : []), call];
      } else {
        messages.push({ role: 'assistant', content: null, tool_calls: [call] });
      }
    } else if (type === 'function_call_output') {
      const callId = asString(item.call_id);
      if (callId === undefined) refuse(`${at}.call_id must be a string`, `${at}.call_id`);
      messages.push({ role: 'tool', tool_call_id: callId, content: toolOutput(item.output, `${at}.output`) });
    } else if (type !== 'reasoning') {
      refuse(`${at}.type ${JSON.stringify(type)} is not supported for this provider`, `${at}.type`);
    }
  });
  return messages;
}

function chatTools(tools: JsonValue): JsonObject[] {
  if (!Array.isArray(tools)) refuse('tools must be an array', 'tools');
  return tools.map((tool, i) => {
    const at = `tools[${i}]`;
    if (!isObject(tool)) refuse(`${at} must be an object`, at);
    if (tool.type !== 'function') {
      refuse(
        `${at}: the hosted tool ${JSON.stringify(tool.type)} is not available for this provider`,
        `${at}.type`,
      );
    }
    const name = asString(tool.name);
    if (name === undefined) refuse(`${at}.name must be a string`, `${at}.name`);
    const fn: JsonObject = {
      name,
      parameters: isObject(tool.parameters) ? tool.parameters : { type: 'object' },
    };
    if (typeof tool.description === 'string') fn.description = tool.description;
    if (typeof tool.strict === 'boolean') fn.strict = tool.strict;
    return { type: 'function', function: fn };
  });
}

function chatToolChoice(choice: JsonValue): JsonValue {
  if (choice === 'auto' || choice === 'none' || choice === 'required') return choice;
  if (isObject(choice) && choice.type === 'function' && typeof choice.name === 'string') {
    return { type: 'function', function: { name: choice.name } };
  }
  return refuse(`tool_choice ${JSON.stringify(choice)} is not supported for this provider`, 'tool_choice');
}

function responseFormat(text: JsonValue): JsonObject | undefined {
  const format = isObject(text) ? text.format : undefined;
  if (!isObject(format) || format.type === 'text') return undefined;
  if (format.type === 'json_object') return { type: 'json_object' };
  if (format.type === 'json_schema') {
    const schema: JsonObject = { name: asString(format.name) ?? 'response', schema: format.schema ?? {} };
    if (typeof format.strict === 'boolean') schema.strict = format.strict;
    if (typeof format.description === 'string') schema.description = format.description;
    return { type: 'json_schema', json_schema: schema };
  }
  return refuse(`text.format.type ${JSON.stringify(format.type)} is not supported`, 'text.format.type');
}

/** Fields translated below, and hints that do not change the answer (`include`, `metadata` tags, caching). */
const KNOWN_FIELDS: ReadonlySet<string> = new Set([
  'model',
  'input',
  'instructions',
  'max_output_tokens',
  'temperature',
  'top_p',
  'parallel_tool_calls',
  'user',
  'safety_identifier',
  'top_logprobs',
  'tools',
  'tool_choice',
  'text',
  'reasoning',
  'stream',
  'stream_options',
  'store',
  'truncation',
  'include',
  'metadata',
  'service_tier',
  'prompt_cache_key',
  ...Object.keys(REFUSED_FIELDS),
]);

function translateRequest(body: JsonObject, init: TranslatorInit): JsonObject {
  refuseUnknownFields(
    body,
    KNOWN_FIELDS,
    (field) => new TranslationError(`${field} is not supported for this provider`, field),
  );
  if (body.truncation === 'auto') {
    refuse('truncation: "auto" is not supported for this provider; shorten the input yourself', 'truncation');
  }
  for (const [field, message] of Object.entries(REFUSED_FIELDS)) {
    if (body[field] !== undefined && body[field] !== null && body[field] !== false) refuse(message, field);
  }
  if (body.store === true) {
    refuse(
      'store: true is not supported for this provider: the gateway keeps no responses; send store: false',
      'store',
    );
  }
  const messages: JsonObject[] = [];
  const instructions = asString(body.instructions);
  if (instructions !== undefined && instructions !== '')
    messages.push({ role: 'system', content: instructions });
  messages.push(...inputMessages(body.input));
  const out: JsonObject = { model: init.upstreamModel ?? body.model ?? null, messages };
  if (typeof body.max_output_tokens === 'number') out.max_tokens = body.max_output_tokens;
  for (const field of ['temperature', 'top_p', 'parallel_tool_calls', 'user', 'top_logprobs'] as const) {
    if (body[field] !== undefined && body[field] !== null) out[field] = body[field];
  }
  if (out.top_logprobs !== undefined) out.logprobs = true;
  const user = asString(body.safety_identifier);
  if (out.user === undefined && user !== undefined) out.user = user;
  if (body.tools !== undefined && body.tools !== null) {
    const tools = chatTools(body.tools);
    if (tools.length > 0) out.tools = tools;
  }
  if (body.tool_choice !== undefined && body.tool_choice !== null)
    out.tool_choice = chatToolChoice(body.tool_choice);
  const format = body.text === undefined ? undefined : responseFormat(body.text);
  if (format) out.response_format = format;
  const effort = isObject(body.reasoning) ? asString(body.reasoning.effort) : undefined;
  if (effort !== undefined) out.reasoning_effort = effort;
  return streamWithUsage(out, body.stream === true);
}

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
  let request: JsonObject = {};
  const base = safeId(init.requestId) || 'gateway';
  let responseId = `resp_${base}`;
  let seq = 0;
  let started = false;
  let finished = false;
  const done: JsonObject[] = [];
  let nextIndex = 0;
  let text: OpenItem | undefined;
  let reasoning: OpenItem | undefined;
  const calls = new Map<number, OpenItem>();
  let finish: JsonValue | undefined;
  let usage: JsonObject | null = null;

  const event = (type: string, fields: JsonObject): SseOut => ({
    event: type,
    data: JSON.stringify({ type, sequence_number: seq++, ...fields }),
  });

  function start(out: SseOut[]): void {
    if (started) return;
    started = true;
    const response = envelope(request, init, responseId, init.model);
    out.push(event('response.created', { response }), event('response.in_progress', { response }));
  }

  function openItem(
    out: SseOut[],
    kind: OpenItem['kind'],
    id: string,
    extra: Partial<OpenItem> = {},
  ): OpenItem {
    const item: OpenItem = { index: nextIndex++, id, kind, text: '', ...extra };
    let added: JsonObject;
    if (kind === 'message')
      added = { type: 'message', id, status: 'in_progress', role: 'assistant', content: [] };
    else if (kind === 'reasoning') added = { type: 'reasoning', id, summary: [] };
    else added = functionItem(item.callId ?? '', item.name ?? '', '', 'in_progress');
    out.push(event('response.output_item.added', { output_index: item.index, item: added }));
    const at = { item_id: id, output_index: item.index };
    if (kind === 'message') {
      const part = { type: 'output_text', text: '', annotations: [], logprobs: [] };
      out.push(event('response.content_part.added', { ...at, content_index: 0, part }));
    } else if (kind === 'reasoning') {
      out.push(
        event('response.reasoning_summary_part.added', {
          ...at,
          summary_index: 0,
          part: { type: 'summary_text', text: '' },
        }),
      );
    }
    return item;
  }

  function closeItem(out: SseOut[], item: OpenItem): void {
    const at = { item_id: item.id, output_index: item.index };
    let full: JsonObject;
    if (item.kind === 'message') {
      out.push(
        event('response.output_text.done', { ...at, content_index: 0, text: item.text, logprobs: [] }),
      );
      const part = { type: 'output_text', text: item.text, annotations: [], logprobs: [] };
      out.push(event('response.content_part.done', { ...at, content_index: 0, part }));
      full = messageItem(item.id, item.text, 'completed');
    } else if (item.kind === 'reasoning') {
      out.push(event('response.reasoning_summary_text.done', { ...at, summary_index: 0, text: item.text }));
      out.push(
        event('response.reasoning_summary_part.done', {
          ...at,
          summary_index: 0,
          part: { type: 'summary_text', text: item.text },
        }),
      );
      full = reasoningItem(item.id, item.text);
    } else {
      out.push(
        event('response.function_call_arguments.done', {
          ...at,
          name: item.name ?? '',
          arguments: item.text,
        }),
      );
      full = functionItem(item.callId ?? '', item.name ?? '', item.text, 'completed');
    }
    out.push(event('response.output_item.done', { output_index: item.index, item: full }));
    done[item.index] = full;
  }

  /** Adds to an open item's text and emits the delta event of its kind. */
  function appendDelta(out: SseOut[], item: OpenItem, type: string, fields: JsonObject, delta: string): void {
    item.text += delta;
    out.push(event(type, { item_id: item.id, output_index: item.index, ...fields, delta }));
  }

  function closeOne(out: SseOut[], item: OpenItem): undefined {
    closeItem(out, item);
    return undefined;
  }

  function closeAll(out: SseOut[]): void {
    const open = [reasoning, text, ...calls.values()].filter((i): i is OpenItem => i !== undefined);
    open.sort((a, b) => a.index - b.index);
    for (const item of open) closeItem(out, item);
    reasoning = undefined;
    text = undefined;
    calls.clear();
  }

  function complete(): SseOut[] {
    if (finished) return [];
    finished = true;
    const out: SseOut[] = [];
    start(out);
    closeAll(out);
    const { status, incomplete } = outcome(finish);
    const response = {
      ...envelope(request, init, responseId, init.model),
      status,
      incomplete_details: incomplete,
      output: done.filter((item) => item !== undefined),
      usage,
    };
    out.push(event(status === 'completed' ? 'response.completed' : 'response.incomplete', { response }));
    return out;
  }

  function fail(message: string, code: string, errorType: string): SseOut[] {
    if (finished) return [];
    finished = true;
    const text = `${message} (request id: ${init.requestId})`;
    const error = { type: errorType, code, message: text, param: null };
    return [event('error', { code, message: text, param: null, error })];
  }

  function onChunk(chunk: JsonObject): SseOut[] {
    const out: SseOut[] = [];
    if (isObject(chunk.error)) {
      const code = asString(chunk.error.code) ?? asString(chunk.error.type) ?? 'server_error';
      return fail(
        asString(chunk.error.message) ?? 'upstream stream error',
        code,
        asString(chunk.error.type) ?? 'server_error',
      );
    }
    if (!started && typeof chunk.id === 'string') responseId = `resp_${safeId(chunk.id) || base}`;
    start(out);
    if (isObject(chunk.usage)) usage = responsesUsage(chunk.usage);
    const choice = Array.isArray(chunk.choices) && isObject(chunk.choices[0]) ? chunk.choices[0] : undefined;
    const delta = choice && isObject(choice.delta) ? choice.delta : undefined;
    const thought = delta ? (asString(delta.reasoning_content) ?? asString(delta.reasoning)) : undefined;
    if (thought) {
      reasoning ??= openItem(out, 'reasoning', `rs_${base}_${nextIndex}`);
      appendDelta(out, reasoning, 'response.reasoning_summary_text.delta', { summary_index: 0 }, thought);
    }
    const content = delta ? asString(delta.content) : undefined;
    if (content) {
      // Items follow each other: reasoning is done once the answer starts.
      if (reasoning) reasoning = closeOne(out, reasoning);
      text ??= openItem(out, 'message', `msg_${base}_${nextIndex}`);
      appendDelta(out, text, 'response.output_text.delta', { content_index: 0, logprobs: [] }, content);
    }
    const toolCalls = delta && Array.isArray(delta.tool_calls) ? delta.tool_calls : [];
    for (const call of toolCalls) {
      if (!isObject(call)) continue;
      const index = typeof call.index === 'number' ? call.index : 0;
      const fn = isObject(call.function) ? call.function : {};
      let item = calls.get(index);
      if (item === undefined) {
        if (reasoning) reasoning = closeOne(out, reasoning);
        if (text) text = closeOne(out, text);
        const callId = asString(call.id) ?? `call_${base}_${index}`;
        item = openItem(out, 'function_call', `fc_${safeId(callId)}`, {
          callId,
          name: asString(fn.name) ?? '',
        });
        calls.set(index, item);
      }
      const args = asString(fn.arguments);
      if (args) appendDelta(out, item, 'response.function_call_arguments.delta', {}, args);
    }
    if (choice && typeof choice.finish_reason === 'string') finish = choice.finish_reason;
    return out;
  }

  return {
    request(body) {
      request = body;
      return translateRequest(body, init);
    },

    response(body) {
      if (!isObject(body)) return body;
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
        ...envelope(request, init, id, init.model),
        status,
        incomplete_details: incomplete,
        output,
        usage: responsesUsage(body.usage),
      };
    },

    streamEvent(_event, data) {
      if (finished) return [];
      if (data.trim() === '[DONE]') return complete();
      const chunk = parseJsonObject(data);
      return chunk ? onChunk(chunk) : [];
    },

    streamEnd(completeStream) {
      if (finished) return [];
      // Some OpenAI-compatible servers end without [DONE]; a finish reason is enough to close cleanly.
      if (completeStream && finish !== undefined) return complete();
      return fail('upstream stream ended before the response was complete', 'server_error', 'server_error');
    },

    error(status, body) {
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
    },
  };
}

export const responsesToOpenai = defineTranslator('responses_to_openai', createResponsesToOpenai);
