// Spans from openTracing to a real OTLP/HTTP receiver: parents, sampling decisions and what propagates
// when a span is not sampled; and the export path: batching, retries, the queue bound, shutdown.

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { SpanKind } from '@opentelemetry/api';
import type { TracesConfig } from '../../common/config-types.ts';
import { protobufEncoder } from '../../common/otlp-encoding.ts';
import { SpanExport } from '../../common/span-export.ts';
import { RecordedSpan } from '../../common/trace-span.ts';
import { openTracing } from '../../common/tracing.ts';
import { decodeTraceRequest } from '../support/otlp-protobuf.ts';
import { type OtlpReceiver, startOtlpReceiver } from '../support/otlp-receiver.ts';

let receiver: OtlpReceiver;
before(async () => {
  receiver = await startOtlpReceiver();
});
after(() => receiver.close());

function config(over: Partial<TracesConfig> = {}): TracesConfig {
  return {
    url: `${receiver.url}/v1/traces`,
    protocol: 'http/protobuf',
    headers: {},
    sampler: 'parentbased_always_on',
    samplerArg: 1,
    exportDelayMs: 60_000,
    serviceName: 'tracing-test',
    resourceAttributes: {},
    ...over,
  };
}

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const PARENT = 'b7ad6b7169203331';

test('a server span continues the incoming trace; a child is under it; shutdown exports both', async () => {
  const tracing = openTracing(config());
  const server = tracing.startServer('POST /v1/chat/completions', {
    traceparent: `00-${TRACE}-${PARENT}-01`,
    tracestate: 'congo=t61rcWkgMzE',
  });
  const child = tracing.startChild('chat gpt-5.4-mini', server, { 'gen_ai.request.model': 'gpt-5.4-mini' });
  const headers: Record<string, string> = {};
  tracing.inject(child, headers);
  assert.equal(headers.traceparent, `00-${TRACE}-${child.spanContext().spanId}-01`);
  assert.equal(headers.tracestate, 'congo=t61rcWkgMzE');
  child.end();
  server.end();
  await tracing.shutdown();
  const got = receiver.spans.filter((s) => s.traceId === TRACE);
  assert.equal(got.length, 2);
  const s = got.find((x) => x.kind === 2)!;
  const c = got.find((x) => x.kind === 3)!;
  assert.equal(s.parentSpanId, PARENT);
  assert.equal(c.parentSpanId, s.spanId);
  assert.equal(c.attributes['gen_ai.request.model'], 'gpt-5.4-mini');
  assert.equal(s.resource['service.name'], 'tracing-test');
});

test('ids made here are exported as the same bytes as their hex, across refills of the id pool', async () => {
  const tracing = openTracing(config({ serviceName: 'ids-test' }));
  const made: { trace: string; server: string; child: string }[] = [];
  // 200 requests' ids span several pools, so some server and child spans come from different ones.
  for (let i = 0; i < 200; i++) {
    const server = tracing.startServer('GET /ids', {});
    const child = tracing.startChild('chat m', server);
    made.push({
      trace: server.spanContext().traceId,
      server: server.spanContext().spanId,
      child: child.spanContext().spanId,
    });
    child.end();
    server.end();
  }
  await tracing.shutdown();
  const byId = new Map(
    receiver.spans.filter((x) => x.resource['service.name'] === 'ids-test').map((x) => [x.spanId, x]),
  );
  assert.equal(byId.size, 400);
  for (const m of made) {
    const s = byId.get(m.server);
    const c = byId.get(m.child);
    assert.equal(s?.traceId, m.trace);
    assert.equal(s?.parentSpanId, '', 'a root span');
    assert.equal(c?.traceId, m.trace);
    assert.equal(c?.parentSpanId, m.server);
  }
});

