// The gateway's OTLP encoders against OpenTelemetry's own serializers (@opentelemetry/otlp-transformer):
// the same spans, encoded by both, decode to the same request, in protobuf and in JSON.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type HrTime, SpanKind, SpanStatusCode, TraceFlags } from '@opentelemetry/api';
import { TraceState } from '@opentelemetry/core';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { jsonEncoder, protobufEncoder } from '../../common/otlp-encoding.ts';
import { RecordedSpan } from '../../common/trace-span.ts';
import { decodeTraceRequest } from '../support/otlp-protobuf.ts';

const RESOURCE = { 'service.name': 'router-under-test', 'deployment.environment.name': 'test' };
const SCOPE = { name: 'llm-router' };
// One object: OpenTelemetry's serializer groups spans by resource identity.
const SDK_RESOURCE = resourceFromAttributes(RESOURCE);

function hrTime(ms: number): HrTime {
  const whole = Math.floor(ms);
  const ns = BigInt(whole) * 1_000_000n + BigInt(Math.round((ms - whole) * 1e6));
  return [Number(ns / 1_000_000_000n), Number(ns % 1_000_000_000n)];
}

/** The SDK's view of one of our spans, for its serializers. */
function readable(s: RecordedSpan): ReadableSpan {
  const c = s.spanContext();
  return {
    name: s.name,
    kind: s.kind,
    spanContext: () => c,
    parentSpanContext:
      s.parentSpanId === undefined
        ? undefined
        : { traceId: c.traceId, spanId: s.parentSpanId, traceFlags: 1, isRemote: s.parentRemote },
    startTime: hrTime(s.startMs),
    endTime: hrTime(s.endMs),
    status: { code: s.statusCode, message: s.statusMessage },
    attributes: s.attributes,
    links: s.links ?? [],
    events: (s.events ?? []).map((e) => ({ name: e.name, time: hrTime(e.timeMs), attributes: e.attributes })),
    duration: [0, 0],
    ended: true,
    resource: SDK_RESOURCE,
    instrumentationScope: SCOPE,
    droppedAttributesCount: s.droppedAttributes,
    droppedEventsCount: s.droppedEvents,
    droppedLinksCount: s.droppedLinks,
  };
}

function sampleSpans(): RecordedSpan[] {
  const ended: RecordedSpan[] = [];
  const onEnd = (s: RecordedSpan) => ended.push(s);
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const remote = { traceId, spanId: '00f067aa0ba902b7', traceFlags: TraceFlags.SAMPLED, isRemote: true };
  const server = new RecordedSpan(
    { traceId, spanId: 'a1b2c3d4e5f60718', traceFlags: 1, traceState: new TraceState('vendor=x,other=y') },
    remote,
    'POST /v1/chat/completions',
    SpanKind.SERVER,
    { 'http.request.method': 'POST', 'router.api': 'chat' },
    onEnd,
  );
  const client = new RecordedSpan(
    { traceId, spanId: '1122334455667788', traceFlags: 1 },
    server.spanContext(),
    'chat gpt-5.4-mini',
    SpanKind.CLIENT,
    {
      'gen_ai.request.model': 'gpt-5.4-mini',
      'gen_ai.request.temperature': 0.25,
      'gen_ai.request.max_tokens': 80,
      'gen_ai.request.seed': -7,
      'gen_ai.request.stop_sequences': ['END', 'ÿ終'],
      'router.stream': false,
      'router.big': 2 ** 40,
    },
    onEnd,
  );
  client.setAttribute('gen_ai.response.finish_reasons', ['stop']);
  client.setAttribute('unicode', 'naïve ☃ 🎉');
  client.setAttribute('numbers', [1, 2.5, -3]);
  client.setAttribute('zero', 0);
  client.addEvent('exception', { 'exception.message': 'boom' });
  client.addLink({ context: remote, attributes: { why: 'retry of' } });
  client.setStatus({ code: SpanStatusCode.ERROR, message: 'upstream refused' });
  client.end();
  server.setStatus({ code: SpanStatusCode.OK });
  server.end();
  return ended;
}

