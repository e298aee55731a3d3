// One pricing file checked and compiled into price entries and multipliers. Problems become
// diagnostics at the line of the offending entry; a bad entry is left out, the rest still apply.

import type { Decimal } from 'decimal.js';
import { childPointer, pointerOf as pointerOfSegments } from '../common/config-diagnostics.ts';
import { isPlainObject, parseYaml } from '../common/yaml-source.ts';
import { parseMoney } from './money.ts';
import { entryKey } from './price-table.ts';
import {
  COST_KEYS,
  type Multipliers,
  type PriceComponent,
  type PriceEntry,
  type PricingDiagnostic,
  type PricingSource,
  TOKEN_COMPONENTS,
} from './price-types.ts';

const DEFAULT_CURRENCY = 'USD';
const DEFAULT_PRICING_UNIT = 1_000_000;
const ENTRY_KEYS = new Set(['provider', 'model', 'channel', 'cost']);
const TOP_KEYS = new Set(['currency', 'pricing_unit', 'reference_prices', 'prices', 'multipliers']);
const MULTIPLIER_KEYS = ['providers', 'models', 'channels'] as const;

const pointerOf = (...segments: (string | number)[]): string => pointerOfSegments(segments);
const escapeSegment = (segment: string): string => childPointer('', segment).slice(1);

type Report = (pointer: string, message: string) => void;

function nonEmptyString(value: unknown): value is string {
  return typeof value === 'string' && value.trim() !== '';
}

function validModelPattern(model: string): boolean {
  const star = model.indexOf('*');
  return star < 0 || star === model.length - 1;
}

function compileEntry(
  raw: unknown,
  pointer: string,
  defaults: { currency: string; pricingUnit: number; file: string; line: number },
  report: Report,
): PriceEntry | undefined {
  if (!isPlainObject(raw)) {
    report(pointer, 'a price entry must be a mapping with provider, model and cost');
    return undefined;
  }
  for (const key of Object.keys(raw)) {
    if (!ENTRY_KEYS.has(key))
      report(`${pointer}/${escapeSegment(key)}`, `unknown key "${key}" in a price entry (ignored)`);
  }
  const { provider, model, channel, cost } = raw;
  if (!nonEmptyString(provider)) {
    report(pointer, 'price entry without a provider (entry ignored)');
    return undefined;
  }
  if (!nonEmptyString(model)) {
    report(pointer, 'price entry without a model (entry ignored)');
    return undefined;
  }
  if (!validModelPattern(model)) {
    report(`${pointer}/model`, `model "${model}": "*" is allowed only at the end (entry ignored)`);
    return undefined;
  }
  if (channel !== undefined && !nonEmptyString(channel)) {
    report(`${pointer}/channel`, 'channel must be a non-empty string (entry ignored)');
    return undefined;
  }
  if (!isPlainObject(cost)) {
    report(`${pointer}/cost`, `cost must be a mapping of ${COST_KEYS.join(', ')} (entry ignored)`);
    return undefined;
  }
  const prices: Partial<Record<PriceComponent, Decimal>> = {};
  let images: Record<string, Decimal> | undefined;
  let bad = false;
  for (const [key, value] of Object.entries(cost)) {
    const where = `${pointer}/cost/${escapeSegment(key)}`;
    if (!COST_KEYS.includes(key)) {
      report(where, `unknown cost "${key}"; expected one of ${COST_KEYS.join(', ')} (ignored)`);
      continue;
    }
    if (key === 'images') {
      images = compileImagePrices(value, where, report);
      if (images === undefined) bad = true;
      continue;
    }
    const price = parseMoney(value);
    if (price === undefined) {
      report(where, `cost ${key} must be a non-negative number (entry ignored)`);
      bad = true;
    } else {
      prices[key as PriceComponent] = price;
    }
  }
  if (bad) return undefined;
  // A channel entry may override a single component; an ordinary entry that prices tokens must price
  // both directions (one without output would bill generated tokens at nothing).
  const pricesTokens = TOKEN_COMPONENTS.some((c) => prices[c] !== undefined);
  if (channel === undefined && pricesTokens && (prices.input === undefined || prices.output === undefined)) {
    report(`${pointer}/cost`, 'cost needs both input and output (entry ignored)');
    return undefined;
  }
  if (Object.keys(prices).length === 0 && images === undefined) {
    report(`${pointer}/cost`, 'cost names no price (entry ignored)');
    return undefined;
  }
  return {
    provider,
    model,
    channel: channel === undefined ? undefined : channel,
    currency: defaults.currency,
    pricingUnit: defaults.pricingUnit,
    cost: prices,
    images,
    file: defaults.file,
    line: defaults.line,
  };
}

