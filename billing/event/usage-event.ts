// The usage event sent to the billing service (docs/billing.md "The usage event").

import type { ApiName, StreamEndReason } from '../../common/types.ts';

export interface UsageCounts {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  cache_read_tokens?: number;
  cache_creation_tokens?: number;
  /** Audio tokens among input_tokens / output_tokens (realtime sessions), present when non-zero. */
  input_audio_tokens?: number;
  output_audio_tokens?: number;
  /** Completion-style aliases, emitted for completion-style rules. */
  prompt_tokens?: number;
  completion_tokens?: number;
  cached_tokens?: number;
  /** Non-token quantities (images, speech, transcription), present when non-zero. */
  images?: number;
  input_characters?: number;
  audio_seconds?: number;
}

export interface BillingItem {
  metric: string;
  quantity: number;
  unit: string;
}

export interface PricingHint {
  unit_price: number;
  pricing_unit: number;
  currency: string;
}

export interface UsageEvent {
  source: string;
  external_event_id: string;
  idempotency_key: string;
  /** Unix seconds. */
  occurred_at: number;
  subject_type: string;
  subject_id: string;
  raw_json: {
    provider: string;
    api: ApiName;
    model: string;
    stream: boolean;
    status: number;
    usage_stage: 'upstream' | 'estimated';
    usage: UsageCounts;
    meta: {
      subject_type: string;
      subject_id: string;
      request_id: string;
      correlation_id?: string;
      /** The price table that priced the event (billing/price-version.ts); on every event the gateway makes. */
      price_version?: string;
      /** The model had no price: the items carry no pricing_hints. */
      unpriced?: true;
      /** Why a stream was interrupted (docs/billing.md "Interrupted streams"); only on such a stream's event. */
      end_reason?: StreamEndReason;
    };
  };
  'x-billing'?: {
    items: BillingItem[];
    pricing_hints?: Record<string, PricingHint>;
    /** meta.price_version again, for a rule set that reads x-billing only. */
    price_version?: string;
  };
}

let lastKeyId: string | undefined;
let lastKey = '';

/** The idempotency key of a request's event: `router:<request id>`. */
export function idempotencyKey(requestId: string): string {
  if (requestId !== lastKeyId) {
    lastKeyId = requestId;
    lastKey = `router:${requestId}`;
  }
  return lastKey;
}

/**
 * Whether `key` is `router:<requestId>`, answered cheaply for the key idempotencyKey made last (the
 * event just built): the same strings compare at once, where reading the key compared it character by
 * character.
 */
export function isLastKey(requestId: string, key: string): boolean {
  return requestId === lastKeyId && key === lastKey;
}

/**
 * The key under which a queued event (an outbox line, a stream entry's payload) carries the W3C
 * traceparent of its request, so that the sidecar's delivery joins the request's trace. Taken off before
 * the event is sent: the billing service never receives it.
 */
export const TRACE_KEY = 'x-router-trace';

/** Removes the traceparent a queued event carries and returns it (a string of the W3C shape only). */
export function takeTraceparent(value: Record<string, unknown>): string | undefined {
  const carried = value[TRACE_KEY];
  if (carried === undefined) return undefined;
  delete value[TRACE_KEY];
  return wellFormedTraceparent(carried);
}

const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** A carried traceparent when it has the W3C shape; undefined otherwise. */
export function wellFormedTraceparent(carried: unknown): string | undefined {
  return typeof carried === 'string' && TRACEPARENT.test(carried) ? carried : undefined;
}
