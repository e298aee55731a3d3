// Over 400 lines: one direction's request, reply, stream and error mappings share per-request state.
// A completion-style (chat.completions) client talking to a Gemini generateContent upstream. The provider
// file sets the upstream path (`models/<m>:generateContent` or `:streamGenerateContent?alt=sse`), so the
// body carries neither `model` nor `stream`.
//
// Tool-call ids: Gemini function calls usually carry no id, so replies number them `call_<n>` per
// response. A later request finds the function name of a tool message by walking the history in order,
// so an id reused by a later turn resolves to the most recent assistant turn, as the client meant.
// Gemini 3 thought signatures ride along in `tool_calls[].extra_content.google.thought_signature` (the
// field Google's own OpenAI-compatible endpoint uses) and go back as `thoughtSignature` on the part.

import { asString, isObject } from '../../../common/json-guards.ts';
import type { JsonObject, JsonValue, SseOut } from '../../../common/types.ts';
import type { Translator, TranslatorInit } from '../../translators/types.ts';
import { defineTranslator, TranslationError } from '../../translators/types.ts';
import { byEffort, CHAT_FIELDS, IGNORABLE_CHAT_FIELDS, refuseUnservable } from '../openai/request-fields.ts';
import {
  asArray,
  asNumber,
  field,
  jsonSchemaToGemini,
  openaiErrorFromGemini,
  parseJson,
  usageFromGemini,
} from './translator-shared.ts';

// ---------------------------------------------------------------------------------------------------
// Request

interface GeminiContent {
  role: 'user' | 'model';
  parts: JsonObject[];
}

const IMAGE_MIME_BY_EXTENSION: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  heic: 'image/heic',
  heif: 'image/heif',
  bmp: 'image/bmp',
};

/** `data:<mime>[;base64],<payload>` as Gemini inline data (base64 always). */
function inlineDataFromDataUrl(url: string, path: string): JsonObject {
  const match = /^data:([^;,]*)((?:;[^;,]*)*),(.*)$/s.exec(url);
  if (!match) throw new TranslationError('malformed data URL', path);
  const mimeType = match[1] || 'application/octet-stream';
  // Every group of the pattern takes part in any match, so each is a string (maybe empty).
  const params = match[2]!;
  const payload = match[3]!;
  const isBase64 = params.split(';').includes('base64');
  if (isBase64) return { inlineData: { mimeType, data: payload } };
  let text: string;
  try {
    text = decodeURIComponent(payload);
  } catch {
    throw new TranslationError('malformed data URL', path);
  }
  return { inlineData: { mimeType, data: Buffer.from(text, 'utf8').toString('base64') } };
}

function imagePart(value: JsonValue | undefined, path: string): JsonObject {
  const url = isObject(value) ? asString(value.url) : asString(value);
  if (url === undefined) throw new TranslationError('image_url.url must be a string', path);
  if (url.startsWith('data:')) return inlineDataFromDataUrl(url, path);
  const parsed = URL.parse(url);
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
    throw new TranslationError('image_url must be a data URL or an http(s) URL', path);
  }
  const extension = /\.([a-z0-9]+)$/i.exec(parsed.pathname)?.[1]?.toLowerCase();
  const mimeType = (extension && IMAGE_MIME_BY_EXTENSION[extension]) || 'image/*';
  return { fileData: { fileUri: url, mimeType } };
}

function audioPart(value: JsonValue | undefined, path: string): JsonObject {
  if (!isObject(value) || typeof value.data !== 'string') {
    throw new TranslationError('input_audio.data must be a base64 string', path);
  }
  const format = asString(value.format) ?? 'wav';
  const mimeType = format === 'mp3' ? 'audio/mpeg' : `audio/${format}`;
  return { inlineData: { mimeType, data: value.data } };
}

function filePart(value: JsonValue | undefined, path: string): JsonObject {
  const data = isObject(value) ? asString(value.file_data) : undefined;
  if (data === undefined) throw new TranslationError('only inline file_data is supported for files', path);
  return data.startsWith('data:')
    ? inlineDataFromDataUrl(data, path)
    : { inlineData: { mimeType: 'application/pdf', data } };
}

