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
import {
  constructFromEvents,
  EVENT_ID,
  type Event,
  getScalarValue,
  parseEvents,
  YAMLException,
} from 'js-yaml';
import type { PricingHint } from '../common/usage-event.ts';
import { Money, parseMoney, toWireNumber } from './money.ts';

export const TOKEN_COMPONENTS = ['input', 'output', 'cache_read', 'cache_creation'] as const;
/**
 * Components with one price each: tokens and input characters per pricing_unit, audio per minute. Images
 * (`images`) are priced per image by size and quality (ModelPrice.imagePrices).
 */
export const PRICE_COMPONENTS = [...TOKEN_COMPONENTS, 'input_characters', 'audio_minutes'] as const;
export type PriceComponent = (typeof PRICE_COMPONENTS)[number];
const COST_KEYS: readonly string[] = [...PRICE_COMPONENTS, 'images'];

/** The x-billing metric each cost component prices. */
export const COMPONENT_METRIC: Readonly<Record<PriceComponent, string>> = {
  input: 'prompt_tokens',
  output: 'completion_tokens',
  cache_read: 'cache_read_tokens',
  cache_creation: 'cache_creation_tokens',
  input_characters: 'input_characters',
  audio_minutes: 'audio_seconds',
};

/** The x-billing metric of generated images; its price depends on the image's size and quality. */
export const IMAGES_METRIC = 'images';
/** Audio is metered in seconds and priced per minute, as vendors publish it. */
const SECONDS_PER_MINUTE = 60;

export interface ModelPrice {
  readonly provider: string;
  /** The model or `prefix*` pattern of the entry that matched. */
  readonly model: string;
  /** Set when a channel-specific entry matched. */
  readonly channel: string | undefined;
  readonly currency: string;
  readonly pricingUnit: number;
  /** Price per pricingUnit tokens with all multipliers applied; components without a price are absent. */
  readonly unitPrices: Readonly<Partial<Record<PriceComponent, Decimal>>>;
  /** Price per image by `<size>/<quality>`, `<size>` or `default`, multipliers applied; absent when unpriced. */
  readonly imagePrices: Readonly<Record<string, Decimal>> | undefined;
  /** provider x model x channel multiplier that was applied. */
  readonly multiplier: Decimal;
}

export interface PricingDiagnostic {
  readonly file: string;
  /** 1-based; 0 when unknown. */
  readonly line: number;
  /** 1-based; 0 when unknown. */
  readonly col: number;
  readonly message: string;
}

export interface Pricing {
  /** The price for a request, or undefined (reported once per provider/model to onMissingPrice). */
  lookup(provider: string, model: string, channel?: string): ModelPrice | undefined;
  /** pricing_hints for every priced component, keyed by x-billing metric. */
  hints(price: ModelPrice): Record<string, PricingHint>;
  /** Number of price entries. */
  readonly size: number;
  /** Files marked `reference_prices: true`: shipped prices nobody has reviewed yet. */
  readonly referenceFiles: readonly string[];
  /**
   * Whether a model has a price, without the missing-price report. A `prefix*` pattern counts as priced
   * when some price could match a model under it.
   */
  covers(provider: string, model: string): boolean;
}

export interface PricingOptions {
  /** Called the first time a provider/model has no price (the request is still metered and reported). */
  onMissingPrice?(provider: string, model: string): void;
}

export interface PricingSource {
  readonly file: string;
  readonly text: string;
}

interface PriceEntry {
  readonly provider: string;
  readonly model: string;
  readonly channel: string | undefined;
  readonly currency: string;
  readonly pricingUnit: number;
  readonly cost: Partial<Record<PriceComponent, Decimal>>;
  readonly images: Readonly<Record<string, Decimal>> | undefined;
  readonly file: string;
  readonly line: number;
}

interface Multipliers {
  readonly providers: Map<string, Decimal>;
  readonly models: Map<string, Decimal>;
  readonly channels: Map<string, Decimal>;
}

const DEFAULT_CURRENCY = 'USD';
const DEFAULT_PRICING_UNIT = 1_000_000;
const ENTRY_KEYS = new Set(['provider', 'model', 'channel', 'cost']);
const TOP_KEYS = new Set(['currency', 'pricing_unit', 'reference_prices', 'prices', 'multipliers']);
const MULTIPLIER_KEYS = ['providers', 'models', 'channels'] as const;
/** Bounds the per-process memo and the warned set: model names can come from clients. */
const MEMO_LIMIT = 4096;
const WARNED_LIMIT = 10_000;

