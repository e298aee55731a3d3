// One pricing file checked against billing/pricing.schema.json and compiled into price entries and
// multipliers. Problems become diagnostics at the line of the offending entry; a bad entry is left out,
// the rest still apply.

import { Ajv, type ErrorObject } from 'ajv';
import type { Decimal } from 'decimal.js';
import { childPointer, displayPath, pointerOf, splitPointer } from '../common/config-diagnostics.ts';
import { parseYaml, type YamlFile } from '../common/yaml-source.ts';
import { Money, parseMoney } from './money.ts';
import { entryKey } from './price-table.ts';
import {
  COST_KEYS,
  type Multipliers,
  type PriceComponent,
  type PriceEntry,
  type PricingDiagnostic,
  type PricingSource,
} from './price-types.ts';
import schema from './pricing.schema.json' with { type: 'json' };

const DEFAULT_CURRENCY = 'USD';
const DEFAULT_PRICING_UNIT = 1_000_000;
const MULTIPLIER_KEYS = ['providers', 'models', 'channels'] as const;
const ZERO = new Money(0);

// config/validate.ts's options less two: defaults are applied here (also where a problem left a value
// out), and strictRequired cannot see that the anyOf "names at least one cost" requires known keys.
const ajv = new Ajv({
  allErrors: true,
  allowUnionTypes: true,
  verbose: true,
  strict: true,
  strictRequired: false,
});
const check = ajv.compile(schema);

/** A price as the schema admits it: a non-negative number or numeric string. */
type MoneyValue = number | string;
type Factors = Record<string, MoneyValue> | null;

/** The shape of a document the schema accepts; parts named by a problem's `drop` are not trusted. */
interface PricingDocument {
  currency?: string;
  pricing_unit?: number;
  reference_prices?: boolean;
  version?: string;
  prices?: RawEntry[] | null;
  multipliers?: { providers?: Factors; models?: Factors; channels?: Factors } | null;
}

interface RawEntry {
  provider: string;
  model: string;
  channel?: string;
  cost: Partial<Record<PriceComponent, MoneyValue>> & { images?: MoneyValue | Record<string, MoneyValue> };
}

/**
 * One schema error as an operator reads it. `drop` names the part of the file left out for it (a default
 * applies instead); of the problems that drop the same part, only those of the lowest rank are reported,
 * the first thing wrong as a reader would find it.
 */
interface Problem {
  pointer: string;
  message: string;
  drop?: string;
  rank?: number;
}

function describeEntry(error: ErrorObject, entry: string, rest: string[]): Problem | undefined {
  const [field, key, variant] = rest;
  const drop = entry;
  if (field === undefined) {
    switch (error.keyword) {
      case 'type':
        return {
          pointer: entry,
          message: 'a price entry must be a mapping with provider, model and cost',
          drop,
        };
      case 'additionalProperties': {
        const name = String(error.params.additionalProperty);
        return {
          pointer: childPointer(entry, name),
          message: `unknown key "${name}" in a price entry (ignored)`,
        };
      }
      case 'required':
        return describeEntry(error, entry, [String(error.params.missingProperty)]);
      default:
        // `if` repeats the failure of its `then`, reported at cost.
        return undefined;
    }
  }
  const where = childPointer(entry, field);
  switch (field) {
    case 'provider':
      return { pointer: entry, message: 'price entry without a provider (entry ignored)', drop, rank: 1 };
    case 'model':
      if (error.keyword === 'not')
        return {
          pointer: where,
          message: `model "${String(error.data)}": "*" is allowed only at the end (entry ignored)`,
          drop,
          rank: 3,
        };
      return { pointer: entry, message: 'price entry without a model (entry ignored)', drop, rank: 2 };
    case 'channel':
      return { pointer: where, message: 'channel must be a non-empty string (entry ignored)', drop, rank: 4 };
  }
  if (key !== undefined) {
    const at = childPointer(where, key);
    if (key !== 'images')
      return {
        pointer: at,
        message: `cost ${key} must be a non-negative number (entry ignored)`,
        drop,
        rank: 6,
      };
    const name = variant ?? error.propertyName;
    if (name === undefined)
      return {
        pointer: at,
        message:
          'cost images must be a price per image or a mapping of "<size>", "<size>/<quality>" or default to prices (entry ignored)',
        drop,
        rank: 6,
      };
    return {
      pointer: childPointer(at, name),
      message: `image price "${name}" must be a non-negative number (entry ignored)`,
      drop,
      rank: 6,
    };
  }
  switch (error.keyword) {
    case 'additionalProperties': {
      const name = String(error.params.additionalProperty);
      return {
        pointer: childPointer(where, name),
        message: `unknown cost "${name}"; expected one of ${COST_KEYS.join(', ')} (ignored)`,
      };
    }
    case 'dependencies':
      return { pointer: where, message: 'cost needs both input and output (entry ignored)', drop, rank: 7 };
    case 'anyOf':
      return { pointer: where, message: 'cost names no price (entry ignored)', drop, rank: 8 };
    default:
      return {
        pointer: where,
        message: `cost must be a mapping of ${COST_KEYS.join(', ')} (entry ignored)`,
        drop,
        rank: 5,
      };
  }
}

