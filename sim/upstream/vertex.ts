// Google Vertex AI: publishers/google (the Gemini methods, as sim/upstream/gemini.ts answers them) and
// publishers/anthropic (rawPredict / streamRawPredict with anthropic_version "vertex-2023-10-16", and
// count-tokens:rawPredict). The bearer token check lives in cloud-auth.ts.

import {
  anthropicDialect,
  anthropicInputTokens,
  anthropicReply,
  anthropicTurn,
  invalidMessagesBody,
} from './anthropic.ts';
import { embeddingDims, geminiDialect, geminiMethods } from './gemini.ts';
import { asArray, asObject, asString, embeddingVector, tokens, vectorToArray } from './text.ts';
import type { Dialect, RouteHandler, SimReply, SimRequest } from './types.ts';

export const VERTEX_ANTHROPIC_VERSION = 'vertex-2023-10-16';

export const VERTEX_PATH =
  /^\/(?:v1|v1beta1)\/projects\/([^/]+)\/locations\/([^/]+)\/publishers\/(google|anthropic)\/models\/([^/:]+):([A-Za-z]+)$/;

/** Vertex answers in Google's error shape; a Claude model's own refusals (400, 529) keep Anthropic's. */
export const vertexDialect: Dialect = {
  name: 'vertex',
  errorReply: geminiDialect.errorReply,
  hasAuth: (headers) => (headers.authorization ?? '').length > 7,
};

export const vertexAnthropicDialect: Dialect = {
  name: 'vertex',
  errorReply(status, message) {
    return status === 400 || status === 529
      ? anthropicDialect.errorReply(status, message)
      : geminiDialect.errorReply(status, message);
  },
  hasAuth: vertexDialect.hasAuth,
};

function rawPredict(req: SimRequest): SimReply {
  const body = req.json;
  const invalid = invalidMessagesBody(body);
  if (invalid !== undefined || !body) return anthropicDialect.errorReply(400, invalid ?? '');
  if (body.model !== undefined)
    return anthropicDialect.errorReply(400, 'model: Extra inputs are not permitted');
  if (body.anthropic_version !== VERTEX_ANTHROPIC_VERSION)
    return anthropicDialect.errorReply(
      400,
      body.anthropic_version === undefined
        ? 'anthropic_version: Field required'
        : `anthropic_version: Input should be '${VERTEX_ANTHROPIC_VERSION}'`,
    );
  // The response names the model as Anthropic does: "claude-sonnet-4-5@20250929" → "claude-sonnet-4-5-20250929".
  const turn = anthropicTurn(body, req.knobs, req.params.model!.replace('@', '-'));
  return anthropicReply(turn, body.stream === true, req.knobs);
}

function countTokens(req: SimRequest): SimReply {
  const body = req.json;
  if (!body || !Array.isArray(body.messages))
    return anthropicDialect.errorReply(400, 'messages: Field required');
  if (typeof body.model !== 'string') return anthropicDialect.errorReply(400, 'model: Field required');
  return { kind: 'json', status: 200, body: JSON.stringify({ input_tokens: anthropicInputTokens(body) }) };
}

/** Vertex's CountTokensRequest has the generation fields at the top level, no Gemini API wrapper. */
function geminiCountTokens(req: SimRequest): ReturnType<RouteHandler> {
  const unknown = Object.keys(req.json ?? {}).find((k) => !VERTEX_COUNT_FIELDS.has(k));
  if (unknown !== undefined)
    return geminiDialect.errorReply(
      400,
      `Invalid JSON payload received. Unknown name "${unknown}": Cannot find field.`,
    );
  return geminiMethods.countTokens!(req);
}

const VERTEX_COUNT_FIELDS = new Set([
  'model',
  'instances',
  'contents',
  'systemInstruction',
  'tools',
  'generationConfig',
]);

/**
 * Text embeddings, `:predict`: `{instances: [{content, task_type?, title?}], parameters?:
 * {outputDimensionality?, autoTruncate?}}` → one prediction per instance with its vector and its token
 * count, and the characters billed.
 */
function predict(req: SimRequest): SimReply {
  const instances = asArray(req.json?.instances);
  if (instances.length === 0) return geminiDialect.errorReply(400, 'instances: Field required');
  const dims = embeddingDims(req.params.model, asObject(req.json?.parameters)?.outputDimensionality);
  let characters = 0;
  const predictions = [];
  for (const [i, instance] of instances.entries()) {
    const content = asString(asObject(instance)?.content);
    if (content === undefined)
      return geminiDialect.errorReply(400, `instances[${i}].content: Field required`);
    characters += content.replace(/\s/g, '').length;
    predictions.push({
      embeddings: {
        statistics: { truncated: false, token_count: tokens(content) },
        values: vectorToArray(embeddingVector(content, dims)),
      },
    });
  }
  return {
    kind: 'json',
    status: 200,
    body: JSON.stringify({ predictions, metadata: { billableCharacterCount: characters } }),
  };
}

/** The handler for a Vertex path's publisher, model and method, or undefined. */
export function vertexHandler(publisher: string, model: string, method: string): RouteHandler | undefined {
  if (publisher === 'google') {
    if (method === 'countTokens') return geminiCountTokens;
    return method === 'predict' ? predict : geminiMethods[method];
  }
  if (method !== 'rawPredict' && method !== 'streamRawPredict') return undefined;
  if (model === 'count-tokens') return method === 'rawPredict' ? countTokens : undefined;
  return rawPredict;
}
