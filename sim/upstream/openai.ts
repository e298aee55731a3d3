// OpenAI wire format: chat completions, legacy completions, responses, embeddings, images, audio, models.

import type { IncomingHttpHeaders } from 'node:http';
import { describeMultipart, isMultipart, parseMultipart } from './multipart.ts';
import {
  asArray,
  asNumber,
  asObject,
  asString,
  contentText,
  embeddingVector,
  float32ToBase64,
  nextId,
  nowSeconds,
  replyText,
  splitPieces,
  type ToolCallPlan,
  tokens,
  toolCall,
  truncateToTokens,
  vectorToArray,
  wantsTool,
} from './text.ts';
import type { Dialect, JsonReply, Knobs, RouteHandler, SimReply, SimRequest } from './types.ts';

const SSE = 'text/event-stream; charset=utf-8';
const FINGERPRINT = 'fp_sim';

const ERROR_KINDS: Record<number, { type: string; code: string | null }> = {
  400: { type: 'invalid_request_error', code: null },
  401: { type: 'invalid_request_error', code: 'invalid_api_key' },
  403: { type: 'invalid_request_error', code: 'unsupported_country_region_territory' },
  404: { type: 'invalid_request_error', code: 'model_not_found' },
  429: { type: 'requests', code: 'rate_limit_exceeded' },
  500: { type: 'server_error', code: null },
  503: { type: 'server_error', code: null },
};

function openaiErrorBody(status: number, message: string): string {
  const kind = ERROR_KINDS[status] ?? {
    type: status >= 500 ? 'server_error' : 'invalid_request_error',
    code: null,
  };
  return JSON.stringify({ error: { message, type: kind.type, param: null, code: kind.code } });
}

export const openaiDialect: Dialect = {
  name: 'openai',
  errorReply(status: number, message: string): JsonReply {
    return {
      kind: 'json',
      status,
      body: openaiErrorBody(status, message),
      headers: { 'x-request-id': nextId('req_') },
    };
  },
  hasAuth(headers: IncomingHttpHeaders): boolean {
    return (headers.authorization ?? '').length > 7;
  },
};

const MIDSTREAM_ERROR = `data: ${openaiErrorBody(500, 'The server had an error while processing your request. Sorry about that!')}\n\n`;

function json(body: unknown, headers?: Record<string, string>): JsonReply {
  return { kind: 'json', status: 200, body: JSON.stringify(body), headers };
}

function badRequest(message: string): JsonReply {
  return openaiDialect.errorReply(400, message);
}

function chatUsage(prompt: number, completion: number, knobs: Knobs) {
  const output = completion + knobs.reasoningTokens;
  return {
    prompt_tokens: prompt,
    completion_tokens: output,
    total_tokens: prompt + output,
    prompt_tokens_details: { cached_tokens: Math.min(knobs.cachedTokens, prompt), audio_tokens: 0 },
    completion_tokens_details: {
      reasoning_tokens: knobs.reasoningTokens,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}

function responsesUsage(input: number, output: number, knobs: Knobs) {
  const out = output + knobs.reasoningTokens;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: Math.min(knobs.cachedTokens, input) },
    output_tokens: out,
    output_tokens_details: { reasoning_tokens: knobs.reasoningTokens },
    total_tokens: input + out,
  };
}

/** Name of the tool to call: get_weather when offered, else the first one. */
function pickTool(names: string[]): string | undefined {
  return names.includes('get_weather') ? 'get_weather' : names[0];
}

interface Conversation {
  userText: string;
  lastIsUser: boolean;
  promptTokens: number;
}

/** Reads chat messages: last user text and an input token count with the per-message overhead. */
function readChatMessages(messages: unknown[]): Conversation {
  let promptTokens = 3; // reply priming, as in OpenAI's own counting recipe
  let userText = '';
  let lastRole = '';
  for (const m of messages) {
    const msg = asObject(m);
    const role = asString(msg?.role) ?? '';
    const text = contentText(msg?.content);
    promptTokens += 3 + tokens(role) + tokens(text);
    if (role === 'user') userText = text;
    lastRole = role;
  }
  return { userText, lastIsUser: lastRole === 'user', promptTokens };
}

interface Decision {
  text: string;
  finish: 'stop' | 'length';
  tool: ToolCallPlan | undefined;
  outputTokens: number;
}