/** Message content (string or content-part array) as Gemini parts; empty text is dropped (Gemini rejects it). */
function contentParts(content: JsonValue | undefined, path: string, textOnly: boolean): JsonObject[] {
  if (content === undefined || content === null) return [];
  if (typeof content === 'string') return content === '' ? [] : [{ text: content }];
  if (!Array.isArray(content)) throw new TranslationError('content must be a string or an array', path);
  const parts: JsonObject[] = [];
  content.forEach((part, index) => {
    const partPath = `${path}[${index}]`;
    if (!isObject(part)) throw new TranslationError('content part must be an object', partPath);
    const type = asString(part.type);
    if (type === 'text' || type === 'refusal') {
      const text = asString(part.text) ?? asString(part.refusal) ?? '';
      if (text !== '') parts.push({ text });
      return;
    }
    if (textOnly) throw new TranslationError(`content part type "${type}" is not allowed here`, partPath);
    if (type === 'image_url') parts.push(imagePart(part.image_url, `${partPath}.image_url`));
    else if (type === 'input_audio') parts.push(audioPart(part.input_audio, `${partPath}.input_audio`));
    else if (type === 'file') parts.push(filePart(part.file, `${partPath}.file`));
    else throw new TranslationError(`content part type "${type}" is not supported by Gemini`, partPath);
  });
  return parts;
}

function textOf(content: JsonValue | undefined, path: string): string {
  return contentParts(content, path, true)
    .map((part) => part.text)
    .join('');
}

function parseArguments(text: string | undefined, path: string): JsonObject {
  if (text === undefined || text.trim() === '') return {};
  const args = parseJson(text);
  if (!isObject(args)) throw new TranslationError('function arguments must be a JSON object', path);
  return args;
}

/** Gemini wants an object as the function response; tool output is often plain text. */
function functionResponseBody(text: string): JsonObject {
  const parsed = parseJson(text);
  if (isObject(parsed)) return parsed;
  return { output: parsed === undefined ? text : parsed };
}

function thoughtSignatureOf(toolCall: JsonObject): string | undefined {
  const extra = toolCall.extra_content;
  const google = isObject(extra) ? extra.google : undefined;
  return isObject(google) ? asString(google.thought_signature) : undefined;
}

function assistantParts(message: JsonObject, path: string, toolNames: Map<string, string>): JsonObject[] {
  const parts = contentParts(message.content, `${path}.content`, true);
  asArray(message.tool_calls).forEach((call, index) => {
    const callPath = `${path}.tool_calls[${index}]`;
    const fn = isObject(call) ? call.function : undefined;
    const name = isObject(fn) ? asString(fn.name) : undefined;
    if (!isObject(call) || !isObject(fn) || name === undefined) {
      throw new TranslationError('tool call needs function.name', callPath);
    }
    const id = asString(call.id);
    if (id !== undefined) toolNames.set(id, name);
    const part: JsonObject = {
      functionCall: { name, args: parseArguments(asString(fn.arguments), `${callPath}.function.arguments`) },
    };
    const signature = thoughtSignatureOf(call);
    if (signature !== undefined) part.thoughtSignature = signature;
    parts.push(part);
  });
  const legacy = message.function_call;
  if (isObject(legacy) && typeof legacy.name === 'string') {
    parts.push({
      functionCall: {
        name: legacy.name,
        args: parseArguments(asString(legacy.arguments), `${path}.function_call.arguments`),
      },
    });
  }
  return parts;
}

function toolResponsePart(message: JsonObject, path: string, toolNames: Map<string, string>): JsonObject {
  const id = asString(message.tool_call_id);
  const name = (id !== undefined ? toolNames.get(id) : undefined) ?? asString(message.name);
  if (name === undefined) {
    throw new TranslationError('tool message does not answer a known tool call id', `${path}.tool_call_id`);
  }
  return {
    functionResponse: { name, response: functionResponseBody(textOf(message.content, `${path}.content`)) },
  };
}

