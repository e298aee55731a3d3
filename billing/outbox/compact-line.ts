// The outbox's compact line: most usage events are written as
//   [1,<shape>,"<request id>",<correlation id or null>,<occurred_at>,<input>,<output>,<total>(,"<traceparent>")]
// where the shape holds everything that repeats from one request to the next (source, subject, provider,
// api, model, stream, status, usage stage, whether the completion-style aliases are present, the prompt and
// completion pricing hints). The sidecar rebuilds the event from it (eventOfCompactLine); the billing
// service receives the same event either way. Written for token-only events, which is nearly every
// request; anything else (cached or audio tokens, images, characters, seconds, an event not made by the
// builder) is written as the whole event, which the reader also takes. Writing only the per-request
// values is what keeps billing's share of a request's CPU small: a whole event is many separate copies.

import type { ApiName, UsageStage } from '../../common/types.ts';
import {
  isLastKey,
  type PricingHint,
  type UsageEvent,
  wellFormedTraceparent,
} from '../../common/usage-event.ts';
import {
  type JsonBytes,
  type RepeatingFields,
  repeatingFields,
  sameRepeatingFields,
} from '../../common/usage-event-json.ts';

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
}

interface KeptShape {
  readonly fields: RepeatingFields;
  readonly aliases: boolean;
  readonly promptHint: PricingHint | undefined;
  readonly completionHint: PricingHint | undefined;
  /** `[1,<shape>,` */
  readonly bytes: Buffer;
}

let kept: KeptShape | undefined;

/** A count or a time as the line holds it: a non-negative safe integer (the writer checks, the reader too). */
function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/**
 * Writes `e` as a compact line (without its newline) and returns true, or writes nothing and returns false
 * when the event is not of the compact kind.
 */
