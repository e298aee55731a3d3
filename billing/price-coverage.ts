// What an operator must know about prices before billing starts: the served models (registry routes)
// that have no price, whose requests would reach the billing service without pricing_hints, and the
// pricing files that still hold unreviewed reference prices. Reported at start-up (log), by
// `router -t` (warning lines) and as the router_unpriced_models gauge.

import type { ModelEntry } from '../common/config-types.ts';
import type { Pricing } from './price-types.ts';

export interface UnpricedModel {
  readonly provider: string;
  /** The model name as priced: the route's upstream name, else the registry id (`gpt-*` for a pattern). */
  readonly model: string;
}

/**
 * Registry routes without a price. The gateway prices the upstream name first, then the requested one,
 * so either having a price is enough. A pattern counts as priced when some price could match a model
 * under it; models it routes that no price matches are still reported per request at run time.
 */
export function unpricedModels(entries: readonly ModelEntry[], pricing: Pricing): UnpricedModel[] {
  const missing: UnpricedModel[] = [];
  const seen = new Set<string>();
  for (const entry of entries) {
    for (const route of entry.routes) {
      const upstream = route.model ?? entry.id;
      if (pricing.covers(route.provider, upstream) || pricing.covers(route.provider, entry.id)) continue;
      const key = `${route.provider}/${upstream}`;
      if (seen.has(key)) continue;
      seen.add(key);
      missing.push({ provider: route.provider, model: upstream });
    }
  }
  return missing;
}

/** The warnings to show, one per line, with billing on (empty when there is nothing to say). */
export function pricingWarnings(unpriced: readonly UnpricedModel[], pricing: Pricing): string[] {
  const warnings: string[] = [];
  for (const file of pricing.referenceFiles) {
    warnings.push(
      `${file}: holds reference prices (vendors' list prices, dated in the file); review them, then set reference_prices: false`,
    );
  }
  if (unpriced.length > 0) {
    const list = unpriced.map((m) => `${m.provider}/${m.model}`).join(', ');
    warnings.push(
      `${unpriced.length} served model${unpriced.length === 1 ? ' has' : 's have'} no price; their usage events carry no pricing_hints: ${list}`,
    );
  }
  return warnings;
}