function mapMessages(messages: JsonValue[]): { system: JsonObject[]; contents: GeminiContent[] } {
  const system: JsonObject[] = [];
  const contents: GeminiContent[] = [];
  const toolNames = new Map<string, string>();
  // Gemini wants alternating turns and all answers to one model turn's calls in one user turn, so
  // consecutive messages of the same Gemini role are merged.
  function push(role: 'user' | 'model', parts: JsonObject[]): void {
    if (parts.length === 0) return;
    const last = contents.at(-1);
    if (last?.role === role) last.parts.push(...parts);
    else contents.push({ role, parts });
  }
  messages.forEach((message, index) => {
    const path = `messages[${index}]`;
    if (!isObject(message)) throw new TranslationError('message must be an object', path);
    const role = asString(message.role);
    switch (role) {
      case 'system':
      case 'developer':
        system.push(...contentParts(message.content, `${path}.content`, true));
        break;
      case 'user':
        push('user', contentParts(message.content, `${path}.content`, false));
        break;
      case 'assistant':
        push('model', assistantParts(message, path, toolNames));
        break;
      case 'tool':
      case 'function':
        push('user', [toolResponsePart(message, path, toolNames)]);
        break;
      default:
        throw new TranslationError(`unsupported message role "${role}"`, `${path}.role`);
    }
  });
  return { system, contents };
}

function mapTools(tools: JsonValue[]): JsonObject[] {
  const declarations = tools.map((tool, index): JsonObject => {
    const path = `tools[${index}]`;
    if (!isObject(tool) || tool.type !== 'function' || !isObject(tool.function)) {
      throw new TranslationError('only function tools are supported by Gemini', path);
    }
    const fn = tool.function;
    const name = asString(fn.name);
    if (name === undefined) throw new TranslationError('function.name is required', `${path}.function.name`);
    const declaration: JsonObject = { name };
    if (typeof fn.description === 'string') declaration.description = fn.description;
    if (isObject(fn.parameters)) {
      const parameters = jsonSchemaToGemini(fn.parameters);
      // An object schema without properties is rejected ("properties: should be non-empty").
      const properties = parameters.properties;
      if (!isObject(properties) || Object.keys(properties).length > 0) declaration.parameters = parameters;
    }
    return declaration;
  });
  return declarations.length > 0 ? [{ functionDeclarations: declarations }] : [];
}

function namedFunction(choice: JsonObject): string | undefined {
  return isObject(choice.function) ? asString(choice.function.name) : undefined;
}

function mapToolChoice(choice: JsonValue): JsonObject | undefined {
  if (choice === 'auto') return { functionCallingConfig: { mode: 'AUTO' } };
  if (choice === 'none') return { functionCallingConfig: { mode: 'NONE' } };
  if (choice === 'required') return { functionCallingConfig: { mode: 'ANY' } };
  if (isObject(choice) && choice.type === 'function') {
    const name = namedFunction(choice);
    if (name === undefined)
      throw new TranslationError('tool_choice.function.name is required', 'tool_choice');
    return { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: [name] } };
  }
  if (isObject(choice) && choice.type === 'allowed_tools' && isObject(choice.allowed_tools)) {
    const allowed = choice.allowed_tools;
    if (allowed.mode !== 'required') return { functionCallingConfig: { mode: 'AUTO' } };
    const names = asArray(allowed.tools)
      .filter(isObject)
      .map(namedFunction)
      .filter((name) => name !== undefined);
    return { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: names } };
  }
  throw new TranslationError('unsupported tool_choice', 'tool_choice');
}

/** Thinking budgets for reasoning_effort, the same steps Google's OpenAI-compatible endpoint uses. */
const THINKING_BUDGET: Record<string, number> = { none: 0, ...byEffort([0, 1024, 8192, 24576, 32768]) };

