// Pricing files -> a compiled price table, looked up per request to fill the usage event's
// pricing_hints. Format (docs/billing.md "Pricing files"):
//
//   currency: USD                 # default USD
//   pricing_unit: 1000000         # token and character prices are per this many; default 1,000,000
//   prices:
//     - { provider: openai, model: gpt-5.4-mini, cost: { input: 0.15, output: 0.6, cache_read: 0.075 } }
//     - { provider: openai, model: dall-e-3, cost: { images: { default: 0.04, "1024x1024/hd": 0.08 } } }
//     - { provider: openai, model: tts-1, cost: { input_characters: 15 } }
//     - { provider: openai, model: whisper-1, cost: { audio_minutes: 0.006 } }
//     - { provider: anthropic, model: "claude-*", cost: { input: 3, output: 15, cache_read: 0.3, cache_creation: 3.75 } }
//     - { provider: openai, model: gpt-5.4-mini, channel: key1, cost: { input: 0.12, output: 0.5 } }
//   multipliers:
//     providers: { openrouter: 1.05 }
//     models: { "openai/gpt-5.5": 0.9 }
//     channels: { "openai/key1": 0.8 }
//
// Lookup precedence: a channel-specific entry > the exact model > the longest matching `prefix*`
// pattern. A channel entry overrides only the cost components it names; the others come from the
// model's ordinary entry. Multipliers multiply: provider x model (`provider/model`, exact) x channel
// (`provider/channel`). Later files override earlier ones entry by entry, so an operator can keep a
// shipped price list and a small local override file. All arithmetic is decimal (billing/money.ts).

import { readFile } from 'node:fs/promises';
import type { Decimal } from 'decimal.js';
import { setBounded } from '../common/bounded-map.ts';
import { Money } from './money.ts';
import { priceHints } from './price-hints.ts';
import { entryKey, PriceTable } from './price-table.ts';
import {
  type ModelPrice,
  type Multipliers,
  PRICE_COMPONENTS,
  type PriceComponent,
  type Pricing,
  type PricingDiagnostic,
  type PricingOptions,
  type PricingSource,
} from './price-types.ts';
import { priceVersion } from './price-version.ts';
import { compileSource } from './pricing-file.ts';

/** Bounds the per-process memo and the warned set: model names can come from clients. */
const MEMO_LIMIT = 4096;
/** Providers times the channels clients name. */
const SCOPE_LIMIT = 256;
const WARNED_LIMIT = 10_000;

const ONE = new Money(1);

interface Looked {
  readonly provider: string;
  readonly model: string;
  readonly channel: string | undefined;
  readonly price: ModelPrice | undefined;
}

