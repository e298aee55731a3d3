// AWS Bedrock's wire: no client speaks it, so it is a provider wire (types.ts `ProviderWire`), not a
// wire family: translators from the pivot to Converse, the Anthropic body Bedrock's InvokeModel (and
// Vertex's rawPredict) take, usage presets, the event-stream framing of both stream APIs and CountTokens.

import type { ProviderWire } from '../types.ts';
import {
  anthropicToBedrockInvoke,
  anthropicToVertexAnthropic,
  cloudAnthropicTranslators,
} from './anthropic-body.ts';
import { bedrockCounts } from './count-tokens.ts';
import { bedrockErrorStatus } from './errors.ts';
import { bedrockEventStream } from './event-stream.ts';
import { openaiToBedrockConverse } from './openai-to-bedrock-converse.ts';
import { bedrockConverse, bedrockInvoke } from './usage.ts';

export const bedrockWire: ProviderWire = {
  name: 'bedrock',
  translators: [openaiToBedrockConverse, anthropicToBedrockInvoke, anthropicToVertexAnthropic],
  derive: cloudAnthropicTranslators,
  usagePresets: [bedrockConverse, bedrockInvoke],
  framings: [bedrockEventStream],
  tokenCounts: bedrockCounts,
  errorStatus: bedrockErrorStatus,
};

export { ANTHROPIC_CLOUD_VERSION, cloudAnthropicBody } from './anthropic-body.ts';
export { bedrockExceptionStatus } from './errors.ts';
export { EVENT_STREAM_CONTENT_TYPE, EventStreamDecoder, encodeEventStreamMessage } from './event-stream.ts';
export { bedrockApiFor, bedrockBaseModelId, bedrockModelSegment, bedrockPath } from './model-id.ts';
