// A completion-style embeddings client talking to Gemini's batchEmbedContents (the provider file sets
// the path `models/<m>:batchEmbedContents`).
//
// Usage: Gemini reports no token counts for embeddings, so the gateway estimates usage for billing as
// it does for any upstream that reports none. The client still gets a `usage` object (SDKs expect
// one): its counts are a local o200k token estimate of the input, not an upstream figure. Should the
// upstream ever send `usageMetadata`, that is used instead.

import { asString, isObject } from '../../../common/json-guards.ts';
import type { JsonObject, JsonValue } from '../../../common/types.ts';
import type { Translator, TranslatorInit } from '../../translators/types.ts';
import { defineTranslator, TranslationError } from '../../translators/types.ts';
// The shared counter loads its encoding on first use: importing gpt-tokenizer's default entry here
// would load a whole encoding (docs/architecture.md has its memory cost) into every gateway at start.
import { countTokens } from '../../usage/estimate.ts';
import { asArray, asNumber, field, openaiErrorFromGemini } from './translator-shared.ts';

export function inputTexts(input: JsonValue | undefined): string[] {
  if (typeof input === 'string') return [input];
  if (!Array.isArray(input) || input.length === 0) {
    throw new TranslationError('input must be a non-empty string or array of strings', 'input');
  }
  return input.map((entry, index) => {
    if (typeof entry === 'string') return entry;
    // Token-id inputs are tokenizer-specific; Gemini only embeds text.
    throw new TranslationError('token array input is not supported by Gemini embeddings', `input[${index}]`);
  });
}

/** float32 little-endian, base64: what `encoding_format: "base64"` clients (the openai SDK) decode. */
export function base64Floats(values: JsonValue[]): string {
  const buffer = Buffer.alloc(values.length * 4);
  values.forEach((value, index) => {
    buffer.writeFloatLE(typeof value === 'number' ? value : 0, index * 4);
  });
  return buffer.toString('base64');
}

/** The OpenAI embeddings reply for these vectors (each a list of floats, base64 when asked). */
export function openaiEmbeddingList(
  vectors: readonly JsonValue[][],
  base64: boolean,
  model: string,
  tokens: number,
): JsonObject {
  const data = vectors.map(
    (values, index): JsonObject => ({
      object: 'embedding',
      index,
      embedding: base64 ? base64Floats(values) : values,
    }),
  );
  return { object: 'list', data, model, usage: { prompt_tokens: tokens, total_tokens: tokens } };
}

function createOpenaiEmbeddingsToGemini(init: TranslatorInit): Translator {
  let base64 = false;
  let estimatedTokens = 0;

  function request(body: JsonObject): JsonObject {
    const texts = inputTexts(body.input);
    const format = body.encoding_format;
    if (format !== undefined && format !== 'float' && format !== 'base64') {
      throw new TranslationError('encoding_format must be "float" or "base64"', 'encoding_format');
    }
    base64 = format === 'base64';
    const dimensions = body.dimensions;
    if (dimensions !== undefined && (!Number.isInteger(dimensions) || (dimensions as number) <= 0)) {
      throw new TranslationError('dimensions must be a positive integer', 'dimensions');
    }
    const upstream = init.upstreamModel ?? init.model ?? asString(body.model);
    if (upstream === undefined) throw new TranslationError('model is required', 'model');
    const model = upstream.startsWith('models/') ? upstream : `models/${upstream}`;
    estimatedTokens = texts.reduce((sum, text) => sum + countTokens(text, upstream), 0);
    const requests = texts.map((text): JsonObject => {
      const entry: JsonObject = { model, content: { parts: [{ text }] } };
      if (dimensions !== undefined) entry.outputDimensionality = dimensions;
      return entry;
    });
    return { requests };
  }

  function response(body: JsonValue): JsonValue {
    if (!isObject(body)) throw new TranslationError('upstream reply is not a JSON object');
    const meta = field(body, 'usageMetadata');
    const reported = isObject(meta) ? asNumber(field(meta, 'promptTokenCount')) : undefined;
    const vectors = asArray(body.embeddings).map((entry) => (isObject(entry) ? asArray(entry.values) : []));
    return openaiEmbeddingList(
      vectors,
      base64,
      init.model ?? init.upstreamModel ?? '',
      reported ?? estimatedTokens,
    );
  }

  return {
    request,
    response,
    // Embeddings never stream.
    streamEvent: () => [],
    streamEnd: () => [],
    error: (status, body) => openaiErrorFromGemini(status, body, init.requestId),
  };
}

export const openaiEmbeddingsToGemini = defineTranslator(
  'openai_embeddings_to_gemini',
  createOpenaiEmbeddingsToGemini,
);
