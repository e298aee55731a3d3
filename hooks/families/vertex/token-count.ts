// Vertex AI's counting endpoints. Claude: `publishers/anthropic/models/count-tokens:rawPredict`, one
// endpoint for every model, taking Anthropic's count_tokens body with the model in it and the
// `anthropic_version` the official Vertex SDK adds to every body. Gemini: `models/{model}:countTokens`,
// whose request holds contents, systemInstruction and tools at the top level (Vertex has no
// `generateContentRequest` wrapper, which the Gemini API's counting request uses).
//
// `<client>_count_to_vertex_anthropic` and `<client>_count_to_vertex_gemini` are made for each family
// with a counting endpoint, over the generation translator of the same pair, as the registry makes the
// other counting translators.

import type { JsonObject } from '../../../common/types.ts';
import type { TranslatorFactory } from '../../translators/types.ts';
import { anthropicTokenCount } from '../anthropic/token-count.ts';
import { ANTHROPIC_CLOUD_VERSION } from '../bedrock/index.ts';
import { countTranslator } from '../count-translator.ts';
import { geminiTokenCount } from '../gemini/token-count.ts';
import { responsesTokenCount } from '../responses/token-count.ts';
import type { TokenCount } from '../types.ts';

/** The fields of a generateContent body Vertex's countTokens takes. */
const VERTEX_COUNTED_FIELDS = ['contents', 'systemInstruction', 'tools'] as const;

function vertexAnthropicCount(anthropic: TokenCount): TokenCount {
  const requestFor = anthropic.requestFor;
  if (requestFor === undefined) throw new Error('the Anthropic family has no counting request');
  return {
    ...anthropic,
    requestFor: (generation, upstreamModel) => ({
      ...requestFor(generation, upstreamModel),
      anthropic_version: ANTHROPIC_CLOUD_VERSION.vertex,
    }),
  };
}

function vertexGeminiCount(gemini: TokenCount): TokenCount {
  return {
    ...gemini,
    requestFor(generation) {
      const out: JsonObject = {};
      for (const field of VERTEX_COUNTED_FIELDS) {
        const value = generation[field];
        if (value !== undefined) out[field] = value;
      }
      return out;
    },
  };
}

/** The families with a counting endpoint, as clients. */
const CLIENTS: readonly (TokenCount & { readonly family: string })[] = [
  { ...anthropicTokenCount, family: 'anthropic' },
  { ...geminiTokenCount, family: 'gemini' },
  { ...responsesTokenCount, family: 'responses' },
];

const CLAUDE = { ...vertexAnthropicCount(anthropicTokenCount), family: 'vertex_anthropic' };
const GEMINI = { ...vertexGeminiCount(geminiTokenCount), family: 'vertex_gemini' };

export function vertexCountTranslators(
  translators: ReadonlyMap<string, TranslatorFactory>,
): TranslatorFactory[] {
  const out: TranslatorFactory[] = [];
  for (const client of CLIENTS) {
    const toClaude = translators.get(`${client.family}_to_vertex_anthropic`);
    if (toClaude !== undefined) out.push(countTranslator(client, toClaude, CLAUDE));
    const toGemini = translators.get(`${client.family}_to_vertex_gemini`);
    if (toGemini !== undefined) out.push(countTranslator(client, toGemini, GEMINI));
  }
  return out;
}
