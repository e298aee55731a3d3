// Helpers of the families' telemetry readers (FamilyTelemetry): typed reads of request parameters and
// reply fields, so that a malformed body adds nothing instead of an attribute of the wrong type.

import type { JsonObject, JsonValue } from '../../common/types.ts';
import type { ReplyFacts, TraceAttribute } from './types.ts';

interface Param {
  readonly attribute: string;
  /** A stop-sequence parameter: a lone string is a list of one. */
  readonly list: boolean;
}

/**
 * A reader of the numeric and string-list parameters named in `fields` (body name -> attribute name).
 * It walks the body's own keys, a few, rather than looking up every parameter the family knows.
 */
export function paramsReader(
  fields: Readonly<Record<string, string>>,
): (body: JsonObject | undefined, set: (key: string, value: TraceAttribute) => void) => void {
  const params = new Map<string, Param>();
  for (const name in fields) {
    const attribute = fields[name]!;
    params.set(name, { attribute, list: attribute.endsWith('stop_sequences') });
  }
  return (body, set) => {
    if (body === undefined) return;
    for (const name in body) {
      const param = params.get(name);
      if (param === undefined) continue;
      const value = body[name];
      if (typeof value === 'number' && Number.isFinite(value)) set(param.attribute, value);
      else if (typeof value === 'string' && param.list) set(param.attribute, [value]);
      else if (Array.isArray(value) && value.length <= 16 && value.every((v) => typeof v === 'string'))
        set(param.attribute, value as string[]);
    }
  };
}

/** A reader of the output cap: the first of `names` the body sets to a non-negative number. */
export function maxTokensReader(
  names: readonly string[],
): (body: JsonObject | undefined) => number | undefined {
  return (body) => {
    if (body === undefined) return undefined;
    for (let i = 0; i < names.length; i++) {
      const value = body[names[i]!];
      if (typeof value === 'number' && Number.isFinite(value) && value >= 0) return value;
    }
    return undefined;
  };
}

/** Sets a fact from a string field; an id or model name longer than an id would be is ignored. */
export function setFact(facts: ReplyFacts, key: 'id' | 'model', value: JsonValue | undefined): void {
  if (typeof value !== 'string' || value === '' || value.length > 256) return;
  // Named stores rather than facts[key]: each site sees one property.
  if (key === 'id') facts.id = value;
  else facts.model = value;
}

export function addFinishReason(facts: ReplyFacts, value: JsonValue | undefined): void {
  if (typeof value !== 'string' || value === '' || value.length > 64) return;
  facts.finishReasons ??= [];
  const reasons = facts.finishReasons;
  if (!reasons.includes(value) && reasons.length < 16) reasons.push(value);
}
