// What one usage event costs, the way the billing-side rule set prices it: each x-billing item
// is charged quantity / pricing_unit * unit_price with the pricing hint of the same metric. A rule set
// in `spec` mode is one written to the specification: it charges prompt_tokens and completion_tokens
// only, and any other item costs nothing.

import type { UsageEvent } from '../../billing/event/usage-event.ts';
import { Money } from './ledger.ts';
import type { RuleSetMode } from './types.ts';

/** The metrics a spec rule set charges: the two charge items of the specification. */
const SPEC_METRICS: ReadonlySet<string> = new Set(['prompt_tokens', 'completion_tokens']);

export interface ItemCharge {
  metric: string;
  quantity: number;
  /** Undefined when the metric has no pricing hint (charged nothing). */
  amount: Money | undefined;
  currency: string | undefined;
}

export function chargeItems(event: UsageEvent, mode: RuleSetMode = 'items'): ItemCharge[] {
  const billing = event['x-billing'];
  if (!billing) return [];
  const hints = billing.pricing_hints ?? {};
  return billing.items.map(function chargeItem(item): ItemCharge {
    const charged = mode === 'items' || SPEC_METRICS.has(item.metric);
    const hint = charged && Object.hasOwn(hints, item.metric) ? hints[item.metric] : undefined;
    if (!hint)
      return { metric: item.metric, quantity: item.quantity, amount: undefined, currency: undefined };
    // Multiply before dividing so that exact inputs give exact results within the precision.
    const amount = new Money(item.quantity).times(new Money(hint.unit_price)).dividedBy(hint.pricing_unit);
    return { metric: item.metric, quantity: item.quantity, amount, currency: hint.currency };
  });
}

/** Total charge of an event per currency. */
export function chargeTotals(items: readonly ItemCharge[]): Map<string, Money> {
  const totals = new Map<string, Money>();
  for (const item of items) {
    if (item.amount === undefined || item.currency === undefined) continue;
    totals.set(item.currency, (totals.get(item.currency) ?? new Money(0)).plus(item.amount));
  }
  return totals;
}
