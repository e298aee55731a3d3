// Safe reading of JSON that came over the wire (client bodies, upstream replies and stream events),
// shared by the translators of every family.

import type { ErrorCode } from '../../common/errors.ts';
import { asString, isObject } from '../../common/json-guards.ts';
import type { JsonObject, JsonValue } from '../../common/types.ts';

export { asString, isObject };

/** A non-negative token count, or undefined (null, missing, or garbage from a misbehaving upstream). */
export function asCount(value: JsonValue | undefined): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
}

/** Parse one SSE data payload; undefined when it is not a JSON object (never throws). */
export function parseJsonObject(data: string): JsonObject | undefined {
  try {
    const value: JsonValue = JSON.parse(data);
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Refuses a request field the translator neither carries nor may safely ignore: a feature is translated
 * or refused with its name, never dropped without a word. `known` lists what the translator handles.
 */
export function refuseUnknownFields(
  body: JsonObject,
  known: ReadonlySet<string>,
  refusal: (field: string) => Error,
): void {
  for (const field of Object.keys(body)) {
    if (!known.has(field) && !isNeutral(body[field])) throw refusal(field);
  }
}

/** A value that asks for nothing (null, 0, false, an empty list or object): sending it changes nothing. */
function isNeutral(value: JsonValue | undefined): boolean {
  if (value === null || value === undefined || value === 0 || value === false) return true;
  if (Array.isArray(value)) return value.length === 0;
  return isObject(value) && Object.keys(value).length === 0;
}

/** The message and type of an upstream error body; a generic message when it has none (never raw text). */
export function readUpstreamError(
  status: number,
  body: JsonValue | string,
): { message: string; type: string | undefined } {
  const error = isObject(body) && isObject(body.error) ? body.error : undefined;
  const message = error ? asString(error.message) : undefined;
  if (error === undefined || message === undefined) {
    return { message: genericUpstreamMessage(status), type: undefined };
  }
  return { message, type: asString(error.type) };
}

/** Generic text for upstream errors whose body we cannot read: never echo raw (possibly HTML) bodies. */
export function genericUpstreamMessage(status: number): string {
  return `upstream returned HTTP ${status}`;
}

/** The catalogue's code for a provider's throttling (common/errors.ts), as stream errors carry it. */
export const THROTTLED_CODE = 'upstream_rate_limited' satisfies ErrorCode;

/**
 * Whether an upstream stream error is a provider's throttling that a provider-side translator already
 * named (Bedrock's throttlingException, Claude's rate_limit_error on a cloud, Vertex's
 * RESOURCE_EXHAUSTED): the catalogue's code in the error object's `code`, or in an ErrorInfo `reason` of
 * a Gemini error. A client-side translator keeps that code in its client's error event.
 */
export function isThrottled(error: JsonObject): boolean {
  if (error.code === THROTTLED_CODE) return true;
  const details = error.details;
  return Array.isArray(details) && details.some((d) => isObject(d) && d.reason === THROTTLED_CODE);
}
