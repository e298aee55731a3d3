// The JSON of a queued usage event, written as UTF-8 bytes for the event's one shape. JSON.stringify, and
// then building the text from pieces and encoding it, were most of what billing added to a request: from
// one event to the next only the ids, the time and the counts change. Here the bytes between those are
// kept from the last event (encoded once) and reused while their fields are equal; ids and counts are
// written straight into the output, and a string is escaped only when it holds something JSON escapes or
// a character beyond ASCII. The result is byte for byte what JSON.stringify makes of an event the builder
// made (test/billing/event/usage-event-json.test.ts).

import type { TokenEvent } from './token-event.ts';
import {
  type BillingItem,
  isLastKey,
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
  Only<
    UsageEvent['raw_json']['meta'],
    | 'subject_type'
    | 'subject_id'
    | 'request_id'
    | 'correlation_id'
    | 'price_version'
    | 'unpriced'
    | 'end_reason'
  >,
  Only<NonNullable<UsageEvent['x-billing']>, 'items' | 'pricing_hints' | 'price_version'>,
  Only<BillingItem, 'metric' | 'quantity' | 'unit'>,
  Only<PricingHint, 'unit_price' | 'pricing_unit' | 'currency'>,
] = [true, true, true, true, true, true];
void writesEveryField;

const QUOTE = 0x22;
const ZERO = 0x30;

/** Strings written as they are, between quotes: printable ASCII but the quote and the backslash. */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** JSON.stringify's text of a string: as it is between quotes when PLAIN. */
export function quote(s: string): string {
  return PLAIN.test(s) ? `"${s}"` : JSON.stringify(s);
}

/** A growing byte buffer that events are written into, and the position of its next byte. */
export class JsonBytes {
  buf: Buffer;
  at = 0;
  /** buf.length, kept in a field: reading a Buffer's length is a call in optimized code. */
  #size: number;

  constructor(size = 64 * 1024) {
    this.buf = Buffer.allocUnsafe(size);
    this.#size = size;
  }

