// The completion-style family: the OpenAI REST API and the many servers that speak it, and the pivot
// every other family translates through. The Responses API is a family of its own (../responses): its
// streams and their errors are shaped differently.

import type { ListedModel, WireFamily } from '../types.ts';
import { openaiBodySchemas } from './body-schemas.ts';
import { openaiErrorBody, openaiErrorEvent, openaiErrorType } from './errors.ts';
import { OPENAI_RATE_LIMIT_PREFIXES, openaiRateLimitHeaders } from './rate-limit-headers.ts';
import { openaiRealtime } from './realtime.ts';
import { openaiRequestText } from './request-text.ts';
import { openaiTelemetry } from './telemetry.ts';
import { UNIT_PRESETS } from './unit-usage.ts';
import { openAiCompletionPreset, openAiResponses, STREAM_END } from './usage.ts';
import { openaiUsageStrip } from './usage-strip.ts';

const model = (m: ListedModel, created: number) => ({
  id: m.id,
  object: 'model',
  created,
  owned_by: m.ownedBy ?? 'router',
});

const ROUTES: WireFamily['routes'] = [
  { path: '/v1/chat/completions', api: 'chat.completions' },
  { path: '/v1/completions', api: 'completions' },
  { path: '/v1/embeddings', api: 'embeddings' },
  { path: '/v1/images/generations', api: 'images.generations' },
  { path: '/v1/images/edits', api: 'images.edits', body: 'multipart' },
  { path: '/v1/audio/speech', api: 'audio.speech' },
  { path: '/v1/audio/transcriptions', api: 'audio.transcriptions', body: 'multipart' },
  { path: '/v1/audio/translations', api: 'audio.translations', body: 'multipart' },
];

export const openaiFamily: WireFamily = {
  name: 'openai',
  routes: ROUTES,
  models: {
    paths: ['/v1/models'],
    apis: ROUTES.map((r) => r.api),
    list: (models, created) => ({ object: 'list', data: models.map((m) => model(m, created)) }),
    item: model,
  },
  keyHeaders: [],
  forwardedHeaders: ['openai-beta'],
  bodySchemas: openaiBodySchemas,
  errorType: openaiErrorType,
  errorBody: openaiErrorBody,
  errorEvent: openaiErrorEvent,
  rateLimitHeaders: openaiRateLimitHeaders,
  rateLimitHeaderPrefixes: OPENAI_RATE_LIMIT_PREFIXES,
  usagePresets: [
    openAiCompletionPreset('openai_chat_completions', false),
    openAiCompletionPreset('openai_completions', false),
    openAiResponses,
    openAiCompletionPreset('openai_embeddings', true),
    ...UNIT_PRESETS,
  ],
  usageFields: ['usage'],
  completionStyleUsage: true,
  requestText: openaiRequestText,
  replyTextFields: ['content', 'text', 'arguments', 'refusal'],
  streamEnd: STREAM_END,
  translators: [],
  transforms: [openaiUsageStrip],
  telemetry: openaiTelemetry,
  realtime: [openaiRealtime],
};
