// Over 400 lines: one direction's request, reply, stream and error mappings share per-request state.
// A Google-SDK client (native.generateContent / native.streamGenerateContent) talking to an
// OpenAI-compatible /v1/chat/completions upstream.
//
// Tool-call ids: Gemini function calls and responses are paired by name and order (ids are optional),
// while chat.completions pairs them by id. The request mapping gives each functionCall its own id (or
// a generated `call_<n>`) and hands the ids to functionResponse parts of the same name, first come
// first served. Streamed tool-call argument fragments are the one thing accumulated here: Gemini sends
// a function call as one whole part, so each call's arguments are held until the choice finishes.

import { asString, isObject } from '../../../common/json-guards.ts';
import type { JsonObject, JsonValue, SseOut } from '../../../common/types.ts';
import { refuseUnknownFields } from '../../translators/json.ts';
import type { Translator, TranslatorInit } from '../../translators/types.ts';
import { defineTranslator, TranslationError } from '../../translators/types.ts';
import { streamWithUsage } from '../openai/request-fields.ts';
import {
  asArray,
  asNumber,
  field,
  geminiErrorFromOpenai,
  geminiSchemaToJsonSchema,
  parseJson,
  usageFromOpenai,
} from './translator-shared.ts';

// ---------------------------------------------------------------------------------------------------
// Request

/** Per-request pairing of function calls with their responses (see the file comment). */
class CallIds {
  #next = 0;
  readonly #pending = new Map<string, string[]>();

  forCall(name: string, id: string | undefined): string {
    const callId = id ?? `call_${this.#next++}`;
    const queue = this.#pending.get(name) ?? [];
    queue.push(callId);
    this.#pending.set(name, queue);
    return callId;
  }

  forResponse(name: string, id: string | undefined): string {
    const queue = this.#pending.get(name) ?? [];
    if (id !== undefined) {
      const at = queue.indexOf(id);
      if (at >= 0) queue.splice(at, 1);
      return id;
    }
    return queue.shift() ?? `call_${this.#next++}`;
  }
}

const AUDIO_FORMATS: Record<string, string> = {
  'audio/wav': 'wav',
  'audio/x-wav': 'wav',
  'audio/wave': 'wav',
  'audio/mpeg': 'mp3',
  'audio/mp3': 'mp3',
};

function inlineDataPart(data: JsonObject, path: string): JsonObject {
  const mimeType = asString(field(data, 'mimeType')) ?? '';
  const payload = asString(data.data);
  if (payload === undefined) throw new TranslationError('inlineData.data must be a base64 string', path);
  if (mimeType.startsWith('image/')) {
    return { type: 'image_url', image_url: { url: `data:${mimeType};base64,${payload}` } };
  }
  const audioFormat = AUDIO_FORMATS[mimeType];
  if (audioFormat !== undefined)
    return { type: 'input_audio', input_audio: { data: payload, format: audioFormat } };
  if (mimeType.startsWith('text/'))
    return { type: 'text', text: Buffer.from(payload, 'base64').toString('utf8') };
  if (mimeType === 'application/pdf') {
    const filename = asString(field(data, 'displayName')) ?? 'document.pdf';
    return { type: 'file', file: { filename, file_data: `data:${mimeType};base64,${payload}` } };
  }
  throw new TranslationError(`inline data of type "${mimeType}" is not supported by this upstream`, path);
}

function fileDataPart(data: JsonObject, path: string): JsonObject {
  const uri = asString(field(data, 'fileUri'));
  const mimeType = asString(field(data, 'mimeType'));
  if (uri === undefined) throw new TranslationError('fileData.fileUri must be a string', path);
  const isImage = mimeType === undefined || mimeType.startsWith('image/');
  if (!isImage || !/^https?:\/\//i.test(uri)) {
    throw new TranslationError('only http(s) image fileData is supported by this upstream', path);
  }
  return { type: 'image_url', image_url: { url: uri } };
}

interface TurnParts {
  content: JsonObject[];
  toolCalls: JsonObject[];
  toolMessages: JsonObject[];
  reasoning: string;
}

