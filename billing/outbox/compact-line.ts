// The outbox's compact line: most usage events are written as
//   [1,<shape>,"<request id>",<correlation id or null>,<occurred_at>,<input>,<output>,<total>(,"<traceparent>")]
// where the shape holds everything that repeats from one request to the next (source, subject, provider,
// api, model, stream, status, usage stage, whether the completion-style aliases are present, the prompt and
// completion pricing hints). The sidecar rebuilds the event from it (eventOfCompactLine); the billing
// service receives the same event either way. Written for token-only events, which is nearly every
// request; anything else (cached or audio tokens, images, characters, seconds, an event not made by the
// builder) is written as the whole event, which the reader also takes. Writing only the per-request
// values is what keeps billing's share of a request's CPU small: a whole event is many separate copies.

import { isObject } from '../../common/json-guards.ts';
import type { ApiName, UsageStage } from '../../common/types.ts';
import { isCount, type TokenEvent, tokenEventOf, usageEventOf } from '../event/token-event.ts';
import { type PricingHint, type UsageEvent, wellFormedTraceparent } from '../event/usage-event.ts';
import { type JsonBytes, sameFields } from '../event/usage-event-json.ts';

export const COMPACT_VERSION = 1;

/** What the shape of a compact line holds. */
interface Shape {
  source: string;
  subject_type: string;
  subject_id: string;
  provider: string;
  api: ApiName;
  model: string;
  stream: boolean;
  status: number;
  usage_stage: UsageStage;
  /** prompt_tokens / completion_tokens in usage, equal to input_tokens / output_tokens. */
  aliases: boolean;
  /** The hints of the prompt_tokens and completion_tokens items, where priced. */
  hints?: { prompt_tokens?: PricingHint; completion_tokens?: PricingHint };
  // Added to version 1 without a new version: a reader that does not know them still reads the line
  // (the event goes out without them) rather than quarantining it.
  /** meta.price_version (and x-billing.price_version). */
  price_version?: string;
  /** meta.unpriced. */
  unpriced?: true;
}

/** The token event whose shape was written last, and the shape's bytes, `[1,<shape>,`. */
let kept: { readonly event: TokenEvent; readonly bytes: Buffer } | undefined;

/**
 * Writes `e` as a compact line (without its newline) and returns true, or writes nothing and returns false
 * when the event is not a token event (billing/event/token-event.ts).
 */
export function writeCompactEvent(out: JsonBytes, e: UsageEvent, traceparent: string | undefined): boolean {
  const t = tokenEventOf(e);
  return t !== undefined && writeCompactLine(out, t, traceparent);
}

/**
 * Writes `t` as a compact line (without its newline) and returns true; writes nothing and returns false
 * when its shape is one the reader would refuse (a price that is not a finite number).
 */
export function writeCompactLine(out: JsonBytes, t: TokenEvent, traceparent: string | undefined): boolean {
  const shape = shapeOf(t);
  if (shape === undefined) return false;
  out.bytes(shape);
  out.string(t.id);
  if (t.correlationId === undefined) out.bytes(timeOf(t.occurredAt).afterNull);
  else {
    out.byte(0x2c); // ,
    out.string(t.correlationId);
    out.bytes(timeOf(t.occurredAt).alone);
  }
  // Room for three counts of up to 16 digits, their commas, a comma before a traceparent and `]`.
  out.reserve(COUNTS_ROOM);
  const buf = out.buf;
  out.number(t.input);
  buf[out.at++] = 0x2c;
  out.number(t.output);
  buf[out.at++] = 0x2c;
  out.number(t.total);
  if (traceparent === undefined)
    buf[out.at++] = 0x5d; // ]
  else {
    buf[out.at++] = 0x2c;
    out.string(traceparent);
    out.byte(0x5d);
  }
  return true;
}

const COUNTS_ROOM = 3 * 16 + 4;

/**
 * The last event's `,<occurred_at>,`, alone and after a `null` correlation id (`,null,<occurred_at>,`):
 * it changes once a second.
 */
let time = { seconds: -1, alone: Buffer.alloc(0), afterNull: Buffer.alloc(0) };

function timeOf(seconds: number): typeof time {
  if (seconds !== time.seconds) {
    time = {
      seconds,
      alone: Buffer.from(`,${seconds},`, 'latin1'),
      afterNull: Buffer.from(`,null,${seconds},`, 'latin1'),
    };
  }
  return time;
}

function sameShape(k: TokenEvent, t: TokenEvent): boolean {
  return (
    sameFields(k, t) &&
    k.aliases === t.aliases &&
    k.promptHint === t.promptHint &&
    k.completionHint === t.completionHint &&
    k.priceVersion === t.priceVersion &&
    k.unpriced === t.unpriced
  );
}

