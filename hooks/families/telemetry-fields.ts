// Helpers of the families' telemetry readers (FamilyTelemetry): typed reads of request parameters and
// reply fields, so that a malformed body adds nothing instead of an attribute of the wrong type.

import type { JsonObject, JsonValue } from '../../common/types.ts';
import type { ReplyFacts, TraceAttribute } from './types.ts';

export function objectOf(value: JsonValue | undefined): JsonObject | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? value : undefined;
}

/** Copies the numeric and string-list parameters named in `fields` (body name -> attribute name). */
export function copyParams(
  body: JsonObject | undefined,
  fields: Readonly<Record<string, string>>,
  into: Record<string, TraceAttribute>,
): void {
  if (body === undefined) return;
  for (const name in fields) {
    const value = body[name];
    const attribute = fields[name]!;
    if (typeof value === 'number' && Number.isFinite(value)) into[attribute] = value;
    else if (typeof value === 'string' && attribute.endsWith('stop_sequences')) into[attribute] = [value];
    else if (Array.isArray(value) && value.length <= 16 && value.every((v) => typeof v === 'string'))
      into[attribute] = value as string[];
  }
}

/** A family's requestAttributes: its parameters named in `fields`, read from the body's top level. */
export function topLevelParams(
  fields: Readonly<Record<string, string>>,
): (body: JsonObject) => Record<string, TraceAttribute> {
  return (body) => {
    const out: Record<string, TraceAttribute> = {};
    copyParams(body, fields, out);
    return out;
  };
}

/** Sets a fact from a string field; an id or model name longer than an id would be is ignored. */
export function setFact(facts: ReplyFacts, key: 'id' | 'model', value: JsonValue | undefined): void {
  if (typeof value === 'string' && value !== '' && value.length <= 256) facts[key] = value;
}

export function addFinishReason(facts: ReplyFacts, value: JsonValue | undefined): void {
  if (typeof value !== 'string' || value === '' || value.length > 64) return;
  facts.finishReasons ??= [];
  const reasons = facts.finishReasons;
  if (!reasons.includes(value) && reasons.length < 16) reasons.push(value);
}