function turnParts(parts: JsonValue[], path: string, ids: CallIds): TurnParts {
  const turn: TurnParts = { content: [], toolCalls: [], toolMessages: [], reasoning: '' };
  parts.forEach((part, index) => {
    const partPath = `${path}.parts[${index}]`;
    if (!isObject(part)) throw new TranslationError('part must be an object', partPath);
    const inline = field(part, 'inlineData');
    const file = field(part, 'fileData');
    const call = field(part, 'functionCall');
    const response = field(part, 'functionResponse');
    if (typeof part.text === 'string') {
      // Thought summaries from an earlier turn are context for Gemini only; other upstreams get none.
      if (part.thought !== true && part.text !== '') turn.content.push({ type: 'text', text: part.text });
    } else if (isObject(inline)) {
      turn.content.push(inlineDataPart(inline, `${partPath}.inlineData`));
    } else if (isObject(file)) {
      turn.content.push(fileDataPart(file, `${partPath}.fileData`));
    } else if (isObject(call)) {
      const name = asString(call.name);
      if (name === undefined) throw new TranslationError('functionCall.name is required', partPath);
      turn.toolCalls.push({
        id: ids.forCall(name, asString(call.id)),
        type: 'function',
        function: { name, arguments: JSON.stringify(call.args ?? {}) },
      });
    } else if (isObject(response)) {
      const name = asString(response.name);
      if (name === undefined) throw new TranslationError('functionResponse.name is required', partPath);
      turn.toolMessages.push({
        role: 'tool',
        tool_call_id: ids.forResponse(name, asString(response.id)),
        content: JSON.stringify(response.response ?? {}),
      });
    } else if (part.thoughtSignature === undefined && part.thought_signature === undefined) {
      throw new TranslationError('part type is not supported by this upstream', partPath);
    }
  });
  return turn;
}

/** A single text part goes as a plain string: the widest-supported form across compatible upstreams. */
function messageContent(parts: JsonObject[]): JsonValue {
  const only = parts[0];
  if (parts.length === 1 && only?.type === 'text') return only.text ?? '';
  return parts;
}

function systemText(instruction: JsonValue | undefined): string | undefined {
  if (typeof instruction === 'string') return instruction;
  if (!isObject(instruction)) return undefined;
  const texts = asArray(instruction.parts)
    .filter(isObject)
    .map((part) => asString(part.text))
    .filter((text) => text !== undefined);
  return texts.length > 0 ? texts.join('\n') : undefined;
}

function mapContents(body: JsonObject): JsonObject[] {
  const messages: JsonObject[] = [];
  const system = systemText(field(body, 'systemInstruction'));
  if (system !== undefined) messages.push({ role: 'system', content: system });
  const ids = new CallIds();
  const contents = body.contents;
  if (!Array.isArray(contents)) throw new TranslationError('contents must be an array', 'contents');
  contents.forEach((content, index) => {
    const path = `contents[${index}]`;
    if (!isObject(content)) throw new TranslationError('content must be an object', path);
    const role = asString(content.role) ?? 'user';
    const turn = turnParts(asArray(content.parts), path, ids);
    if (role === 'model') {
      if (turn.toolMessages.length > 0) {
        throw new TranslationError('functionResponse parts belong in user turns', path);
      }
      const texts = turn.content.filter((part) => part.type === 'text').map((part) => part.text);
      if (texts.length < turn.content.length)
        throw new TranslationError('model turns may hold only text', path);
      const message: JsonObject = { role: 'assistant', content: texts.length > 0 ? texts.join('') : null };
      if (turn.toolCalls.length > 0) message.tool_calls = turn.toolCalls;
      if (texts.length > 0 || turn.toolCalls.length > 0) messages.push(message);
    } else if (role === 'user' || role === 'function') {
      if (turn.toolCalls.length > 0)
        throw new TranslationError('functionCall parts belong in model turns', path);
      // Tool answers must directly follow the assistant turn that called them.
      messages.push(...turn.toolMessages);
      if (turn.content.length > 0) messages.push({ role: 'user', content: messageContent(turn.content) });
    } else {
      throw new TranslationError(`unsupported role "${role}"`, `${path}.role`);
    }
  });
  return messages;
}

