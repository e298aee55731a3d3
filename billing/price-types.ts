// The shapes of compiled pricing: cost components, a model's price, the pricing interface the gateway
// uses. The file format is in billing/pricing.ts.

import type { Decimal } from 'decimal.js';
import type { PricingHint } from './event/usage-event.ts';

/**
 * `input_audio` / `output_audio`: audio tokens (realtime sessions), priced apart from text tokens when
 * the model's entry prices them; otherwise they are billed as input / output.
 */
export const TOKEN_COMPONENTS = [
  'input',
  'output',
  'cache_read',
  'cache_creation',
  'input_audio',
  'output_audio',
] as const;
/**
 * Components with one price each: tokens and input characters per pricing_unit, audio per minute. Images
 * (`images`) are priced per image by size and quality (ModelPrice.imagePrices).
 */
export const PRICE_COMPONENTS = [...TOKEN_COMPONENTS, 'input_characters', 'audio_minutes'] as const;
export type PriceComponent = (typeof PRICE_COMPONENTS)[number];
export const COST_KEYS: readonly string[] = [...PRICE_COMPONENTS, 'images'];

/** The x-billing metric each cost component prices. */
export const COMPONENT_METRIC: Readonly<Record<PriceComponent, string>> = {
  input: 'prompt_tokens',
  output: 'completion_tokens',
  cache_read: 'cache_read_tokens',
  cache_creation: 'cache_creation_tokens',
  input_audio: 'input_audio_tokens',
  output_audio: 'output_audio_tokens',
  input_characters: 'input_characters',
  audio_minutes: 'audio_seconds',
};

/** The x-billing metric of generated images; its price depends on the image's size and quality. */
export const IMAGES_METRIC = 'images';
/** Audio is metered in seconds and priced per minute, as vendors publish it. */
export const SECONDS_PER_MINUTE = 60;

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
   * The price version every usage event carries: `sha256:<16 hex>` of the compiled table, `@<version>`
   * added when pricing files name one (billing/price-version.ts).
   */
  readonly version: string;
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

export interface PriceEntry {
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

export interface Multipliers {
  readonly providers: Map<string, Decimal>;
  readonly models: Map<string, Decimal>;
  readonly channels: Map<string, Decimal>;
}
