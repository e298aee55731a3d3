// Bedrock's errors: whole replies are `{"message": "..."}` (the exception's name is in the
// `x-amzn-errortype` header), stream exceptions are event-stream messages named by `:exception-type`.

import { asString, isObject } from '../../../common/json-guards.ts';
import type { JsonObject, JsonValue, ResponsePart } from '../../../common/types.ts';
import { genericUpstreamMessage } from '../../translators/json.ts';
import { anthropicErrorType } from '../anthropic/errors.ts';

/** The HTTP status each Bedrock exception stands for, as the gateway answers it. */
const EXCEPTION_STATUS: Readonly<Record<string, number>> = {
  accessdeniedexception: 403,
  validationexception: 400,
  resourcenotfoundexception: 404,
  throttlingexception: 429,
  servicequotaexceededexception: 429,
  modelnotreadyexception: 503,
  serviceunavailableexception: 503,
  modeltimeoutexception: 504,
  modelerrorexception: 502,
  modelstreamerrorexception: 502,
  internalserverexception: 500,
};

/** The status of an exception by its name in any case (`ThrottlingException`, `throttlingException`). */
export function bedrockExceptionStatus(exceptionType: string): number {
  const name = exceptionType.split(':')[0]!.trim().toLowerCase();
  return EXCEPTION_STATUS[name] ?? 500;
}

/** The message of a Bedrock error body; a generic one when it has none (never the raw text). */
export function readBedrockError(status: number, body: JsonValue | string): string {
  if (isObject(body)) {
    const message = asString(body.message) ?? asString(body.Message);
    if (message !== undefined) return message;
    // Already in the Anthropic shape (an error event of our own framing, a proxy in between).
    if (isObject(body.error)) {
      const inner = asString(body.error.message);
      if (inner !== undefined) return inner;
    }
  }
  return genericUpstreamMessage(status);
}

/** A Bedrock error body as an Anthropic one (what Anthropic clients and translators read). */
export function bedrockErrorAsAnthropic(status: number, body: JsonValue | string): JsonObject {
  if (isObject(body) && body.type === 'error' && isObject(body.error)) return body;
  return {
    type: 'error',
    error: { type: anthropicErrorType(status), message: readBedrockError(status, body) },
  };
}

/**
 * A stream exception as an Anthropic `error` event; `error.code` keeps the exception's name and
 * `error.status` the status it stands for, for the translators of Converse streams.
 */
export function bedrockExceptionEvent(exceptionType: string, payload: string): ResponsePart {
  const status = bedrockExceptionStatus(exceptionType);
  let body: JsonValue | string = payload;
  try {
    body = JSON.parse(payload) as JsonValue;
  } catch {
    // Not JSON: the generic message below.
  }
  const message = readBedrockError(status, body);
  const error = { type: anthropicErrorType(status), message, code: exceptionType, status };
  return { type: 'event', event: 'error', data: JSON.stringify({ type: 'error', error }) };
}