  /** Makes room for `n` more bytes. */
  reserve(n: number): void {
    if (this.at + n <= this.#size) return;
    const grown = Buffer.allocUnsafe(Math.max(2 * this.#size, this.at + n));
    this.buf.copy(grown, 0, 0, this.at);
    this.buf = grown;
    this.#size = grown.length;
  }

  bytes(piece: Uint8Array): void {
    const n = piece.length;
    if (this.at + n > this.#size) this.reserve(n);
    this.buf.set(piece, this.at);
    this.at += n;
  }

  byte(b: number): void {
    this.reserve(1);
    this.buf[this.at++] = b;
  }

  /** A string as JSON.stringify writes it. */
  string(s: string): void {
    // A regular expression runs as native code: far cheaper than a loop over the characters in
    // JavaScript.
    if (PLAIN.test(s)) {
      this.reserve(s.length + 2);
      const buf = this.buf;
      buf[this.at++] = QUOTE;
      this.at += buf.write(s, this.at, 'latin1');
      buf[this.at++] = QUOTE;
      return;
    }
    const text = JSON.stringify(s);
    // Three UTF-8 bytes at most for each UTF-16 unit (four for a surrogate pair).
    this.reserve(3 * text.length);
    this.at += this.buf.write(text, this.at, 'utf8');
  }

  /** Bytes written earlier, from `start` to `end`, again. */
  again(start: number, end: number): void {
    this.reserve(end - start);
    this.buf.copyWithin(this.at, start, end);
    this.at += end - start;
  }

  /** A number as JSON.stringify writes it. */
  number(n: number): void {
    if (!(n >= 0 && Number.isSafeInteger(n))) {
      this.ascii(Number.isFinite(n) ? `${n}` : 'null');
      return;
    }
    const digits = (n | 0) === n ? smallDigits(n) : largeDigits(n);
    if (this.at + digits > this.#size) this.reserve(digits);
    const buf = this.buf;
    let at = this.at + digits;
    this.at = at;
    let v = n;
    // Without `%`, which is slow on doubles.
    do {
      const q = Math.floor(v / 10);
      buf[--at] = ZERO + (v - q * 10);
      v = q;
    } while (v > 0);
  }

  ascii(text: string): void {
    this.reserve(text.length);
    this.at += this.buf.write(text, this.at, 'latin1');
  }

  /** The bytes written, as text. */
  text(start = 0): string {
    return this.buf.toString('utf8', start, this.at);
  }
}

/** Digits of a non-negative integer below 2^31, by comparison. */
function smallDigits(n: number): number {
  if (n < 100) return n < 10 ? 1 : 2;
  if (n < 10_000) return n < 1000 ? 3 : 4;
  if (n < 1_000_000) return n < 100_000 ? 5 : 6;
  if (n < 100_000_000) return n < 10_000_000 ? 7 : 8;
  return n < 1_000_000_000 ? 9 : 10;
}

/** Digits of a larger integer. */
function largeDigits(n: number): number {
  let digits = 1;
  for (let v = n; v >= 10; v = Math.floor(v / 10)) digits++;
  return digits;
}

function encoded(text: string): Buffer {
  return Buffer.from(text, 'utf8');
}

/** A count's key, `{"<key>":` when it comes first and `,"<key>":` after another. */
interface CountKey {
  readonly first: Buffer;
  readonly later: Buffer;
}

function countKey(key: keyof UsageCounts): CountKey {
  return { first: encoded(`{"${key}":`), later: encoded(`,"${key}":`) };
}

// Each count's key; the compiler refuses a count left out.
const K = {
  input_tokens: countKey('input_tokens'),
  output_tokens: countKey('output_tokens'),
  total_tokens: countKey('total_tokens'),
  cache_read_tokens: countKey('cache_read_tokens'),
  cache_creation_tokens: countKey('cache_creation_tokens'),
  input_audio_tokens: countKey('input_audio_tokens'),
  output_audio_tokens: countKey('output_audio_tokens'),
  images: countKey('images'),
  input_characters: countKey('input_characters'),
  audio_seconds: countKey('audio_seconds'),
  prompt_tokens: countKey('prompt_tokens'),
  completion_tokens: countKey('completion_tokens'),
  cached_tokens: countKey('cached_tokens'),
} satisfies Record<keyof UsageCounts, CountKey>;

/**
 * The counts, each by its own name (a lookup by a computed key was a slow generic one), in the order
 * the builder sets them: an event made elsewhere in another order is written in this one.
 */
function counts(out: JsonBytes, c: UsageCounts): void {
  const start = out.at;
  count(out, start, K.input_tokens, c.input_tokens);
  count(out, start, K.output_tokens, c.output_tokens);
  count(out, start, K.total_tokens, c.total_tokens);
  count(out, start, K.cache_read_tokens, c.cache_read_tokens);
  count(out, start, K.cache_creation_tokens, c.cache_creation_tokens);
  count(out, start, K.input_audio_tokens, c.input_audio_tokens);
  count(out, start, K.output_audio_tokens, c.output_audio_tokens);
  count(out, start, K.images, c.images);
  count(out, start, K.input_characters, c.input_characters);
  count(out, start, K.audio_seconds, c.audio_seconds);
  count(out, start, K.prompt_tokens, c.prompt_tokens);
  count(out, start, K.completion_tokens, c.completion_tokens);
  count(out, start, K.cached_tokens, c.cached_tokens);
  // The closing brace comes with what follows (Middle.meta).
  if (out.at === start) out.byte(0x7b); // {
}

function count(out: JsonBytes, start: number, key: CountKey, value: number | undefined): void {
  if (value === undefined) return;
  out.bytes(out.at === start ? key.first : key.later);
  out.number(value);
}

/** An item's bytes around its quantity, by metric; kept with the unit they were written for. */
interface ItemText {
  readonly unit: string;
  /** `{"metric":…,"quantity":` */
  readonly open: Buffer;
  /** `,{"metric":…,"quantity":` */
  readonly later: Buffer;
  /** `,"unit":…}` */
  readonly close: Buffer;
}
const itemTexts = new Map<string, ItemText>();
/** Metrics are the builder's own names; the bound keeps the map small whatever an event holds. */
const ITEM_TEXTS_MAX = 64;

function itemText(item: BillingItem): ItemText {
  const kept = itemTexts.get(item.metric);
  if (kept !== undefined && kept.unit === item.unit) return kept;
  const open = `{"metric":${quote(item.metric)},"quantity":`;
  const text = {
    unit: item.unit,
    open: encoded(open),
    later: encoded(`,${open}`),
    close: encoded(`,"unit":${quote(item.unit)}}`),
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

/** The last event's pricing hints and their bytes. */
let hintsKept: { readonly hints: readonly HintWritten[]; readonly bytes: Buffer } = {
  hints: [],
  bytes: Buffer.alloc(0),
};

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

function num(n: number): string {
  return Number.isFinite(n) ? `${n}` : 'null';
}

function hintText(metric: string, h: PricingHint): string {
  return `${quote(metric)}:{"unit_price":${num(h.unit_price)},"pricing_unit":${num(h.pricing_unit)},"currency":${quote(h.currency)}}`;
}

/** What closes the items, with the pricing hints: `],"pricing_hints":{…}`. */
function hintsClose(texts: readonly string[]): Buffer {
  return encoded(`],"pricing_hints":{${texts.join(',')}}`);
}

function hintsBytes(hints: Record<string, PricingHint>): Buffer {
  if (sameHints(hints)) return hintsKept.bytes;
  const written: HintWritten[] = [];
  const text: string[] = [];
  for (const metric in hints) {
    const h = hints[metric] as PricingHint;
    written.push({ metric, unitPrice: h.unit_price, pricingUnit: h.pricing_unit, currency: h.currency });
    text.push(hintText(metric, h));
  }
  hintsKept = { hints: written, bytes: hintsClose(text) };
  return hintsKept.bytes;
}

// What closes meta and raw_json, with what opens x-billing; and what closes the items when there are no
// pricing hints (hintsBytes has the hints' own). billingEnd closes x-billing and the event.
const ITEMS_OPEN = encoded('}},"x-billing":{"items":[');
const ITEMS_CLOSE = encoded(']');
const NO_BILLING_CLOSE = encoded('}}}');
const BILLING_END = encoded('}}');
const UNPRICED = encoded(',"unpriced":true');

function versionEntry(version: string): { version: string; meta: Buffer; end: Buffer } {
  const field = `,"price_version":${quote(version)}`;
  return { version, meta: encoded(field), end: encoded(`${field}}}`) };
}

/** The last price version's bytes: in meta, and closing x-billing and the event. It changes on reload. */
let versionKept = versionEntry('');

function versionBytes(version: string): typeof versionKept {
  if (version !== versionKept.version) versionKept = versionEntry(version);
  return versionKept;
}

/** meta's fields after the ids: the price version and the unpriced mark. */
function metaTail(out: JsonBytes, version: string | undefined, unpriced: boolean): void {
  if (version !== undefined) out.bytes(versionBytes(version).meta);
  if (unpriced) out.bytes(UNPRICED);
}

function billingEnd(out: JsonBytes, version: string | undefined): void {
  out.bytes(version === undefined ? BILLING_END : versionBytes(version).end);
}

function billing(out: JsonBytes, x: NonNullable<UsageEvent['x-billing']>): void {
  out.bytes(ITEMS_OPEN);
  let first = true;
  for (const item of x.items) {
    const t = itemText(item);
    out.bytes(first ? t.open : t.later);
    out.number(item.quantity);
    out.bytes(t.close);
    first = false;
  }
  out.bytes(x.pricing_hints === undefined ? ITEMS_CLOSE : hintsBytes(x.pricing_hints));
  billingEnd(out, x.price_version);
}

/** The fields of an event that repeat from one request to the next, as they were last written. */
export interface RepeatingFields {
  readonly source: string;
  readonly subjectType: string;
  readonly subjectId: string;
  readonly provider: string;
  readonly api: string;
  readonly model: string;
  readonly stream: boolean;
  readonly status: number;
  readonly usageStage: string;
}

export function repeatingFields(e: UsageEvent): RepeatingFields {
  const r = e.raw_json;
  return {
    source: e.source,
    subjectType: e.subject_type,
    subjectId: e.subject_id,
    provider: r.provider,
    api: r.api,
    model: r.model,
    stream: r.stream,
    status: r.status,
    usageStage: r.usage_stage,
  };
}

/** Whether two sets of repeating fields (a token event is one) are equal. */
export function sameFields(a: RepeatingFields, b: RepeatingFields): boolean {
  return (
    a.source === b.source &&
    a.subjectType === b.subjectType &&
    a.subjectId === b.subjectId &&
    a.provider === b.provider &&
    a.api === b.api &&
    a.model === b.model &&
    a.stream === b.stream &&
    a.status === b.status &&
    a.usageStage === b.usageStage
  );
}

/** Whether `e` repeats the fields kept from an earlier event. */
export function sameRepeatingFields(k: RepeatingFields, e: UsageEvent): boolean {
  const r = e.raw_json;
  return (
    k.source === e.source &&
    k.subjectType === e.subject_type &&
    k.subjectId === e.subject_id &&
    k.provider === r.provider &&
    k.api === r.api &&
    k.model === r.model &&
    k.stream === r.stream &&
    k.status === r.status &&
    k.usageStage === r.usage_stage
  );
}

/**
 * The bytes that repeat from event to event: from the subject to the usage, and the meta block up to
 * the request id. Kept for the last event and reused while the fields they were written from are equal.
 */
interface Middle {
  fields: RepeatingFields;
  metaSubjectType: string;
  metaSubjectId: string;
  /** `{"source":…,"external_event_id":` */
  open: Buffer;
  /** The same without its brace, after a traceparent. */
  head: Buffer;
  /** `,"subject_type":…,"raw_json":{…,"usage":` */
  middle: Buffer;
  /** `},"meta":{"subject_type":…,"request_id":`, closing the usage counts. */
  meta: Buffer;
}

let last: Middle | undefined;

function middleOf(e: UsageEvent): Middle {
  const m = e.raw_json.meta;
  const l = last;
  if (
    l !== undefined &&
    sameRepeatingFields(l.fields, e) &&
    l.metaSubjectType === m.subject_type &&
    l.metaSubjectId === m.subject_id
  ) {
    return l;
  }
  last = middle(repeatingFields(e), m.subject_type, m.subject_id);
  return last;
}

/** middleOf for a token event, whose fields are named as RepeatingFields' and whose meta is its subject. */
function middleOfTokens(t: TokenEvent): Middle {
  const l = last;
  if (
    l !== undefined &&
    sameFields(l.fields, t) &&
    l.metaSubjectType === t.subjectType &&
    l.metaSubjectId === t.subjectId
  ) {
    return l;
  }
  last = middle(t, t.subjectType, t.subjectId);
  return last;
}

/** `f` is kept as it is: a copy made for it, or a token event, whose fields are read-only. */
function middle(f: RepeatingFields, metaSubjectType: string, metaSubjectId: string): Middle {
  const open = encoded(`{"source":${quote(f.source)},"external_event_id":`);
  return {
    fields: f,
    metaSubjectType,
    metaSubjectId,
    open,
    head: open.subarray(1),
    middle: encoded(
      `,"subject_type":${quote(f.subjectType)},"subject_id":${quote(f.subjectId)}` +
        `,"raw_json":{"provider":${quote(f.provider)},"api":${quote(f.api)},"model":${quote(f.model)}` +
        `,"stream":${f.stream},"status":${num(f.status)},"usage_stage":${quote(f.usageStage)},"usage":`,
    ),
    meta: encoded(
      `},"meta":{"subject_type":${quote(metaSubjectType)},"subject_id":${quote(metaSubjectId)},"request_id":`,
    ),
  };
}

const TRACE_OPEN = encoded(`{"${TRACE_KEY}":`);
const IDEMPOTENCY_KEY = encoded(',"idempotency_key":');
const ROUTER_KEY = encoded(',"idempotency_key":"router:');
const OCCURRED_AT = encoded(',"occurred_at":');
const CORRELATION_ID = encoded(',"correlation_id":');
const END_REASON = encoded(',"end_reason":');

/** `{"source":…,"external_event_id":`, after the traceparent when there is one. */
function openEvent(out: JsonBytes, k: Middle, traceparent: string | undefined): void {
  if (traceparent === undefined) out.bytes(k.open);
  else {
    out.bytes(TRACE_OPEN);
    out.string(traceparent);
    out.byte(0x2c); // ,
    out.bytes(k.head);
  }
}

/**
 * Writes an event as queued: its JSON, with the request's traceparent first (TRACE_KEY) when there is
 * one. Keys are written in the order of the UsageEvent type, which is the order the builder sets them.
 */
export function writeQueuedEvent(out: JsonBytes, event: UsageEvent, traceparent: string | undefined): void {
  const k = middleOf(event);
  const r = event.raw_json;
  const x = event['x-billing'];
  openEvent(out, k, traceparent);
  const idStart = out.at;
  out.string(event.external_event_id);
  const idEnd = out.at;
  if (isLastKey(event.external_event_id, event.idempotency_key)) {
    // `router:` and the id as written above (escaping the id escapes the key alike).
    out.bytes(ROUTER_KEY);
    out.again(idStart + 1, idEnd);
  } else {
    out.bytes(IDEMPOTENCY_KEY);
    out.string(event.idempotency_key);
  }
  out.bytes(OCCURRED_AT);
  out.number(event.occurred_at);
  out.bytes(k.middle);
  counts(out, r.usage);
  out.bytes(k.meta);
  // The request id is the event's id (written above) unless the event was made elsewhere.
  if (r.meta.request_id === event.external_event_id) out.again(idStart, idEnd);
  else out.string(r.meta.request_id);
  if (r.meta.correlation_id !== undefined) {
    out.bytes(CORRELATION_ID);
    out.string(r.meta.correlation_id);
  }
  metaTail(out, r.meta.price_version, r.meta.unpriced === true);
  if (r.meta.end_reason !== undefined) {
    out.bytes(END_REASON);
    out.string(r.meta.end_reason);
  }
  if (x === undefined) out.bytes(NO_BILLING_CLOSE);
  else billing(out, x);
}

const PROMPT_ITEM = itemText({ metric: 'prompt_tokens', quantity: 0, unit: 'token' });
const COMPLETION_ITEM = itemText({ metric: 'completion_tokens', quantity: 0, unit: 'token' });

/** The last token event's hints, by identity, and what closes its items with them. */
let tokenHintsKept: {
  readonly prompt: PricingHint | undefined;
  readonly completion: PricingHint | undefined;
  readonly bytes: Buffer;
} = { prompt: undefined, completion: undefined, bytes: ITEMS_CLOSE };

function tokenHintsClose(prompt: PricingHint | undefined, completion: PricingHint | undefined): Buffer {
  const k = tokenHintsKept;
  if (k.prompt === prompt && k.completion === completion) return k.bytes;
  const texts: string[] = [];
  if (prompt !== undefined) texts.push(hintText('prompt_tokens', prompt));
  if (completion !== undefined) texts.push(hintText('completion_tokens', completion));
  tokenHintsKept = { prompt, completion, bytes: texts.length === 0 ? ITEMS_CLOSE : hintsClose(texts) };
  return tokenHintsKept.bytes;
}

/**
 * writeQueuedEvent of usageEventOf(t), written from the parts: the same bytes without the event object
 * (the Redis queue's enqueueTokens).
 */
export function writeQueuedTokens(out: JsonBytes, t: TokenEvent, traceparent: string | undefined): void {
  const k = middleOfTokens(t);
  openEvent(out, k, traceparent);
  const idStart = out.at;
  out.string(t.id);
  const idEnd = out.at;
  out.bytes(ROUTER_KEY);
  out.again(idStart + 1, idEnd);
  out.bytes(OCCURRED_AT);
  out.number(t.occurredAt);
  out.bytes(k.middle);
  out.bytes(K.input_tokens.first);
  out.number(t.input);
  out.bytes(K.output_tokens.later);
  out.number(t.output);
  out.bytes(K.total_tokens.later);
  out.number(t.total);
  if (t.aliases) {
    out.bytes(K.prompt_tokens.later);
    out.number(t.input);
    out.bytes(K.completion_tokens.later);
    out.number(t.output);
  }
  out.bytes(k.meta);
  out.again(idStart, idEnd);
  if (t.correlationId !== undefined) {
    out.bytes(CORRELATION_ID);
    out.string(t.correlationId);
  }
  metaTail(out, t.priceVersion, t.unpriced);
  if (t.input === 0 && t.output === 0) {
    out.bytes(NO_BILLING_CLOSE);
    return;
  }
  out.bytes(ITEMS_OPEN);
  if (t.input > 0) {
    out.bytes(PROMPT_ITEM.open);
    out.number(t.input);
    out.bytes(PROMPT_ITEM.close);
  }
  if (t.output > 0) {
    out.bytes(t.input > 0 ? COMPLETION_ITEM.later : COMPLETION_ITEM.open);
    out.number(t.output);
    out.bytes(COMPLETION_ITEM.close);
  }
  out.bytes(
    tokenHintsClose(t.input > 0 ? t.promptHint : undefined, t.output > 0 ? t.completionHint : undefined),
  );
  billingEnd(out, t.priceVersion);
}

const scratch = new JsonBytes(4096);

/** An event as queued, as text (see writeQueuedEvent). */
export function queuedJson(event: UsageEvent, traceparent: string | undefined): string {
  scratch.at = 0;
  writeQueuedEvent(scratch, event, traceparent);
  return scratch.text();
}

/** A token event as queued, as text (see writeQueuedTokens). */
export function queuedTokensJson(event: TokenEvent, traceparent: string | undefined): string {
  scratch.at = 0;
  writeQueuedTokens(scratch, event, traceparent);
  return scratch.text();
}