export function writeCompactEvent(out: JsonBytes, e: UsageEvent, traceparent: string | undefined): boolean {
  const r = e.raw_json;
  const c = r.usage;
  const m = r.meta;
  const id = e.external_event_id;
  const input = c.input_tokens;
  const output = c.output_tokens;
  if (
    !isLastKey(id, e.idempotency_key) ||
    m.request_id !== id ||
    m.subject_type !== e.subject_type ||
    m.subject_id !== e.subject_id ||
    c.cache_read_tokens !== undefined ||
    c.cache_creation_tokens !== undefined ||
    c.input_audio_tokens !== undefined ||
    c.output_audio_tokens !== undefined ||
    c.images !== undefined ||
    c.input_characters !== undefined ||
    c.audio_seconds !== undefined ||
    c.cached_tokens !== undefined ||
    !isCount(input) ||
    !isCount(output) ||
    !isCount(c.total_tokens) ||
    !isCount(e.occurred_at)
  ) {
    return false;
  }
  const aliases = c.prompt_tokens !== undefined;
  if (
    aliases ? c.prompt_tokens !== input || c.completion_tokens !== output : c.completion_tokens !== undefined
  )
    return false;
  let promptHint: PricingHint | undefined;
  let completionHint: PricingHint | undefined;
  const x = e['x-billing'];
  if (x === undefined) {
    if (input > 0 || output > 0) return false;
  } else {
    const items = x.items;
    const n = (input > 0 ? 1 : 0) + (output > 0 ? 1 : 0);
    if (items.length !== n || n === 0) return false;
    const first = items[0]!;
    if (input > 0 && !isItem(first, 'prompt_tokens', input)) return false;
    if (output > 0 && !isItem(items[n - 1]!, 'completion_tokens', output)) return false;
    const hints = x.pricing_hints;
    if (hints !== undefined) {
      // In the order the builder sets them, and only for the items present.
      let seen = 0;
      for (const metric in hints) {
        if (metric === 'prompt_tokens' && input > 0 && seen === 0) promptHint = hints[metric];
        else if (metric === 'completion_tokens' && output > 0 && completionHint === undefined)
          completionHint = hints[metric];
        else return false;
        seen++;
      }
      if (seen === 0) return false;
    }
  }
  const shape = shapeOf(e, aliases, promptHint, completionHint);
  if (shape === undefined) return false;
  out.bytes(shape.bytes);
  out.string(id);
  if (m.correlation_id === undefined) out.bytes(timeOf(e.occurred_at).afterNull);
  else {
    out.byte(0x2c); // ,
    out.string(m.correlation_id);
    out.bytes(timeOf(e.occurred_at).alone);
  }
  // Room for three counts of up to 16 digits, their commas, a comma before a traceparent and `]`.
  out.reserve(COUNTS_ROOM);
  const buf = out.buf;
  out.number(input);
  buf[out.at++] = 0x2c;
  out.number(output);
  buf[out.at++] = 0x2c;
  out.number(c.total_tokens);
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

function isItem(
  item: { metric: string; quantity: number; unit: string },
  metric: string,
  n: number,
): boolean {
  return item.metric === metric && item.quantity === n && item.unit === 'token';
}

function shapeOf(
  e: UsageEvent,
  aliases: boolean,
  promptHint: PricingHint | undefined,
  completionHint: PricingHint | undefined,
): KeptShape | undefined {
  const r = e.raw_json;
  const k = kept;
  if (
    k !== undefined &&
    sameRepeatingFields(k.fields, e) &&
    k.aliases === aliases &&
    k.promptHint === promptHint &&
    k.completionHint === completionHint
  ) {
    return k;
  }
  const shape: Shape = {
    source: e.source,
    subject_type: e.subject_type,
    subject_id: e.subject_id,
    provider: r.provider,
    api: r.api,
    model: r.model,
    stream: r.stream,
    status: r.status,
    usage_stage: r.usage_stage,
    aliases,
  };
  if (promptHint !== undefined || completionHint !== undefined) {
    shape.hints = {};
    if (promptHint !== undefined) shape.hints.prompt_tokens = promptHint;
    if (completionHint !== undefined) shape.hints.completion_tokens = completionHint;
  }
  const json = JSON.stringify(shape);
  // A shape the reader would refuse (a price that is not a finite number, a status that is not an
  // integer) is not written compactly: its events go out whole.
  if (readShape(JSON.parse(json)) === undefined) return undefined;
  kept = {
    fields: repeatingFields(e),
    aliases,
    promptHint,
    completionHint,
    bytes: Buffer.from(`[${COMPACT_VERSION},${json},`, 'utf8'),
  };
  return kept;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

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
    typeof s.aliases !== 'boolean'
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
  const event: UsageEvent = {
    source: shape.source,
    external_event_id: id,
    idempotency_key: `router:${id}`,
    occurred_at: occurredAt,
    subject_type: shape.subject_type,
    subject_id: shape.subject_id,
    raw_json: {
      provider: shape.provider,
      api: shape.api,
      model: shape.model,
      stream: shape.stream,
      status: shape.status,
      usage_stage: shape.usage_stage,
      usage: shape.aliases
        ? {
            input_tokens: input,
            output_tokens: output,
            total_tokens: total,
            prompt_tokens: input,
            completion_tokens: output,
          }
        : { input_tokens: input, output_tokens: output, total_tokens: total },
      meta: {
        subject_type: shape.subject_type,
        subject_id: shape.subject_id,
        request_id: id,
        ...(correlationId === null ? {} : { correlation_id: correlationId }),
      },
    },
  };
  if (input > 0 || output > 0) {
    const items = [];
    const hints: Record<string, PricingHint> = {};
    if (input > 0) {
      items.push({ metric: 'prompt_tokens', quantity: input, unit: 'token' });
      if (shape.hints?.prompt_tokens !== undefined) hints.prompt_tokens = shape.hints.prompt_tokens;
    }
    if (output > 0) {
      items.push({ metric: 'completion_tokens', quantity: output, unit: 'token' });
      if (shape.hints?.completion_tokens !== undefined)
        hints.completion_tokens = shape.hints.completion_tokens;
    }
    event['x-billing'] = Object.keys(hints).length > 0 ? { items, pricing_hints: hints } : { items };
  }
  return { event, traceparent: wellFormedTraceparent(traceparent) };
}
