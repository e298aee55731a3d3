// The one narrowing of parsed JSON (client bodies, upstream replies, stream events, files read back):
// every reader that asks "an object?" or "a string?" of a value it did not build asks these.

import type { JsonObject, JsonValue } from './types.ts';

/**
 * What isObject narrows a `T` to: JSON's object out of a JSON value, else a string-keyed record. One
 * generic signature, not overloads, so that `.filter(isObject)` narrows too.
 */
export type ObjectPart<T> = unknown extends T
  ? T & Record<string, unknown>
  : [Extract<T, JsonObject>] extends [never]
    ? T & Record<string, unknown>
    : Extract<T, JsonObject>;

/** An object: not null, not an array. */
export function isObject<T>(value: T): value is ObjectPart<T> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The value when it is an object, else undefined. */
export function asObject(value: JsonValue | undefined): JsonObject | undefined {
  return isObject(value) ? value : undefined;
}

/** The value when it is a string, else undefined. */
export function asString(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}