// ---------------------------------------------------------------------------------------------------
// YAML with positions: js-yaml v5's event stream carries source offsets; one pass records where each
// node is written (by JSON pointer) so a bad entry can be reported at its line.

type Frame =
  | { kind: 'map'; pointer: string; key: string | undefined; keyOffset: number }
  | { kind: 'seq'; pointer: string; index: number }
  | { kind: 'skip' };

function escapeSegment(segment: string | number): string {
  return String(segment).replaceAll('~', '~0').replaceAll('/', '~1');
}

function pointerOf(...segments: (string | number)[]): string {
  return segments.map((s) => `/${escapeSegment(s)}`).join('');
}

function collectOffsets(source: string, events: readonly Event[]): Map<string, number> {
  const offsets = new Map<string, number>();
  const stack: Frame[] = [];
  /** Registers the node starting at `offset`; returns its pointer, or undefined when it is a mapping key. */
  function place(offset: number): string | undefined {
    const top = stack.at(-1);
    if (top === undefined) return '';
    if (top.kind === 'skip') return undefined;
    if (top.kind === 'seq') {
      const pointer = `${top.pointer}/${top.index++}`;
      offsets.set(pointer, offset);
      return pointer;
    }
    if (top.key === undefined) return undefined;
    const pointer = `${top.pointer}/${escapeSegment(top.key)}`;
    offsets.set(pointer, top.keyOffset);
    top.key = undefined;
    return pointer;
  }
  for (const event of events) {
    switch (event.type) {
      case EVENT_ID.MAPPING:
      case EVENT_ID.SEQUENCE: {
        const top = stack.at(-1);
        const pointer = place(event.start);
        if (pointer === undefined) {
          // A collection used as a mapping key: not addressable; its value gets a placeholder key.
          if (top?.kind === 'map') top.key = '?';
          stack.push({ kind: 'skip' });
        } else if (event.type === EVENT_ID.MAPPING) {
          stack.push({ kind: 'map', pointer, key: undefined, keyOffset: -1 });
        } else {
          stack.push({ kind: 'seq', pointer, index: 0 });
        }
        break;
      }
      case EVENT_ID.SCALAR: {
        const top = stack.at(-1);
        if (top?.kind === 'map' && top.key === undefined) {
          top.key = getScalarValue(source, event);
          top.keyOffset = event.valueStart;
        } else {
          place(event.valueStart);
        }
        break;
      }
      case EVENT_ID.ALIAS:
        place(event.anchorStart);
        break;
      case EVENT_ID.POP:
        stack.pop();
        break;
      default:
        break;
    }
  }
  return offsets;
}

function lineStarts(source: string): number[] {
  const starts = [0];
  for (let i = 0; i < source.length; i++) if (source.charCodeAt(i) === 10) starts.push(i + 1);
  return starts;
}

function positionAt(starts: readonly number[], offset: number): { line: number; col: number } {
  if (offset < 0) return { line: 0, col: 0 };
  let low = 0;
  let high = starts.length - 1;
  while (low < high) {
    const mid = (low + high + 1) >> 1;
    if (starts[mid]! <= offset) low = mid;
    else high = mid - 1;
  }
  return { line: low + 1, col: offset - starts[low]! + 1 };
}

// ---------------------------------------------------------------------------------------------------
// Compilation

