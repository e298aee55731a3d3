// The one narrowing of parsed JSON (client bodies, upstream replies, stream events, files read back):
// every reader that asks "an object?" or "a string?" of a value it did not build asks these.

import type { JsonObject, JsonValue } from './types.ts';

/** An object: not null, not an array. */
export function isObject(value: JsonValue | undefined): value is JsonObject;
export function isObject(value: unknown): value is Record<string, unknown>;
export function isObject(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The value when it is a string, else undefined. */
export function asString(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}
