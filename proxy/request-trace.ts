// The spans of one proxied request (docs/operations.md "Tracing"): a SERVER span continuing the client's
// trace, one CLIENT span per upstream attempt (its traceparent goes upstream), the reply's facts read by
// the client family's telemetry reader, and the GenAI attributes set once the request completes. Only
// created when tracing is on; nothing of a prompt, a completion or a key is ever set.

import type { IncomingMessage } from 'node:http';
import { SpanKind } from '@opentelemetry/api';
import { epochMs, newSpanId, RecordedSpan } from '../common/trace-span.ts';
import type { Span, Tracing } from '../common/tracing.ts';
import { failSpan } from '../common/tracing.ts';
import type { JsonValue, RequestContext, UpstreamRequest } from '../common/types.ts';
import { operationName, telemetryOf } from '../hooks/families/index.ts';
import type { ReplyFacts } from '../hooks/families/types.ts';

export class RequestTrace {
  // TypeScript-private, not #private: a # field's definition costs each request a keyed define.
  private readonly tracing: Tracing;
  private readonly server: Span;
  /** The attempt's span while it is open; a RecordedSpan when the sampler kept it. */
  private current: Span | undefined = undefined;
  private attempts = 0;
  readonly facts: ReplyFacts = {};
  /** The sampler kept this trace: only then are replies read for their facts (a stream's every event). */
  readonly recording: boolean;

  constructor(tracing: Tracing, ctx: RequestContext, req: IncomingMessage, route: string) {
    this.tracing = tracing;
    // Attributes are put one by one, each key once, not as an object: no object per span to build and
    // walk, and no check for a key set before.
    const server = tracing.startServer(spanName(ctx.method, route), req.headers, undefined, ctx.startedAt);
    this.server = server;
    this.recording = server instanceof RecordedSpan;
    if (!(server instanceof RecordedSpan)) return;
    // Attributes that repeat from request to request come first, those of this request last: the
    // encoder copies the leading ones that the last span of the name had too as one block.
    server.put('http.request.method', ctx.method);
    server.put('http.route', route);
    server.put('router.api', ctx.api);
    server.put('gen_ai.operation.name', operationName(ctx.api));
  }

  /** The server span's trace id (log lines carry it). */
  get traceId(): string {
    return this.server.spanContext().traceId;
  }

  get spanId(): string {
    return this.server.spanContext().spanId;
  }

  /** The traceparent of the request's server span, carried beside its usage event. */
  traceparent(): string | undefined {
    return this.tracing.traceparent(this.server);
  }

  /**
   * Starts the CLIENT span of an upstream attempt (at `at`, a performance.now() reading) and names it as
   * the parent in the upstream request.
   */
  attempt(ctx: RequestContext, provider: string, upstream: UpstreamRequest, at: number): void {
    this.attempts++;
    const context = this.server.spanContext();
    if (!this.recording && context.traceState === undefined) {
      // Every sampler decides a child of an unsampled span the same way (by its flag or its trace id):
      // nothing is recorded, and the upstream gets the trace under a span id of its own, unsampled.
      upstream.headers.traceparent = `00-${context.traceId}-${newSpanId()}-00`;
      return;
    }
    const operation = operationName(ctx.api);
    const model = ctx.upstreamModel ?? ctx.model;
    const span = this.tracing.startChild(
      model === undefined ? operation : spanName(operation, model),
      this.server,
      undefined,
      SpanKind.CLIENT,
      at,
    );
    if (span instanceof RecordedSpan) {
      span.put('gen_ai.operation.name', operation);
      span.put('gen_ai.provider.name', provider);
      span.put('http.request.method', upstream.method);
      span.put('server.address', hostOf(upstream.origin));
      span.put('router.attempt', this.attempts);
      if (model !== undefined) span.put('gen_ai.request.model', model);
    }
    this.current = span;
    this.tracing.inject(span, upstream.headers);
  }

  /** The attempt ended without a reply the client gets (refused, unreachable): the next may follow. */
  attemptFailed(errorType: string, status?: number): void {
    const span = this.current;
    if (span === undefined) return;
    if (status !== undefined) span.setAttribute('http.response.status_code', status);
    failSpan(span, errorType);
    span.end();
    this.current = undefined;
  }

