// gen_ai.operation.name of every api (OpenTelemetry GenAI semantic conventions), for spans and metrics
// alike: the conventions' well-known values where one applies, a custom value otherwise
// (docs/operations.md "Metrics"). Keyed by every api, so a new api cannot go without one.

import type { ApiName } from '../../common/types.ts';

const GEN_AI_OPERATIONS: Readonly<Record<ApiName, string>> = {
  completions: 'text_completion',
  'chat.completions': 'chat',
  responses: 'chat',
  'native.messages': 'chat',
  embeddings: 'embeddings',
  'images.generations': 'image_generation',
  'images.edits': 'image_edit',
  'audio.speech': 'text_to_speech',
  'audio.transcriptions': 'transcription',
  'audio.translations': 'translation',
  'native.generateContent': 'generate_content',
  'native.streamGenerateContent': 'generate_content',
  // A realtime session is a conversation: each of its model responses is a chat turn.
  realtime: 'chat',
  'native.live': 'chat',
  'messages.count_tokens': 'count_tokens',
  'native.countTokens': 'count_tokens',
  'responses.input_tokens': 'count_tokens',
};

export function operationName(api: ApiName): string {
  return GEN_AI_OPERATIONS[api];
}