function decide(
  conv: Conversation,
  knobs: Knobs,
  toolNames: string[],
  toolChoice: unknown,
  maxTokens: number | undefined,
): Decision {
  const choice = asObject(toolChoice);
  const forcedName = asString(asObject(choice?.function)?.name) ?? asString(choice?.name);
  const toolName = forcedName ?? pickTool(toolNames);
  const useTool = wantsTool({
    toolName,
    lastIsUser: conv.lastIsUser,
    userText: conv.userText,
    knobs,
    forced: toolChoice === 'required' || forcedName !== undefined,
    disabled: toolChoice === 'none',
  });
  if (useTool && toolName !== undefined) {
    const tool = toolCall(toolName, conv.userText);
    return { text: '', finish: 'stop', tool, outputTokens: tokens(tool.name) + tokens(tool.argsJson) + 7 };
  }
  const full = replyText(conv.userText, knobs);
  const cut = maxTokens !== undefined ? truncateToTokens(full, maxTokens) : { text: full, truncated: false };
  return {
    text: cut.text,
    finish: cut.truncated ? 'length' : 'stop',
    tool: undefined,
    outputTokens: tokens(cut.text),
  };
}

// ---------------------------------------------------------------- chat completions

function chatCompletions(req: SimRequest): SimReply {
  const body = req.json;
  if (!body || !Array.isArray(body.messages)) return badRequest("Missing required parameter: 'messages'.");
  const model = asString(body.model) ?? 'gpt-4o-mini';
  const { knobs } = req;
  const conv = readChatMessages(body.messages);
  const toolNames: string[] = [];
  for (const t of asArray(body.tools)) {
    const name = asString(asObject(asObject(t)?.function)?.name);
    if (name !== undefined) toolNames.push(name);
  }
  if (toolNames.length > 0) conv.promptTokens += tokens(JSON.stringify(body.tools));
  const maxTokens = asNumber(body.max_completion_tokens) ?? asNumber(body.max_tokens);
  const d = decide(conv, knobs, toolNames, body.tool_choice, maxTokens);
  const usage = knobs.noUsage ? undefined : chatUsage(conv.promptTokens, d.outputTokens, knobs);
  const id = nextId('chatcmpl-');
  const created = nowSeconds();
  const callId = d.tool ? nextId('call_') : '';

  if (body.stream !== true) {
    const message = d.tool
      ? {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: callId, type: 'function', function: { name: d.tool.name, arguments: d.tool.argsJson } },
          ],
          refusal: null,
          annotations: [],
        }
      : { role: 'assistant', content: d.text, refusal: null, annotations: [] };
    return json({
      id,
      object: 'chat.completion',
      created,
      model,
      choices: [{ index: 0, message, logprobs: null, finish_reason: d.tool ? 'tool_calls' : d.finish }],
      usage,
      service_tier: 'default',
      system_fingerprint: FINGERPRINT,
    });
  }

  const includeUsage = asObject(body.stream_options)?.include_usage === true && usage !== undefined;
  // Every chunk shares this envelope; only the delta and finish_reason change.
  const head = `data: {"id":"${id}","object":"chat.completion.chunk","created":${created},"model":${JSON.stringify(model)},"service_tier":"default","system_fingerprint":"${FINGERPRINT}","choices":[{"index":0,"delta":`;
  const usageNull = includeUsage ? ',"usage":null' : '';
  const mid = `,"logprobs":null,"finish_reason":null}]${usageNull}}\n\n`;
  const frames: string[] = [];
  if (d.tool) {
    const first = {
      role: 'assistant',
      content: null,
      tool_calls: [
        { index: 0, id: callId, type: 'function', function: { name: d.tool.name, arguments: '' } },
      ],
      refusal: null,
    };
    frames.push(head + JSON.stringify(first) + mid);
    for (const frag of splitPieces(d.tool.argsJson, Math.max(2, Math.min(knobs.chunks, 6)))) {
      frames.push(
        `${head}{"tool_calls":[{"index":0,"function":{"arguments":${JSON.stringify(frag)}}}]}${mid}`,
      );
    }
  } else {
    frames.push(`${head}{"role":"assistant","content":"","refusal":null}${mid}`);
    for (const piece of splitPieces(d.text, knobs.chunks))
      frames.push(`${head}{"content":${JSON.stringify(piece)}}${mid}`);
  }
  const finish = d.tool ? 'tool_calls' : d.finish;
  frames.push(`${head}{},"logprobs":null,"finish_reason":"${finish}"}]${usageNull}}\n\n`);
  if (includeUsage) {
    frames.push(
      `data: {"id":"${id}","object":"chat.completion.chunk","created":${created},"model":${JSON.stringify(model)},"service_tier":"default","system_fingerprint":"${FINGERPRINT}","choices":[],"usage":${JSON.stringify(usage)}}\n\n`,
    );
  }
  frames.push('data: [DONE]\n\n');
  return { kind: 'stream', contentType: SSE, frames, errorFrame: MIDSTREAM_ERROR };
}