  /**
   * Whether a stream event's text can add a fact: any event until the reply's id and model are known,
   * then only the events that can end it. A long stream is not parsed event by event for its spans.
   */
  wantsEvent(format: string, data: string): boolean {
    if (!this.recording) return false;
    if (this.facts.id === undefined || this.facts.model === undefined) return true;
    return telemetryOf(format)?.finishMarker.test(data) === true;
  }

  /** A reply body or stream event in the client's shape. */
  reply(format: string, value: JsonValue): void {
    if (this.recording) telemetryOf(format)?.readReply(value, this.facts);
  }

  /**
   * Sets what the request's completion knows and ends the spans. The request parameters and the reply's
   * facts go on the attempt that served (the inference span of the conventions); the server span gets
   * the outcome: status, usage, subject, error.
   */
  finish(ctx: RequestContext, at: number): void {
    if (!this.recording) return;
    const errorType =
      ctx.error?.code ??
      (ctx.status >= 400 ? String(ctx.status) : ctx.clientAborted ? 'client_aborted' : undefined);
    const end = epochMs(at);
    const attempt = this.current;
    if (attempt instanceof RecordedSpan) {
      // Its provider and request model were put when it started.
      attempt.put('http.response.status_code', ctx.status);
      if (ctx.body !== undefined) {
        // Two body fields may name one attribute: setAttribute keeps the last.
        telemetryOf(ctx.clientFormat)?.requestAttributes(ctx.body, (key, value) =>
          attempt.setAttribute(key, value),
        );
      }
      const facts = this.facts;
      if (facts.model !== undefined) attempt.put('gen_ai.response.model', facts.model);
      if (facts.finishReasons !== undefined)
        attempt.put('gen_ai.response.finish_reasons', facts.finishReasons);
      putUsage(attempt, ctx);
      if (facts.id !== undefined) attempt.put('gen_ai.response.id', facts.id);
      if (errorType !== undefined) failSpan(attempt, errorType);
    }
    attempt?.end(end);
    const server = this.server as RecordedSpan;
    server.put('http.response.status_code', ctx.status);
    if (ctx.provider !== undefined) server.put('gen_ai.provider.name', ctx.provider);
    server.put('router.stream', ctx.stream);
    if (ctx.model !== undefined) server.put('gen_ai.request.model', ctx.model);
    if (ctx.usageStage !== undefined) server.put('router.usage_stage', ctx.usageStage);
    if (ctx.principal?.subjectId !== undefined) server.put('router.subject_id', ctx.principal.subjectId);
    server.put('url.path', ctx.path);
    putUsage(server, ctx);
    server.put('router.request_id', ctx.id);
    if (ctx.firstTokenMs !== undefined)
      server.put('router.time_to_first_token_ms', Math.round(ctx.firstTokenMs * 1000) / 1000);
    if (ctx.clientAborted) server.put('router.client_aborted', true);
    if (errorType !== undefined) failSpan(server, errorType);
    server.end(end);
  }
}

function putUsage(span: RecordedSpan, ctx: RequestContext): void {
  if (ctx.usage !== undefined) {
    span.put('gen_ai.usage.input_tokens', ctx.usage.inputTokens);
    span.put('gen_ai.usage.output_tokens', ctx.usage.outputTokens);
  }
}

/**
 * `<first> <second>` as one string per pair: span names repeat (a method and route, an operation and
 * model), and the same string each time is hashed once by the exporter's caches, not once per span.
 */
const NAMES = new Map<string, Map<string, string>>();

function spanName(first: string, second: string): string {
  let bySecond = NAMES.get(first);
  if (bySecond === undefined) {
    bySecond = new Map();
    if (NAMES.size < 64) NAMES.set(first, bySecond);
  }
  let name = bySecond.get(second);
  if (name === undefined) {
    name = `${first} ${second}`;
    if (bySecond.size < 1024) bySecond.set(second, name);
  }
  return name;
}

/** Origins are few (one per provider): their host names are parsed once. */
const HOSTS = new Map<string, string>();

function hostOf(origin: string): string {
  let host = HOSTS.get(origin);
  if (host === undefined) {
    try {
      host = new URL(origin).hostname;
    } catch {
      host = origin;
    }
    if (HOSTS.size < 1024) HOSTS.set(origin, host);
  }
  return host;
}