function describeMultipliers(error: ErrorObject, rest: string[]): Problem | undefined {
  const [group, name] = rest;
  if (group === undefined) {
    if (error.keyword !== 'additionalProperties')
      return {
        pointer: '/multipliers',
        message: 'multipliers must be a mapping of providers, models and channels',
        drop: '/multipliers',
      };
    const key = String(error.params.additionalProperty);
    return {
      pointer: pointerOf(['multipliers', key]),
      message: `unknown multipliers group "${key}"; expected ${MULTIPLIER_KEYS.join(', ')}`,
    };
  }
  const key = name ?? error.propertyName;
  if (key === undefined) {
    const where = pointerOf(['multipliers', group]);
    return {
      pointer: where,
      message: `multipliers.${group} must be a mapping of name to number`,
      drop: where,
    };
  }
  const where = pointerOf(['multipliers', group, key]);
  if (name !== undefined)
    return {
      pointer: where,
      message: `multiplier for "${key}" must be a non-negative number (ignored)`,
      drop: where,
    };
  return {
    pointer: where,
    message: `multipliers.${group} keys are "provider/${group === 'models' ? 'model' : 'channel'}" (ignored)`,
    drop: where,
    rank: 1,
  };
}

function describe(error: ErrorObject): Problem | undefined {
  // A key's own error comes with the name (error.propertyName), and an anyOf reports for its branches.
  if (error.keyword === 'propertyNames' || error.schemaPath.includes('/anyOf/')) return undefined;
  const [top, ...rest] = splitPointer(error.instancePath);
  switch (top) {
    case undefined:
      if (error.keyword === 'additionalProperties') {
        const key = String(error.params.additionalProperty);
        return { pointer: pointerOf([key]), message: `unknown top-level key "${key}" (ignored)` };
      }
      return {
        pointer: '',
        message:
          'a pricing file must be a mapping with prices (and optional currency, pricing_unit, multipliers)',
        drop: '',
      };
    case 'currency':
      return {
        pointer: '/currency',
        message: `currency must be a three-letter code such as USD (using ${DEFAULT_CURRENCY})`,
        drop: '/currency',
      };
    case 'pricing_unit':
      return {
        pointer: '/pricing_unit',
        message: `pricing_unit must be a positive integer (using ${DEFAULT_PRICING_UNIT})`,
        drop: '/pricing_unit',
      };
    case 'reference_prices':
      return { pointer: '/reference_prices', message: 'reference_prices must be true or false' };
    case 'version':
      return {
        pointer: '/version',
        message: 'version must be up to 64 letters, digits, ".", "_" or "-" (ignored)',
        drop: '/version',
      };
    case 'prices': {
      const [index, ...inEntry] = rest;
      if (index === undefined)
        return { pointer: '/prices', message: 'prices must be a list of entries', drop: '/prices' };
      return describeEntry(error, childPointer('/prices', index), inEntry);
    }
    case 'multipliers':
      return describeMultipliers(error, rest);
    default:
      return {
        pointer: error.instancePath,
        message: `${displayPath(error.instancePath)} ${error.message ?? 'is invalid'}`,
      };
  }
}

/** The problems to report (first of each dropped part, every ignored key) and the parts left out. */
function problemsOf(errors: readonly ErrorObject[]): { report: Problem[]; dropped: Set<string> } {
  const problems = errors.map(describe).filter((p): p is Problem => p !== undefined);
  const lowest = new Map<string, number>();
  for (const { drop, rank = 0 } of problems) {
    if (drop !== undefined) lowest.set(drop, Math.min(rank, lowest.get(drop) ?? rank));
  }
  const seen = new Set<string>();
  const report = problems.filter((p) => {
    const key = `${p.pointer}\u0000${p.message}`;
    if (seen.has(key) || (p.drop !== undefined && (p.rank ?? 0) !== lowest.get(p.drop))) return false;
    seen.add(key);
    return true;
  });
  return { report, dropped: new Set(lowest.keys()) };
}

