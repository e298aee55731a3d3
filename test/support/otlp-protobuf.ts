// Test support: decodes an OTLP protobuf ExportTraceServiceRequest into the shape of its JSON mapping
// (ids as hex, 64-bit integers as decimal strings), written from the field numbers of
// opentelemetry/proto/trace/v1/trace.proto and common/v1/common.proto. Fields left at their default
// value are absent, as a proto3 decoder sees them.

type Kind = 'string' | 'bytes' | 'varint' | 'fixed64' | 'fixed32' | 'double' | Schema;
interface Schema {
  readonly [field: number]: readonly [name: string, kind: Kind, repeated?: true];
}

const ANY_VALUE: Schema = {};
const KEY_VALUE: Schema = { 1: ['key', 'string'], 2: ['value', ANY_VALUE] };
Object.assign(ANY_VALUE, {
  1: ['stringValue', 'string'],
  2: ['boolValue', 'varint'],
  3: ['intValue', 'varint'],
  4: ['doubleValue', 'double'],
  5: ['arrayValue', { 1: ['values', ANY_VALUE, true] }],
  6: ['kvlistValue', { 1: ['values', KEY_VALUE, true] }],
  7: ['bytesValue', 'bytes'],
});
const EVENT: Schema = {
  1: ['timeUnixNano', 'fixed64'],
  2: ['name', 'string'],
  3: ['attributes', KEY_VALUE, true],
  4: ['droppedAttributesCount', 'varint'],
};
const LINK: Schema = {
  1: ['traceId', 'bytes'],
  2: ['spanId', 'bytes'],
  3: ['traceState', 'string'],
  4: ['attributes', KEY_VALUE, true],
  5: ['droppedAttributesCount', 'varint'],
  6: ['flags', 'fixed32'],
};
const SPAN: Schema = {
  1: ['traceId', 'bytes'],
  2: ['spanId', 'bytes'],
  3: ['traceState', 'string'],
  4: ['parentSpanId', 'bytes'],
  5: ['name', 'string'],
  6: ['kind', 'varint'],
  7: ['startTimeUnixNano', 'fixed64'],
  8: ['endTimeUnixNano', 'fixed64'],
  9: ['attributes', KEY_VALUE, true],
  10: ['droppedAttributesCount', 'varint'],
  11: ['events', EVENT, true],
  12: ['droppedEventsCount', 'varint'],
  13: ['links', LINK, true],
  14: ['droppedLinksCount', 'varint'],
  15: ['status', { 2: ['message', 'string'], 3: ['code', 'varint'] }],
  16: ['flags', 'fixed32'],
};
const REQUEST: Schema = {
  1: [
    'resourceSpans',
    {
      1: ['resource', { 1: ['attributes', KEY_VALUE, true], 2: ['droppedAttributesCount', 'varint'] }],
      2: [
        'scopeSpans',
        {
          1: [
            'scope',
            { 1: ['name', 'string'], 2: ['version', 'string'], 3: ['attributes', KEY_VALUE, true] },
          ],
          2: ['spans', SPAN, true],
          3: ['schemaUrl', 'string'],
        },
        true,
      ],
      3: ['schemaUrl', 'string'],
    },
    true,
  ],
};

type Decoded = { [name: string]: unknown };

/** A varint; one longer than it needs to be (a last byte of 0 after others) is refused. */
function readVarint(b: Uint8Array, at: { pos: number }): bigint {
  let v = 0n;
  let shift = 0n;
  for (;;) {
    const byte = b[at.pos++]!;
    v |= BigInt(byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) {
      if (byte === 0 && shift > 0n) throw new Error(`a varint padded to ${shift / 7n + 1n} bytes`);
      return v;
    }
    shift += 7n;
  }
}

function decode(b: Uint8Array, schema: Schema): Decoded {
  const out: Decoded = {};
  const at = { pos: 0 };
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  while (at.pos < b.length) {
    const key = Number(readVarint(b, at));
    const field = key >>> 3;
    const wire = key & 7;
    let raw: bigint | Uint8Array | number;
    if (wire === 0) raw = readVarint(b, at);
    else if (wire === 1) {
      raw = view.getBigUint64(at.pos, true);
      at.pos += 8;
    } else if (wire === 5) {
      raw = view.getUint32(at.pos, true);
      at.pos += 4;
    } else if (wire === 2) {
      const len = Number(readVarint(b, at));
      raw = b.subarray(at.pos, at.pos + len);
      at.pos += len;
    } else throw new Error(`wire type ${wire} of field ${field}`);
    const spec = schema[field];
    if (spec === undefined) throw new Error(`unknown field ${field}`);
    const [name, kind, repeated] = spec;
    let value: unknown;
    if (typeof kind === 'object') value = decode(raw as Uint8Array, kind);
    else if (kind === 'string') value = Buffer.from(raw as Uint8Array).toString('utf8');
    else if (kind === 'bytes') value = Buffer.from(raw as Uint8Array).toString('hex');
    else if (kind === 'double') value = view.getFloat64(at.pos - 8, true);
    else if (kind === 'fixed32') value = raw as number;
    else if (kind === 'fixed64') value = (raw as bigint).toString();
    else if (name === 'intValue') value = BigInt.asIntN(64, raw as bigint).toString();
    else if (name === 'boolValue') value = raw !== 0n;
    else value = Number(raw as bigint);
    if (repeated) {
      const list = (out[name] as unknown[] | undefined) ?? [];
      list.push(value);
      out[name] = list;
    } else out[name] = value;
  }
  // proto3: a field at its default value is as good as absent (not so in a oneof: AnyValue's are kept).
  if (schema === ANY_VALUE) return out;
  for (const [k, v] of Object.entries(out)) {
    if (
      v === 0 ||
      v === '' ||
      v === '0' ||
      (typeof v === 'object' && v !== null && Object.keys(v).length === 0)
    )
      delete out[k];
  }
  return out;
}

/** An ExportTraceServiceRequest body, in the JSON mapping's shape. */
export function decodeTraceRequest(body: Uint8Array): Decoded {
  return decode(body, REQUEST);
}
