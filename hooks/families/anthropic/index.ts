// The Anthropic Messages family: POST /v1/messages, the key in `x-api-key`, errors typed by Anthropic's
// table, and the translators between it and the completion-style family.

import type { WireFamily } from '../types.ts';
import { anthropicToOpenai } from './anthropic-to-openai.ts';
import { anthropicErrorBody, anthropicErrorEvent, anthropicErrorType } from './errors.ts';
import { openaiToAnthropic } from './openai-to-anthropic.ts';
import { anthropicMessages } from './usage.ts';

export const anthropicFamily: WireFamily = {
  name: 'anthropic',
  routes: [{ path: '/v1/messages', api: 'native.messages' }],
  keyHeaders: ['x-api-key'],
  forwardedHeaders: ['anthropic-version', 'anthropic-beta'],
  errorType: anthropicErrorType,
  errorBody: anthropicErrorBody,
  errorEvent: anthropicErrorEvent,
  usagePresets: [anthropicMessages],
  usageFields: ['usage'],
  completionStyleUsage: false,
  translators: [openaiToAnthropic, anthropicToOpenai],
};