// ---------------------------------------------------------------- legacy completions

function completions(req: SimRequest): SimReply {
  const body = req.json;
  if (!body || body.prompt === undefined) return badRequest("Missing required parameter: 'prompt'.");
  const model = asString(body.model) ?? 'gpt-3.5-turbo-instruct';
  const { knobs } = req;
  const prompt = Array.isArray(body.prompt)
    ? body.prompt.filter((p) => typeof p === 'string').join('\n')
    : String(body.prompt);
  const maxTokens = asNumber(body.max_tokens) ?? 16;
  const full = replyText(prompt, knobs);
  const cut = truncateToTokens(full, maxTokens);
  const finish = cut.truncated ? 'length' : 'stop';
  const promptTokens = tokens(prompt);
  const out = tokens(cut.text);
  const usage = knobs.noUsage
    ? undefined
    : { prompt_tokens: promptTokens, completion_tokens: out, total_tokens: promptTokens + out };
  const id = nextId('cmpl-');
  const created = nowSeconds();
  if (body.stream !== true) {
    return json({
      id,
      object: 'text_completion',
      created,
      model,
      choices: [{ text: cut.text, index: 0, logprobs: null, finish_reason: finish }],
      usage,
    });
  }
  const includeUsage = asObject(body.stream_options)?.include_usage === true && usage !== undefined;
  const head = `data: {"id":"${id}","object":"text_completion","created":${created},"choices":[{"text":`;
  const tail = `,"model":${JSON.stringify(model)}${includeUsage ? ',"usage":null' : ''}}\n\n`;
  const frames = splitPieces(cut.text, knobs.chunks).map(
    (p) => `${head}${JSON.stringify(p)},"index":0,"logprobs":null,"finish_reason":null}]${tail}`,
  );
  frames.push(`${head}"","index":0,"logprobs":null,"finish_reason":"${finish}"}]${tail}`);
  if (includeUsage) {
    frames.push(
      `data: {"id":"${id}","object":"text_completion","created":${created},"choices":[],"model":${JSON.stringify(model)},"usage":${JSON.stringify(usage)}}\n\n`,
    );
  }
  frames.push('data: [DONE]\n\n');
  return { kind: 'stream', contentType: SSE, frames, errorFrame: MIDSTREAM_ERROR };
}

// ---------------------------------------------------------------- responses

function readResponsesInput(input: unknown, instructions: string | undefined): Conversation {
  let promptTokens = instructions ? tokens(instructions) + 3 : 0;
  if (typeof input === 'string') {
    promptTokens += tokens(input) + 3;
    return { userText: input, lastIsUser: true, promptTokens };
  }
  let userText = '';
  let lastIsUser = false;
  for (const item of asArray(input)) {
    const o = asObject(item);
    const role = asString(o?.role);
    const text = contentText(o?.content);
    promptTokens += 3 + tokens(text);
    if (role === 'user') userText = text;
    lastIsUser = role === 'user';
  }
  return { userText, lastIsUser, promptTokens };
}

