// The Responses API family: POST /v1/responses. Its bodies and whole-reply errors are completion-style,
// but its streams are typed events that end in an `error` event on failure, and its translator reaches
// the other providers through the completion-style pivot.

import { openaiErrorBody, openaiErrorType } from '../openai/errors.ts';
import { OPENAI_RATE_LIMIT_PREFIXES, openaiRateLimitHeaders } from '../openai/rate-limit-headers.ts';
import type { WireFamily } from '../types.ts';
import { responsesBodySchemas } from './body-schemas.ts';
import { responsesErrorEvent } from './errors.ts';
import { responsesRequestText } from './request-text.ts';
import { responsesToOpenai } from './responses-to-openai.ts';
import { responsesTelemetry } from './telemetry.ts';
import { responsesTokenCount } from './token-count.ts';

export const responsesFamily: WireFamily = {
  name: 'responses',
  routes: [
    { path: '/v1/responses', api: 'responses' },
    { path: '/v1/responses/input_tokens', api: 'responses.input_tokens' },
  ],
  keyHeaders: [],
  forwardedHeaders: ['openai-beta'],
  bodySchemas: responsesBodySchemas,
  errorType: openaiErrorType,
  errorBody: openaiErrorBody,
  errorEvent: responsesErrorEvent,
  rateLimitHeaders: openaiRateLimitHeaders,
  rateLimitHeaderPrefixes: OPENAI_RATE_LIMIT_PREFIXES,
  usagePresets: [],
  usageFields: ['usage'],
  completionStyleUsage: true,
  requestText: responsesRequestText,
  // response.output_text.delta and the other typed deltas carry `delta`.
  replyTextFields: ['delta', 'text', 'arguments', 'refusal'],
  translators: [responsesToOpenai],
  tokenCount: responsesTokenCount,
  telemetry: responsesTelemetry,
};
