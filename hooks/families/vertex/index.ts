// Google Vertex AI's wire: no client speaks it. Generation needs nothing of its own: Gemini models take
// Gemini bodies (the Gemini family's translators) and Claude models the Anthropic body the clouds take
// (`<client>_to_vertex_anthropic`, beside Bedrock's in hooks/families/bedrock/anthropic-body.ts). What
// differs is counting (token-count.ts).

import type { ProviderWire } from '../types.ts';
import { vertexCountTranslators } from './token-count.ts';

export const vertexWire: ProviderWire = {
  name: 'vertex',
  translators: [],
  derive: vertexCountTranslators,
  usagePresets: [],
};
