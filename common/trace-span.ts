// The gateway's recording span (docs/operations.md "Tracing"): an @opentelemetry/api Span kept as plain
// fields, handed to the exporter when it ends. The SDK's span validated and copied every attribute and
// its exporter re-read them into an intermediate form; this one stores what it is given (primitives and
// arrays of them, as the API allows) and is encoded to OTLP directly (common/otlp-encoding.ts).

import { randomFillSync } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import {
  type AttributeValue,
  type Exception,
  type Link,
  type Span,
  type SpanAttributes,
  type SpanContext,
  type SpanKind,
  type SpanStatus,
  SpanStatusCode,
  type TimeInput,
} from '@opentelemetry/api';

/** As the SDK's default span limits: attributes per span, events and links kept. */
const ATTRIBUTE_LIMIT = 128;
const EVENT_LIMIT = 128;
const LINK_LIMIT = 128;

export interface SpanEvent {
  readonly name: string;
  readonly timeMs: number;
  readonly attributes: Record<string, AttributeValue>;
}

export type SpanLink = Link;

// Read once: the getter is not free, and the origin never changes.
const TIME_ORIGIN = performance.timeOrigin;

/** Epoch milliseconds now. */
export function nowMs(): number {
  return TIME_ORIGIN + performance.now();
}

/** Epoch milliseconds of a TimeInput (HrTime is [seconds, nanoseconds]). */
export function epochMs(time: TimeInput | undefined): number {
  if (time === undefined) return nowMs();
  if (typeof time === 'number') {
    // Below a year in ms, the API means a performance.now() reading.
    return time < 31_536_000_000 ? TIME_ORIGIN + time : time;
  }
  if (time instanceof Date) return time.getTime();
  return time[0] * 1000 + time[1] / 1e6;
}

function validValue(v: unknown): v is AttributeValue {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return true;
    case 'object':
      return Array.isArray(v);
    default:
      return false;
  }
}

export class RecordedSpan implements Span {
  // TypeScript-private, not #private: a # field's definition costs each span a keyed define.
  private readonly context: SpanContext;
  readonly parentSpanId: string | undefined;
  readonly parentRemote: boolean;
  name: string;
  readonly kind: SpanKind;
  readonly startMs: number;
  endMs = 0;
  /** Attribute keys and their values, in the order first set. */
  readonly keys: string[] = [];
  readonly values: AttributeValue[] = [];
  droppedAttributes = 0;
  statusCode: SpanStatusCode = SpanStatusCode.UNSET;
  statusMessage: string | undefined = undefined;
  events: SpanEvent[] | undefined = undefined;
  droppedEvents = 0;
  links: SpanLink[] | undefined = undefined;
  droppedLinks = 0;
  /**
   * The id pool this span's ids were cut from, and their byte offsets in it (-1: not there, as for a
   * remote parent's): the encoder copies those bytes instead of decoding the hex.
   */
  idPool: DataView | undefined = undefined;
  traceAt = -1;
  spanAt = -1;
  parentAt = -1;
  private ended = false;
  private readonly onEnd: (span: RecordedSpan) => void;

  constructor(
    context: SpanContext,
    parent: SpanContext | undefined,
    name: string,
    kind: SpanKind,
    attributes: SpanAttributes | undefined,
    onEnd: (span: RecordedSpan) => void,
    startTime?: TimeInput,
  ) {
    this.context = context;
    this.parentSpanId = parent?.spanId;
    this.parentRemote = parent?.isRemote === true;
    this.name = name;
    this.kind = kind;
    this.startMs = epochMs(startTime);
    this.onEnd = onEnd;
    if (attributes !== undefined) this.setAttributes(attributes);
  }

  spanContext(): SpanContext {
    return this.context;
  }

  setAttribute(key: string, value: AttributeValue | undefined): this {
    if (this.ended || !validValue(value)) return this;
    const v = Array.isArray(value) ? (value.slice() as AttributeValue) : value;
    const at = this.keys.indexOf(key);
    if (at >= 0) this.values[at] = v;
    else if (this.keys.length >= ATTRIBUTE_LIMIT) this.droppedAttributes++;
    else {
      this.keys.push(key);
      this.values.push(v);
    }
    return this;
  }

  /**
   * Appends an attribute the caller knows is not set yet (a primitive, or an array it no longer
   * changes): the gateway's own spans set each key once, and skip setAttribute's checks.
   */
  put(key: string, value: AttributeValue): void {
    // As setAttribute: a value that is not there (a field a reply lacked) sets nothing.
    if (value === undefined || value === null) return;
    if (this.keys.length >= ATTRIBUTE_LIMIT) this.droppedAttributes++;
    else {
      this.keys.push(key);
      this.values.push(value);
    }
  }

