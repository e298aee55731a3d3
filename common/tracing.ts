// OpenTelemetry traces of the gateway and its sidecar (docs/operations.md "Tracing"): spans made by the
// configured sampler, recorded as plain fields (common/trace-span.ts), batched and
// exported over OTLP/HTTP, protobuf or JSON (common/span-export.ts, common/otlp-encoding.ts); W3C trace
// context in and out. The SDK's span objects and OTLP serializer put sampling 1.0 far over its CPU budget
// (docs/benchmarks.md section 10); this path keeps the API, the samplers and the wire format.
// Contexts are passed explicitly, never through a global context manager: the request path keeps no
// async-local state, and with tracing off nothing here runs per request (`Tracing.enabled` is false).

import {
  type Attributes,
  INVALID_SPAN_CONTEXT,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  type TextMapSetter,
  type TimeInput,
  TraceFlags,
  trace,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { SamplingDecision, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace';
import type { Logger } from 'pino';
import type { TracesConfig } from './config-types.ts';
import { jsonEncoder, type OtlpEncoder, protobufEncoder } from './otlp-encoding.ts';
import { NO_SPANS, SpanExport, type SpanExportCounters } from './span-export.ts';
import { lastId, newSpanId, newTraceId, RecordedSpan } from './trace-span.ts';

export type { Attributes, Span };
export { SpanStatusCode };

export interface Tracing {
  /** False when traces are off: callers skip every span call. */
  readonly enabled: boolean;
  /** A SERVER span continuing the trace of the incoming `traceparent`/`tracestate`, if any. */
  startServer(
    name: string,
    headers: Readonly<Record<string, string | string[] | undefined>>,
    attributes?: Attributes,
    startTime?: TimeInput,
  ): Span;
  /** A span under `parent` (CLIENT unless `kind` says otherwise). */
  startChild(
    name: string,
    parent: Span,
    attributes?: Attributes,
    kind?: SpanKind,
    startTime?: TimeInput,
  ): Span;
  /** A CLIENT span under the span named by a `traceparent` carried beside a queued event. */
  startFromTraceparent(name: string, traceparent: string | undefined, attributes?: Attributes): Span;
  /** Sets `traceparent` (and `tracestate`) naming `span` on outgoing headers. */
  inject(span: Span, headers: Record<string, string>): void;
  /** The `traceparent` naming `span`, to carry beside a usage event (undefined for an invalid context). */
  traceparent(span: Span): string | undefined;
  /** Spans exported and dropped so far, and exports that failed (all 0 when traces are off). */
  readonly spans: Readonly<SpanExportCounters>;
  /** Exports what is buffered and stops. */
  shutdown(): Promise<void>;
}

const getter: TextMapGetter<Readonly<Record<string, string | string[] | undefined>>> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => carrier[key],
};
const setter: TextMapSetter<Record<string, string>> = {
  set: (carrier, key, value) => {
    carrier[key] = value;
  },
};

/** Tracing off: what a runtime built without a tracer uses. */
export const TRACING_OFF: Tracing = {
  enabled: false,
  startServer: () => trace.wrapSpanContext(INVALID_SPAN_CONTEXT),
  startChild: () => trace.wrapSpanContext(INVALID_SPAN_CONTEXT),
  startFromTraceparent: () => trace.wrapSpanContext(INVALID_SPAN_CONTEXT),
  inject: () => {},
  traceparent: () => undefined,
  spans: NO_SPANS,
  shutdown: async () => {},
};

/**
 * The sampling decision of the OTEL_TRACES_SAMPLER values, as the SDK's samplers decide it (a parent-based
 * sampler follows its parent's sampled flag, local or remote); the ratio is the SDK's own sampler.
 */
export function samplerOf(
  config: Pick<TracesConfig, 'sampler' | 'samplerArg'>,
): (parent: SpanContext | undefined, traceId: string) => boolean {
  const ratio = new TraceIdRatioBasedSampler(config.samplerArg);
  const byRatio = (traceId: string) =>
    ratio.shouldSample(ROOT_CONTEXT, traceId).decision === SamplingDecision.RECORD_AND_SAMPLED;
  const parentOr =
    (root: (traceId: string) => boolean) => (parent: SpanContext | undefined, traceId: string) =>
      parent === undefined ? root(traceId) : (parent.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED;
  switch (config.sampler) {
    case 'always_on':
      return () => true;
    case 'always_off':
      return () => false;
    case 'traceidratio':
      return (_parent, traceId) => byRatio(traceId);
    case 'parentbased_always_on':
      return parentOr(() => true);
    case 'parentbased_always_off':
      return parentOr(() => false);
    case 'parentbased_traceidratio':
      return parentOr(byRatio);
  }
}

export interface TracingOptions {
  /** Resource attributes of this process beyond the configured ones (e.g. the sidecar's role). */
  readonly attributes?: Attributes;
  /** Export failures are logged here (once per failure streak). */
  readonly logger?: Logger;
}

const SCOPE = { name: 'llm-router' };

export function openTracing(config: TracesConfig, opts: TracingOptions = {}): Tracing {
  if (config.url === undefined) return TRACING_OFF;
  const resource: Attributes = {
    ...config.resourceAttributes,
    'service.name': config.serviceName,
    'telemetry.sdk.language': 'nodejs',
    ...opts.attributes,
  };
  const encoder: OtlpEncoder =
    config.protocol === 'http/json'
      ? jsonEncoder(resource as Record<string, string>, SCOPE)
      : protobufEncoder(resource as Record<string, string>, SCOPE);
  const exporter = new SpanExport({
    url: config.url,
    headers: config.headers,
    encoder,
    delayMs: config.exportDelayMs,
    logger: opts.logger,
  });
  const onEnd = (span: RecordedSpan): void => exporter.add(span);
  const sampled = samplerOf(config);
  const propagator = new W3CTraceContextPropagator();

  /**
   * A span under `parent` (undefined: a new trace), recorded if the sampler keeps it; `local` is the
   * parent when it is a span of this process.
   */
  function start(
    name: string,
    kind: SpanKind,
    parent: SpanContext | undefined,
    attributes?: Attributes,
    startTime?: TimeInput,
    local?: RecordedSpan,
  ): Span {
    const traceId = parent?.traceId ?? newTraceId();
    const tracePool = lastId.pool;
    const traceAt = lastId.at;
    const spanId = newSpanId();
    const traceState = parent?.traceState;
    if (!sampled(parent, traceId))
      return trace.wrapSpanContext({ traceId, spanId, traceFlags: 0, traceState });
    const context: SpanContext = { traceId, spanId, traceFlags: 1, traceState, isRemote: false };
    const span = new RecordedSpan(context, parent, name, kind, attributes, onEnd, startTime);
    const ids = lastId.pool;
    span.idPool = ids;
    span.spanAt = lastId.at;
    if (parent === undefined) {
      if (tracePool === ids) span.traceAt = traceAt;
    } else if (local?.idPool === ids) {
      span.traceAt = local.traceAt;
      span.parentAt = local.spanAt;
    }
    return span;
  }
  function remoteParent(
    carrier: Readonly<Record<string, string | string[] | undefined>>,
  ): SpanContext | undefined {
    if (carrier.traceparent === undefined) return undefined;
    const c = trace.getSpanContext(propagator.extract(ROOT_CONTEXT, carrier, getter));
    return c !== undefined && trace.isSpanContextValid(c) ? c : undefined;
  }
  const under = (parent: Span) => trace.setSpan(ROOT_CONTEXT, parent);

  return {
    enabled: true,
    startServer(name, headers, attributes, startTime) {
      return start(name, SpanKind.SERVER, remoteParent(headers), attributes, startTime);
    },
    startChild(name, parent, attributes, kind = SpanKind.CLIENT, startTime = undefined) {
      const c = parent.spanContext();
      if (parent instanceof RecordedSpan) return start(name, kind, c, attributes, startTime, parent);
      return start(name, kind, trace.isSpanContextValid(c) ? c : undefined, attributes, startTime);
    },
    startFromTraceparent(name, traceparent, attributes) {
      const parent = traceparent === undefined ? undefined : remoteParent({ traceparent });
      return start(name, SpanKind.CLIENT, parent, attributes);
    },
    inject(span, headers) {
      // Most contexts carry no tracestate: their header is written directly.
      if (span.spanContext().traceState !== undefined) propagator.inject(under(span), headers, setter);
      else {
        const value = traceparentOf(span);
        if (value !== undefined) headers.traceparent = value;
      }
    },
    traceparent: traceparentOf,
    spans: exporter.counters,
    shutdown: () => exporter.shutdown(),
  };
}

function traceparentOf(span: Span): string | undefined {
  const c = span.spanContext();
  if (!(span instanceof RecordedSpan) && !trace.isSpanContextValid(c)) return undefined;
  return `00-${c.traceId}-${c.spanId}-0${(c.traceFlags & 1).toString()}`;
}

/** Marks `span` failed, with the gateway's error code (or the upstream's status) as `error.type`. */
export function failSpan(span: Span, errorType: string): void {
  span.setAttribute('error.type', errorType);
  span.setStatus({ code: SpanStatusCode.ERROR });
}
