// The completion-style family: the OpenAI REST API and the many servers that speak it. The Responses
// API belongs here: the gateway's own errors reach its clients in the same shape, which the SDK raises
// on Responses streams too; only its usage preset differs.

import type { ListedModel, WireFamily } from '../types.ts';
import { openaiErrorBody, openaiErrorEvent, openaiErrorType } from './errors.ts';
import { UNIT_PRESETS } from './unit-usage.ts';
import { openAiCompletionPreset, openAiResponses } from './usage.ts';
import { openaiUsageStrip } from './usage-strip.ts';

const model = (m: ListedModel, created: number) => ({
  id: m.id,
  object: 'model',
  created,
  owned_by: m.ownedBy ?? 'router',
});

export const openaiFamily: WireFamily = {
  name: 'openai',
  routes: [
    { path: '/v1/chat/completions', api: 'chat.completions' },
    { path: '/v1/completions', api: 'completions' },
    { path: '/v1/responses', api: 'responses' },
    { path: '/v1/embeddings', api: 'embeddings' },
    { path: '/v1/images/generations', api: 'images.generations' },
    { path: '/v1/images/edits', api: 'images.edits', body: 'multipart' },
    { path: '/v1/audio/speech', api: 'audio.speech' },
    { path: '/v1/audio/transcriptions', api: 'audio.transcriptions', body: 'multipart' },
    { path: '/v1/audio/translations', api: 'audio.translations', body: 'multipart' },
  ],
  models: {
    paths: ['/v1/models'],
    list: (models, created) => ({ object: 'list', data: models.map((m) => model(m, created)) }),
    item: model,
  },
  keyHeaders: [],
  forwardedHeaders: ['openai-beta'],
  errorType: openaiErrorType,
  errorBody: openaiErrorBody,
  errorEvent: openaiErrorEvent,
  usagePresets: [
    openAiCompletionPreset('openai_chat_completions', false),
    openAiCompletionPreset('openai_completions', false),
    openAiResponses,
    openAiCompletionPreset('openai_embeddings', true),
    ...UNIT_PRESETS,
  ],
  usageFields: ['usage'],
  completionStyleUsage: true,
  translators: [],
  transforms: [openaiUsageStrip],
};