/** `images: 0.04` (any image) or `images: { default: 0.04, "1024x1024": 0.04, "1024x1792/hd": 0.12 }`. */
function compileImagePrices(
  raw: unknown,
  where: string,
  report: Report,
): Record<string, Decimal> | undefined {
  const single = parseMoney(raw);
  if (single !== undefined) return { default: single };
  if (!isPlainObject(raw) || Object.keys(raw).length === 0) {
    report(
      where,
      'cost images must be a price per image or a mapping of "<size>", "<size>/<quality>" or default to prices (entry ignored)',
    );
    return undefined;
  }
  const prices: Record<string, Decimal> = {};
  for (const [variant, value] of Object.entries(raw)) {
    const price = parseMoney(value);
    if (price === undefined || variant.trim() === '') {
      report(
        `${where}/${escapeSegment(variant)}`,
        `image price "${variant}" must be a non-negative number (entry ignored)`,
      );
      return undefined;
    }
    prices[variant.toLowerCase()] = price;
  }
  return prices;
}

function compileMultipliers(raw: unknown, into: Multipliers, report: Report): void {
  if (raw === undefined || raw === null) return;
  if (!isPlainObject(raw)) {
    report('/multipliers', 'multipliers must be a mapping of providers, models and channels');
    return;
  }
  for (const key of Object.keys(raw)) {
    if (!(MULTIPLIER_KEYS as readonly string[]).includes(key)) {
      report(
        pointerOf('multipliers', key),
        `unknown multipliers group "${key}"; expected ${MULTIPLIER_KEYS.join(', ')}`,
      );
    }
  }
  for (const group of MULTIPLIER_KEYS) {
    const table = raw[group];
    if (table === undefined || table === null) continue;
    if (!isPlainObject(table)) {
      report(pointerOf('multipliers', group), `multipliers.${group} must be a mapping of name to number`);
      continue;
    }
    for (const [name, value] of Object.entries(table)) {
      const factor = parseMoney(value);
      const where = pointerOf('multipliers', group, name);
      if (factor === undefined) {
        report(where, `multiplier for "${name}" must be a non-negative number (ignored)`);
      } else if (group !== 'providers' && !name.includes('/')) {
        report(
          where,
          `multipliers.${group} keys are "provider/${group === 'models' ? 'model' : 'channel'}" (ignored)`,
        );
      } else {
        into[group].set(name, factor);
      }
    }
  }
}

export interface CompiledFile {
  entries: PriceEntry[];
  reference: boolean;
}

export function compileSource(
  source: PricingSource,
  multipliers: Multipliers,
  diagnostics: PricingDiagnostic[],
): CompiledFile | undefined {
  const { file, text } = source;
  const parsed = parseYaml(text, file);
  diagnostics.push(...parsed.diagnostics);
  if (parsed.yaml === undefined) return undefined;
  const yaml = parsed.yaml;
  // Entries are reported at their key, as an editor shows where they start.
  const locate = (pointer: string) => yaml.locate(pointer, 'key');
  const report: Report = (pointer, message) => diagnostics.push(yaml.at(pointer, message, 'key'));
  const doc = yaml.value;

  if (doc === undefined || doc === null) return { entries: [], reference: false };
  if (!isPlainObject(doc)) {
    report(
      '',
      'a pricing file must be a mapping with prices (and optional currency, pricing_unit, multipliers)',
    );
    return undefined;
  }
  for (const key of Object.keys(doc)) {
    if (!TOP_KEYS.has(key)) report(pointerOf(key), `unknown top-level key "${key}" (ignored)`);
  }
  let currency = DEFAULT_CURRENCY;
  if (doc['currency'] !== undefined) {
    if (typeof doc['currency'] === 'string' && /^[A-Z]{3}$/.test(doc['currency'])) currency = doc['currency'];
    else report('/currency', `currency must be a three-letter code such as USD (using ${DEFAULT_CURRENCY})`);
  }
  let pricingUnit = DEFAULT_PRICING_UNIT;
  if (doc['pricing_unit'] !== undefined) {
    const unit = doc['pricing_unit'];
    if (typeof unit === 'number' && Number.isSafeInteger(unit) && unit > 0) pricingUnit = unit;
    else report('/pricing_unit', `pricing_unit must be a positive integer (using ${DEFAULT_PRICING_UNIT})`);
  }
  const entries: PriceEntry[] = [];
  const prices = doc['prices'];
  if (prices !== undefined && prices !== null && !Array.isArray(prices)) {
    report('/prices', 'prices must be a list of entries');
  } else if (Array.isArray(prices)) {
    const seen = new Map<string, number>();
    prices.forEach((raw, index) => {
      const pointer = pointerOf('prices', index);
      const { line } = locate(pointer);
      const entry = compileEntry(raw, pointer, { currency, pricingUnit, file, line }, report);
      if (!entry) return;
      const key = entryKey(entry.provider, entry.model, entry.channel);
      const earlier = seen.get(key);
      if (earlier !== undefined) {
        report(
          pointer,
          `duplicate price for ${describe(entry)}; this entry replaces the one on line ${earlier}`,
        );
      }
      seen.set(key, line);
      entries.push(entry);
    });
  }
  compileMultipliers(doc['multipliers'], multipliers, report);
  const reference = doc['reference_prices'];
  if (reference !== undefined && typeof reference !== 'boolean')
    report('/reference_prices', 'reference_prices must be true or false');
  return { entries, reference: reference === true };
}

function describe(entry: { provider: string; model: string; channel: string | undefined }): string {
  return `${entry.provider}/${entry.model}${entry.channel === undefined ? '' : ` (channel ${entry.channel})`}`;
}