function responses(req: SimRequest): SimReply {
  const body = req.json;
  if (!body || body.input === undefined) return badRequest("Missing required parameter: 'input'.");
  const model = asString(body.model) ?? 'gpt-4o-mini';
  const { knobs } = req;
  const conv = readResponsesInput(body.input, asString(body.instructions));
  const toolNames: string[] = [];
  for (const t of asArray(body.tools)) {
    const name = asString(asObject(t)?.name);
    if (name !== undefined) toolNames.push(name);
  }
  if (toolNames.length > 0) conv.promptTokens += tokens(JSON.stringify(body.tools));
  const d = decide(conv, knobs, toolNames, body.tool_choice, asNumber(body.max_output_tokens));
  const usage = knobs.noUsage ? null : responsesUsage(conv.promptTokens, d.outputTokens, knobs);
  const id = nextId('resp_');
  const itemId = d.tool ? nextId('fc_') : nextId('msg_');
  const callId = d.tool ? nextId('call_') : '';
  const base = {
    id,
    object: 'response',
    created_at: nowSeconds(),
    status: 'in_progress',
    error: null,
    incomplete_details: null,
    instructions: asString(body.instructions) ?? null,
    max_output_tokens: asNumber(body.max_output_tokens) ?? null,
    model,
    output: [] as unknown[],
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    store: true,
    temperature: 1,
    text: { format: { type: 'text' } },
    tool_choice: body.tool_choice ?? 'auto',
    tools: body.tools ?? [],
    top_p: 1,
    truncation: 'disabled',
    usage: null as unknown,
    metadata: {},
  };
  const doneItem = d.tool
    ? {
        id: itemId,
        type: 'function_call',
        status: 'completed',
        arguments: d.tool.argsJson,
        call_id: callId,
        name: d.tool.name,
      }
    : {
        id: itemId,
        type: 'message',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', annotations: [], logprobs: [], text: d.text }],
      };
  const incomplete = d.finish === 'length';
  const completed = {
    ...base,
    status: incomplete ? 'incomplete' : 'completed',
    incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
    output: [doneItem],
    usage,
  };
  if (body.stream !== true) return json(completed);

  let seq = 0;
  const frames: string[] = [];
  const emit = (type: string, fields: Record<string, unknown>): void => {
    frames.push(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...fields })}\n\n`);
  };
  emit('response.created', { response: base });
  emit('response.in_progress', { response: base });
  if (d.tool) {
    emit('response.output_item.added', {
      output_index: 0,
      item: { ...doneItem, status: 'in_progress', arguments: '' },
    });
    for (const frag of splitPieces(d.tool.argsJson, Math.max(2, Math.min(knobs.chunks, 6)))) {
      emit('response.function_call_arguments.delta', { item_id: itemId, output_index: 0, delta: frag });
    }
    emit('response.function_call_arguments.done', {
      item_id: itemId,
      output_index: 0,
      arguments: d.tool.argsJson,
    });
  } else {
    emit('response.output_item.added', {
      output_index: 0,
      item: { id: itemId, type: 'message', status: 'in_progress', role: 'assistant', content: [] },
    });
    const part = { type: 'output_text', annotations: [], logprobs: [], text: '' };
    emit('response.content_part.added', { item_id: itemId, output_index: 0, content_index: 0, part });
    for (const piece of splitPieces(d.text, knobs.chunks)) {
      emit('response.output_text.delta', {
        item_id: itemId,
        output_index: 0,
        content_index: 0,
        delta: piece,
        logprobs: [],
      });
    }
    emit('response.output_text.done', {
      item_id: itemId,
      output_index: 0,
      content_index: 0,
      text: d.text,
      logprobs: [],
    });
    emit('response.content_part.done', {
      item_id: itemId,
      output_index: 0,
      content_index: 0,
      part: { ...part, text: d.text },
    });
  }
  emit('response.output_item.done', { output_index: 0, item: doneItem });
  emit(incomplete ? 'response.incomplete' : 'response.completed', { response: completed });
  const errorFrame = `event: error\ndata: ${JSON.stringify({ type: 'error', sequence_number: seq, code: 'server_error', message: 'The server had an error while processing your request.', param: null })}\n\n`;
  return { kind: 'stream', contentType: SSE, frames, errorFrame };
}

// ---------------------------------------------------------------- embeddings

function embeddingInputs(input: unknown): string[] {
  if (typeof input === 'string') return [input];
  if (!Array.isArray(input)) return [];
  // Token arrays (number[] or number[][]) embed by their printed form; they are rare and need no decoding.
  if (input.every((v) => typeof v === 'number')) return [input.join(',')];
  return input.map((v) => (typeof v === 'string' ? v : Array.isArray(v) ? v.join(',') : ''));
}

function embeddings(req: SimRequest): SimReply {
  const body = req.json;
  const inputs = embeddingInputs(body?.input);
  if (!body || inputs.length === 0) return badRequest("'input' is a required property");
  const model = asString(body.model) ?? 'text-embedding-3-small';
  const dims = asNumber(body.dimensions) ?? (model.includes('large') ? 3072 : 1536);
  const base64 = body.encoding_format === 'base64';
  let promptTokens = 0;
  const data = inputs.map((text, index) => {
    promptTokens += tokens(text);
    const v = embeddingVector(text, dims);
    return { object: 'embedding', index, embedding: base64 ? float32ToBase64(v) : vectorToArray(v) };
  });
  const usage = req.knobs.noUsage ? undefined : { prompt_tokens: promptTokens, total_tokens: promptTokens };
  return json({ object: 'list', data, model, usage });
}

// ---------------------------------------------------------------- images

// A valid 1x1 transparent PNG: small, but a real image for clients that decode it.
const PNG_1X1 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

function imageReply(prompt: string, n: number, model: string, responseFormat: unknown, knobs: Knobs) {
  // dall-e models answer with URLs by default; gpt-image models always with b64_json.
  const asUrl = responseFormat === 'url' || (responseFormat === undefined && model.startsWith('dall-e'));
  const data = Array.from({ length: n }, (_, i) =>
    asUrl
      ? { url: `https://sim.invalid/images/${nextId('img_')}-${i}.png`, revised_prompt: prompt }
      : { b64_json: PNG_1X1, revised_prompt: prompt },
  );
  const inputTokens = tokens(prompt);
  const outputTokens = 272 * n; // a low-quality square image is billed at 272 tokens
  const usage =
    knobs.noUsage || !model.startsWith('gpt-image')
      ? undefined
      : {
          input_tokens: inputTokens,
          output_tokens: outputTokens,
          total_tokens: inputTokens + outputTokens,
          input_tokens_details: { text_tokens: inputTokens, image_tokens: 0 },
        };
  return { created: nowSeconds(), data, usage };
}