const KNOWN_FIELDS: ReadonlySet<string> = new Set([
  ...CHAT_FIELDS,
  ...IGNORABLE_CHAT_FIELDS,
  'seed',
  'presence_penalty',
  'frequency_penalty',
]);

function mapGenerationConfig(body: JsonObject): JsonObject {
  const config: JsonObject = {};
  const n = asNumber(body.n);
  if (n !== undefined && n !== 1) throw new TranslationError('n must be 1 for Gemini upstreams', 'n');
  const numeric: [string, string][] = [
    ['temperature', 'temperature'],
    ['top_p', 'topP'],
    ['presence_penalty', 'presencePenalty'],
    ['frequency_penalty', 'frequencyPenalty'],
    ['seed', 'seed'],
    ['top_k', 'topK'],
  ];
  for (const [from, to] of numeric) {
    const value = asNumber(body[from]);
    if (value !== undefined) config[to] = value;
  }
  const maxTokens = asNumber(body.max_completion_tokens) ?? asNumber(body.max_tokens);
  if (maxTokens !== undefined) config.maxOutputTokens = maxTokens;
  if (typeof body.stop === 'string') config.stopSequences = [body.stop];
  else if (Array.isArray(body.stop))
    config.stopSequences = body.stop.filter((stop) => typeof stop === 'string');
  const format = body.response_format;
  if (isObject(format) && format.type === 'json_object') {
    config.responseMimeType = 'application/json';
  } else if (isObject(format) && format.type === 'json_schema') {
    config.responseMimeType = 'application/json';
    const schema = isObject(format.json_schema) ? format.json_schema.schema : undefined;
    if (isObject(schema)) config.responseSchema = jsonSchemaToGemini(schema);
  }
  const effort = asString(body.reasoning_effort);
  const budget = effort === undefined ? undefined : THINKING_BUDGET[effort];
  if (effort !== undefined && budget === undefined) {
    throw new TranslationError(
      `reasoning_effort ${JSON.stringify(effort)} is not supported`,
      'reasoning_effort',
    );
  }
  // Thought summaries are asked for so the reasoning reaches the client as reasoning_content.
  if (budget !== undefined)
    config.thinkingConfig =
      budget > 0 ? { thinkingBudget: budget, includeThoughts: true } : { thinkingBudget: 0 };
  return config;
}

