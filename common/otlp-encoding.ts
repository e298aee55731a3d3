// OTLP/HTTP request bodies of a batch of ended spans (docs/operations.md "Tracing"): the protobuf
// ExportTraceServiceRequest (opentelemetry/proto/collector/trace/v1) and its JSON mapping. One
// resource and one instrumentation scope per process, so both are encoded once. Attribute keys are a
// small fixed set: their encoded bytes are kept, and a span costs the writes of its values.

import type { AttributeValue, SpanKind } from '@opentelemetry/api';
import type { RecordedSpan } from './trace-span.ts';

export interface OtlpScope {
  readonly name: string;
  readonly version?: string;
}

/** OTLP span flags: the W3C flags, plus "whether the parent is remote is known" and that bit. */
function spanFlags(traceFlags: number, parentRemote: boolean): number {
  return (traceFlags & 0xff) | 0x100 | (parentRemote ? 0x200 : 0);
}

/** api SpanKind (INTERNAL = 0) to OTLP's (UNSPECIFIED = 0, INTERNAL = 1). */
function otlpKind(kind: SpanKind): number {
  return kind + 1;
}

function varintSize(v: number): number {
  let n = 1;
  while (v > 0x7f) {
    v = v > 0xffffffff ? Math.floor(v / 128) : v >>> 7;
    n++;
  }
  return n;
}

const HEX = new Int8Array(128).fill(-1);
for (let i = 0; i < 16; i++) {
  HEX['0123456789abcdef'.charCodeAt(i)] = i;
  HEX['0123456789ABCDEF'.charCodeAt(i)] = i;
}

/** UTF-8 length of `s`: counted here for short ASCII strings (most values), which spares a native call. */
function utf8Length(s: string): number {
  const n = s.length;
  if (n > 64) return Buffer.byteLength(s);
  for (let i = 0; i < n; i++) if (s.charCodeAt(i) > 0x7f) return Buffer.byteLength(s);
  return n;
}

class ProtoWriter {
  buf: Buffer;
  /** `buf` as a DataView: ids are copied four bytes at a time. */
  view: DataView;
  pos = 0;