test('protobuf: the same request as OpenTelemetry serializes for the same spans', () => {
  const spans = sampleSpans();
  const ours = protobufEncoder(RESOURCE, SCOPE).encode(spans) as Uint8Array;
  const theirs = ProtobufTraceSerializer.serializeRequest(spans.map(readable));
  assert.ok(theirs !== undefined);
  const decoded = decodeTraceRequest(ours);
  assert.deepEqual(decoded, decodeTraceRequest(theirs));
  // And what that request says, read back: nothing lost on the way.
  const [client, server] = (
    decoded.resourceSpans as { scopeSpans: { spans: Record<string, unknown>[] }[] }[]
  )[0]!.scopeSpans[0]!.spans;
  assert.equal(server!.traceState, 'vendor=x,other=y');
  assert.equal(server!.parentSpanId, '00f067aa0ba902b7');
  assert.equal(server!.flags, 0x301, 'sampled, parent remote and known to be');
  assert.equal(client!.parentSpanId, 'a1b2c3d4e5f60718');
  assert.equal(client!.kind, 3);
  const attrs = Object.fromEntries(
    (client!.attributes as { key: string; value: Record<string, unknown> }[]).map((kv) => [kv.key, kv.value]),
  );
  assert.deepEqual(attrs['unicode'], { stringValue: 'naïve ☃ 🎉' });
  assert.deepEqual(attrs['gen_ai.request.seed'], { intValue: '-7' });
  assert.deepEqual(attrs['router.big'], { intValue: String(2 ** 40) });
  assert.deepEqual(attrs['zero'], { intValue: '0' });
  assert.deepEqual(attrs['gen_ai.request.temperature'], { doubleValue: 0.25 });
});

test('protobuf: a batch larger than the writer grows into a longer buffer, every span intact', () => {
  const ended: RecordedSpan[] = [];
  for (let i = 0; i < 600; i++) {
    // Spans whose lengths take one, two and three bytes: the writer reserves two.
    const attributes = i === 3 ? {} : { i, long: 'y'.repeat(i === 7 ? 20_000 : 200) };
    const s = new RecordedSpan(
      { traceId: 'ab'.repeat(16), spanId: (i + 1).toString(16).padStart(16, '0'), traceFlags: 1 },
      undefined,
      i === 3 ? 'a' : `span ${i} ${'x'.repeat(i % 300)}`,
      SpanKind.INTERNAL,
      attributes,
      (span) => ended.push(span),
    );
    if (i === 5) s.setStatus({ code: SpanStatusCode.ERROR, message: 'z'.repeat(300) });
    s.end();
  }
  const ours = protobufEncoder(RESOURCE, SCOPE).encode(ended) as Uint8Array;
  const theirs = ProtobufTraceSerializer.serializeRequest(ended.map(readable))!;
  assert.ok(ours.length > 64 * 1024);
  // The decoder refuses a length written in more bytes than it takes.
  assert.deepEqual(decodeTraceRequest(ours), decodeTraceRequest(theirs));
});

test('protobuf: spans of one name repeat, change and reorder their attributes, each encoded as set', () => {
  const ended: RecordedSpan[] = [];
  for (let i = 0; i < 50; i++) {
    const s = new RecordedSpan(
      { traceId: 'cd'.repeat(16), spanId: (i + 1).toString(16).padStart(16, '0'), traceFlags: 1 },
      undefined,
      'POST /same',
      SpanKind.SERVER,
      undefined,
      (span) => ended.push(span),
    );
    // The encoder keeps the last span's attributes per position of a name: the same, then others.
    if (i % 7 === 3) s.setAttribute('extra', 'first');
    s.setAttribute('http.route', '/same');
    s.setAttribute('http.response.status_code', i % 3 === 0 ? 200 : 429);
    s.setAttribute('router.stream', i % 2 === 0);
    s.setAttribute('n', i % 4 === 0 ? 1.5 : i);
    s.setAttribute('gen_ai.response.finish_reasons', [i % 2 === 0 ? 'stop' : 'length']);
    s.end();
  }
  const ours = protobufEncoder(RESOURCE, SCOPE).encode(ended) as Uint8Array;
  const theirs = ProtobufTraceSerializer.serializeRequest(ended.map(readable))!;
  assert.deepEqual(decodeTraceRequest(ours), decodeTraceRequest(theirs));
});