function mapRequest(body: JsonObject): JsonObject {
  refuseUnservable(body, KNOWN_FIELDS, 'for Gemini upstreams');
  if (!Array.isArray(body.messages)) throw new TranslationError('messages must be an array', 'messages');
  const { system, contents } = mapMessages(body.messages);
  const out: JsonObject = { contents: contents as unknown as JsonValue[] };
  if (system.length > 0) out.systemInstruction = { parts: system };
  if (Array.isArray(body.tools)) {
    const tools = mapTools(body.tools);
    if (tools.length > 0) out.tools = tools;
  }
  if (body.tool_choice !== undefined && body.tool_choice !== null) {
    const toolConfig = mapToolChoice(body.tool_choice);
    if (toolConfig) out.toolConfig = toolConfig;
  }
  const generationConfig = mapGenerationConfig(body);
  if (Object.keys(generationConfig).length > 0) out.generationConfig = generationConfig;
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Response

const FILTER_REASONS = new Set([
  'SAFETY',
  'RECITATION',
  'BLOCKLIST',
  'PROHIBITED_CONTENT',
  'SPII',
  'IMAGE_SAFETY',
  'IMAGE_PROHIBITED_CONTENT',
  'IMAGE_RECITATION',
]);

function finishReasonOf(reason: string, sawToolCall: boolean): string {
  if (sawToolCall) return 'tool_calls';
  if (reason === 'MAX_TOKENS') return 'length';
  if (FILTER_REASONS.has(reason)) return 'content_filter';
  return 'stop';
}

function openaiUsage(meta: JsonObject): JsonObject {
  const usage = usageFromGemini(meta);
  const out: JsonObject = {
    prompt_tokens: usage.inputTokens,
    completion_tokens: usage.outputTokens,
    total_tokens: usage.totalTokens,
  };
  if (usage.cacheReadTokens !== undefined)
    out.prompt_tokens_details = { cached_tokens: usage.cacheReadTokens };
  if (usage.reasoningTokens !== undefined) {
    out.completion_tokens_details = { reasoning_tokens: usage.reasoningTokens };
  }
  return out;
}

interface FunctionCall {
  readonly call: JsonObject;
  /** Gemini 3 thought signature of the part, to be echoed back on the next turn. */
  readonly signature: string | undefined;
}

/** Visible text, thought summaries (the pivot's reasoning_content) and function calls of one candidate. */
function candidateOutput(candidate: JsonObject): {
  text: string | undefined;
  thoughts: string | undefined;
  calls: FunctionCall[];
} {
  const content = candidate.content;
  let text: string | undefined;
  let thoughts: string | undefined;
  const calls: FunctionCall[] = [];
  for (const part of isObject(content) ? asArray(content.parts) : []) {
    if (!isObject(part)) continue;
    if (part.thought === true) {
      if (typeof part.text === 'string') thoughts = (thoughts ?? '') + part.text;
      continue;
    }
    if (typeof part.text === 'string') text = (text ?? '') + part.text;
    const call = field(part, 'functionCall');
    if (isObject(call)) calls.push({ call, signature: asString(field(part, 'thoughtSignature')) });
  }
  return { text, thoughts, calls };
}

function toolCall({ call, signature }: FunctionCall, index: number, withIndex: boolean): JsonObject {
  const out: JsonObject = withIndex ? { index } : {};
  out.id = `call_${index}`;
  out.type = 'function';
  out.function = { name: asString(call.name) ?? '', arguments: JSON.stringify(call.args ?? {}) };
  if (signature !== undefined) out.extra_content = { google: { thought_signature: signature } };
  return out;
}

function firstCandidate(body: JsonObject): JsonObject | undefined {
  const candidates = asArray(body.candidates);
  return isObject(candidates[0]) ? candidates[0] : undefined;
}

function blockReasonOf(body: JsonObject): string | undefined {
  const feedback = field(body, 'promptFeedback');
  return isObject(feedback) ? asString(field(feedback, 'blockReason')) : undefined;
}

// ---------------------------------------------------------------------------------------------------
// Translator

function createOpenaiToGemini(init: TranslatorInit): Translator {
  let includeUsage = false;
  let lastUsage: JsonObject | undefined;
  // Stream state: a handful of flags and counters, never the text.
  let chunkId: string | undefined;
  let roleSent = false;
  let toolCallCount = 0;
  let finishSent = false;
  let failed = false;

  function rememberUsage(body: JsonObject): void {
    const meta = field(body, 'usageMetadata');
    if (isObject(meta)) lastUsage = meta;
  }

  function modelName(body: JsonObject): string {
    return init.model ?? asString(field(body, 'modelVersion')) ?? init.upstreamModel ?? 'gemini';
  }

  function response(body: JsonValue): JsonValue {
    if (!isObject(body)) throw new TranslationError('upstream reply is not a JSON object');
    rememberUsage(body);
    const candidate = firstCandidate(body);
    const { text, thoughts, calls } = candidate
      ? candidateOutput(candidate)
      : { text: undefined, thoughts: undefined, calls: [] };
    const message: JsonObject = { role: 'assistant', content: text ?? null, refusal: null };
    if (thoughts !== undefined) message.reasoning_content = thoughts;
    if (calls.length > 0) message.tool_calls = calls.map((call, index) => toolCall(call, index, false));
    // No candidate at all means the prompt itself was blocked (promptFeedback.blockReason).
    const blocked = candidate === undefined && blockReasonOf(body) !== undefined;
    const reason = (candidate && asString(field(candidate, 'finishReason'))) ?? (blocked ? 'SAFETY' : 'STOP');
    const responseId = asString(field(body, 'responseId'));
    const out: JsonObject = {
      id: `chatcmpl-${responseId ?? init.requestId}`,
      object: 'chat.completion',
      created: init.createdAt,
      model: modelName(body),
      choices: [
        { index: 0, message, logprobs: null, finish_reason: finishReasonOf(reason, calls.length > 0) },
      ],
    };
    if (lastUsage) out.usage = openaiUsage(lastUsage);
    return out;
  }

  function chunk(model: string, delta: JsonObject, finishReason: string | null): SseOut {
    return {
      data: JSON.stringify({
        id: chunkId,
        object: 'chat.completion.chunk',
        created: init.createdAt,
        model,
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
      }),
    };
  }

  function streamEvent(_event: string | undefined, data: string): SseOut[] {
    if (failed || finishSent) {
      // After the finish chunk only usage updates matter.
      const late = parseJson(data);
      if (!failed && isObject(late)) rememberUsage(late);
      return [];
    }
    const body = parseJson(data);
    if (!isObject(body)) return [];
    if (isObject(body.error)) {
      failed = true;
      return [{ data: JSON.stringify(openaiErrorFromGemini(500, body, init.requestId)) }];
    }
    rememberUsage(body);
    chunkId ??= `chatcmpl-${asString(field(body, 'responseId')) ?? init.requestId}`;
    const model = modelName(body);
    const out: SseOut[] = [];
    if (!roleSent) {
      roleSent = true;
      out.push(chunk(model, { role: 'assistant', content: '', refusal: null }, null));
    }
    const candidate = firstCandidate(body);
    if (!candidate) {
      if (blockReasonOf(body) !== undefined) {
        finishSent = true;
        out.push(chunk(model, {}, 'content_filter'));
      }
      return out;
    }
    const { text, thoughts, calls } = candidateOutput(candidate);
    if (thoughts) out.push(chunk(model, { reasoning_content: thoughts }, null));
    if (text) out.push(chunk(model, { content: text }, null));
    if (calls.length > 0) {
      const deltas = calls.map((call) => toolCall(call, toolCallCount++, true));
      out.push(chunk(model, { tool_calls: deltas }, null));
    }
    const reason = asString(field(candidate, 'finishReason'));
    if (reason !== undefined) {
      finishSent = true;
      out.push(chunk(model, {}, finishReasonOf(reason, toolCallCount > 0)));
    }
    return out;
  }

  function streamEnd(complete: boolean): SseOut[] {
    if (failed) return [];
    if (!complete) {
      failed = true;
      const error = {
        message: `upstream stream ended before completion (request id: ${init.requestId})`,
        type: 'server_error',
        code: 'upstream_stream_incomplete',
      };
      return [{ data: JSON.stringify({ error }) }];
    }
    const model = init.model ?? init.upstreamModel ?? 'gemini';
    chunkId ??= `chatcmpl-${init.requestId}`;
    const out: SseOut[] = [];
    if (!finishSent) {
      finishSent = true;
      if (!roleSent) out.push(chunk(model, { role: 'assistant', content: '', refusal: null }, null));
      out.push(chunk(model, {}, toolCallCount > 0 ? 'tool_calls' : 'stop'));
    }
    if (includeUsage && lastUsage) {
      const usageChunk = {
        id: chunkId,
        object: 'chat.completion.chunk',
        created: init.createdAt,
        model,
        choices: [],
        usage: openaiUsage(lastUsage),
      };
      out.push({ data: JSON.stringify(usageChunk) });
    }
    out.push({ data: '[DONE]' });
    return out;
  }

  return {
    request(body: JsonObject): JsonObject {
      const options = body.stream_options;
      includeUsage = isObject(options) && options.include_usage === true;
      return mapRequest(body);
    },
    response,
    streamEvent,
    streamEnd,
    error: (status, body) => openaiErrorFromGemini(status, body, init.requestId),
  };
}

export const openaiToGemini = defineTranslator('openai_to_gemini', createOpenaiToGemini);
