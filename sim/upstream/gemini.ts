// Gemini (Generative Language API) wire format, served under /v1beta/ and /v1/:
// models/{model}:generateContent | :streamGenerateContent | :countTokens | :embedContent | :batchEmbedContents.

import type { IncomingHttpHeaders } from 'node:http';
import { geminiPartTokens } from './prompt-rules.ts';
import { geminiJsonRequest, structuredText } from './structured.ts';
import {
  asArray,
  asNumber,
  asObject,
  asString,
  contentText,
  embeddingVector,
  nextId,
  reasoningText,
  replyText,
  splitPieces,
  type ToolCallPlan,
  tokens,
  toolCallsFor,
  truncateToTokens,
  vectorToArray,
  wantsTool,
} from './text.ts';
import type { Dialect, JsonReply, Knobs, RouteHandler, SimReply, SimRequest } from './types.ts';

const STATUS_NAMES: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  429: 'RESOURCE_EXHAUSTED',
  499: 'CANCELLED',
  500: 'INTERNAL',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

function errorBody(code: number, message: string): string {
  const status = STATUS_NAMES[code] ?? (code >= 500 ? 'INTERNAL' : 'FAILED_PRECONDITION');
  return JSON.stringify({ error: { code, message, status } });
}

export const geminiDialect: Dialect = {
  name: 'gemini',
  errorReply(status: number, message: string): JsonReply {
    return { kind: 'json', status, body: errorBody(status, message) };
  },
  hasAuth(headers: IncomingHttpHeaders, query: URLSearchParams): boolean {
    return (
      (headers['x-goog-api-key'] ?? '').length > 0 ||
      (query.get('key') ?? '').length > 0 ||
      (headers.authorization ?? '').length > 7
    );
  },
};

// Gemini separates SSE events with CRLF pairs; clients must cope, so the simulator does too.
const EOL = '\r\n\r\n';
const MIDSTREAM_ERROR = `data: ${errorBody(500, 'An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting')}${EOL}`;
const THROTTLE_MESSAGE = 'Simulated quota exhaustion: Resource exhausted. Please try again later.';

interface Conversation {
  userText: string;
  lastIsUser: boolean;
  promptTokens: number;
}

function readContents(body: Record<string, unknown>): Conversation {
  let promptTokens = 0;
  const system = asObject(body.systemInstruction);
  if (system) promptTokens += tokens(contentText(system.parts));
  let userText = '';
  let lastIsUser = false;
  for (const c of asArray(body.contents)) {
    const content = asObject(c);
    const parts = content?.parts;
    const text = contentText(parts);
    promptTokens += tokens(text) + geminiPartTokens(parts);
    const isUserTurn =
      (content?.role ?? 'user') === 'user' &&
      !asArray(parts).some((p) => asObject(p)?.functionResponse !== undefined);
    if (isUserTurn) userText = text;
    lastIsUser = isUserTurn;
  }
  if (Array.isArray(body.tools)) promptTokens += tokens(JSON.stringify(body.tools));
  return { userText, lastIsUser, promptTokens: Math.max(1, promptTokens) };
}

function toolNames(body: Record<string, unknown>): string[] {
  const names: string[] = [];
  for (const t of asArray(body.tools)) {
    for (const f of asArray(asObject(t)?.functionDeclarations)) {
      const name = asString(asObject(f)?.name);
      if (name !== undefined) names.push(name);
    }
  }
  return names;
}

interface Plan {
  text: string;
  tools: ToolCallPlan[];
  /** A thought summary, when the request asked for thoughts. */
  thought: string | undefined;
  finishReason: 'STOP' | 'MAX_TOKENS';
  outputTokens: number;
}