type Report = (pointer: string, message: string) => void;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

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
  if (!isRecord(raw)) {
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
  if (!isRecord(cost)) {
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
  if (!isRecord(raw) || Object.keys(raw).length === 0) {
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

function compileMultipliers(raw: unknown, into: Multipliers, report: Report): void {
  if (raw === undefined || raw === null) return;
  if (!isRecord(raw)) {
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
    if (!isRecord(table)) {
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

interface CompiledFile {
  entries: PriceEntry[];
  reference: boolean;
}

function compileSource(
  source: PricingSource,
  multipliers: Multipliers,
  diagnostics: PricingDiagnostic[],
): CompiledFile | undefined {
  const { file, text } = source;
  const starts = lineStarts(text);
  let events: Event[];
  let doc: unknown;
  try {
    events = parseEvents(text, { filename: file });
    const documents = constructFromEvents(events, { source: text, filename: file });
    doc = documents[0];
    if (documents.length > 1) {
      diagnostics.push({ file, line: 0, col: 0, message: 'expected one YAML document, found several' });
      return undefined;
    }
  } catch (error) {
    const position =
      error instanceof YAMLException && error.mark
        ? positionAt(starts, error.mark.position)
        : { line: 0, col: 0 };
    const reason = error instanceof YAMLException ? error.reason : String(error);
    diagnostics.push({ file, ...position, message: `YAML syntax error: ${reason}` });
    return undefined;
  }
  const offsets = collectOffsets(text, events);
  const locate = (pointer: string) => {
    // Fall back to the nearest written ancestor (e.g. a missing key is reported at its entry).
    let p = pointer;
    for (;;) {
      const offset = offsets.get(p);
      if (offset !== undefined || p === '') return positionAt(starts, offset ?? -1);
      p = p.slice(0, p.lastIndexOf('/'));
    }
  };
  const report: Report = (pointer, message) => diagnostics.push({ file, ...locate(pointer), message });

  if (doc === undefined || doc === null) return { entries: [], reference: false };
  if (!isRecord(doc)) {
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

function entryKey(provider: string, model: string, channel: string | undefined): string {
  return `${provider}\u0000${channel ?? ''}\u0000${model}`;
}

function describe(entry: { provider: string; model: string; channel: string | undefined }): string {
  return `${entry.provider}/${entry.model}${entry.channel === undefined ? '' : ` (channel ${entry.channel})`}`;
}

/** Exact entries by key, patterns per provider+channel ordered longest prefix first. */
class PriceTable {
  readonly exact = new Map<string, PriceEntry>();
  readonly patterns = new Map<string, { prefix: string; entry: PriceEntry }[]>();

  add(entry: PriceEntry): void {
    if (entry.model.endsWith('*')) {
      const group = `${entry.provider}\u0000${entry.channel ?? ''}`;
      const prefix = entry.model.slice(0, -1);
      const list = (this.patterns.get(group) ?? []).filter((p) => p.prefix !== prefix);
      list.push({ prefix, entry });
      list.sort((a, b) => b.prefix.length - a.prefix.length);
      this.patterns.set(group, list);
    } else {
      this.exact.set(entryKey(entry.provider, entry.model, entry.channel), entry);
    }
  }

  find(provider: string, model: string, channel: string | undefined): PriceEntry | undefined {
    const exact = this.exact.get(entryKey(provider, model, channel));
    if (exact) return exact;
    const list = this.patterns.get(`${provider}\u0000${channel ?? ''}`);
    return list?.find((p) => model.startsWith(p.prefix))?.entry;
  }

  /** Some entry (exact or pattern) could price a model starting with `prefix`. */
  coversPrefix(provider: string, prefix: string): boolean {
    const start = `${provider}\u0000\u0000`;
    for (const key of this.exact.keys()) if (key.startsWith(start + prefix)) return true;
    const list = this.patterns.get(`${provider}\u0000`) ?? [];
    return list.some((p) => p.prefix.startsWith(prefix) || prefix.startsWith(p.prefix));
  }

  get size(): number {
    let size = this.exact.size;
    for (const list of this.patterns.values()) size += list.length;
    return size;
  }
}

const ONE = new Money(1);

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

function createPricing(
  table: PriceTable,
  multipliers: Multipliers,
  options: PricingOptions,
  referenceFiles: readonly string[],
): Pricing {
  const memo = new Map<string, ModelPrice | undefined>();
  const warned = new Set<string>();

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

  return {
    lookup(provider, model, channel) {
      const key = entryKey(provider, model, channel);
      if (memo.has(key)) return memo.get(key);
      const price = resolve(provider, model, channel === '' ? undefined : channel);
      if (memo.size >= MEMO_LIMIT) memo.clear();
      memo.set(key, price);
      if (!price) {
        const id = `${provider}\u0000${model}`;
        if (!warned.has(id) && warned.size < WARNED_LIMIT) {
          warned.add(id);
          options.onMissingPrice?.(provider, model);
        }
      }
      return price;
    },
    hints: priceHints,
    get size() {
      return table.size;
    },
    referenceFiles,
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
  for (const source of sources) {
    const compiled = compileSource(source, multipliers, diagnostics);
    for (const entry of compiled?.entries ?? []) table.add(entry);
    if (compiled?.reference === true) referenceFiles.push(source.file);
  }
  return { pricing: createPricing(table, multipliers, options, referenceFiles), diagnostics };
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
