// Builds the usage event (docs/billing.md "The usage event"). The event
// is made only from the fields below (counts, names, ids, status), so it cannot carry prompts, outputs,
// headers or keys.
//
// x-billing items (runtime quantities are the source of truth for charges):
// - prompt_tokens and completion_tokens, unit `token`;
// - item_detail `spec` (the default): those two are all there is for tokens, so a rule set written to the
//   specification (which names only them) charges everything. prompt_tokens counts all input (cache
//   reads and writes, input audio) and completion_tokens all output; when an item's tokens have
//   different prices, its hint is exact instead of per token: pricing_unit is the quantity and
//   unit_price the decimal amount of its parts, so quantity / pricing_unit x unit_price is the amount.
// - item_detail `detailed`: when the price has a cache_read (cache_creation) component and the request
//   read from (wrote to) the prompt cache, those tokens become their own `cache_read_tokens`
//   (`cache_creation_tokens`) item at that price and prompt_tokens is the uncached remainder; audio
//   likewise (`input_audio_tokens`, `output_audio_tokens`). Without a cache price every input token is
//   a prompt_tokens token. Both modes charge the same amount.
// - `images` (unit `image`, priced per image by size and quality), `input_characters` (unit `character`,
//   speech) and `audio_seconds` (unit `second`, transcription; whole seconds, at least 1) for endpoints
//   that are not billed by tokens (docs/billing.md "Price units");
// - items of quantity 0 are left out; x-billing is omitted when no item remains, pricing_hints when
//   there is no price (the billing service may still price the items from its own rules).
//
// Size: an event's JSON is at most MAX_EVENT_BYTES (boundEventSize). The billing service refuses larger
// bodies, and one event it can never take must not cost the request its charge.

import { createHash } from 'node:crypto';
import type { Decimal } from 'decimal.js';
import type { ItemDetail } from '../common/config-types.ts';
import type { ApiName, StreamEndReason, Usage, UsageStage } from '../common/types.ts';
import { isCount, type TokenEvent } from './event/token-event.ts';
import {
  type BillingItem,
  idempotencyKey,
  type PricingHint,
  type UsageCounts,
  type UsageEvent,
} from './event/usage-event.ts';
import { Money, toWireNumber } from './money.ts';
import { imageHint, priceHints } from './price-hints.ts';
import { IMAGES_METRIC, type ModelPrice, type PriceComponent } from './price-types.ts';

export interface UsageEventInput {
  requestId: string;
  /** The caller's own request id, kept for correlation only. */
  correlationId?: string | undefined;
  /** Wall-clock time of the request, ms since the epoch. */
  occurredAtMs: number;
  provider: string;
  api: ApiName;
  /** Model name as requested by the client. */
  model: string;
  stream: boolean;
  status: number;
  usage: Usage;
  usageStage: UsageStage;
  subjectType: string;
  subjectId: string;
  /** The event's `source` (billing.source). */
  source: string;
  /** Emit the prompt_tokens / completion_tokens / cached_tokens aliases (completion-style rules). */
  completionStyle: boolean;
  price: ModelPrice | undefined;
  /** billing.item_detail; default `spec`. */
  itemDetail?: ItemDetail | undefined;
  /** The pricing's version (Pricing.version), carried in meta and x-billing. */
  priceVersion?: string | undefined;
  /** Why the stream was interrupted (meta.end_reason); such an event is never a token event. */
  endReason?: StreamEndReason | undefined;
}

/** A token count for the wire: a non-negative integer whatever the upstream sent. */
function tokens(value: number | undefined): number {
  return value !== undefined && Number.isFinite(value) && value > 0 ? Math.floor(value) : 0;
}

function usageCounts(usage: Usage, completionStyle: boolean, units: UnitQuantities): UsageCounts {
  const input = tokens(usage.inputTokens);
  const output = tokens(usage.outputTokens);
  const cacheRead = tokens(usage.cacheReadTokens);
  const cacheCreation = tokens(usage.cacheCreationTokens);
  const counts: UsageCounts = {
    input_tokens: input,
    output_tokens: output,
    total_tokens: tokens(usage.totalTokens) || input + output,
  };
  if (cacheRead > 0) counts.cache_read_tokens = cacheRead;
  if (cacheCreation > 0) counts.cache_creation_tokens = cacheCreation;
  const inputAudio = tokens(usage.inputAudioTokens);
  const outputAudio = tokens(usage.outputAudioTokens);
  if (inputAudio > 0) counts.input_audio_tokens = inputAudio;
  if (outputAudio > 0) counts.output_audio_tokens = outputAudio;
  if (units.images > 0) counts.images = units.images;
  if (units.characters > 0) counts.input_characters = units.characters;
  if (units.seconds > 0) counts.audio_seconds = units.seconds;
  if (completionStyle) {
    counts.prompt_tokens = input;
    counts.completion_tokens = output;
    if (cacheRead > 0) counts.cached_tokens = cacheRead;
  }
  return counts;
}

