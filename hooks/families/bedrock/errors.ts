// Bedrock's errors: whole replies are `{"message": "..."}` (the exception's name is in the
// `x-amzn-errortype` header, sometimes also the body's `__type`), stream exceptions are event-stream
// messages named by `:exception-type`. The client gets the status the exception stands for (AWS sends
// ModelNotReadyException as 429 and ModelTimeoutException as 408), and throttling is the catalogue's
// 429 `upstream_rate_limited`, whatever the client's family.

import { clip, GatewayError } from '../../../common/errors.ts';
import { asString, isObject } from '../../../common/json-guards.ts';
import type { JsonObject, JsonValue, ResponsePart } from '../../../common/types.ts';
import { genericUpstreamMessage } from '../../translators/json.ts';
import { anthropicErrorType } from '../anthropic/errors.ts';
import type { UpstreamErrorStatus } from '../types.ts';

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

/** An exception's name as the table keys it: `ThrottlingException:http://...` or `...#ThrottlingException`. */
function exceptionKey(exceptionType: string): string {
  const name = exceptionType.split(':')[0]!;
  return name
    .slice(name.lastIndexOf('#') + 1)
    .trim()
    .toLowerCase();
}

/** The status of an exception by its name in any case (`ThrottlingException`, `throttlingException`). */
export function bedrockExceptionStatus(exceptionType: string): number {
  return EXCEPTION_STATUS[exceptionKey(exceptionType)] ?? 500;
}

/** The status of a Bedrock error reply as the client gets it, by the exception its header names. */
export const bedrockErrorStatus: UpstreamErrorStatus = {
  formats: ['bedrock_invoke', 'bedrock_converse'],
  status(status, headers) {
    const name = headers['x-amzn-errortype'];
    return name === undefined ? status : (EXCEPTION_STATUS[exceptionKey(name)] ?? status);
  },
};

/**
 * Throws `upstream_rate_limited` for a throttled Bedrock call: a 429 (after the status mapping above,
 * only ThrottlingException and ServiceQuotaExceededException are), or a body whose `__type` names
 * throttling. The upstream's message is kept.
 */
export function throwIfThrottled(status: number, body: JsonValue | string): void {
  const type = isObject(body) ? asString(body.__type) : undefined;
  if (status !== 429 && (type === undefined || bedrockExceptionStatus(type) !== 429)) return;
  throw new GatewayError(
    'upstream_rate_limited',
    `The upstream provider is throttling requests: ${clip(readBedrockError(429, body), 200)}`,
  );
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
  // The catalogue's code where the gateway has one, else the exception's name.
  const code = status === 429 ? 'upstream_rate_limited' : exceptionType;
  const error = { type: anthropicErrorType(status), message, code, status };
  return { type: 'event', event: 'error', data: JSON.stringify({ type: 'error', error }) };
}
