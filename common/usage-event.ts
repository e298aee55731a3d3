// The usage event sent to the billing service (docs/billing.md "The usage event").

import type { ApiName } from './types.ts';

export interface UsageCounts {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  cache_read_tokens?: number;
  cache_creation_tokens?: number;
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
    meta: { subject_type: string; subject_id: string; request_id: string; correlation_id?: string };
  };
  'x-billing'?: {
    items: BillingItem[];
    pricing_hints?: Record<string, PricingHint>;
  };
}
