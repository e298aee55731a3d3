// Vertex AI's counting endpoints. Claude: `publishers/anthropic/models/count-tokens:rawPredict`, one
// endpoint for every model, taking Anthropic's count_tokens body with the model in it and the
// `anthropic_version` the official Vertex SDK adds to every body. Gemini: `models/{model}:countTokens`,
// whose request holds contents, systemInstruction and tools at the top level (Vertex has no
// `generateContentRequest` wrapper, which the Gemini API's counting request uses). The registry makes
// `<client>_count_to_vertex_anthropic` and `_vertex_gemini` over the generation translators of each pair.

import type { JsonObject } from '../../../common/types.ts';
import { anthropicTokenCount } from '../anthropic/token-count.ts';
import { ANTHROPIC_CLOUD_VERSION } from '../bedrock/index.ts';
import { geminiTokenCount } from '../gemini/token-count.ts';
import type { WireTokenCount } from '../types.ts';

/** The fields of a generateContent body Vertex's countTokens takes. */
const VERTEX_COUNTED_FIELDS = ['contents', 'systemInstruction', 'tools'] as const;

const anthropicRequest = anthropicTokenCount.requestFor!;

export const vertexCounts: readonly WireTokenCount[] = [
  {
    format: 'vertex_anthropic',
    requestFor: (generation, upstreamModel) => ({
      ...anthropicRequest(generation, upstreamModel),
      anthropic_version: ANTHROPIC_CLOUD_VERSION.vertex,
    }),
    read: anthropicTokenCount.read,
  },
  {
    format: 'vertex_gemini',
    requestFor(generation) {
      const out: JsonObject = {};
      for (const field of VERTEX_COUNTED_FIELDS) {
        const value = generation[field];
        if (value !== undefined) out[field] = value;
      }
      return out;
    },
    read: geminiTokenCount.read,
  },
];