/** Token counts by the price component that prices them. */
interface TokenParts {
  readonly input: number;
  readonly output: number;
  readonly cacheRead: number;
  readonly cacheCreation: number;
  readonly inputAudio: number;
  readonly outputAudio: number;
}

/**
 * The tokens of each priced component: cache and audio tokens apart from text only when the price has
 * their component; else the text price prices them.
 */
function tokenParts(usage: Usage, price: ModelPrice | undefined): TokenParts {
  const cacheRead = price?.unitPrices.cache_read !== undefined ? tokens(usage.cacheReadTokens) : 0;
  const cacheCreation =
    price?.unitPrices.cache_creation !== undefined ? tokens(usage.cacheCreationTokens) : 0;
  const inputAudio = price?.unitPrices.input_audio !== undefined ? tokens(usage.inputAudioTokens) : 0;
  const outputAudio = price?.unitPrices.output_audio !== undefined ? tokens(usage.outputAudioTokens) : 0;
  return {
    input: Math.max(0, tokens(usage.inputTokens) - cacheRead - cacheCreation - inputAudio),
    output: Math.max(0, tokens(usage.outputTokens) - outputAudio),
    cacheRead,
    cacheCreation,
    inputAudio,
    outputAudio,
  };
}

function billingItems(parts: TokenParts, detailed: boolean, units: UnitQuantities): BillingItem[] {
  const items: BillingItem[] = [];
  if (detailed) {
    add(items, 'prompt_tokens', parts.input, 'token');
    add(items, 'completion_tokens', parts.output, 'token');
    add(items, 'cache_read_tokens', parts.cacheRead, 'token');
    add(items, 'cache_creation_tokens', parts.cacheCreation, 'token');
    add(items, 'input_audio_tokens', parts.inputAudio, 'token');
    add(items, 'output_audio_tokens', parts.outputAudio, 'token');
  } else {
    add(
      items,
      'prompt_tokens',
      parts.input + parts.cacheRead + parts.cacheCreation + parts.inputAudio,
      'token',
    );
    add(items, 'completion_tokens', parts.output + parts.outputAudio, 'token');
  }
  add(items, IMAGES_METRIC, units.images, 'image');
  add(items, 'input_characters', units.characters, 'character');
  add(items, 'audio_seconds', units.seconds, 'second');
  return items;
}

function add(items: BillingItem[], metric: string, quantity: number, unit: string): void {
  if (quantity > 0) items.push({ metric, quantity, unit });
}

interface UnitQuantities {
  readonly images: number;
  readonly characters: number;
  readonly seconds: number;
}

/** Audio is billed in whole seconds, rounded to the nearest, and any audio at all as at least one. */
function unitQuantities(usage: Usage): UnitQuantities {
  const audio = usage.audioSeconds;
  const seconds =
    audio !== undefined && Number.isFinite(audio) && audio > 0 ? Math.max(1, Math.round(audio)) : 0;
  return { images: tokens(usage.images), characters: tokens(usage.inputCharacters), seconds };
}

/** Largest usage event, as JSON bytes (docs/billing.md "The usage event"). */
export const MAX_EVENT_BYTES = 64 * 1024;
// Each UTF-16 unit is at most 6 bytes of JSON (a \u00XX escape); keys, numbers and items stay far below
// the rest.
const JSON_BYTES_PER_CHAR = 6;
const STRUCTURE_BYTES = 4096;
/** Characters kept of an oversized string, then fewer if the event is still too large. */
const KEPT_CHARS = [1024, 64];

/**
 * The event itself when its JSON fits MAX_EVENT_BYTES; otherwise a copy whose long strings are cut, each
 * ending in a marker with the original length and a hash, so ids stay distinct and the event still bills.
 */
export function boundEventSize(event: UsageEvent): UsageEvent {
  if (stringChars(event) * JSON_BYTES_PER_CHAR + STRUCTURE_BYTES <= MAX_EVENT_BYTES) return event;
  if (Buffer.byteLength(JSON.stringify(event)) <= MAX_EVENT_BYTES) return event;
  let bounded = event;
  for (const keep of KEPT_CHARS) {
    bounded = mapStrings(event, keep) as UsageEvent;
    if (Buffer.byteLength(JSON.stringify(bounded)) <= MAX_EVENT_BYTES) break;
  }
  return bounded;
}