test('sampling: an unsampled parent or a ratio of 0 records nothing, yet the trace still propagates', async () => {
  const before = receiver.spans.length;
  const parentBased = openTracing(config({ sampler: 'parentbased_traceidratio', samplerArg: 0 }));
  const unsampled = parentBased.startServer('GET /x', { traceparent: `00-${TRACE}-${PARENT}-00` });
  assert.equal(unsampled.isRecording(), false);
  assert.match(parentBased.traceparent(unsampled) ?? '', new RegExp(`^00-${TRACE}-[0-9a-f]{16}-00$`));
  const root = parentBased.startServer('GET /y', {});
  assert.equal(root.isRecording(), false, 'a new trace at ratio 0 is not sampled');
  const sampledParent = parentBased.startServer('GET /z', { traceparent: `00-${TRACE}-${PARENT}-01` });
  assert.equal(sampledParent.isRecording(), true, 'a sampled parent is followed');
  for (const s of [unsampled, root, sampledParent]) s.end();
  await parentBased.shutdown();
  const off = openTracing(config({ sampler: 'always_off' }));
  const none = off.startServer('GET /w', {});
  none.end();
  await off.shutdown();
  const got = receiver.spans.slice(before);
  assert.deepEqual(
    got.map((s) => s.name),
    ['GET /z'],
  );
});

test('no endpoint: tracing is off and makes no spans', () => {
  const off = openTracing(config({ url: undefined }));
  assert.equal(off.enabled, false);
  assert.equal(off.startServer('GET /', {}).isRecording(), false);
});

/** A collector that answers each export with the next status of `statuses` (then 200). */
async function scriptedCollector(statuses: number[]) {
  const bodies: Buffer[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      bodies.push(Buffer.concat(chunks));
      res.writeHead(statuses.shift() ?? 200);
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`,
    bodies,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

function spans(n: number, into: SpanExport): void {
  for (let i = 0; i < n; i++) {
    const s = new RecordedSpan(
      { traceId: TRACE, spanId: (i + 1).toString(16).padStart(16, '0'), traceFlags: 1 },
      undefined,
      `s${i}`,
      SpanKind.INTERNAL,
      undefined,
      (span) => into.add(span),
    );
    s.end();
  }
}

function spanCount(body: Buffer): number {
  const req = decodeTraceRequest(body) as { resourceSpans: { scopeSpans: { spans: unknown[] }[] }[] };
  return req.resourceSpans[0]!.scopeSpans[0]!.spans.length;
}

test('export: batches of at most 512, retried on 503, the queue bounded at 2048', async () => {
  const collector = await scriptedCollector([503, 503]);
  const exporter = new SpanExport({
    url: collector.url,
    headers: { authorization: 'Bearer collector-key' },
    encoder: protobufEncoder({ 'service.name': 't' }, { name: 't' }),
    delayMs: 60_000,
    retryDelayMs: 1,
  });
  try {
    spans(2100, exporter);
    assert.equal(exporter.counters.dropped, 52, 'beyond 2048 waiting spans, the rest are dropped');
    await exporter.shutdown();
    assert.equal(exporter.counters.exported, 2048);
    // Two refusals, then the same first batch again, then the other three.
    assert.deepEqual(collector.bodies.map(spanCount), [512, 512, 512, 512, 512, 512]);
    assert.deepEqual(collector.bodies[0], collector.bodies[2]);
  } finally {
    await collector.close();
  }
});

test('export: a refused batch (400) is dropped and counted, not retried; later batches still go', async () => {
  const collector = await scriptedCollector([400]);
  const exporter = new SpanExport({
    url: collector.url,
    headers: {},
    encoder: protobufEncoder({}, { name: 't' }),
    delayMs: 60_000,
    retryDelayMs: 1,
  });
  try {
    spans(10, exporter);
    await exporter.shutdown();
    assert.equal(collector.bodies.length, 1);
    assert.equal(exporter.counters.failedExports, 1);
    assert.equal(exporter.counters.dropped, 10);
  } finally {
    await collector.close();
  }
});

test('put: each key once as given; a value that is not there sets nothing, as with setAttribute', () => {
  const ended: RecordedSpan[] = [];
  const span = new RecordedSpan(
    { traceId: 'ef'.repeat(16), spanId: '0123456789abcdef', traceFlags: 1 },
    undefined,
    'GET /put',
    SpanKind.SERVER,
    undefined,
    (s) => ended.push(s),
  );
  span.put('a', 1);
  span.put('missing', undefined as unknown as number);
  span.put('b', ['x']);
  span.end();
  assert.deepEqual(ended[0]!.attributes, { a: 1, b: ['x'] });
});
