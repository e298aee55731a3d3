// Errors in the Anthropic Messages shape: `{type:'error', error:{type,message}, request_id}`, and
// mid-stream an SSE event named `error` with the same body.

import type { GatewayError } from '../../../common/errors.ts';
import { withRequestId } from '../../../common/errors.ts';
import type { JsonObject, SseOut } from '../../../common/types.ts';

/** Anthropic's error types by HTTP status, as its API documents them (test/hooks/families pins them). */
const ANTHROPIC_TYPES: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  408: 'timeout_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  502: 'api_error',
  503: 'overloaded_error',
  504: 'timeout_error',
  529: 'overloaded_error',
};

export function anthropicErrorType(status: number): string {
  return ANTHROPIC_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
}

export function anthropicErrorBody(err: GatewayError, requestId: string): JsonObject {
  return {
    type: 'error',
    error: {
      type: anthropicErrorType(err.status),
      message: withRequestId(err.message, requestId),
      code: err.code,
    },
    request_id: requestId,
  };
}

export function anthropicErrorEvent(err: GatewayError, requestId: string): SseOut {
  return { event: 'error', data: JSON.stringify(anthropicErrorBody(err, requestId)) };
}