/**
 * Characters of every string an event built from `input` can hold, each as often as the event repeats
 * it: the inputs' strings, and the currency of each pricing hint (metric and unit names are in
 * STRUCTURE_BYTES). Bounds the event's size without walking it.
 */
function inputChars(input: UsageEventInput, items: number): number {
  return (
    input.source.length +
    3 * input.requestId.length +
    2 * (input.subjectType.length + input.subjectId.length) +
    input.provider.length +
    input.api.length +
    input.model.length +
    input.usageStage.length +
    (input.correlationId?.length ?? 0) +
    2 * (input.priceVersion?.length ?? 0) +
    (input.endReason?.length ?? 0) +
    (input.price === undefined ? 0 : items * input.price.currency.length)
  );
}

function stringChars(value: unknown): number {
  if (typeof value === 'string') return value.length;
  if (typeof value !== 'object' || value === null) return 0;
  let n = 0;
  if (Array.isArray(value)) for (const v of value) n += stringChars(v);
  else for (const k in value) n += stringChars((value as Record<string, unknown>)[k]);
  return n;
}

function mapStrings(value: unknown, keep: number): unknown {
  if (typeof value === 'string') return value.length > keep ? truncated(value, keep) : value;
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map((v) => mapStrings(v, keep));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = mapStrings(v, keep);
  return out;
}

function truncated(text: string, keep: number): string {
  let head = text.slice(0, keep);
  const last = head.charCodeAt(head.length - 1);
  if (last >= 0xd800 && last <= 0xdbff) head = head.slice(0, -1);
  const hash = createHash('sha256').update(text).digest('hex').slice(0, 16);
  return `${head}…[truncated from ${text.length} chars, sha256 ${hash}]`;
}

/**
 * The exact hint of a spec-mode item whose tokens have different prices: the amount of its parts for
 * pricing_unit = quantity. undefined when the text price prices it all (the per-token hint is exact
 * then) or no price does.
 */
function blendedHint(
  price: ModelPrice,
  quantity: number,
  parts: readonly (readonly [PriceComponent, number])[],
): PricingHint | undefined {
  // parts[0] is the text component, whose per-token hint the item has otherwise.
  if (parts.every(([, count], i) => i === 0 || count === 0)) return undefined;
  let amount: Decimal | undefined;
  for (const [component, count] of parts) {
    const unitPrice = price.unitPrices[component];
    if (count === 0 || unitPrice === undefined) continue;
    const part = new Money(count).mul(unitPrice);
    amount = amount === undefined ? part : amount.add(part);
  }
  if (amount === undefined) return undefined;
  return {
    unit_price: toWireNumber(amount.div(price.pricingUnit)),
    pricing_unit: quantity,
    currency: price.currency,
  };
}

/** Pricing hints of the event's items, or undefined when none is priced. */
function itemHints(
  input: UsageEventInput,
  price: ModelPrice,
  items: readonly BillingItem[],
  parts: TokenParts,
  detailed: boolean,
): Record<string, PricingHint> | undefined {
  const all = priceHints(price);
  const hints: Record<string, PricingHint> = {};
  let hinted = false;
  for (const item of items) {
    let hint: PricingHint | undefined;
    if (item.metric === IMAGES_METRIC) {
      hint = imageHint(price, input.usage.imageSize, input.usage.imageQuality);
    } else if (!detailed && item.metric === 'prompt_tokens') {
      hint =
        blendedHint(price, item.quantity, [
          ['input', parts.input],
          ['cache_read', parts.cacheRead],
          ['cache_creation', parts.cacheCreation],
          ['input_audio', parts.inputAudio],
        ]) ?? all[item.metric];
    } else if (!detailed && item.metric === 'completion_tokens') {
      hint =
        blendedHint(price, item.quantity, [
          ['output', parts.output],
          ['output_audio', parts.outputAudio],
        ]) ?? all[item.metric];
    } else {
      hint = all[item.metric];
    }
    if (hint) {
      hints[item.metric] = hint;
      hinted = true;
    }
  }
  return hinted ? hints : undefined;
}