function imageGenerations(req: SimRequest): SimReply {
  const body = req.json;
  const prompt = asString(body?.prompt);
  if (!body || prompt === undefined) return badRequest("Missing required parameter: 'prompt'.");
  const n = Math.max(1, Math.min(asNumber(body.n) ?? 1, 10));
  return json(imageReply(prompt, n, asString(body.model) ?? 'dall-e-2', body.response_format, req.knobs));
}

async function imageEdits(req: SimRequest): Promise<SimReply> {
  if (!isMultipart(req.headers)) return badRequest('Expected a multipart/form-data body.');
  const form = await parseMultipart(req.headers, req.body);
  if (form.files.length === 0) return badRequest("Missing required parameter: 'image'.");
  const prompt = form.fields.prompt ?? '';
  const n = Math.max(1, Math.min(Number(form.fields.n ?? 1) || 1, 10));
  const model = form.fields.model ?? 'dall-e-2';
  const reply = imageReply(prompt, n, model, form.fields.response_format, req.knobs);
  return json(reply, { 'x-sim-multipart': describeMultipart(form) });
}

// ---------------------------------------------------------------- audio

const AUDIO_TYPES: Record<string, string> = {
  mp3: 'audio/mpeg',
  opus: 'audio/ogg',
  aac: 'audio/aac',
  flac: 'audio/flac',
  wav: 'audio/wav',
  pcm: 'audio/pcm',
};

/** Fake audio: an MPEG frame header then deterministic bytes; about 64 bytes per input character. */
function fakeAudio(input: string): Buffer {
  const size = 418 + Buffer.byteLength(input) * 64;
  const buf = Buffer.alloc(size);
  buf[0] = 0xff;
  buf[1] = 0xfb;
  buf[2] = 0x90;
  buf[3] = 0x64;
  for (let i = 4; i < size; i++) buf[i] = (i * 31 + input.length) & 0xff;
  return buf;
}

function speech(req: SimRequest): SimReply {
  const body = req.json;
  const input = asString(body?.input);
  if (!body || input === undefined) return badRequest("Missing required parameter: 'input'.");
  const format = asString(body.response_format) ?? 'mp3';
  return {
    kind: 'bytes',
    status: 200,
    contentType: AUDIO_TYPES[format] ?? 'audio/mpeg',
    body: fakeAudio(input),
  };
}

