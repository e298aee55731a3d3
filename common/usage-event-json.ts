// The JSON text of a queued usage event, written for the event's one shape. JSON.stringify was most of
// what billing added to a request: it looks every key up, checks each object for toJSON and escapes every
// string one character at a time, although from one event to the next only the ids, the time and the
// counts change. Here the text between those is kept from the last event and reused while its fields are
// equal, and a string is checked for characters to escape only when it is written anew. The result is
// byte for byte what JSON.stringify makes of an event the builder made (test/common/usage-event-json.test.ts).

import {
  type BillingItem,
  type PricingHint,
  TRACE_KEY,
  type UsageCounts,
  type UsageEvent,
} from './usage-event.ts';

// A field added to the event's types without being written here fails to compile.
type Only<T, Written extends string> = [Exclude<keyof T, Written>] extends [never] ? true : never;
const writesEveryField: [
  Only<
    UsageEvent,
    | 'source'
    | 'external_event_id'
    | 'idempotency_key'
    | 'occurred_at'
    | 'subject_type'
    | 'subject_id'
    | 'raw_json'
    | 'x-billing'
  >,
  Only<
    UsageEvent['raw_json'],
    'provider' | 'api' | 'model' | 'stream' | 'status' | 'usage_stage' | 'usage' | 'meta'
  >,
  Only<UsageEvent['raw_json']['meta'], 'subject_type' | 'subject_id' | 'request_id' | 'correlation_id'>,
  Only<NonNullable<UsageEvent['x-billing']>, 'items' | 'pricing_hints'>,
  Only<BillingItem, 'metric' | 'quantity' | 'unit'>,
  Only<PricingHint, 'unit_price' | 'pricing_unit' | 'currency'>,
] = [true, true, true, true, true, true];
void writesEveryField;

/** JSON.stringify's text of a string: as it is between quotes unless it has something to escape. */
export function quote(s: string): string {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    // Quote, backslash, control characters, and surrogates (a lone one is escaped).
    if (c < 0x20 || c === 0x22 || c === 0x5c || (c >= 0xd800 && c <= 0xdfff)) return JSON.stringify(s);
  }
  return `"${s}"`;
}

function num(n: number): string {
  return Number.isFinite(n) ? `${n}` : 'null';
}

const COUNT_KEYS = [
  'input_tokens',
  'output_tokens',
  'total_tokens',
  'cache_read_tokens',
  'cache_creation_tokens',
  'input_audio_tokens',
  'output_audio_tokens',
  'prompt_tokens',
  'completion_tokens',
  'cached_tokens',
  'images',
  'input_characters',
  'audio_seconds',
] as const satisfies readonly (keyof UsageCounts)[];
const countsComplete: [Only<UsageCounts, (typeof COUNT_KEYS)[number]>] = [true];
void countsComplete;
/** `{"<key>":` of each count, for the first; `,"<key>":` for the others. */
const FIRST_KEY = new Map<string, string>(COUNT_KEYS.map((k) => [k, `{"${k}":`]));
const LATER_KEY = new Map<string, string>(COUNT_KEYS.map((k) => [k, `,"${k}":`]));

/**
 * The pieces of the event's text, joined once at the end: joining copies each piece once into one flat
 * string, where concatenation made a tree of pieces that every write of the line walked again.
 */
const parts: string[] = [];

/** Counts in their own key order (the builder sets only those an event has). */
function counts(record: UsageCounts): void {
  let first = true;
  for (const key in record) {
    const value = record[key as keyof UsageCounts];
    if (value === undefined) continue;
    const name = first
      ? (FIRST_KEY.get(key) ?? `{${quote(key)}:`)
      : (LATER_KEY.get(key) ?? `,${quote(key)}:`);
    parts.push(name, num(value));
    first = false;
  }
  parts.push(first ? '{}' : '}');
}

/** An item's text around its quantity, by metric; kept with the unit it was written for. */
interface ItemText {
  readonly unit: string;
  /** `{"metric":…,"quantity":` */
  readonly open: string;
  /** `,"unit":…}` */
  readonly close: string;
}
const itemTexts = new Map<string, ItemText>();
/** Metrics are the builder's own names; the bound keeps the map small whatever an event holds. */
const ITEM_TEXTS_MAX = 64;

function itemText(item: BillingItem): ItemText {
  const kept = itemTexts.get(item.metric);
  if (kept !== undefined && kept.unit === item.unit) return kept;
  const text = {
    unit: item.unit,
    open: `{"metric":${quote(item.metric)},"quantity":`,
    close: `,"unit":${quote(item.unit)}}`,
  };
  if (itemTexts.size < ITEM_TEXTS_MAX || kept !== undefined) itemTexts.set(item.metric, text);
  return text;
}

/** A pricing hint as it was written: its metric and values. */
interface HintWritten {
  readonly metric: string;
  readonly unitPrice: number;
  readonly pricingUnit: number;
  readonly currency: string;
}

/** The last event's pricing hints and their text. */
let hintsKept: { readonly hints: readonly HintWritten[]; readonly text: string } = { hints: [], text: '' };