function mapTools(tools: JsonValue[]): JsonObject[] {
  const out: JsonObject[] = [];
  tools.forEach((tool, index) => {
    const path = `tools[${index}]`;
    if (!isObject(tool)) throw new TranslationError('tool must be an object', path);
    const declarations = field(tool, 'functionDeclarations');
    const others = Object.keys(tool).filter(
      (key) => key !== 'functionDeclarations' && key !== 'function_declarations',
    );
    if (others.length > 0)
      throw new TranslationError(`tool "${others[0]}" is not supported by this upstream`, path);
    asArray(declarations).forEach((declaration, at) => {
      const declarationPath = `${path}.functionDeclarations[${at}]`;
      if (!isObject(declaration) || typeof declaration.name !== 'string') {
        throw new TranslationError('function declaration needs a name', declarationPath);
      }
      const fn: JsonObject = { name: declaration.name };
      if (typeof declaration.description === 'string') fn.description = declaration.description;
      const jsonSchema = field(declaration, 'parametersJsonSchema');
      const schema = field(declaration, 'parameters');
      if (isObject(jsonSchema)) fn.parameters = jsonSchema;
      else if (isObject(schema)) fn.parameters = geminiSchemaToJsonSchema(schema);
      else fn.parameters = { type: 'object', properties: {} };
      out.push({ type: 'function', function: fn });
    });
  });
  return out;
}

/** toolConfig as tool_choice; ANY with several allowed names narrows the tool list instead. */
function applyToolConfig(toolConfig: JsonValue | undefined, out: JsonObject): void {
  const calling = isObject(toolConfig) ? field(toolConfig, 'functionCallingConfig') : undefined;
  if (!isObject(calling)) return;
  const mode = asString(calling.mode);
  if (mode === 'NONE') out.tool_choice = 'none';
  else if (mode === 'AUTO' || mode === 'VALIDATED') out.tool_choice = 'auto';
  if (mode !== 'ANY') return;
  const allowed = asArray(field(calling, 'allowedFunctionNames')).filter((name) => typeof name === 'string');
  if (allowed.length === 1) {
    out.tool_choice = { type: 'function', function: { name: allowed[0]! } };
    return;
  }
  out.tool_choice = 'required';
  if (allowed.length > 1 && Array.isArray(out.tools)) {
    out.tools = out.tools.filter(
      (tool) =>
        isObject(tool) && isObject(tool.function) && allowed.includes(asString(tool.function.name) ?? ''),
    );
  }
}

function applyGenerationConfig(config: JsonObject, out: JsonObject): void {
  const numeric: [string, string][] = [
    ['temperature', 'temperature'],
    ['topP', 'top_p'],
    ['maxOutputTokens', 'max_tokens'],
    ['candidateCount', 'n'],
    ['presencePenalty', 'presence_penalty'],
    ['frequencyPenalty', 'frequency_penalty'],
    ['seed', 'seed'],
    ['topK', 'top_k'],
  ];
  for (const [from, to] of numeric) {
    const value = asNumber(field(config, from));
    if (value !== undefined) out[to] = value;
  }
  const stop = asArray(field(config, 'stopSequences')).filter((entry) => typeof entry === 'string');
  if (stop.length > 0) out.stop = stop;
  const jsonSchema = field(config, 'responseJsonSchema');
  const schema = field(config, 'responseSchema');
  if (isObject(jsonSchema)) {
    out.response_format = { type: 'json_schema', json_schema: { name: 'response', schema: jsonSchema } };
  } else if (isObject(schema)) {
    out.response_format = {
      type: 'json_schema',
      json_schema: { name: 'response', schema: geminiSchemaToJsonSchema(schema) },
    };
  } else if (field(config, 'responseMimeType') === 'application/json') {
    out.response_format = { type: 'json_object' };
  }
}

// ---------------------------------------------------------------------------------------------------
// Response

function finishReasonOf(reason: string): string {
  switch (reason) {
    case 'length':
      return 'MAX_TOKENS';
    case 'content_filter':
      return 'SAFETY';
    default:
      // stop, tool_calls and function_call: Gemini reports STOP for a turn that ends in function calls.
      return 'STOP';
  }
}

