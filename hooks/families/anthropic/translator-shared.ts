// Helpers shared by the two translators between the completion-style (OpenAI) wire format and the
// Anthropic Messages wire format: safe JSON access and the mapping between the two vendors' error types.

import type { JsonObject } from '../../../common/types.ts';
import { parseJsonObject } from '../../translators/json.ts';

export {
  asCount,
  asString,
  genericUpstreamMessage,
  isObject,
  parseJsonObject,
  readUpstreamError,
} from '../../translators/json.ts';

/** Parse tool-call arguments into an object; undefined when they are not a JSON object. */
export function parseArguments(text: string): JsonObject | undefined {
  if (text.trim() === '') return {};
  return parseJsonObject(text);
}

/** Anthropic's error type for an HTTP status: the family's one table (hooks/families/anthropic/errors.ts). */
export { anthropicErrorType as anthropicTypeForStatus } from './errors.ts';

/**
 * Anthropic error type -> completion-style `type` and `code`. The code keeps the Anthropic type's
 * meaning in the vocabulary completion-style clients already match on (e.g. `rate_limit_exceeded`).
 */
const OPENAI_ERROR_FOR_ANTHROPIC: Readonly<Record<string, { type: string; code: string }>> = {
  invalid_request_error: { type: 'invalid_request_error', code: 'invalid_request_error' },
  authentication_error: { type: 'authentication_error', code: 'invalid_api_key' },
  billing_error: { type: 'billing_error', code: 'billing_error' },
  permission_error: { type: 'permission_error', code: 'permission_denied' },
  not_found_error: { type: 'invalid_request_error', code: 'not_found' },
  request_too_large: { type: 'invalid_request_error', code: 'request_too_large' },
  rate_limit_error: { type: 'rate_limit_error', code: 'rate_limit_exceeded' },
  timeout_error: { type: 'server_error', code: 'timeout' },
  api_error: { type: 'server_error', code: 'api_error' },
  overloaded_error: { type: 'server_error', code: 'overloaded' },
};

export function openaiErrorForAnthropicType(anthropicType: string): { type: string; code: string } {
  return OPENAI_ERROR_FOR_ANTHROPIC[anthropicType] ?? { type: 'server_error', code: anthropicType };
}

/**
 * Completion-style error (`type`/`code`, no status mid-stream) -> Anthropic error type. Only the
 * unambiguous cases are mapped; everything else is `api_error`, which Anthropic SDKs treat as a
 * server-side failure.
 */
export function anthropicTypeForOpenaiError(type: string | undefined, code: string | undefined): string {
  // OpenAI's rate-limit errors use type "tokens" / "requests" and code "rate_limit_exceeded".
  if (
    type === 'tokens' ||
    type === 'requests' ||
    type === 'rate_limit_error' ||
    code === 'rate_limit_exceeded'
  ) {
    return 'rate_limit_error';
  }
  if (code === 'invalid_api_key' || type === 'authentication_error') return 'authentication_error';
  if (type === 'permission_error' || code === 'permission_denied') return 'permission_error';
  if (code === 'overloaded' || type === 'overloaded_error') return 'overloaded_error';
  if (type === 'invalid_request_error') return 'invalid_request_error';
  return 'api_error';
}