function sameHints(hints: Record<string, PricingHint>): boolean {
  const kept = hintsKept.hints;
  let i = 0;
  for (const metric in hints) {
    const h = hints[metric] as PricingHint;
    const k = kept[i];
    if (
      k === undefined ||
      k.metric !== metric ||
      k.unitPrice !== h.unit_price ||
      k.pricingUnit !== h.pricing_unit ||
      k.currency !== h.currency
    ) {
      return false;
    }
    i++;
  }
  return i === kept.length;
}

function hintsText(hints: Record<string, PricingHint>): string {
  if (sameHints(hints)) return hintsKept.text;
  const written: HintWritten[] = [];
  const text: string[] = [];
  for (const metric in hints) {
    const h = hints[metric] as PricingHint;
    written.push({ metric, unitPrice: h.unit_price, pricingUnit: h.pricing_unit, currency: h.currency });
    text.push(
      `${quote(metric)}:{"unit_price":${num(h.unit_price)},"pricing_unit":${num(h.pricing_unit)},"currency":${quote(h.currency)}}`,
    );
  }
  hintsKept = { hints: written, text: `,"pricing_hints":{${text.join(',')}}` };
  return hintsKept.text;
}

function billing(x: NonNullable<UsageEvent['x-billing']>): void {
  parts.push(',"x-billing":{"items":[');
  let first = true;
  for (const item of x.items) {
    const t = itemText(item);
    parts.push(first ? t.open : `,${t.open}`, num(item.quantity), t.close);
    first = false;
  }
  parts.push(']');
  if (x.pricing_hints !== undefined) parts.push(hintsText(x.pricing_hints));
  parts.push('}');
}

/**
 * The text that repeats from event to event: from the subject to the usage, and the meta block up to
 * the request id. Kept for the last event and reused while the fields it was written from are equal.
 */
interface Middle {
  source: string;
  subjectType: string;
  subjectId: string;
  provider: string;
  api: string;
  model: string;
  stream: boolean;
  status: number;
  usageStage: string;
  metaSubjectType: string;
  metaSubjectId: string;
  /** `{"source":…,"external_event_id":` */
  head: string;
  /** `,"subject_type":…,"raw_json":{…,"usage":` */
  middle: string;
  /** `,"meta":{"subject_type":…,"request_id":` */
  meta: string;
}

let last: Middle | undefined;

function middleOf(e: UsageEvent): Middle {
  const r = e.raw_json;
  const m = r.meta;
  const l = last;
  if (
    l !== undefined &&
    l.source === e.source &&
    l.subjectType === e.subject_type &&
    l.subjectId === e.subject_id &&
    l.provider === r.provider &&
    l.api === r.api &&
    l.model === r.model &&
    l.stream === r.stream &&
    l.status === r.status &&
    l.usageStage === r.usage_stage &&
    l.metaSubjectType === m.subject_type &&
    l.metaSubjectId === m.subject_id
  ) {
    return l;
  }
  last = {
    source: e.source,
    subjectType: e.subject_type,
    subjectId: e.subject_id,
    provider: r.provider,
    api: r.api,
    model: r.model,
    stream: r.stream,
    status: r.status,
    usageStage: r.usage_stage,
    metaSubjectType: m.subject_type,
    metaSubjectId: m.subject_id,
    // Joined, so that each is one flat string rather than a tree of the pieces it was made from.
    head: ['{"source":', quote(e.source), ',"external_event_id":'].join(''),
    middle: [
      ',"subject_type":',
      quote(e.subject_type),
      ',"subject_id":',
      quote(e.subject_id),
      ',"raw_json":{"provider":',
      quote(r.provider),
      ',"api":',
      quote(r.api),
      ',"model":',
      quote(r.model),
      r.stream ? ',"stream":true,"status":' : ',"stream":false,"status":',
      num(r.status),
      ',"usage_stage":',
      quote(r.usage_stage),
      ',"usage":',
    ].join(''),
    meta: [
      ',"meta":{"subject_type":',
      quote(m.subject_type),
      ',"subject_id":',
      quote(m.subject_id),
      ',"request_id":',
    ].join(''),
  };
  return last;
}

/**
 * The event's JSON, with `lead` (a `"key":value,` member, or '') as its first member. Keys are written in
 * the order of the UsageEvent type, which is the order the event builder sets them.
 */
export function usageEventJson(event: UsageEvent, lead: string): string {
  const k = middleOf(event);
  const r = event.raw_json;
  const x = event['x-billing'];
  parts.length = 0;
  if (lead === '') parts.push(k.head);
  else parts.push('{', lead, k.head.slice(1));
  // The request id is written twice (the event's id and meta's request_id): checked once.
  const id = quote(event.external_event_id);
  parts.push(
    id,
    ',"idempotency_key":',
    quote(event.idempotency_key),
    ',"occurred_at":',
    num(event.occurred_at),
    k.middle,
  );
  counts(r.usage);
  parts.push(k.meta, r.meta.request_id === event.external_event_id ? id : quote(r.meta.request_id));
  if (r.meta.correlation_id !== undefined) parts.push(',"correlation_id":', quote(r.meta.correlation_id));
  parts.push('}}');
  if (x !== undefined) billing(x);
  parts.push('}');
  return parts.join('');
}

/** An event as queued: its JSON, with the request's traceparent first when there is one. */
export function queuedJson(event: UsageEvent, traceparent: string | undefined): string {
  return usageEventJson(event, traceparent === undefined ? '' : `"${TRACE_KEY}":${quote(traceparent)},`);
}