function plan(body: Record<string, unknown>, conv: Conversation, knobs: Knobs): Plan {
  const names = toolNames(body);
  const fcc = asObject(asObject(body.toolConfig)?.functionCallingConfig);
  const mode = asString(fcc?.mode);
  const allowed = asArray(fcc?.allowedFunctionNames).filter((n): n is string => typeof n === 'string');
  const toolName = allowed[0] ?? (names.includes('get_weather') ? 'get_weather' : names[0]);
  const useTool = wantsTool({
    toolName,
    lastIsUser: conv.lastIsUser,
    userText: conv.userText,
    knobs,
    forced: mode === 'ANY',
    disabled: mode === 'NONE',
  });
  const config = asObject(body.generationConfig);
  const thought =
    asObject(config?.thinkingConfig)?.includeThoughts === true ? reasoningText(conv.userText) : undefined;
  if (useTool && toolName !== undefined) {
    // Gemini has no switch for parallel calls: several places get several calls.
    const tools = toolCallsFor(toolName, conv.userText, true);
    const outputTokens = tools.reduce((n, t) => n + tokens(t.name) + tokens(t.argsJson), 0);
    return { text: '', tools, thought, finishReason: 'STOP', outputTokens };
  }
  const full = structuredText(geminiJsonRequest(body), conv.userText) ?? replyText(conv.userText, knobs);
  const max = asNumber(asObject(body.generationConfig)?.maxOutputTokens);
  const cut = max !== undefined ? truncateToTokens(full, max) : { text: full, truncated: false };
  return {
    text: cut.text,
    tools: [],
    thought,
    finishReason: cut.truncated ? 'MAX_TOKENS' : 'STOP',
    outputTokens: Math.max(1, tokens(cut.text)),
  };
}

function usageMetadata(
  prompt: number,
  output: number,
  knobs: Knobs,
  thought: number,
): Record<string, unknown> {
  const thoughts = knobs.reasoningTokens + thought;
  const u: Record<string, unknown> = {
    promptTokenCount: prompt,
    candidatesTokenCount: output,
    totalTokenCount: prompt + output + thoughts,
  };
  if (knobs.cachedTokens > 0) u.cachedContentTokenCount = Math.min(knobs.cachedTokens, prompt);
  u.promptTokensDetails = [{ modality: 'TEXT', tokenCount: prompt }];
  if (thoughts > 0) u.thoughtsTokenCount = thoughts;
  return u;
}

function generate(req: SimRequest, stream: boolean): SimReply {
  const body = req.json;
  if (!body || !Array.isArray(body.contents)) {
    return geminiDialect.errorReply(400, '* GenerateContentRequest.contents: contents is not specified\n');
  }
  const { knobs } = req;
  const model = req.params.model;
  const conv = readContents(body);
  const p = plan(body, conv, knobs);
  const responseId = nextId('');
  const thoughtTokens = p.thought === undefined ? 0 : tokens(p.thought);
  const fullUsage = knobs.noUsage
    ? undefined
    : usageMetadata(conv.promptTokens, p.outputTokens, knobs, thoughtTokens);
  const thoughtParts = p.thought === undefined ? [] : [{ text: p.thought, thought: true }];
  const finalParts =
    p.tools.length > 0
      ? p.tools.map((tool) => ({ functionCall: { name: tool.name, args: tool.args } }))
      : [{ text: p.text }];

  if (!stream) {
    return {
      kind: 'json',
      status: 200,
      body: JSON.stringify({
        candidates: [
          {
            content: { parts: [...thoughtParts, ...finalParts], role: 'model' },
            finishReason: p.finishReason,
            index: 0,
          },
        ],
        usageMetadata: fullUsage,
        modelVersion: model,
        responseId,
      }),
    };
  }

  // Intermediate chunks carry only prompt counts, as the real API does; the last one has the full usage.
  const partial = knobs.noUsage
    ? ''
    : `,"usageMetadata":{"promptTokenCount":${conv.promptTokens},"totalTokenCount":${conv.promptTokens}}`;
  const tail = `${partial},"modelVersion":${JSON.stringify(model)},"responseId":"${responseId}"}`;
  const chunks: string[] = [];
  // The thought summary comes in its own chunk, before the answer.
  if (p.thought !== undefined) {
    chunks.push(
      `{"candidates":[{"content":{"parts":${JSON.stringify(thoughtParts)},"role":"model"},"index":0}]${tail}`,
    );
  }
  const pieces = p.tools.length > 0 ? [] : splitPieces(p.text, knobs.chunks);
  for (let i = 0; i < pieces.length - 1; i++) {
    chunks.push(
      `{"candidates":[{"content":{"parts":[{"text":${JSON.stringify(pieces[i])}}],"role":"model"},"index":0}]${tail}`,
    );
  }
  const lastParts = p.tools.length > 0 ? finalParts : [{ text: pieces[pieces.length - 1] ?? '' }];
  chunks.push(
    JSON.stringify({
      candidates: [{ content: { parts: lastParts, role: 'model' }, finishReason: p.finishReason, index: 0 }],
      usageMetadata: fullUsage,
      modelVersion: model,
      responseId,
    }),
  );
  if (req.query.get('alt') === 'sse') {
    return {
      kind: 'stream',
      contentType: 'text/event-stream',
      frames: chunks.map((c) => `data: ${c}${EOL}`),
      errorFrame: MIDSTREAM_ERROR,
      throttleFrame: `data: ${errorBody(429, THROTTLE_MESSAGE)}${EOL}`,
    };
  }
  // Without alt=sse the API streams one JSON array, element by element.
  const frames = chunks.map((c, i) => (i === 0 ? `[${c}` : `\n,\r\n${c}`));
  frames.push('\n]');
  return {
    kind: 'stream',
    contentType: 'application/json; charset=UTF-8',
    frames,
    errorFrame: `\n,\r\n${errorBody(500, 'An internal error has occurred.')}\n]`,
    throttleFrame: `\n,\r\n${errorBody(429, THROTTLE_MESSAGE)}\n]`,
  };
}

