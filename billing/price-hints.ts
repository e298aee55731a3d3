// Pricing hints for the usage event: the unit prices of a looked-up model price, as the wire needs them.

import type { Decimal } from 'decimal.js';
import type { PricingHint } from './event/usage-event.ts';
import { toWireNumber } from './money.ts';
import { COMPONENT_METRIC, type ModelPrice, PRICE_COMPONENTS, SECONDS_PER_MINUTE } from './price-types.ts';

/**
 * pricing_hints for every priced component, keyed by x-billing metric. unit_price is a JSON number as
 * the wire format requires, converted from the exact decimal (exact for prices of up to 15 digits).
 */
export function priceHints(price: ModelPrice): Record<string, PricingHint> {
  // A price is immutable and lookups return the same object for a model, so the hints are computed
  // once per price rather than once per request (the decimal conversion is not free).
  const cached = hintCache.get(price);
  if (cached !== undefined) return cached;
  const hints: Record<string, PricingHint> = {};
  for (const component of PRICE_COMPONENTS) {
    const unitPrice = price.unitPrices[component];
    if (unitPrice === undefined) continue;
    hints[COMPONENT_METRIC[component]] = {
      unit_price: toWireNumber(unitPrice),
      pricing_unit: component === 'audio_minutes' ? SECONDS_PER_MINUTE : price.pricingUnit,
      currency: price.currency,
    };
  }
  hintCache.set(price, hints);
  return hints;
}

const hintCache = new WeakMap<ModelPrice, Record<string, PricingHint>>();

/** The `images` pricing hint for images of this size and quality (per image), or undefined. */
export function imageHint(
  price: ModelPrice,
  size: string | undefined,
  quality: string | undefined,
): PricingHint | undefined {
  if (price.imagePrices === undefined) return undefined;
  const unitPrice = imagePrice(price.imagePrices, size, quality);
  if (unitPrice === undefined) return undefined;
  return { unit_price: toWireNumber(unitPrice), pricing_unit: 1, currency: price.currency };
}

/**
 * The price of one image: `<size>/<quality>`, then `<size>`, then the same under `default` (an image
 * whose size was not given or is not listed). undefined when none matches.
 */
export function imagePrice(
  prices: Readonly<Record<string, Decimal>>,
  size: string | undefined,
  quality: string | undefined,
): Decimal | undefined {
  const sizes = size === undefined ? ['default'] : [size.toLowerCase(), 'default'];
  const q = quality?.toLowerCase();
  for (const s of sizes) {
    const found = (q === undefined ? undefined : prices[`${s}/${q}`]) ?? prices[s];
    if (found !== undefined) return found;
  }
  return undefined;
}
