// OpenTelemetry traces of the gateway and its sidecar (docs/operations.md "Tracing"): a tracer provider
// with a batch processor and an OTLP/HTTP exporter (protobuf or JSON), W3C trace context in and out.
// Contexts are passed explicitly, never through a global context manager: the request path keeps no
// async-local state, and with tracing off nothing here runs per request (`Tracing.enabled` is false).

import {
  type Attributes,
  type Context,
  INVALID_SPAN_CONTEXT,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  type TextMapSetter,
  trace,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  type SpanExporter,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import type { TracesConfig } from './config-types.ts';

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
  ): Span;
  /** A span under `parent` (CLIENT unless `kind` says otherwise). */
  startChild(name: string, parent: Span, attributes?: Attributes, kind?: SpanKind): Span;
  /** A CLIENT span under the span named by a `traceparent` carried beside a queued event. */
  startFromTraceparent(name: string, traceparent: string | undefined, attributes?: Attributes): Span;
  /** Sets `traceparent` (and `tracestate`) naming `span` on outgoing headers. */
  inject(span: Span, headers: Record<string, string>): void;
  /** The `traceparent` naming `span`, to carry beside a usage event (undefined for an invalid context). */
  traceparent(span: Span): string | undefined;
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
  shutdown: async () => {},
};

export function samplerOf(config: Pick<TracesConfig, 'sampler' | 'samplerArg'>): Sampler {
  const ratio = () => new TraceIdRatioBasedSampler(config.samplerArg);
  switch (config.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio();
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio() });
  }
}

export interface TracingOptions {
  /** Resource attributes of this process beyond the configured ones (e.g. the sidecar's role). */
  readonly attributes?: Attributes;
  /** An exporter instead of OTLP/HTTP (tests). */
  readonly exporter?: SpanExporter;
}

export function openTracing(config: TracesConfig, opts: TracingOptions = {}): Tracing {
  if (config.url === undefined && opts.exporter === undefined) return TRACING_OFF;
  const exporterConfig = { url: config.url, headers: { ...config.headers } };
  const exporter =
    opts.exporter ??
    (config.protocol === 'http/json'
      ? new JsonExporter(exporterConfig)
      : new ProtobufExporter(exporterConfig));
  const provider = new TracerProvider({
    sampler: samplerOf(config),
    resource: resourceFromAttributes({
      ...config.resourceAttributes,
      'service.name': config.serviceName,
      ...opts.attributes,
    }),
    spanProcessors: [new BatchSpanProcessor({ exporter, scheduledDelayMillis: config.exportDelayMs })],
  });
  const tracer = provider.getTracer('llm-router');
  const propagator = new W3CTraceContextPropagator();
  const under = (parent: Span): Context => trace.setSpan(ROOT_CONTEXT, parent);
  return {
    enabled: true,
    startServer(name, headers, attributes) {
      const parent =
        headers.traceparent === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, headers, getter);
      return tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
    },
    startChild(name, parent, attributes, kind = SpanKind.CLIENT) {
      return tracer.startSpan(name, { kind, attributes }, under(parent));
    },
    startFromTraceparent(name, traceparent, attributes) {
      const parent =
        traceparent === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, { traceparent }, getter);
      return tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, parent);
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
    shutdown: () => provider.shutdown(),
  };
}

function traceparentOf(span: Span): string | undefined {
  const c = span.spanContext();
  if (!trace.isSpanContextValid(c)) return undefined;
  return `00-${c.traceId}-${c.spanId}-0${(c.traceFlags & 1).toString()}`;
}

/** Marks `span` failed, with the gateway's error code (or the upstream's status) as `error.type`. */
export function failSpan(span: Span, errorType: string): void {
  span.setAttribute('error.type', errorType);
  span.setStatus({ code: SpanStatusCode.ERROR });
}