export function embeddingDims(model: string | undefined, requested: unknown): number {
  return asNumber(requested) ?? (model?.includes('gemini-embedding') ? 3072 : 768);
}

function embedContent(req: SimRequest): SimReply {
  const body = req.json;
  const content = asObject(body?.content);
  if (!body || !content)
    return geminiDialect.errorReply(400, '* EmbedContentRequest.content: content is not specified\n');
  const v = embeddingVector(
    contentText(content.parts),
    embeddingDims(req.params.model, body.outputDimensionality),
  );
  return { kind: 'json', status: 200, body: JSON.stringify({ embedding: { values: vectorToArray(v) } }) };
}

function batchEmbedContents(req: SimRequest): SimReply {
  const body = req.json;
  const requests = asArray(body?.requests);
  if (requests.length === 0)
    return geminiDialect.errorReply(400, '* BatchEmbedContentsRequest.requests: requests is not specified\n');
  const embeddings = requests.map((r) => {
    const o = asObject(r);
    const text = contentText(asObject(o?.content)?.parts);
    return {
      values: vectorToArray(embeddingVector(text, embeddingDims(req.params.model, o?.outputDimensionality))),
    };
  });
  return { kind: 'json', status: 200, body: JSON.stringify({ embeddings }) };
}

function countTokens(req: SimRequest): SimReply {
  const body = req.json ?? {};
  const inner = asObject(body.generateContentRequest) ?? body;
  const totalTokens = readContents({ ...inner, contents: inner.contents ?? [] }).promptTokens;
  return {
    kind: 'json',
    status: 200,
    body: JSON.stringify({
      totalTokens,
      promptTokensDetails: [{ modality: 'TEXT', tokenCount: totalTokens }],
    }),
  };
}

export const GEMINI_MODELS = [
  'gemini-2.5-pro',
  'gemini-2.5-flash',
  'gemini-2.0-flash',
  'text-embedding-004',
  'gemini-embedding-001',
];

const MODELS_BODY = JSON.stringify({
  models: GEMINI_MODELS.map((id) => ({
    name: `models/${id}`,
    version: '001',
    displayName: id,
    inputTokenLimit: 1_048_576,
    outputTokenLimit: 65_536,
    supportedGenerationMethods: id.includes('embedding')
      ? ['embedContent', 'batchEmbedContents']
      : ['generateContent', 'streamGenerateContent', 'countTokens'],
  })),
});

export function geminiListModels(): SimReply {
  return { kind: 'json', status: 200, body: MODELS_BODY };
}

function generateContent(req: SimRequest): SimReply {
  return generate(req, false);
}

function streamGenerateContent(req: SimRequest): SimReply {
  return generate(req, true);
}

/** Handlers for "models/{model}:{method}", keyed by the method in the path. */
export const geminiMethods: Record<string, RouteHandler> = {
  generateContent,
  streamGenerateContent,
  countTokens,
  embedContent,
  batchEmbedContents,
};