function usageMetadata(usage: JsonObject): JsonObject {
  const normalized = usageFromOpenai(usage);
  // completion_tokens includes reasoning; Gemini counts candidates and thoughts separately.
  const thoughts = normalized.reasoningTokens ?? 0;
  const meta: JsonObject = {
    promptTokenCount: normalized.inputTokens,
    candidatesTokenCount: Math.max(0, normalized.outputTokens - thoughts),
    totalTokenCount: normalized.totalTokens,
  };
  if (normalized.cacheReadTokens) meta.cachedContentTokenCount = normalized.cacheReadTokens;
  if (thoughts > 0) meta.thoughtsTokenCount = thoughts;
  return meta;
}

/** Arguments JSON as a Gemini args object; undefined when the upstream produced broken JSON. */
function argsObject(text: string): JsonObject | undefined {
  if (text.trim() === '') return {};
  const parsed = parseJson(text);
  return isObject(parsed) ? parsed : undefined;
}

function functionCallPart(id: string | undefined, name: string, args: JsonObject): JsonObject {
  const call: JsonObject = { name, args };
  if (id !== undefined) call.id = id;
  return { functionCall: call };
}

/**
 * thinkingLevel, or thinkingBudget by the steps openai-to-gemini uses the other way; 0 asks for no
 * thinking and -1 (dynamic) for the upstream's default effort.
 */
function reasoningEffort(thinking: JsonObject): string | undefined {
  const level = asString(field(thinking, 'thinkingLevel'));
  if (level !== undefined) return level.toLowerCase();
  const budget = asNumber(field(thinking, 'thinkingBudget'));
  if (budget === undefined || budget === 0) return undefined;
  if (budget < 0) return 'medium';
  if (budget <= 1024) return 'low';
  return budget <= 8192 ? 'medium' : 'high';
}

function reasoningText(value: JsonObject): string | undefined {
  return asString(value.reasoning_content) ?? asString(value.reasoning);
}

/** generateContent fields this direction translates (camelCase; snake_case is read too). */
const KNOWN_FIELDS = camelAndSnake([
  'model',
  'contents',
  'systemInstruction',
  'tools',
  'toolConfig',
  'generationConfig',
  'safetySettings',
]);

/**
 * Safety thresholds no stricter than Gemini's default leave the upstream's own policy in charge; a
 * stricter one (block more) cannot be honoured by another provider and is refused.
 */
function checkSafetySettings(settings: JsonValue | undefined): void {
  if (settings === undefined || settings === null) return;
  const stricter = asArray(settings).some(
    (setting) => isObject(setting) && field(setting, 'threshold') === 'BLOCK_LOW_AND_ABOVE',
  );
  if (stricter) {
    throw new TranslationError(
      'safetySettings stricter than the default (BLOCK_LOW_AND_ABOVE) cannot be applied by this upstream',
      'safetySettings',
    );
  }
}

/** generationConfig fields it translates; `responseModalities` passes only when it asks for text. */
const KNOWN_GENERATION_FIELDS = camelAndSnake([
  'temperature',
  'topP',
  'topK',
  'maxOutputTokens',
  'candidateCount',
  'presencePenalty',
  'frequencyPenalty',
  'seed',
  'stopSequences',
  'responseMimeType',
  'responseSchema',
  'responseJsonSchema',
  'thinkingConfig',
  'responseModalities',
]);

function camelAndSnake(names: readonly string[]): ReadonlySet<string> {
  return new Set(names.flatMap((name) => [name, name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)]));
}

/** A field neither translated nor harmless to ignore (safetySettings, logprobs, speech) is refused by name. */
function refuseUnknown(object: JsonObject, known: ReadonlySet<string>, prefix: string): void {
  refuseUnknownFields(
    object,
    known,
    (name) => new TranslationError(`${prefix}${name} is not supported by this upstream`, `${prefix}${name}`),
  );
  const modalities = field(object, 'responseModalities');
  if (
    Array.isArray(modalities) &&
    modalities.some((m) => typeof m !== 'string' || m.toUpperCase() !== 'TEXT')
  ) {
    throw new TranslationError(
      `${prefix}responseModalities: only text output is supported by this upstream`,
      `${prefix}responseModalities`,
    );
  }
}

// ---------------------------------------------------------------------------------------------------
// Translator

interface PendingCall {
  id: string | undefined;
  name: string;
  args: string;
}

interface ChoiceState {
  readonly calls: Map<number, PendingCall>;
  finishReason: string | undefined;
}