  /** The attributes as one object. */
  get attributes(): Record<string, AttributeValue> {
    const out: Record<string, AttributeValue> = {};
    for (let i = 0; i < this.keys.length; i++) out[this.keys[i]!] = this.values[i]!;
    return out;
  }

  setAttributes(attributes: SpanAttributes): this {
    for (const key in attributes) this.setAttribute(key, attributes[key]);
    return this;
  }

  addEvent(name: string, attributesOrTime?: SpanAttributes | TimeInput, time?: TimeInput): this {
    if (this.ended) return this;
    const isTime =
      typeof attributesOrTime === 'number' ||
      attributesOrTime instanceof Date ||
      Array.isArray(attributesOrTime);
    const given = isTime ? undefined : (attributesOrTime as SpanAttributes | undefined);
    const attributes: Record<string, AttributeValue> = {};
    for (const key in given) {
      const v = given[key];
      if (validValue(v)) attributes[key] = v;
    }
    this.events ??= [];
    if (this.events.length >= EVENT_LIMIT) {
      this.droppedEvents++;
      return this;
    }
    this.events.push({ name, timeMs: epochMs(isTime ? (attributesOrTime as TimeInput) : time), attributes });
    return this;
  }

  addLink(link: Link): this {
    if (this.ended) return this;
    this.links ??= [];
    if (this.links.length >= LINK_LIMIT) this.droppedLinks++;
    else this.links.push(link);
    return this;
  }

  addLinks(links: Link[]): this {
    for (const link of links) this.addLink(link);
    return this;
  }

  setStatus(status: SpanStatus): this {
    if (this.ended || this.statusCode === SpanStatusCode.OK) return this;
    this.statusCode = status.code;
    this.statusMessage = status.code === SpanStatusCode.ERROR ? status.message : undefined;
    return this;
  }

  updateName(name: string): this {
    if (!this.ended) this.name = name;
    return this;
  }

  end(endTime?: TimeInput): void {
    if (this.ended) return;
    this.ended = true;
    this.endMs = Math.max(this.startMs, epochMs(endTime));
    this.onEnd(this);
  }

  isRecording(): boolean {
    return !this.ended;
  }

  recordException(exception: Exception, time?: TimeInput): void {
    const attributes: SpanAttributes = {};
    if (typeof exception === 'string') attributes['exception.message'] = exception;
    else {
      if (exception.code !== undefined) attributes['exception.type'] = String(exception.code);
      else if (exception.name !== undefined) attributes['exception.type'] = exception.name;
      if (exception.message !== undefined) attributes['exception.message'] = exception.message;
      if (exception.stack !== undefined) attributes['exception.stacktrace'] = exception.stack;
    }
    this.addEvent('exception', attributes, time);
  }
}

// Ids come from one random buffer, turned into hex at once: a getrandom call and a conversion per 64
// requests' ids, not per id. A used-up pool is replaced, not refilled: spans keep the bytes of their ids
// there until they are encoded.
const POOL_BYTES = 2048;
let pool = Buffer.allocUnsafe(POOL_BYTES);
let poolView = new DataView(pool.buffer, pool.byteOffset, POOL_BYTES);
let poolHex = '';
let poolAt = POOL_BYTES * 2;
const ZERO_TRACE_ID = '0'.repeat(32);
const ZERO_SPAN_ID = '0'.repeat(16);

/** The pool the last id came from, and the byte offset of that id in it. */
export const lastId = { pool: poolView, at: 0 };

function randomHex(chars: number, zero: string): string {
  if (poolAt + chars > poolHex.length) {
    pool = Buffer.allocUnsafe(POOL_BYTES);
    randomFillSync(pool);
    poolView = new DataView(pool.buffer, pool.byteOffset, POOL_BYTES);
    poolHex = pool.toString('hex');
    poolAt = 0;
  }
  const hex = poolHex.slice(poolAt, poolAt + chars);
  lastId.pool = poolView;
  lastId.at = poolAt >>> 1;
  poolAt += chars;
  // An all-zero id is invalid in W3C trace context; at these sizes it never comes, but never send one.
  return hex === zero ? randomHex(chars, zero) : hex;
}

export function newTraceId(): string {
  return randomHex(32, ZERO_TRACE_ID);
}

export function newSpanId(): string {
  return randomHex(16, ZERO_SPAN_ID);
}
