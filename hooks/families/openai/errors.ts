// Errors in the completion-style shape: `{error:{message,type,code,param}}`, and mid-stream the same
// object as a nameless SSE event, which the official SDK raises.

import type { GatewayError } from '../../../common/errors.ts';
import { withRequestId } from '../../../common/errors.ts';
import type { JsonObject, SseOut } from '../../../common/types.ts';

/** Completion-style error `type` by HTTP status, for errors that carry no type of their own. */
export function openaiErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/** The gateway's own errors keep the catalogue's type, which completion-style clients match on. */
export function openaiErrorBody(err: GatewayError, requestId: string): JsonObject {
  const error: JsonObject = {
    message: withRequestId(err.message, requestId),
    type: err.type,
    code: err.code,
  };
  if (err.param !== undefined) error.param = err.param;
  return { error };
}

export function openaiErrorEvent(err: GatewayError, requestId: string): SseOut {
  return { data: JSON.stringify(openaiErrorBody(err, requestId)) };
}
