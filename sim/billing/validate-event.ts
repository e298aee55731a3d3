// Checks an ingest body the way the billing service does before accepting it: the top-level fields of
// docs/billing.md "The usage event" and a well-formed x-billing block. raw_json's inside belongs to the extractor rule set and is
// only required to be an object.

import type { UsageEvent } from '../../billing/event/usage-event.ts';

export type Validation = { ok: true; event: UsageEvent } | { ok: false; message: string };

// Larger values are Unix milliseconds (year 5138+ in seconds): a common bug worth rejecting loudly.
const MAX_UNIX_SECONDS = 1e11;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isNonEmptyString(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0;
}

function isFiniteNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

function checkBilling(billing: unknown): string | undefined {
  if (!isObject(billing)) return 'x-billing must be an object';
  if (!Array.isArray(billing.items)) return 'x-billing.items must be an array';
  for (const [index, item] of billing.items.entries()) {
    if (!isObject(item)) return `x-billing.items[${index}] must be an object`;
    if (!isNonEmptyString(item.metric)) return `x-billing.items[${index}].metric is required`;
    if (!isFiniteNumber(item.quantity) || item.quantity < 0) {
      return `x-billing.items[${index}].quantity must be a non-negative number`;
    }
    if (typeof item.unit !== 'string') return `x-billing.items[${index}].unit is required`;
  }
  if (billing.pricing_hints === undefined) return undefined;
  if (!isObject(billing.pricing_hints)) return 'x-billing.pricing_hints must be an object';
  for (const [metric, hint] of Object.entries(billing.pricing_hints)) {
    if (!isObject(hint)) return `x-billing.pricing_hints.${metric} must be an object`;
    if (!isFiniteNumber(hint.unit_price) || hint.unit_price < 0) {
      return `x-billing.pricing_hints.${metric}.unit_price must be a non-negative number`;
    }
    if (!isFiniteNumber(hint.pricing_unit) || hint.pricing_unit <= 0) {
      return `x-billing.pricing_hints.${metric}.pricing_unit must be a positive number`;
    }
    if (!isNonEmptyString(hint.currency)) return `x-billing.pricing_hints.${metric}.currency is required`;
  }
  return undefined;
}

export function validateEvent(body: unknown): Validation {
  if (!isObject(body)) return { ok: false, message: 'event must be a JSON object' };
  for (const field of ['source', 'external_event_id', 'idempotency_key', 'subject_type', 'subject_id']) {
    if (!isNonEmptyString(body[field])) return { ok: false, message: `${field} is required` };
  }
  const occurredAt = body.occurred_at;
  if (typeof occurredAt !== 'number' || !Number.isInteger(occurredAt) || occurredAt < 0) {
    return { ok: false, message: 'occurred_at must be an integer (Unix seconds)' };
  }
  if (occurredAt > MAX_UNIX_SECONDS) {
    return { ok: false, message: 'occurred_at must be Unix seconds, not milliseconds' };
  }
  if (!isObject(body.raw_json)) return { ok: false, message: 'raw_json must be an object' };
  if (body['x-billing'] !== undefined) {
    const problem = checkBilling(body['x-billing']);
    if (problem) return { ok: false, message: problem };
  }
  // The top-level shape is checked above; raw_json's fields are the gateway's business (not validated).
  return { ok: true, event: body as unknown as UsageEvent };
}