test('protobuf: leading attributes kept from span to span, broken and regrown at every position', () => {
  // The encoder copies the leading attributes that the last span of a name had too as one block, which
  // grows by the fields that follow it unchanged and shrinks where a span differs: every position is
  // made to differ, to go missing, to hold an array and to come back, across three names.
  const ended: RecordedSpan[] = [];
  const base: [string, string | number | boolean][] = [
    ['http.request.method', 'POST'],
    ['http.route', '/v1/chat/completions'],
    ['router.api', 'chat'],
    ['gen_ai.operation.name', 'chat'],
    ['http.response.status_code', 200],
    ['gen_ai.provider.name', 'openai'],
    ['router.stream', false],
    ['gen_ai.request.model', 'gpt-5.4-mini'],
    ['router.usage_stage', 'upstream'],
    ['gen_ai.usage.input_tokens', 12],
  ];
  for (let i = 0; i < 240; i++) {
    const s = new RecordedSpan(
      { traceId: 'ab'.repeat(16), spanId: (i + 1).toString(16).padStart(16, '0'), traceFlags: 1 },
      undefined,
      `name ${i % 3}`,
      SpanKind.SERVER,
      undefined,
      (span) => ended.push(span),
    );
    const at = Math.floor(i / 3) % base.length;
    for (const [j, [key, value]] of base.entries()) {
      if (j === at && i % 4 === 1) s.put(key, typeof value === 'number' ? value + i : `${value}-${i}`);
      else if (j === at && i % 4 === 2) continue;
      else if (j === at && i % 12 === 3) s.put(key, [String(value)]);
      else s.put(key, value);
    }
    if (i % 5 === 0) s.put('router.trace_note', `note-${i}`);
    // Values that never repeat (past the cache's 64 per key, written without lookups), some not ASCII,
    // one a number now and then; and single-string arrays, cached by their item.
    s.put(
      'router.request_id',
      i % 9 === 4
        ? `req-${i}-ünï`
        : i % 11 === 5
          ? i
          : i % 13 === 6
            ? `req-${i}-${'x'.repeat(130)}`
            : `req-${i}`,
    );
    s.put('gen_ai.response.finish_reasons', [i % 6 === 0 ? 'length' : 'stop']);
    s.end();
  }
  const ours = protobufEncoder(RESOURCE, SCOPE).encode(ended) as Uint8Array;
  const theirs = ProtobufTraceSerializer.serializeRequest(ended.map(readable))!;
  assert.deepEqual(decodeTraceRequest(ours), decodeTraceRequest(theirs));
});

/** JSON mapping, with defaults dropped and 64-bit numbers as strings, as a receiver reads either form. */
function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      if (k === 'intValue') {
        out[k] = String(x); // a oneof member: present even when 0
        continue;
      }
      if (x === undefined || x === 0 || x === '' || (Array.isArray(x) && x.length === 0)) continue;
      const c = canonical(x);
      if (c !== null && typeof c === 'object' && !Array.isArray(c) && Object.keys(c).length === 0) continue;
      out[k] = /UnixNano$/.test(k) ? String(x) : c;
    }
    return out;
  }
  return v;
}

test('JSON: the same request as OpenTelemetry serializes for the same spans', () => {
  const spans = sampleSpans();
  const ours = JSON.parse(jsonEncoder(RESOURCE, SCOPE).encode(spans) as string);
  const theirs = JSON.parse(
    Buffer.from(JsonTraceSerializer.serializeRequest(spans.map(readable))!).toString(),
  );
  assert.deepEqual(canonical(ours), canonical(theirs));
});
