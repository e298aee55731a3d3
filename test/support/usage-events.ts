// Test support: usage events as the gateway writes them (docs/billing.md "The usage event"), numbered so that
// tests can assert order and exactly-once delivery by request id.

import { Decimal } from 'decimal.js';
import type { UsageEvent } from '../../billing/event/usage-event.ts';
import { eventOfCompactLine } from '../../billing/outbox/compact-line.ts';

/** Event number `i` (request id `req-<i>`); `aliases` adds the completion-style usage aliases. */
export function makeEvent(i: number, opts: { aliases?: boolean } = {}): UsageEvent {
  const rid = `req-${i}`;
  return {
    source: 'router',
    external_event_id: rid,
    idempotency_key: `router:${rid}`,
    occurred_at: 1760000000 + i,
    subject_type: 'api_key',
    subject_id: 'client-a',
    raw_json: {
      provider: 'openai',
      api: 'chat.completions',
      model: 'gpt-4o-mini',
      stream: false,
      status: 200,
      usage_stage: 'upstream',
      usage: opts.aliases
        ? { input_tokens: 12, output_tokens: 5, total_tokens: 17, prompt_tokens: 12, completion_tokens: 5 }
        : { input_tokens: 12, output_tokens: 5, total_tokens: 17 },
      meta: { subject_type: 'api_key', subject_id: 'client-a', request_id: rid },
    },
  };
}

/** What the billing service charges for an event: sum(quantity / pricing_unit * unit_price). */
export function chargeOf(event: UsageEvent): Decimal {
  let total = new Decimal(0);
  const billing = event['x-billing'];
  for (const item of billing?.items ?? []) {
    const hint = billing?.pricing_hints?.[item.metric];
    if (hint)
      total = total.plus(new Decimal(item.quantity).times(hint.unit_price).dividedBy(hint.pricing_unit));
  }
  return total;
}

/**
 * The request ids of the usage events in outbox text (lines of segments or spool files), in order: whole
 * events and compact lines (billing/outbox/compact-line.ts) alike; headers and other lines are skipped.
 */
export function outboxEventIds(text: string): string[] {
  const ids: string[] = [];
  for (const line of text.split('\n')) {
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      continue;
    }
    const id = Array.isArray(value)
      ? eventOfCompactLine(value)?.event.external_event_id
      : (value as { external_event_id?: unknown } | null)?.external_event_id;
    if (typeof id === 'string') ids.push(id);
  }
  return ids;
}
