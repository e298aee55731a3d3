// A completion-style embeddings client talking to Vertex AI's text embeddings, the Google publisher's
// `models/{model}:predict` (the provider file sets the path): one instance per input text, the
// dimensions as `parameters.outputDimensionality`. Unlike the Gemini API's batchEmbedContents, the reply
// counts each text's tokens (`statistics.token_count`), so the client's usage and the bill are Vertex's.

import { isObject } from '../../../common/json-guards.ts';
import type { JsonObject, JsonValue } from '../../../common/types.ts';
import type { Translator, TranslatorInit } from '../../translators/types.ts';
import { defineTranslator, TranslationError } from '../../translators/types.ts';
import type { UsagePreset } from '../../usage/types.ts';
import { googleThrottling } from '../gemini/errors.ts';
import { inputTexts, openaiEmbeddingList } from '../gemini/openai-embeddings-to-gemini.ts';
import { asArray, asNumber, openaiErrorFromGemini } from '../gemini/translator-shared.ts';

/** The token counts of a predict reply's embeddings, in order (0 where one has none). */
function tokenCounts(body: JsonValue): number[] | undefined {
  if (!isObject(body) || !Array.isArray(body.predictions)) return undefined;
  return body.predictions.map((p) => {
    const embeddings = isObject(p) ? p.embeddings : undefined;
    const statistics = isObject(embeddings) ? embeddings.statistics : undefined;
    return (isObject(statistics) ? asNumber(statistics.token_count) : undefined) ?? 0;
  });
}

function createOpenaiEmbeddingsToVertexPredict(init: TranslatorInit): Translator {
  let base64 = false;

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
    const out: JsonObject = { instances: texts.map((content): JsonObject => ({ content })) };
    if (dimensions !== undefined) out.parameters = { outputDimensionality: dimensions };
    return out;
  }

  function response(body: JsonValue): JsonValue {
    if (!isObject(body)) throw new TranslationError('upstream reply is not a JSON object');
    const vectors = asArray(body.predictions).map((p) => {
      const embeddings = isObject(p) ? p.embeddings : undefined;
      return isObject(embeddings) ? asArray(embeddings.values) : [];
    });
    const tokens = (tokenCounts(body) ?? []).reduce((sum, n) => sum + n, 0);
    return openaiEmbeddingList(vectors, base64, init.model ?? init.upstreamModel ?? '', tokens);
  }

  return {
    request,
    response,
    // Embeddings never stream.
    streamEvent: () => [],
    streamEnd: () => [],
    error(status, body) {
      const throttled = googleThrottling(status, body);
      if (throttled !== undefined) throw throttled;
      return openaiErrorFromGemini(status, body, init.requestId);
    },
  };
}

export const openaiEmbeddingsToVertexPredict = defineTranslator(
  'openai_embeddings_to_vertex_predict',
  createOpenaiEmbeddingsToVertexPredict,
);

/** `usage_extract vertex_predict_embeddings`: the input tokens are the sum of the predictions' counts. */
export const vertexPredictEmbeddings: UsagePreset = {
  name: 'vertex_predict_embeddings',
  fromJson(body) {
    const counts = tokenCounts(body);
    if (counts === undefined) return undefined;
    const input = counts.reduce((sum, n) => sum + n, 0);
    return { inputTokens: input, outputTokens: 0, totalTokens: input };
  },
  createSniffer: () => ({ event() {}, result: () => undefined, final: () => false }),
};
