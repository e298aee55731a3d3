// OpenAI wire format: chat completions, legacy completions, embeddings, models, and the route table of
// every OpenAI endpoint (Responses in openai-responses.ts, images and audio in openai-media.ts).

import {
  badRequest,
  chatUsage,
  decide,
  FINGERPRINT,
  json,
  MIDSTREAM_ERROR,
  readChatMessages,
  SSE,
} from './openai-common.ts';
import { audioText, imageEdits, imageGenerations, speech } from './openai-media.ts';
import { responses, responsesInputTokens } from './openai-responses.ts';
import { openaiToolTokens } from './prompt-rules.ts';
import { chatJsonRequest } from './structured.ts';
import {
  asArray,
  asNumber,
  asObject,
  asString,
  embeddingVector,
  float32ToBase64,
  nextId,
  nowSeconds,
  replyText,
  splitPieces,
  tokens,
  truncateToTokens,
  vectorToArray,
} from './text.ts';
import type { RouteHandler, SimReply, SimRequest } from './types.ts';

export { openaiDialect } from './openai-common.ts';

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
  if (toolNames.length > 0) conv.promptTokens += openaiToolTokens(body.tools, model);
  const maxTokens = asNumber(body.max_completion_tokens) ?? asNumber(body.max_tokens);
  const d = decide(conv, knobs, toolNames, body.tool_choice, maxTokens, {
    json: chatJsonRequest(body),
    reasoning: body.reasoning_effort !== undefined && body.reasoning_effort !== null,
    parallel: body.parallel_tool_calls !== false,
  });
  const reasoningTokens = d.reasoning === undefined ? 0 : tokens(d.reasoning);
  const usage = knobs.noUsage
    ? undefined
    : chatUsage(conv.promptTokens, d.outputTokens, knobs, reasoningTokens);
  const id = nextId('chatcmpl-');
  const created = nowSeconds();
  const callIds = d.tools.map(() => nextId('call_'));
  // The reasoning_content field of DeepSeek and vLLM, when the request asked for an effort.
  const reasoning = d.reasoning === undefined ? {} : { reasoning_content: d.reasoning };

  if (body.stream !== true) {
    const message = d.tool
      ? {
          role: 'assistant',
          content: null,
          ...reasoning,
          tool_calls: d.tools.map((tool, i) => ({
            id: callIds[i],
            type: 'function',
            function: { name: tool.name, arguments: tool.argsJson },
          })),
          refusal: null,
          annotations: [],
        }
      : { role: 'assistant', content: d.text, ...reasoning, refusal: null, annotations: [] };
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
  if (d.reasoning !== undefined) {
    frames.push(`${head}{"role":"assistant","content":null,"refusal":null}${mid}`);
    for (const piece of splitPieces(d.reasoning, 2))
      frames.push(`${head}{"reasoning_content":${JSON.stringify(piece)}}${mid}`);
  }
  if (d.tool) {
    d.tools.forEach((tool, index) => {
      const call = {
        index,
        id: callIds[index],
        type: 'function',
        function: { name: tool.name, arguments: '' },
      };
      const first =
        index === 0
          ? { role: 'assistant', content: null, tool_calls: [call], refusal: null }
          : { tool_calls: [call] };
      frames.push(head + JSON.stringify(first) + mid);
      for (const frag of splitPieces(tool.argsJson, Math.max(2, Math.min(knobs.chunks, 6)))) {
        frames.push(
          `${head}{"tool_calls":[{"index":${index},"function":{"arguments":${JSON.stringify(frag)}}}]}${mid}`,
        );
      }
    });
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
  'POST /v1/responses/input_tokens': responsesInputTokens,
  'POST /v1/embeddings': embeddings,
  'POST /v1/images/generations': imageGenerations,
  'POST /v1/images/edits': imageEdits,
  'POST /v1/audio/speech': speech,
  'POST /v1/audio/transcriptions': audioText('transcribe'),
  'POST /v1/audio/translations': audioText('translate'),
  'GET /v1/models': listModels,
};

export { getModel as openaiGetModel };