// The schema admits what parseMoney reads, and -0, which prices as 0.
const money = (value: MoneyValue): Decimal => parseMoney(value) ?? ZERO;

function compileEntry(
  raw: RawEntry,
  defaults: { currency: string; pricingUnit: number; file: string; line: number },
): PriceEntry {
  const prices: Partial<Record<PriceComponent, Decimal>> = {};
  let images: Record<string, Decimal> | undefined;
  for (const [key, value] of Object.entries(raw.cost)) {
    if (!COST_KEYS.includes(key) || value === undefined) continue;
    if (key === 'images') images = imagePrices(value);
    else prices[key as PriceComponent] = money(value as MoneyValue);
  }
  return {
    provider: raw.provider,
    model: raw.model,
    channel: raw.channel,
    currency: defaults.currency,
    pricingUnit: defaults.pricingUnit,
    cost: prices,
    images,
    file: defaults.file,
    line: defaults.line,
  };
}

/** `images: 0.04` (any image) or `images: { default: 0.04, "1024x1024": 0.04, "1024x1792/hd": 0.12 }`. */
function imagePrices(raw: MoneyValue | Record<string, MoneyValue>): Record<string, Decimal> {
  if (typeof raw !== 'object') return { default: money(raw) };
  const prices: Record<string, Decimal> = {};
  for (const [variant, value] of Object.entries(raw)) prices[variant.toLowerCase()] = money(value);
  return prices;
}

function compileMultipliers(doc: PricingDocument, dropped: ReadonlySet<string>, into: Multipliers): void {
  if (doc.multipliers === undefined || doc.multipliers === null || dropped.has('/multipliers')) return;
  for (const group of MULTIPLIER_KEYS) {
    const table = doc.multipliers[group];
    if (table === undefined || table === null || dropped.has(pointerOf(['multipliers', group]))) continue;
    for (const [name, value] of Object.entries(table)) {
      if (!dropped.has(pointerOf(['multipliers', group, name]))) into[group].set(name, money(value));
    }
  }
}

export interface CompiledFile {
  entries: PriceEntry[];
  reference: boolean;
  /** The file's top-level `version:`, which the price version names after its hash. */
  version: string | undefined;
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
  if (yaml.value === undefined || yaml.value === null)
    return { entries: [], reference: false, version: undefined };
  const { report, dropped } = check(yaml.value)
    ? { report: [], dropped: new Set<string>() }
    : problemsOf(check.errors ?? []);
  // Entries are reported at their key, as an editor shows where they start.
  const own = report.map(({ pointer, message }) => yaml.at(pointer, message, 'key'));
  const compiled = dropped.has('') ? undefined : compileDocument(yaml, dropped, multipliers, own);
  diagnostics.push(...own.sort((a, b) => a.line - b.line || a.col - b.col));
  return compiled;
}

function compileDocument(
  yaml: YamlFile,
  dropped: ReadonlySet<string>,
  multipliers: Multipliers,
  diagnostics: PricingDiagnostic[],
): CompiledFile {
  const doc = yaml.value as PricingDocument;
  const currency = dropped.has('/currency') ? DEFAULT_CURRENCY : (doc.currency ?? DEFAULT_CURRENCY);
  const pricingUnit = dropped.has('/pricing_unit')
    ? DEFAULT_PRICING_UNIT
    : (doc.pricing_unit ?? DEFAULT_PRICING_UNIT);
  const entries: PriceEntry[] = [];
  const seen = new Map<string, number>();
  const prices = dropped.has('/prices') ? [] : (doc.prices ?? []);
  prices.forEach((raw, index) => {
    const pointer = pointerOf(['prices', index]);
    if (dropped.has(pointer)) return;
    const { line } = yaml.locate(pointer, 'key');
    const entry = compileEntry(raw, { currency, pricingUnit, file: yaml.file, line });
    const key = entryKey(entry.provider, entry.model, entry.channel);
    const earlier = seen.get(key);
    if (earlier !== undefined) {
      const message = `duplicate price for ${entryName(entry)}; this entry replaces the one on line ${earlier}`;
      diagnostics.push(yaml.at(pointer, message, 'key'));
    }
    seen.set(key, line);
    entries.push(entry);
  });
  compileMultipliers(doc, dropped, multipliers);
  const version = dropped.has('/version') ? undefined : doc.version;
  return { entries, reference: doc.reference_prices === true, version };
}

function entryName(entry: { provider: string; model: string; channel: string | undefined }): string {
  return `${entry.provider}/${entry.model}${entry.channel === undefined ? '' : ` (channel ${entry.channel})`}`;
}
