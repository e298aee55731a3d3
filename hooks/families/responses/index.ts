// The Responses API family: POST /v1/responses. Its bodies and whole-reply errors are completion-style,
// but its streams are typed events that end in an `error` event on failure, and its translator reaches
// the other providers through the completion-style pivot.

import { openaiErrorBody, openaiErrorType } from '../openai/errors.ts';
import type { WireFamily } from '../types.ts';
import { responsesErrorEvent } from './errors.ts';
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
  errorType: openaiErrorType,
  errorBody: openaiErrorBody,
  errorEvent: responsesErrorEvent,
  usagePresets: [],
  usageFields: ['usage'],
  completionStyleUsage: true,
  translators: [responsesToOpenai],
  tokenCount: responsesTokenCount,
  telemetry: responsesTelemetry,
};
