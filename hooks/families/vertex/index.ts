// Google Vertex AI's wire: no client speaks it. Gemini models take the Gemini API's bodies
// (`<client>_to_vertex_gemini`: the client's translator to Gemini, throttling as the catalogue's code) and
// Claude models the Anthropic body the clouds take (`<client>_to_vertex_anthropic`, beside Bedrock's in
// hooks/families/bedrock/anthropic-body.ts). Counting has endpoints of its own (token-count.ts), and text
// embeddings are the Google publisher's `:predict`.

import type { ProviderWire } from '../types.ts';
import { vertexGeminiTranslators } from './gemini-publisher.ts';
import {
  openaiEmbeddingsToVertexPredict,
  vertexPredictEmbeddings,
} from './openai-embeddings-to-vertex-predict.ts';
import { vertexCounts } from './token-count.ts';

export const vertexWire: ProviderWire = {
  name: 'vertex',
  translators: [openaiEmbeddingsToVertexPredict],
  derive: vertexGeminiTranslators,
  usagePresets: [vertexPredictEmbeddings],
  tokenCounts: vertexCounts,
};