  constructor(size = 1024) {
    this.buf = Buffer.allocUnsafe(size);
    this.view = new DataView(this.buf.buffer, this.buf.byteOffset, size);
  }

  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
    this.view = new DataView(next.buffer, next.byteOffset, next.length);
  }

  varint(v: number): void {
    this.ensure(10);
    const buf = this.buf;
    while (v > 0x7f) {
      buf[this.pos++] = (v & 0x7f) | 0x80;
      v = v > 0xffffffff ? Math.floor(v / 128) : v >>> 7;
    }
    buf[this.pos++] = v;
  }

  tag(field: number, wire: number): void {
    this.varint((field << 3) | wire);
  }

  bytes(b: Uint8Array): void {
    this.ensure(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  /** The bytes of `s`, `len` of them in UTF-8 (short one-byte strings are copied here, not natively). */
  raw(s: string, len: number): void {
    this.ensure(len);
    if (len === s.length && len <= 32) {
      const buf = this.buf;
      for (let i = 0; i < len; i++) buf[this.pos + i] = s.charCodeAt(i);
      this.pos += len;
    } else this.pos += this.buf.write(s, this.pos, len, 'utf8');
  }

  string(field: number, s: string): void {
    const len = utf8Length(s);
    this.tag(field, 2);
    this.varint(len);
    this.raw(s, len);
  }

  hex(field: number, hex: string): void {
    const len = hex.length >>> 1;
    this.tag(field, 2);
    this.varint(len);
    this.ensure(len);
    const buf = this.buf;
    for (let i = 0; i < len; i++) {
      buf[this.pos + i] = (HEX[hex.charCodeAt(2 * i)]! << 4) | HEX[hex.charCodeAt(2 * i + 1)]!;
    }
    this.pos += len;
  }

  /** `len` bytes (8 or 16) of `src` from `at`, as a bytes field (an id made here: no hex to decode). */
  idBytes(field: number, src: DataView, at: number, len: number): void {
    this.ensure(len + 2);
    const buf = this.buf;
    const view = this.view;
    const pos = this.pos + 2;
    // Field numbers under 16 and ids under 128 bytes: tag and length are a byte each.
    buf[pos - 2] = (field << 3) | 2;
    buf[pos - 1] = len;
    for (let i = 0; i < len; i += 4) view.setUint32(pos + i, src.getUint32(at + i));
    this.pos = pos + len;
  }

  /** Epoch milliseconds as fixed64 nanoseconds, exact in doubles: ms = hi * 2^20 + lo. */
  timeNs(field: number, ms: number): void {
    this.ensure(9);
    this.buf[this.pos++] = (field << 3) | 1; // fields under 16
    // Remainders by floor division: exact for these powers of two, where `%` on doubles is a call.
    const whole = Math.floor(ms);
    const hi = Math.floor(whole / 1048576);
    const lo = whole - hi * 1048576;
    const a = lo * 1e6 + Math.round((ms - whole) * 1e6); // < 2^40
    const b = hi * 1e6; // the rest, in units of 2^20 ns
    const bLo = b - Math.floor(b / 4096) * 4096;
    let low = bLo * 1048576 + a;
    const carry = Math.floor(low / 4294967296);
    low -= carry * 4294967296;
    this.u32(low);
    this.u32((b - bLo) / 4096 + carry);
  }

  /** Four bytes, little-endian (room already ensured). */
  u32(v: number): void {
    const buf = this.buf;
    const at = this.pos;
    buf[at] = v & 0xff;
    buf[at + 1] = (v >>> 8) & 0xff;
    buf[at + 2] = (v >>> 16) & 0xff;
    buf[at + 3] = v >>> 24;
    this.pos = at + 4;
  }

  fixed32(field: number, v: number): void {
    this.tag(field, 5);
    this.ensure(4);
    this.u32(v >>> 0);
  }

  double(field: number, v: number): void {
    this.tag(field, 1);
    this.ensure(8);
    this.buf.writeDoubleLE(v, this.pos);
    this.pos += 8;
  }

  /** An int64 value: negative ones take ten bytes of two's complement. */
  int64(field: number, v: number): void {
    this.tag(field, 0);
    if (v >= 0) {
      this.varint(v);
      return;
    }
    let n = BigInt.asUintN(64, BigInt(v));
    this.ensure(10);
    while (n > 0x7fn) {
      this.buf[this.pos++] = Number(n & 0x7fn) | 0x80;
      n >>= 7n;
    }
    this.buf[this.pos++] = Number(n);
  }

  /**
   * Begins a length-delimited field of unknown length, with room for a length of `room` bytes (2: up to
   * 16 KiB); `end` writes the length in front of it, moving the body only when its length needs more
   * or fewer bytes than that.
   */
  begin(field: number, room = 2): number {
    this.tag(field, 2);
    this.ensure(room);
    const start = this.pos;
    this.pos += room;
    return start * 8 + room;
  }

  end(mark: number): void {
    const room = mark & 7;
    const start = (mark - room) / 8;
    const len = this.pos - start - room;
    const size = varintSize(len);
    if (size !== room) {
      this.ensure(size - room);
      this.buf.copyWithin(start + size, start + room, this.pos);
    }
    let v = len;
    let at = start;
    while (v > 0x7f) {
      this.buf[at++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    this.buf[at] = v;
    this.pos = start + size + len;
  }

  /** What was written, as a view of the writer's buffer: valid until the next write. */
  take(): Uint8Array {
    const out = this.buf.subarray(0, this.pos);
    this.pos = 0;
    return out;
  }
}

/** Encoded `key` fields of KeyValue (tag, length, bytes), by key. */
const KEY_BYTES = new Map<string, Buffer>();

function keyBytes(key: string): Buffer {
  let b = KEY_BYTES.get(key);
  if (b === undefined) {
    const w = new ProtoWriter();
    w.string(1, key);
    b = Buffer.from(w.buf.subarray(0, w.pos));
    if (KEY_BYTES.size < 4096) KEY_BYTES.set(key, b);
  }
  return b;
}

const INT64_LIMIT = 2 ** 63;

function isInt64(v: number): boolean {
  return Number.isInteger(v) && v >= -INT64_LIMIT && v < INT64_LIMIT;
}

// Small messages (AnyValue, KeyValue) have their lengths computed before they are written.

/** The size of an AnyValue message holding `value`. */
function anySize(value: AttributeValue | undefined | null): number {
  switch (typeof value) {
    case 'string': {
      const len = utf8Length(value);
      return 1 + varintSize(len) + len;
    }
    case 'boolean':
      return 2;
    case 'number':
      if (!isInt64(value)) return 9;
      return 1 + (value < 0 ? 10 : varintSize(value));
    case 'object': {
      if (!Array.isArray(value)) return 0;
      const len = arraySize(value);
      return 1 + varintSize(len) + len;
    }
    default:
      return 0;
  }
}

function arraySize(values: readonly unknown[]): number {
  let len = 0;
  for (const item of values) {
    const size = anySize(item as AttributeValue);
    len += 1 + varintSize(size) + size;
  }
  return len;
}

function writeAnyBody(w: ProtoWriter, value: AttributeValue | undefined | null): void {
  switch (typeof value) {
    case 'string':
      w.string(1, value);
      break;
    case 'boolean':
      w.tag(2, 0);
      w.varint(value ? 1 : 0);
      break;
    case 'number':
      if (isInt64(value)) w.int64(3, value);
      else w.double(4, value);
      break;
    case 'object':
      if (Array.isArray(value)) {
        w.tag(5, 2);
        w.varint(arraySize(value));
        for (const item of value) {
          w.tag(1, 2);
          w.varint(anySize(item));
          writeAnyBody(w, item);
        }
      }
      break;
  }
}

// Most attribute values repeat from span to span (a method, a route, a provider, a model, a status):
// the whole encoded field (tag, length, KeyValue) is kept for the first values seen of each key, so
// writing one is a copy. Only span attributes (field 9) are cached.
const SPAN_ATTRIBUTE = 9;
interface KeyCache {
  readonly byValue: Map<string | number | boolean, Uint8Array>;
  hits: number;
  /** Values of this key rarely repeat (an id): not looked up any more. */
  unique: boolean;
}
const KV_CACHE = new Map<string, KeyCache>();
/** Single-string arrays (a reply's one finish reason) repeat as scalars do: cached by key and item. */
const ONE_STRING = new Map<string, KeyCache>();
const KV_PER_KEY = 64;
const scratch = new ProtoWriter();

/** The encoded field of `key` = `value`, from `caches` under `by` (the value, or an array's one item). */
function cachedField(
  caches: Map<string, KeyCache>,
  key: string,
  by: string | number | boolean,
  value: AttributeValue,
): Uint8Array | undefined {
  let entry = caches.get(key);
  if (entry === undefined) {
    if (caches.size >= 4096) return undefined;
    entry = { byValue: new Map(), hits: 0, unique: false };
    caches.set(key, entry);
  }
  if (entry.unique) return undefined;
  let b = entry.byValue.get(by);
  if (b !== undefined) {
    entry.hits++;
    return b;
  }
  if (entry.byValue.size >= KV_PER_KEY) {
    entry.unique = entry.hits < KV_PER_KEY;
    return undefined;
  }
  if (typeof by === 'string' && by.length > 128) return undefined;
  writeKeyValueField(scratch, SPAN_ATTRIBUTE, key, value);
  b = Uint8Array.from(scratch.take());
  entry.byValue.set(by, b);
  return b;
}

function cachedKeyValue(key: string, value: string | number | boolean): Uint8Array | undefined {
  return cachedField(KV_CACHE, key, value, value);
}

function cachedOneString(key: string, item: unknown): Uint8Array | undefined {
  return typeof item === 'string' ? cachedField(ONE_STRING, key, item, [item]) : undefined;
}

/** A string attribute's field, its sizes computed once: for values that do not repeat. */
function writeStringField(w: ProtoWriter, keyField: Buffer, s: string): void {
  const n = s.length;
  const kv = keyField.length + 4 + n;
  if (kv < 128) {
    // Every length a byte: the field is written in one pass, as ASCII until a character says otherwise.
    w.ensure(kv + 2);
    const buf = w.buf;
    const start = w.pos;
    buf[start] = (SPAN_ATTRIBUTE << 3) | 2;
    buf[start + 1] = kv;
    buf.set(keyField, start + 2);
    let p = start + 2 + keyField.length;
    buf[p] = 0x12; // value: AnyValue
    buf[p + 1] = n + 2;
    buf[p + 2] = 0x0a; // string_value
    buf[p + 3] = n;
    p += 4;
    let i = 0;
    for (; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c > 0x7f) break;
      buf[p + i] = c;
    }
    if (i === n) {
      w.pos = p + n;
      return;
    }
  }
  writeKeyField(w, SPAN_ATTRIBUTE, keyField, s);
}

/**
 * Per span name (names repeat: a route, an operation and model): its encoded `name` field (tag, length,
 * bytes), and the attributes the last span of that name had at each position, with their encoded
 * fields. Spans of one name set the same keys in the same order, mostly to the same values: an
 * attribute equal to its predecessor's is a copy, without a cache lookup. The leading attributes that
 * stayed the same are also kept as one block (`lead` of them, `ends` their offsets in it): a span that
 * starts with them copies the block once instead of each field.
 */
interface NameEntry {
  readonly bytes: Uint8Array;
  readonly keys: string[];
  readonly values: (string | number | boolean)[];
  readonly encoded: (Uint8Array | undefined)[];
  /** The encoded key field of a position whose values do not repeat (an id), written without lookups. */
  readonly fresh: (Buffer | undefined)[];
  block: Uint8Array;
  lead: number;
  readonly ends: number[];
}
const NAMES = new Map<string, NameEntry>();
const SLOTS = 32;
const EMPTY = new Uint8Array(0);

function nameEntry(name: string): NameEntry {
  let entry = NAMES.get(name);
  if (entry === undefined) {
    scratch.string(5, name);
    entry = {
      bytes: Uint8Array.from(scratch.take()),
      keys: [],
      values: [],
      encoded: [],
      fresh: [],
      block: EMPTY,
      lead: 0,
      ends: [],
    };
    if (NAMES.size < 1024) NAMES.set(name, entry);
  }
  return entry;
}

function writeKeyValueField(
  w: ProtoWriter,
  field: number,
  key: string,
  value: AttributeValue | undefined,
): void {
  writeKeyField(w, field, keyBytes(key), value);
}

/** A KeyValue field, its key already encoded. */
function writeKeyField(w: ProtoWriter, field: number, k: Buffer, value: AttributeValue | undefined): void {
  const any = anySize(value);
  w.tag(field, 2);
  w.varint(k.length + 1 + varintSize(any) + any);
  w.bytes(k);
  w.tag(2, 2);
  w.varint(any);
  writeAnyBody(w, value);
}

function writeKeyValue(w: ProtoWriter, field: number, key: string, value: AttributeValue | undefined): void {
  if (field === SPAN_ATTRIBUTE && typeof value !== 'object' && value !== undefined) {
    const cached = cachedKeyValue(key, value as string | number | boolean);
    if (cached !== undefined) {
      w.bytes(cached);
      return;
    }
  }
  writeKeyValueField(w, field, key, value);
}

function writeAttributes(
  w: ProtoWriter,
  field: number,
  attributes: Readonly<Record<string, AttributeValue>>,
): void {
  for (const key in attributes) writeKeyValue(w, field, key, attributes[key]);
}

/**
 * The span's attributes: the leading ones equal to the last span's of its name as one copy of the
 * name's block, the rest each from its position's cache, the key/value cache or encoded. The block then
 * grows by the fields that followed it unchanged, or shrinks to the attributes that matched.
 */
function writeSpanAttributes(
  w: ProtoWriter,
  named: NameEntry,
  keys: readonly string[],
  values: readonly (AttributeValue | undefined)[],
): void {
  const n = keys.length;
  let i = 0;
  while (i < named.lead && named.keys[i] === keys[i] && named.values[i] === values[i]) i++;
  if (i < named.lead) {
    named.lead = i;
    named.block = i === 0 ? EMPTY : named.block.subarray(0, named.ends[i - 1]);
  }
  if (i > 0) w.bytes(named.block);
  const runFrom = w.pos;
  let run = i;
  for (; i < n; i++) {
    const key = keys[i]!;
    const value = values[i];
    if (i >= SLOTS || typeof value === 'object' || value === undefined) {
      const one = Array.isArray(value) && value.length === 1 ? cachedOneString(key, value[0]) : undefined;
      if (one !== undefined) w.bytes(one);
      else writeKeyValue(w, SPAN_ATTRIBUTE, key, value);
      continue;
    }
    const v = value as string | number | boolean;
    let b: Uint8Array | undefined;
    if (named.keys[i] === key && named.values[i] === v) {
      b = named.encoded[i];
      if (run === i && b !== undefined) {
        named.ends[i] = (i === 0 ? 0 : named.ends[i - 1]!) + b.length;
        run++;
      }
    } else {
      const fresh = named.keys[i] === key ? named.fresh[i] : undefined;
      if (fresh !== undefined && typeof v === 'string') {
        named.values[i] = v;
        writeStringField(w, fresh, v);
        continue;
      }
      b = cachedKeyValue(key, v);
      named.keys[i] = key;
      named.values[i] = v;
      named.encoded[i] = b;
      named.fresh[i] = b === undefined && KV_CACHE.get(key)?.unique === true ? keyBytes(key) : undefined;
    }
    if (b !== undefined) w.bytes(b);
    else writeKeyValueField(w, SPAN_ATTRIBUTE, key, value);
  }
  if (run > named.lead) {
    const grown = new Uint8Array(named.ends[run - 1]!);
    grown.set(named.block);
    grown.set(w.buf.subarray(runFrom, runFrom + grown.length - named.block.length), named.block.length);
    named.block = grown;
    named.lead = run;
  }
}

function writeSpan(w: ProtoWriter, s: RecordedSpan): void {
  const at = w.begin(2);
  const c = s.spanContext();
  const ids = s.idPool;
  if (ids !== undefined && s.traceAt >= 0) w.idBytes(1, ids, s.traceAt, 16);
  else w.hex(1, c.traceId);
  if (ids !== undefined && s.spanAt >= 0) w.idBytes(2, ids, s.spanAt, 8);
  else w.hex(2, c.spanId);
  if (c.traceState !== undefined) {
    const traceState = c.traceState.serialize();
    if (traceState) w.string(3, traceState);
  }
  if (ids !== undefined && s.parentAt >= 0) w.idBytes(4, ids, s.parentAt, 8);
  else if (s.parentSpanId !== undefined) w.hex(4, s.parentSpanId);
  const named = nameEntry(s.name);
  w.bytes(named.bytes);
  w.ensure(2);
  w.buf[w.pos++] = 6 << 3; // kind: a varint under 128
  w.buf[w.pos++] = otlpKind(s.kind);
  w.timeNs(7, s.startMs);
  w.timeNs(8, s.endMs);
  writeSpanAttributes(w, named, s.keys, s.values);
  if (s.droppedAttributes > 0) {
    w.tag(10, 0);
    w.varint(s.droppedAttributes);
  }
  if (s.events !== undefined)
    for (const e of s.events) {
      const ev = w.begin(11);
      w.timeNs(1, e.timeMs);
      w.string(2, e.name);
      writeAttributes(w, 3, e.attributes);
      w.end(ev);
    }
  if (s.droppedEvents > 0) {
    w.tag(12, 0);
    w.varint(s.droppedEvents);
  }
  if (s.links !== undefined)
    for (const link of s.links) {
      const l = w.begin(13);
      w.hex(1, link.context.traceId);
      w.hex(2, link.context.spanId);
      const state = link.context.traceState?.serialize();
      if (state) w.string(3, state);
      if (link.attributes !== undefined)
        writeAttributes(w, 4, link.attributes as Readonly<Record<string, AttributeValue>>);
      w.fixed32(6, spanFlags(link.context.traceFlags, link.context.isRemote === true));
      w.end(l);
    }
  if (s.droppedLinks > 0) {
    w.tag(14, 0);
    w.varint(s.droppedLinks);
  }
  if (s.statusCode !== 0 || s.statusMessage !== undefined) {
    const st = w.begin(15, 1);
    if (s.statusMessage !== undefined) w.string(2, s.statusMessage);
    if (s.statusCode !== 0) {
      w.tag(3, 0);
      w.varint(s.statusCode);
    }
    w.end(st);
  }
  w.fixed32(16, spanFlags(c.traceFlags, s.parentRemote));
  w.end(at);
}

/** One export's spans, encoded as they are added: the request holds bytes, not span objects. */
export interface OtlpBatch {
  /** Spans added so far. */
  readonly count: number;
  add(span: RecordedSpan): void;
  /** The request body; the batch takes nothing more. */
  finish(): Uint8Array | string;
  /** The body has been sent: its memory may hold the next batch. */
  release(): void;
}

export interface OtlpEncoder {
  readonly contentType: string;
  open(): OtlpBatch;
  /** open(), add() each, finish(). */
  encode(spans: readonly RecordedSpan[]): Uint8Array | string;
}

function encodeAll(encoder: Pick<OtlpEncoder, 'open'>, spans: readonly RecordedSpan[]): Uint8Array | string {
  const batch = encoder.open();
  for (const s of spans) batch.add(s);
  return batch.finish();
}

/** One request body being written. A class: every span's end reads its methods, which stay monomorphic. */
class ProtobufBatch implements OtlpBatch {
  count = 0;
  readonly #w: ProtoWriter;
  readonly #free: ProtoWriter[];
  readonly #resource: number;
  readonly #scope: number;

  constructor(w: ProtoWriter, resourceBytes: Uint8Array, scopeBytes: Uint8Array, free: ProtoWriter[]) {
    this.#w = w;
    this.#free = free;
    w.pos = 0;
    // A batch is under 2 MiB: its two lengths take 3 bytes.
    this.#resource = w.begin(1, 3);
    w.bytes(resourceBytes);
    this.#scope = w.begin(2, 3);
    w.tag(1, 2);
    w.varint(scopeBytes.length);
    w.bytes(scopeBytes);
  }

  add(span: RecordedSpan): void {
    writeSpan(this.#w, span);
    this.count++;
  }

  finish(): Uint8Array {
    this.#w.end(this.#scope);
    this.#w.end(this.#resource);
    return this.#w.take();
  }

  /** Its writer may hold the next batch (buffers are reused: a new one per batch is external memory that
   * V8 counts toward a full collection). */
  release(): void {
    if (this.#free.length < 4) this.#free.push(this.#w);
  }
}

/** ExportTraceServiceRequest in protobuf: resource and scope bytes are made once. */
export function protobufEncoder(
  resource: Readonly<Record<string, AttributeValue>>,
  scope: OtlpScope,
): OtlpEncoder {
  const head = new ProtoWriter();
  const r = head.begin(1);
  writeAttributes(head, 1, resource);
  head.end(r);
  const resourceBytes = Buffer.from(head.take());
  head.string(1, scope.name);
  if (scope.version !== undefined) head.string(2, scope.version);
  const scopeBytes = Buffer.from(head.take());
  const free: ProtoWriter[] = [];
  const encoder = {
    contentType: 'application/x-protobuf',
    open(): OtlpBatch {
      return new ProtobufBatch(free.pop() ?? new ProtoWriter(256 * 1024), resourceBytes, scopeBytes, free);
    },
    encode: (spans: readonly RecordedSpan[]) => encodeAll(encoder, spans),
  };
  return encoder;
}

type JsonAnyValue =
  | { stringValue: string }
  | { boolValue: boolean }
  | { intValue: string }
  | { doubleValue: number }
  | { arrayValue: { values: JsonAnyValue[] } }
  | Record<string, never>;

function jsonValue(v: AttributeValue | undefined | null): JsonAnyValue {
  switch (typeof v) {
    case 'string':
      return { stringValue: v };
    case 'boolean':
      return { boolValue: v };
    case 'number':
      return Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };
    case 'object':
      if (Array.isArray(v)) return { arrayValue: { values: v.map(jsonValue) } };
      return {};
    default:
      return {};
  }
}

function jsonAttributes(attributes: Readonly<Record<string, AttributeValue>>) {
  const out: { key: string; value: JsonAnyValue }[] = [];
  for (const key in attributes) out.push({ key, value: jsonValue(attributes[key]) });
  return out;
}

function nanos(ms: number): string {
  const whole = Math.floor(ms);
  return (BigInt(whole) * 1_000_000n + BigInt(Math.round((ms - whole) * 1e6))).toString();
}

function spanJson(s: RecordedSpan) {
  const c = s.spanContext();
  return {
    traceId: c.traceId,
    spanId: c.spanId,
    traceState: c.traceState?.serialize(),
    parentSpanId: s.parentSpanId,
    name: s.name,
    kind: otlpKind(s.kind),
    startTimeUnixNano: nanos(s.startMs),
    endTimeUnixNano: nanos(s.endMs),
    attributes: jsonAttributes(s.attributes),
    droppedAttributesCount: s.droppedAttributes,
    events: (s.events ?? []).map((e) => ({
      timeUnixNano: nanos(e.timeMs),
      name: e.name,
      attributes: jsonAttributes(e.attributes),
    })),
    droppedEventsCount: s.droppedEvents,
    links: (s.links ?? []).map((l) => ({
      traceId: l.context.traceId,
      spanId: l.context.spanId,
      traceState: l.context.traceState?.serialize(),
      attributes: jsonAttributes((l.attributes ?? {}) as Record<string, AttributeValue>),
      flags: spanFlags(l.context.traceFlags, l.context.isRemote === true),
    })),
    droppedLinksCount: s.droppedLinks,
    status: { code: s.statusCode, message: s.statusMessage },
    flags: spanFlags(c.traceFlags, s.parentRemote),
  };
}

/** The JSON mapping (OTLP/HTTP JSON: ids as hex, 64-bit integers as strings). */
export function jsonEncoder(
  resource: Readonly<Record<string, AttributeValue>>,
  scope: OtlpScope,
): OtlpEncoder {
  const head = `{"resourceSpans":[{"resource":${JSON.stringify({ attributes: jsonAttributes(resource) })},"scopeSpans":[{"scope":${JSON.stringify(scope)},"spans":[`;
  const encoder = {
    contentType: 'application/json',
    open(): OtlpBatch {
      const parts: string[] = [];
      return {
        get count() {
          return parts.length;
        },
        add(span) {
          parts.push(JSON.stringify(spanJson(span)));
        },
        finish: () => `${head}${parts.join(',')}]}]}]}`,
        release() {},
      };
    },
    encode: (spans: readonly RecordedSpan[]) => encodeAll(encoder, spans),
  };
  return encoder;
}
