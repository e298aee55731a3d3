// Money arithmetic. Prices, multipliers and amounts are exact decimals (decimal.js), never binary
// floats: 0.1 x 3 must be 0.3, not 0.30000000000000004. Only at the wire boundary, where the billing
// service's pricing_hints take JSON numbers, is a decimal turned into a number.

import { Decimal } from 'decimal.js';

/** A private Decimal constructor with enough precision for per-token prices times large counts. */
export const Money = Decimal.clone({ precision: 40, rounding: Decimal.ROUND_HALF_EVEN });
export type Money = Decimal;

/** A price written in a file: a finite, non-negative number or numeric string. undefined if not one. */
export function parseMoney(value: unknown): Decimal | undefined {
  if (typeof value !== 'number' && typeof value !== 'string') return undefined;
  if (typeof value === 'string' && !/^\s*[+]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$/.test(value))
    return undefined;
  try {
    // A JS number converts through its shortest round-trip text, so YAML's 0.15 becomes exactly 0.15.
    const decimal = new Money(typeof value === 'string' ? value.trim() : value);
    return decimal.isFinite() && !decimal.isNegative() ? decimal : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The JSON number for the wire (pricing_hints.unit_price). Exact for any price with at most 15
 * significant digits, which covers every real per-million-token price.
 */
export function toWireNumber(value: Decimal): number {
  return value.toNumber();
}

/** Amount = quantity / pricing_unit x unit_price, exactly. */
export function amountOf(quantity: number, unitPrice: Decimal, pricingUnit: number): Decimal {
  return new Money(quantity).div(pricingUnit).mul(unitPrice);
}
