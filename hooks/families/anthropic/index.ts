// The Anthropic Messages family: POST /v1/messages, the key in `x-api-key`, errors typed by Anthropic's
// table, and the translators between it and the completion-style family.

import type { ListedModel, WireFamily } from '../types.ts';
import { anthropicToOpenai } from './anthropic-to-openai.ts';
import { anthropicBodySchemas } from './body-schemas.ts';
import { anthropicErrorBody, anthropicErrorEvent, anthropicErrorType } from './errors.ts';
import { openaiToAnthropic } from './openai-to-anthropic.ts';
import { ANTHROPIC_RATE_LIMIT_PREFIXES, anthropicRateLimitHeaders } from './rate-limit-headers.ts';
import { anthropicRequestText } from './request-text.ts';
import { anthropicTelemetry } from './telemetry.ts';
import { anthropicTokenCount } from './token-count.ts';
import { anthropicMessages } from './usage.ts';

/** A model in the shape of Anthropic's Models API (`created` is the configuration's load time). */
const model = (m: ListedModel, created: number) => ({
  type: 'model',
  id: m.id,
  display_name: m.id,
  created_at: new Date(created * 1000).toISOString(),
});

export const anthropicFamily: WireFamily = {
  name: 'anthropic',
  routes: [
    { path: '/v1/messages', api: 'native.messages' },
    { path: '/v1/messages/count_tokens', api: 'messages.count_tokens' },
  ],
  models: {
    paths: ['/v1/models'],
    apis: ['native.messages'],
    list: (models, created) => ({
      data: models.map((m) => model(m, created)),
      has_more: false,
      first_id: models[0]?.id ?? null,
      last_id: models.at(-1)?.id ?? null,
    }),
    item: model,
  },
  keyHeaders: ['x-api-key'],
  // The Anthropic SDKs list models at GET /v1/models, with x-api-key or a bearer token but always with
  // anthropic-version: they get this family's shape.
  claimsModelPathsByCarrier: true,
  sdkHeaders: ['anthropic-version'],
  forwardedHeaders: ['anthropic-version', 'anthropic-beta'],
  bodySchemas: anthropicBodySchemas,
  errorType: anthropicErrorType,
  errorBody: anthropicErrorBody,
  errorEvent: anthropicErrorEvent,
  rateLimitHeaders: anthropicRateLimitHeaders,
  rateLimitHeaderPrefixes: ANTHROPIC_RATE_LIMIT_PREFIXES,
  usagePresets: [anthropicMessages],
  usageFields: ['usage'],
  completionStyleUsage: false,
  requestText: anthropicRequestText,
  // text_delta, input_json_delta and thinking_delta events; `text` blocks of whole replies.
  replyTextFields: ['text', 'partial_json', 'thinking'],
  translators: [openaiToAnthropic, anthropicToOpenai],
  tokenCount: anthropicTokenCount,
  streamStatesInput: true,
  telemetry: anthropicTelemetry,
};