/** `[1,<shape>,` for `t`, or undefined when the reader would refuse its shape. */
function shapeOf(t: TokenEvent): Buffer | undefined {
  const k = kept;
  if (k !== undefined && sameShape(k.event, t)) return k.bytes;
  const shape: Shape = {
    source: t.source,
    subject_type: t.subjectType,
    subject_id: t.subjectId,
    provider: t.provider,
    api: t.api,
    model: t.model,
    stream: t.stream,
    status: t.status,
    usage_stage: t.usageStage,
    aliases: t.aliases,
  };
  const promptHint = t.input > 0 ? t.promptHint : undefined;
  const completionHint = t.output > 0 ? t.completionHint : undefined;
  if (promptHint !== undefined || completionHint !== undefined) {
    shape.hints = {};
    if (promptHint !== undefined) shape.hints.prompt_tokens = promptHint;
    if (completionHint !== undefined) shape.hints.completion_tokens = completionHint;
  }
  if (t.priceVersion !== undefined) shape.price_version = t.priceVersion;
  if (t.unpriced) shape.unpriced = true;
  const json = JSON.stringify(shape);
  // A shape the reader would refuse (a price that is not a finite number, a status that is not an
  // integer) is not written compactly: its events go out whole.
  if (readShape(JSON.parse(json)) === undefined) return undefined;
  kept = { event: t, bytes: Buffer.from(`[${COMPACT_VERSION},${json},`, 'utf8') };
  return kept.bytes;
}

function readHint(v: unknown): PricingHint | undefined {
  if (!isObject(v)) return undefined;
  const { unit_price, pricing_unit, currency } = v;
  if (typeof unit_price !== 'number' || typeof pricing_unit !== 'number' || typeof currency !== 'string')
    return undefined;
  return { unit_price, pricing_unit, currency };
}

function readShape(v: unknown): Shape | undefined {
  if (!isObject(v)) return undefined;
  const s = v as Partial<Record<keyof Shape, unknown>>;
  if (
    typeof s.source !== 'string' ||
    typeof s.subject_type !== 'string' ||
    typeof s.subject_id !== 'string' ||
    typeof s.provider !== 'string' ||
    typeof s.api !== 'string' ||
    typeof s.model !== 'string' ||
    typeof s.stream !== 'boolean' ||
    typeof s.status !== 'number' ||
    !Number.isSafeInteger(s.status) ||
    (s.usage_stage !== 'upstream' && s.usage_stage !== 'estimated') ||
    typeof s.aliases !== 'boolean' ||
    (s.price_version !== undefined && typeof s.price_version !== 'string') ||
    (s.unpriced !== undefined && s.unpriced !== true)
  ) {
    return undefined;
  }
  const shape: Shape = {
    source: s.source,
    subject_type: s.subject_type,
    subject_id: s.subject_id,
    provider: s.provider,
    api: s.api as ApiName,
    model: s.model,
    stream: s.stream,
    status: s.status,
    usage_stage: s.usage_stage,
    aliases: s.aliases,
  };
  if (s.hints !== undefined) {
    if (!isObject(s.hints)) return undefined;
    const { prompt_tokens, completion_tokens, ...rest } = s.hints;
    if (Object.keys(rest).length > 0) return undefined;
    shape.hints = {};
    if (prompt_tokens !== undefined) {
      const hint = readHint(prompt_tokens);
      if (hint === undefined) return undefined;
      shape.hints.prompt_tokens = hint;
    }
    if (completion_tokens !== undefined) {
      const hint = readHint(completion_tokens);
      if (hint === undefined) return undefined;
      shape.hints.completion_tokens = hint;
    }
  }
  if (s.price_version !== undefined) shape.price_version = s.price_version;
  if (s.unpriced === true) shape.unpriced = true;
  return shape;
}

/**
 * The event a compact line (parsed JSON) stands for, and its traceparent; undefined when the value is not
 * a well-formed compact line. The event is the one the gateway's builder made, key for key and in the
 * same order.
 */
export function eventOfCompactLine(
  value: unknown,
): { event: UsageEvent; traceparent: string | undefined } | undefined {
  if (!Array.isArray(value) || (value.length !== 8 && value.length !== 9) || value[0] !== COMPACT_VERSION)
    return undefined;
  const [, rawShape, id, correlationId, occurredAt, input, output, total, traceparent] = value as unknown[];
  const shape = readShape(rawShape);
  if (
    shape === undefined ||
    typeof id !== 'string' ||
    (correlationId !== null && typeof correlationId !== 'string') ||
    !isCount(occurredAt) ||
    !isCount(input) ||
    !isCount(output) ||
    !isCount(total) ||
    (traceparent !== undefined && typeof traceparent !== 'string')
  ) {
    return undefined;
  }
  const event = usageEventOf({
    source: shape.source,
    subjectType: shape.subject_type,
    subjectId: shape.subject_id,
    provider: shape.provider,
    api: shape.api,
    model: shape.model,
    stream: shape.stream,
    status: shape.status,
    usageStage: shape.usage_stage,
    aliases: shape.aliases,
    promptHint: shape.hints?.prompt_tokens,
    completionHint: shape.hints?.completion_tokens,
    priceVersion: shape.price_version,
    unpriced: shape.unpriced === true,
    id,
    correlationId: correlationId ?? undefined,
    occurredAt,
    input,
    output,
    total,
  });
  return { event, traceparent: wellFormedTraceparent(traceparent) };
}
