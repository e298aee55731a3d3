// A usage event that counts prompt and completion tokens and nothing else, which is nearly every
// request's, held as its parts. The gateway's builder makes it without the event object
// (billing/event-builder.ts buildTokenEvent) and the outbox writes it as a compact line from the parts
// (billing/outbox/compact-line.ts): building and then re-reading the whole event was the larger part of
// billing's own code on a request's path. usageEventOf gives the event itself, key for key as the builder
// makes it.

import type { ApiName, UsageStage } from '../../common/types.ts';
import { idempotencyKey, isLastKey, type PricingHint, type UsageEvent } from './usage-event.ts';

export interface TokenEvent {
  readonly source: string;
  readonly subjectType: string;
  readonly subjectId: string;
  readonly provider: string;
  readonly api: ApiName;
  readonly model: string;
  readonly stream: boolean;
  readonly status: number;
  readonly usageStage: UsageStage;
  /** Whether usage repeats the counts as prompt_tokens / completion_tokens (completion-style clients). */
  readonly aliases: boolean;
  /** The prompt_tokens item's hint; only with input > 0 (there is no item otherwise). */
  readonly promptHint: PricingHint | undefined;
  /** The completion_tokens item's hint; only with output > 0. */
  readonly completionHint: PricingHint | undefined;
  /** meta.price_version and x-billing.price_version. */
  readonly priceVersion: string | undefined;
  /** meta.unpriced: the model had no price. */
  readonly unpriced: boolean;
  /** The request id: external_event_id, meta.request_id, and the idempotency key `router:<id>`. */
  readonly id: string;
  readonly correlationId: string | undefined;
  /** Unix seconds. */
  readonly occurredAt: number;
  readonly input: number;
  readonly output: number;
  readonly total: number;
}

/** A count or a time as a token event holds it: a non-negative safe integer. */
export function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/** The usage event `t` stands for, with the builder's keys in the builder's order. */
export function usageEventOf(t: TokenEvent): UsageEvent {
  const meta: UsageEvent['raw_json']['meta'] = {
    subject_type: t.subjectType,
    subject_id: t.subjectId,
    request_id: t.id,
  };
  if (t.correlationId !== undefined) meta.correlation_id = t.correlationId;
  if (t.priceVersion !== undefined) meta.price_version = t.priceVersion;
  if (t.unpriced) meta.unpriced = true;
  const event: UsageEvent = {
    source: t.source,
    external_event_id: t.id,
    idempotency_key: idempotencyKey(t.id),
    occurred_at: t.occurredAt,
    subject_type: t.subjectType,
    subject_id: t.subjectId,
    raw_json: {
      provider: t.provider,
      api: t.api,
      model: t.model,
      stream: t.stream,
      status: t.status,
      usage_stage: t.usageStage,
      usage: t.aliases
        ? {
            input_tokens: t.input,
            output_tokens: t.output,
            total_tokens: t.total,
            prompt_tokens: t.input,
            completion_tokens: t.output,
          }
        : { input_tokens: t.input, output_tokens: t.output, total_tokens: t.total },
      meta,
    },
  };
  if (t.input > 0 || t.output > 0) {
    const items = [];
    const hints: Record<string, PricingHint> = {};
    let hinted = false;
    if (t.input > 0) {
      items.push({ metric: 'prompt_tokens', quantity: t.input, unit: 'token' });
      if (t.promptHint !== undefined) {
        hints.prompt_tokens = t.promptHint;
        hinted = true;
      }
    }
    if (t.output > 0) {
      items.push({ metric: 'completion_tokens', quantity: t.output, unit: 'token' });
      if (t.completionHint !== undefined) {
        hints.completion_tokens = t.completionHint;
        hinted = true;
      }
    }
    const x: NonNullable<UsageEvent['x-billing']> = hinted ? { items, pricing_hints: hints } : { items };
    if (t.priceVersion !== undefined) x.price_version = t.priceVersion;
    event['x-billing'] = x;
  }
  return event;
}

/**
 * The token event an event is, when it is one: made by the builder (its idempotency key the one just
 * made for its id), counting prompt and completion tokens only, as safe integers. Undefined otherwise.
 */
export function tokenEventOf(e: UsageEvent): TokenEvent | undefined {
  const r = e.raw_json;
  const c = r.usage;
  const m = r.meta;
  const id = e.external_event_id;
  const input = c.input_tokens;
  const output = c.output_tokens;
  if (
    !isLastKey(id, e.idempotency_key) ||
    m.request_id !== id ||
    m.subject_type !== e.subject_type ||
    m.subject_id !== e.subject_id ||
    c.cache_read_tokens !== undefined ||
    c.cache_creation_tokens !== undefined ||
    c.input_audio_tokens !== undefined ||
    c.output_audio_tokens !== undefined ||
    c.images !== undefined ||
    c.input_characters !== undefined ||
    c.audio_seconds !== undefined ||
    c.cached_tokens !== undefined ||
    !isCount(input) ||
    !isCount(output) ||
    !isCount(c.total_tokens) ||
    !isCount(e.occurred_at) ||
    (m.price_version !== undefined && typeof m.price_version !== 'string') ||
    (m.unpriced !== undefined && m.unpriced !== true) ||
    m.end_reason !== undefined
  ) {
    return undefined;
  }
  const aliases = c.prompt_tokens !== undefined;
  if (
    aliases ? c.prompt_tokens !== input || c.completion_tokens !== output : c.completion_tokens !== undefined
  )
    return undefined;
  let promptHint: PricingHint | undefined;
  let completionHint: PricingHint | undefined;
  const x = e['x-billing'];
  if (x === undefined) {
    if (input > 0 || output > 0) return undefined;
  } else {
    if (x.price_version !== m.price_version) return undefined;
    const items = x.items;
    const n = (input > 0 ? 1 : 0) + (output > 0 ? 1 : 0);
    if (items.length !== n || n === 0) return undefined;
    if (input > 0 && !isItem(items[0]!, 'prompt_tokens', input)) return undefined;
    if (output > 0 && !isItem(items[n - 1]!, 'completion_tokens', output)) return undefined;
    const hints = x.pricing_hints;
    if (hints !== undefined) {
      // In the order the builder sets them, and only for the items present.
      let seen = 0;
      for (const metric in hints) {
        const hint = hints[metric];
        if (hint === undefined) return undefined;
        if (metric === 'prompt_tokens' && input > 0 && seen === 0) promptHint = hint;
        else if (metric === 'completion_tokens' && output > 0 && completionHint === undefined)
          completionHint = hint;
        else return undefined;
        seen++;
      }
      if (seen === 0) return undefined;
    }
  }
  return {
    source: e.source,
    subjectType: e.subject_type,
    subjectId: e.subject_id,
    provider: r.provider,
    api: r.api,
    model: r.model,
    stream: r.stream,
    status: r.status,
    usageStage: r.usage_stage,
    aliases,
    promptHint,
    completionHint,
    priceVersion: m.price_version,
    unpriced: m.unpriced === true,
    id,
    correlationId: m.correlation_id,
    occurredAt: e.occurred_at,
    input,
    output,
    total: c.total_tokens,
  };
}

function isItem(
  item: { metric: string; quantity: number; unit: string },
  metric: string,
  n: number,
): boolean {
  return item.metric === metric && item.quantity === n && item.unit === 'token';
}
