// Errors in the Gemini shape: `{error:{code,message,status,details}}` with a google.rpc.Code name in
// `status`, and mid-stream the same object as a nameless SSE event.

import { clip, GatewayError, withRequestId } from '../../../common/errors.ts';
import { isObject } from '../../../common/json-guards.ts';
import type { JsonObject, JsonValue, SseOut } from '../../../common/types.ts';

/**
 * google.rpc.Code names by HTTP status, as the Gemini API reports them in `error.status`. Statuses
 * Google's mapping has no row for take the nearest code: 402 (the gateway's balance check) is a failed
 * precondition, 405 an unimplemented method, 408 and 504 a deadline, 413 and 415 a bad argument.
 */
const GOOGLE_STATUS: Readonly<Record<number, string>> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  402: 'FAILED_PRECONDITION',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  405: 'UNIMPLEMENTED',
  408: 'DEADLINE_EXCEEDED',
  409: 'ABORTED',
  412: 'FAILED_PRECONDITION',
  413: 'INVALID_ARGUMENT',
  415: 'INVALID_ARGUMENT',
  429: 'RESOURCE_EXHAUSTED',
  499: 'CANCELLED',
  500: 'INTERNAL',
  501: 'UNIMPLEMENTED',
  502: 'UNAVAILABLE',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

export function googleStatusName(status: number): string {
  return (
    GOOGLE_STATUS[status] ?? (status >= 500 ? 'INTERNAL' : status >= 400 ? 'INVALID_ARGUMENT' : 'UNKNOWN')
  );
}

export function geminiErrorBody(err: GatewayError, requestId: string): JsonObject {
  const details: JsonObject[] = [
    { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: err.code, domain: 'router' },
  ];
  // As Google's own 429s say when to come back: a google.rpc.RetryInfo with a Duration in seconds.
  if (err.retryAfterMs !== undefined)
    details.push({
      '@type': 'type.googleapis.com/google.rpc.RetryInfo',
      retryDelay: `${Math.ceil(err.retryAfterMs / 1000)}s`,
    });
  return {
    error: {
      code: err.status,
      message: withRequestId(err.message, requestId),
      status: googleStatusName(err.status),
      details,
    },
  };
}

export function geminiErrorEvent(err: GatewayError, requestId: string): SseOut {
  return { data: JSON.stringify(geminiErrorBody(err, requestId)) };
}

/**
 * A Google Cloud API's throttling (429 RESOURCE_EXHAUSTED: a quota or the shared capacity) as the
 * catalogue's `upstream_rate_limited`, with Google's message; undefined for any other error.
 */
export function googleThrottling(status: number, body: JsonValue | string): GatewayError | undefined {
  if (status !== 429) return undefined;
  const error = isObject(body) ? body.error : undefined;
  const message = isObject(error) && typeof error.message === 'string' ? error.message : undefined;
  return new GatewayError(
    'upstream_rate_limited',
    message === undefined ? undefined : `The upstream provider is throttling requests: ${clip(message, 200)}`,
  );
}