function timestamp(seconds: number, sep: string): string {
  const ms = Math.round(seconds * 1000);
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${p(Math.floor(ms / 3_600_000))}:${p(Math.floor(ms / 60_000) % 60)}:${p(Math.floor(ms / 1000) % 60)}${sep}${p(ms % 1000, 3)}`;
}

function audioText(task: 'transcribe' | 'translate') {
  return async function audioHandler(req: SimRequest): Promise<SimReply> {
    if (!isMultipart(req.headers)) return badRequest('Expected a multipart/form-data body.');
    const form = await parseMultipart(req.headers, req.body);
    const file = form.files.find((f) => f.field === 'file');
    if (!file) return badRequest("Missing required parameter: 'file'.");
    const model = form.fields.model ?? 'whisper-1';
    const text = `${task === 'translate' ? 'Translated' : 'Transcribed'} ${file.size} bytes of audio from ${file.filename}.`;
    const seconds = Math.max(1, Math.round(file.size / 16_000));
    const format = form.fields.response_format ?? 'json';
    const headers = { 'x-sim-multipart': describeMultipart(form) };
    const textTokens = tokens(form.fields.prompt ?? '');
    const outTokens = tokens(text);
    const audioTokens = seconds * 10;
    const usage = req.knobs.noUsage
      ? undefined
      : model.startsWith('whisper')
        ? { type: 'duration', seconds }
        : {
            type: 'tokens',
            input_tokens: textTokens + audioTokens,
            input_token_details: { text_tokens: textTokens, audio_tokens: audioTokens },
            output_tokens: outTokens,
            total_tokens: textTokens + audioTokens + outTokens,
          };
    if (form.fields.stream === 'true' && task === 'transcribe') {
      const frames = splitPieces(text, req.knobs.chunks).map(
        (delta) => `data: ${JSON.stringify({ type: 'transcript.text.delta', delta, logprobs: [] })}\n\n`,
      );
      frames.push(`data: ${JSON.stringify({ type: 'transcript.text.done', text, logprobs: [], usage })}\n\n`);
      return { kind: 'stream', contentType: SSE, frames, errorFrame: MIDSTREAM_ERROR, headers };
    }
    switch (format) {
      case 'text':
        return {
          kind: 'bytes',
          status: 200,
          contentType: 'text/plain; charset=utf-8',
          body: `${text}\n`,
          headers,
        };
      case 'srt':
        return {
          kind: 'bytes',
          status: 200,
          contentType: 'text/plain; charset=utf-8',
          body: `1\n${timestamp(0, ',')} --> ${timestamp(seconds, ',')}\n${text}\n\n`,
          headers,
        };
      case 'vtt':
        return {
          kind: 'bytes',
          status: 200,
          contentType: 'text/plain; charset=utf-8',
          body: `WEBVTT\n\n${timestamp(0, '.')} --> ${timestamp(seconds, '.')}\n${text}\n\n`,
          headers,
        };
      case 'verbose_json':
        return json(
          {
            task,
            language: 'english',
            duration: seconds,
            text,
            segments: [
              {
                id: 0,
                seek: 0,
                start: 0,
                end: seconds,
                text,
                tokens: [],
                temperature: 0,
                avg_logprob: -0.2,
                compression_ratio: 1,
                no_speech_prob: 0,
              },
            ],
            usage,
          },
          headers,
        );
      default:
        return json({ text, usage }, headers);
    }
  };
}

// ---------------------------------------------------------------- models

export const OPENAI_MODELS = [
  'gpt-4o',
  'gpt-4o-mini',
  'gpt-4.1',
  'gpt-4.1-mini',
  'o4-mini',
  'gpt-3.5-turbo-instruct',
  'text-embedding-3-small',
  'text-embedding-3-large',
  'dall-e-3',
  'gpt-image-1',
  'tts-1',
  'gpt-4o-mini-tts',
  'whisper-1',
  'gpt-4o-transcribe',
];

const MODELS_BODY = JSON.stringify({
  object: 'list',
  data: OPENAI_MODELS.map((id) => ({ id, object: 'model', created: 1_700_000_000, owned_by: 'system' })),
});

function listModels(): SimReply {
  return { kind: 'json', status: 200, body: MODELS_BODY };
}

function getModel(req: SimRequest): SimReply {
  const id = req.params.model;
  return json({ id, object: 'model', created: 1_700_000_000, owned_by: 'system' });
}

export const openaiRoutes: Record<string, RouteHandler> = {
  'POST /v1/chat/completions': chatCompletions,
  'POST /v1/completions': completions,
  'POST /v1/responses': responses,
  'POST /v1/embeddings': embeddings,
  'POST /v1/images/generations': imageGenerations,
  'POST /v1/images/edits': imageEdits,
  'POST /v1/audio/speech': speech,
  'POST /v1/audio/transcriptions': audioText('transcribe'),
  'POST /v1/audio/translations': audioText('translate'),
  'GET /v1/models': listModels,
};

export { getModel as openaiGetModel };