export function buildUsageEvent(input: UsageEventInput): UsageEvent {
  const units = unitQuantities(input.usage);
  const meta: UsageEvent['raw_json']['meta'] = {
    subject_type: input.subjectType,
    subject_id: input.subjectId,
    request_id: input.requestId,
  };
  if (input.correlationId !== undefined) meta.correlation_id = input.correlationId;
  if (input.priceVersion !== undefined) meta.price_version = input.priceVersion;
  if (input.price === undefined) meta.unpriced = true;
  if (input.endReason !== undefined) meta.end_reason = input.endReason;
  const event: UsageEvent = {
    source: input.source,
    external_event_id: input.requestId,
    idempotency_key: idempotencyKey(input.requestId),
    // The billing service takes Unix seconds.
    occurred_at: Math.floor(input.occurredAtMs / 1000),
    subject_type: input.subjectType,
    subject_id: input.subjectId,
    raw_json: {
      provider: input.provider,
      api: input.api,
      model: input.model,
      stream: input.stream,
      status: input.status,
      usage_stage: input.usageStage,
      usage: usageCounts(input.usage, input.completionStyle, units),
      meta,
    },
  };
  const parts = tokenParts(input.usage, input.price);
  const detailed = input.itemDetail === 'detailed';
  const items = billingItems(parts, detailed, units);
  if (items.length > 0) {
    const billing: NonNullable<UsageEvent['x-billing']> = { items };
    const hints = input.price && itemHints(input, input.price, items, parts, detailed);
    if (hints) billing.pricing_hints = hints;
    if (input.priceVersion !== undefined) billing.price_version = input.priceVersion;
    event['x-billing'] = billing;
  }
  // Events are small unless a client sent long ids or names: most skip the walk of boundEventSize.
  if (inputChars(input, items.length) * JSON_BYTES_PER_CHAR + STRUCTURE_BYTES <= MAX_EVENT_BYTES)
    return event;
  return boundEventSize(event);
}

/**
 * The input's event as a token event (billing/event/token-event.ts), when it is one: usage of prompt and
 * completion tokens only, counts that are safe integers, and strings short enough that the event needs no
 * bounding. usageEventOf(buildTokenEvent(input)) is buildUsageEvent(input); otherwise undefined.
 */
export function buildTokenEvent(input: UsageEventInput): TokenEvent | undefined {
  const usage = input.usage;
  if (
    input.endReason !== undefined ||
    tokens(usage.cacheReadTokens) > 0 ||
    tokens(usage.cacheCreationTokens) > 0 ||
    tokens(usage.inputAudioTokens) > 0 ||
    tokens(usage.outputAudioTokens) > 0 ||
    tokens(usage.images) > 0 ||
    tokens(usage.inputCharacters) > 0 ||
    unitQuantities(usage).seconds > 0
  ) {
    return undefined;
  }
  const inputTokens = tokens(usage.inputTokens);
  const output = tokens(usage.outputTokens);
  const total = tokens(usage.totalTokens) || inputTokens + output;
  const occurredAt = Math.floor(input.occurredAtMs / 1000);
  if (!isCount(inputTokens) || !isCount(output) || !isCount(total) || !isCount(occurredAt)) return undefined;
  if (inputChars(input, 2) * JSON_BYTES_PER_CHAR + STRUCTURE_BYTES > MAX_EVENT_BYTES) return undefined;
  const price = input.price;
  const hints = price === undefined ? undefined : priceHints(price);
  return {
    source: input.source,
    subjectType: input.subjectType,
    subjectId: input.subjectId,
    provider: input.provider,
    api: input.api,
    model: input.model,
    stream: input.stream,
    status: input.status,
    usageStage: input.usageStage,
    aliases: input.completionStyle,
    promptHint: inputTokens > 0 ? hints?.prompt_tokens : undefined,
    completionHint: output > 0 ? hints?.completion_tokens : undefined,
    priceVersion: input.priceVersion,
    unpriced: price === undefined,
    id: input.requestId,
    correlationId: input.correlationId,
    occurredAt,
    input: inputTokens,
    output,
    total,
  };
}

export type ReportDecision = 'report' | 'skip_disabled' | 'skip_status' | 'skip_no_subject';

export interface ReportDecisionInput {
  billingEnabled: boolean;
  /** billing.only_billable_success: report only 2xx requests. */
  onlyBillableSuccess: boolean;
  /** Status sent to the client (0 when the client left before a head was written). */
  status: number;
  /** '' when the request maps to no subject (master key or no key, empty fallback_subject_id). */
  subjectId: string;
}

/**
 * Whether a finished request is reported. A request without a subject is never sent with an empty
 * subject: the billing service could not attribute it, and an empty id would collide across callers.
 */
export function reportDecision(input: ReportDecisionInput): ReportDecision {
  if (!input.billingEnabled) return 'skip_disabled';
  if (input.onlyBillableSuccess && !(input.status >= 200 && input.status < 300)) return 'skip_status';
  if (input.subjectId === '') return 'skip_no_subject';
  return 'report';
}