function createPricing(
  table: PriceTable,
  multipliers: Multipliers,
  options: PricingOptions,
  referenceFiles: readonly string[],
  version: string,
): Pricing {
  // By provider (and channel), then model: looked up per billed request, where composing one key string
  // and hashing it showed in profiles.
  const memo = new Map<string, Map<string, ModelPrice | undefined>>();
  const warned = new Set<string>();
  // The last answer: requests in a row mostly name the same model.
  let last: Looked | undefined;

  function resolve(provider: string, model: string, channel: string | undefined): ModelPrice | undefined {
    const base = table.find(provider, model, undefined);
    const special = channel === undefined ? undefined : table.find(provider, model, channel);
    const chosen = special ?? base;
    if (!chosen) return undefined;
    const multiplier = (multipliers.providers.get(provider) ?? ONE)
      .mul(multipliers.models.get(`${provider}/${model}`) ?? ONE)
      .mul(channel === undefined ? ONE : (multipliers.channels.get(`${provider}/${channel}`) ?? ONE));
    const cost = { ...base?.cost, ...special?.cost };
    const unitPrices: Partial<Record<PriceComponent, Decimal>> = {};
    for (const component of PRICE_COMPONENTS) {
      const price = cost[component];
      if (price !== undefined) unitPrices[component] = price.mul(multiplier);
    }
    const images = special?.images ?? base?.images;
    let imagePrices: Record<string, Decimal> | undefined;
    if (images !== undefined) {
      imagePrices = {};
      for (const [variant, price] of Object.entries(images)) imagePrices[variant] = price.mul(multiplier);
    }
    return Object.freeze({
      provider,
      model: chosen.model,
      channel: special ? channel : undefined,
      currency: chosen.currency,
      pricingUnit: chosen.pricingUnit,
      unitPrices: Object.freeze(unitPrices),
      imagePrices: imagePrices === undefined ? undefined : Object.freeze(imagePrices),
      multiplier,
    });
  }

  function lookup(provider: string, model: string, channel: string | undefined): ModelPrice | undefined {
    const l = last;
    if (l !== undefined && l.provider === provider && l.model === model && l.channel === channel)
      return l.price;
    const price = memoized(provider, model, channel);
    last = { provider, model, channel, price };
    return price;
  }

  function memoized(provider: string, model: string, channel: string | undefined): ModelPrice | undefined {
    const scope = channel === undefined || channel === '' ? provider : entryKey(provider, '', channel);
    let byModel = memo.get(scope);
    const known = byModel?.get(model);
    if (known !== undefined || byModel?.has(model) === true) return known;
    const price = resolve(provider, model, channel === '' ? undefined : channel);
    if (byModel === undefined) {
      byModel = new Map();
      setBounded(memo, scope, byModel, SCOPE_LIMIT);
    }
    setBounded(byModel, model, price, MEMO_LIMIT);
    if (!price) {
      const id = `${provider}\u0000${model}`;
      if (!warned.has(id) && warned.size < WARNED_LIMIT) {
        warned.add(id);
        options.onMissingPrice?.(provider, model);
      }
    }
    return price;
  }

  return {
    lookup,
    hints: priceHints,
    get size() {
      return table.size;
    },
    referenceFiles,
    version,
    covers(provider, model) {
      if (model.endsWith('*')) return table.coversPrefix(provider, model.slice(0, -1));
      return table.find(provider, model, undefined) !== undefined;
    },
  };
}

/** Compiles pricing sources already in memory (later sources override earlier ones). */
export function compilePricing(
  sources: readonly PricingSource[],
  options: PricingOptions = {},
): { pricing: Pricing; diagnostics: PricingDiagnostic[] } {
  const diagnostics: PricingDiagnostic[] = [];
  const multipliers: Multipliers = { providers: new Map(), models: new Map(), channels: new Map() };
  const table = new PriceTable();
  const referenceFiles: string[] = [];
  const versions: string[] = [];
  for (const source of sources) {
    const compiled = compileSource(source, multipliers, diagnostics);
    for (const entry of compiled?.entries ?? []) table.add(entry);
    if (compiled?.reference === true) referenceFiles.push(source.file);
    if (compiled?.version !== undefined) versions.push(compiled.version);
  }
  const version = priceVersion(table, multipliers, versions);
  return { pricing: createPricing(table, multipliers, options, referenceFiles, version), diagnostics };
}

/**
 * Reads and compiles pricing files. Problems never throw: each becomes a diagnostic with file, line and
 * column, and the offending entry (or file) is left out. The caller decides whether any are fatal.
 */
export async function loadPricing(
  files: readonly string[],
  options: PricingOptions = {},
): Promise<{ pricing: Pricing; diagnostics: PricingDiagnostic[] }> {
  const sources: PricingSource[] = [];
  const readErrors: PricingDiagnostic[] = [];
  for (const file of files) {
    try {
      sources.push({ file, text: await readFile(file, 'utf8') });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
      readErrors.push({
        file,
        line: 0,
        col: 0,
        message: `cannot read pricing file: ${code === 'ENOENT' ? 'file not found' : code}`,
      });
    }
  }
  const { pricing, diagnostics } = compilePricing(sources, options);
  return { pricing, diagnostics: [...readErrors, ...diagnostics] };
}
