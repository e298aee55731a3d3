// The price version every usage event carries (docs/billing.md "Price version"): a hash of the compiled
// price table, so a billing service or an auditor can tell which prices priced an event and re-rate
// events priced by an older table. It is made from what prices (entries after overrides, multipliers),
// never from file names, lines or times, so the same prices give the same version on every instance and
// after every restart. Computed once per load; events carry the string as it is.

import { createHash } from 'node:crypto';
import type { Decimal } from 'decimal.js';
import type { PriceTable } from './price-table.ts';
import { type Multipliers, PRICE_COMPONENTS, type PriceEntry } from './price-types.ts';

/** Characters of the hash kept: 64 bits, plenty to tell price tables apart. */
const HASH_CHARS = 16;

function decimal(d: Decimal): string {
  // Plain notation without trailing zeros: 0.150 and 0.15 are one price.
  return d.toFixed();
}

function sortedPairs(map: ReadonlyMap<string, Decimal> | Readonly<Record<string, Decimal>>): string[][] {
  const pairs = map instanceof Map ? [...map] : Object.entries(map);
  return pairs.map(([k, v]) => [k, decimal(v)]).sort((a, b) => (a[0]! < b[0]! ? -1 : a[0]! > b[0]! ? 1 : 0));
}

function canonicalEntry(e: PriceEntry): unknown[] {
  const cost: string[][] = [];
  for (const component of PRICE_COMPONENTS) {
    const price = e.cost[component];
    if (price !== undefined) cost.push([component, decimal(price)]);
  }
  return [
    e.provider,
    e.channel ?? '',
    e.model,
    e.currency,
    e.pricingUnit,
    cost,
    e.images === undefined ? null : sortedPairs(e.images),
  ];
}

function byKey(a: unknown[], b: unknown[]): number {
  const ka = `${a[0]}\u0000${a[1]}\u0000${a[2]}`;
  const kb = `${b[0]}\u0000${b[1]}\u0000${b[2]}`;
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

/** The canonical JSON text of a compiled price table: equal prices give equal text. */
export function canonicalPriceTable(table: PriceTable, multipliers: Multipliers): string {
  const entries = [...table.entries()].map(canonicalEntry).sort(byKey);
  return JSON.stringify({
    entries,
    multipliers: {
      providers: sortedPairs(multipliers.providers),
      models: sortedPairs(multipliers.models),
      channels: sortedPairs(multipliers.channels),
    },
  });
}

/**
 * `sha256:<16 hex>` of the canonical table, then `@<version>` when pricing files name a version (several
 * joined by `+`, in file order).
 */
export function priceVersion(
  table: PriceTable,
  multipliers: Multipliers,
  versions: readonly string[],
): string {
  const hash = createHash('sha256').update(canonicalPriceTable(table, multipliers)).digest('hex');
  const named = versions.length === 0 ? '' : `@${versions.join('+')}`;
  return `sha256:${hash.slice(0, HASH_CHARS)}${named}`;
}