function createGeminiToOpenai(init: TranslatorInit): Translator {
  let includeThoughts = false;
  let lastUsage: JsonObject | undefined;
  // Stream state: ids, per-choice finish reasons and the open tool calls' argument fragments.
  let responseId: string | undefined;
  let modelVersion: string | undefined;
  const choices = new Map<number, ChoiceState>();
  let finishPending = false;
  let finalSent = false;
  let failed = false;

  function request(body: JsonObject): JsonObject {
    const model = init.upstreamModel ?? init.model;
    if (model === undefined) throw new TranslationError('model is required', 'model');
    if (field(body, 'cachedContent') !== undefined) {
      throw new TranslationError('cachedContent is not supported by this upstream', 'cachedContent');
    }
    refuseUnknown(body, KNOWN_FIELDS, '');
    checkSafetySettings(field(body, 'safetySettings'));
    const generation = field(body, 'generationConfig');
    if (isObject(generation)) refuseUnknown(generation, KNOWN_GENERATION_FIELDS, 'generationConfig.');
    const out: JsonObject = { model, messages: mapContents(body) };
    const tools = field(body, 'tools');
    if (Array.isArray(tools)) {
      const mapped = mapTools(tools);
      if (mapped.length > 0) out.tools = mapped;
    }
    applyToolConfig(field(body, 'toolConfig'), out);
    const config = field(body, 'generationConfig');
    if (isObject(config)) {
      applyGenerationConfig(config, out);
      const thinking = field(config, 'thinkingConfig');
      includeThoughts = isObject(thinking) && field(thinking, 'includeThoughts') === true;
      const effort = isObject(thinking) ? reasoningEffort(thinking) : undefined;
      if (effort !== undefined) out.reasoning_effort = effort;
    }
    return streamWithUsage(out, init.stream);
  }

  function messageParts(message: JsonObject): { parts: JsonObject[]; malformed: boolean } {
    const parts: JsonObject[] = [];
    let malformed = false;
    const reasoning = reasoningText(message);
    if (includeThoughts && reasoning) parts.push({ text: reasoning, thought: true });
    const content = message.content;
    if (typeof content === 'string' && content !== '') parts.push({ text: content });
    else if (Array.isArray(content)) {
      for (const part of content) {
        if (isObject(part) && typeof part.text === 'string') parts.push({ text: part.text });
      }
    } else if (typeof message.refusal === 'string') parts.push({ text: message.refusal });
    for (const call of asArray(message.tool_calls)) {
      const fn = isObject(call) ? call.function : undefined;
      if (!isObject(call) || !isObject(fn)) continue;
      const args = argsObject(asString(fn.arguments) ?? '');
      if (args === undefined) malformed = true;
      else parts.push(functionCallPart(asString(call.id), asString(fn.name) ?? '', args));
    }
    return { parts, malformed };
  }

  function response(body: JsonValue): JsonValue {
    if (!isObject(body)) throw new TranslationError('upstream reply is not a JSON object');
    if (isObject(body.usage)) lastUsage = body.usage;
    const candidates = asArray(body.choices)
      .filter(isObject)
      .map((choice, at): JsonObject => {
        const message = isObject(choice.message) ? choice.message : {};
        const { parts, malformed } = messageParts(message);
        const reason = asString(choice.finish_reason);
        return {
          content: { role: 'model', parts },
          finishReason: malformed ? 'MALFORMED_FUNCTION_CALL' : finishReasonOf(reason ?? 'stop'),
          index: asNumber(choice.index) ?? at,
        };
      });
    const out: JsonObject = { candidates };
    if (lastUsage) out.usageMetadata = usageMetadata(lastUsage);
    out.modelVersion = asString(body.model) ?? init.upstreamModel ?? init.model ?? '';
    const id = asString(body.id);
    if (id !== undefined) out.responseId = id;
    return out;
  }

  function envelope(candidates: JsonObject[]): JsonObject {
    const out: JsonObject = { candidates };
    out.modelVersion = modelVersion ?? init.upstreamModel ?? init.model ?? '';
    if (responseId !== undefined) out.responseId = responseId;
    return out;
  }

  function choiceState(index: number): ChoiceState {
    let state = choices.get(index);
    if (!state) {
      state = { calls: new Map(), finishReason: undefined };
      choices.set(index, state);
    }
    return state;
  }

  function accumulateToolCalls(state: ChoiceState, deltas: JsonValue[]): void {
    deltas.forEach((delta, position) => {
      if (!isObject(delta)) return;
      const index = asNumber(delta.index) ?? position;
      let call = state.calls.get(index);
      if (!call) {
        call = { id: undefined, name: '', args: '' };
        state.calls.set(index, call);
      }
      const id = asString(delta.id);
      if (id) call.id = id;
      const fn = isObject(delta.function) ? delta.function : undefined;
      const name = fn ? asString(fn.name) : undefined;
      if (name && call.name === '') call.name = name;
      const args = fn ? asString(fn.arguments) : undefined;
      if (args) call.args += args;
    });
  }

  /** The last chunk: complete function calls, finish reasons and usage. */
  function finalChunk(): SseOut[] {
    if (finalSent || (!finishPending && choices.size === 0 && !lastUsage)) return [];
    finalSent = true;
    const candidates = [...choices.entries()]
      .sort(([a], [b]) => a - b)
      .map(([index, state]): JsonObject => {
        const parts: JsonObject[] = [];
        let malformed = false;
        for (const [, call] of [...state.calls.entries()].sort(([a], [b]) => a - b)) {
          const args = argsObject(call.args);
          if (args === undefined) malformed = true;
          else parts.push(functionCallPart(call.id, call.name, args));
        }
        // Gemini's own last chunk carries an empty text part when there is nothing else.
        if (parts.length === 0) parts.push({ text: '' });
        const finishReason = malformed ? 'MALFORMED_FUNCTION_CALL' : (state.finishReason ?? 'STOP');
        return { content: { role: 'model', parts }, finishReason, index };
      });
    choices.clear();
    const out = envelope(candidates);
    if (lastUsage) out.usageMetadata = usageMetadata(lastUsage);
    return [{ data: JSON.stringify(out) }];
  }

  function streamEvent(_event: string | undefined, data: string): SseOut[] {
    if (failed || data === '[DONE]') return failed ? [] : finalChunk();
    const body = parseJson(data);
    if (!isObject(body)) return [];
    if (finalSent) return [];
    if (isObject(body.error)) {
      failed = true;
      return [{ data: JSON.stringify(geminiErrorFromOpenai(0, body, init.requestId)) }];
    }
    responseId ??= asString(body.id);
    modelVersion ??= asString(body.model);
    if (isObject(body.usage)) lastUsage = body.usage;
    const out: SseOut[] = [];
    for (const choice of asArray(body.choices)) {
      if (!isObject(choice)) continue;
      const index = asNumber(choice.index) ?? 0;
      const state = choiceState(index);
      const delta = isObject(choice.delta) ? choice.delta : {};
      const parts: JsonObject[] = [];
      const reasoning = reasoningText(delta);
      if (includeThoughts && reasoning) parts.push({ text: reasoning, thought: true });
      if (typeof delta.content === 'string' && delta.content !== '') parts.push({ text: delta.content });
      if (parts.length > 0)
        out.push({ data: JSON.stringify(envelope([{ content: { role: 'model', parts }, index }])) });
      if (Array.isArray(delta.tool_calls)) accumulateToolCalls(state, delta.tool_calls);
      const reason = asString(choice.finish_reason);
      if (reason) {
        state.finishReason = finishReasonOf(reason);
        finishPending = true;
      }
    }
    // The final chunk waits for the usage chunk that include_usage adds after the finish reason.
    if (finishPending && lastUsage) out.push(...finalChunk());
    return out;
  }

  function streamEnd(complete: boolean): SseOut[] {
    if (failed) return [];
    if (complete) return finalChunk();
    failed = true;
    const error = geminiErrorFromOpenai(
      500,
      { error: { message: 'upstream stream ended before completion' } },
      init.requestId,
    );
    return [{ data: JSON.stringify(error) }];
  }

  return {
    request,
    response,
    streamEvent,
    streamEnd,
    error: (status, body) => geminiErrorFromOpenai(status, body, init.requestId),
  };
}

export const geminiToOpenai = defineTranslator('gemini_to_openai', createGeminiToOpenai);
