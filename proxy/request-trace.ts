// The spans of one proxied request (docs/operations.md "Tracing"): a SERVER span continuing the client's
// trace, one CLIENT span per upstream attempt (its traceparent goes upstream), the reply's facts read by
// the client family's telemetry reader, and the GenAI attributes set once the request completes. Only
// created when tracing is on; nothing of a prompt, a completion or a key is ever set.

import type { IncomingMessage } from 'node:http';
import { performance } from 'node:perf_hooks';
import { newSpanId } from '../common/trace-span.ts';
import type { Span, Tracing } from '../common/tracing.ts';
import { failSpan } from '../common/tracing.ts';
import type { JsonValue, RequestContext, UpstreamRequest } from '../common/types.ts';
import { operationName, telemetryOf } from '../hooks/families/index.ts';
import type { ReplyFacts } from '../hooks/families/types.ts';

export class RequestTrace {
  readonly #tracing: Tracing;
  readonly #server: Span;
  #attempt: Span | undefined = undefined;
  #attempts = 0;
  readonly facts: ReplyFacts = {};
  /** The sampler kept this trace: only then are replies read for their facts (a stream's every event). */
  readonly recording: boolean;

  constructor(tracing: Tracing, ctx: RequestContext, req: IncomingMessage, route: string) {
    this.#tracing = tracing;
    // Attributes are set one by one, not as an object: no object per span to build and walk.
    const server = tracing.startServer(spanName(ctx.method, route), req.headers);
    this.#server = server;
    this.recording = server.isRecording();
    if (!this.recording) return;
    server.setAttribute('http.request.method', ctx.method);
    server.setAttribute('http.route', route);
    server.setAttribute('url.path', ctx.path);
    server.setAttribute('router.api', ctx.api);
    server.setAttribute('router.request_id', ctx.id);
    server.setAttribute('gen_ai.operation.name', operationName(ctx.api));
  }

  /** The server span's trace id (log lines carry it). */
  get traceId(): string {
    return this.#server.spanContext().traceId;
  }

  get spanId(): string {
    return this.#server.spanContext().spanId;
  }

  /** The traceparent of the request's server span, carried beside its usage event. */
  traceparent(): string | undefined {
    return this.#tracing.traceparent(this.#server);
  }

  /** Starts the CLIENT span of an upstream attempt and names it as the parent in the upstream request. */
  attempt(ctx: RequestContext, provider: string, upstream: UpstreamRequest): void {
    this.#attempts++;
    const context = this.#server.spanContext();
    if (!this.recording && context.traceState === undefined) {
      // Every sampler decides a child of an unsampled span the same way (by its flag or its trace id):
      // nothing is recorded, and the upstream gets the trace under a span id of its own, unsampled.
      upstream.headers.traceparent = `00-${context.traceId}-${newSpanId()}-00`;
      return;
    }
    const operation = operationName(ctx.api);
    const model = ctx.upstreamModel ?? ctx.model;
    const span = this.#tracing.startChild(
      model === undefined ? operation : spanName(operation, model),
      this.#server,
    );
    span.setAttribute('gen_ai.operation.name', operation);
    span.setAttribute('gen_ai.provider.name', provider);
    span.setAttribute('http.request.method', upstream.method);
    span.setAttribute('server.address', hostOf(upstream.origin));
    span.setAttribute('router.attempt', this.#attempts);
    if (model !== undefined) span.setAttribute('gen_ai.request.model', model);
    this.#attempt = span;
    this.#tracing.inject(span, upstream.headers);
  }

  /** The attempt ended without a reply the client gets (refused, unreachable): the next may follow. */
  attemptFailed(errorType: string, status?: number): void {
    const span = this.#attempt;
    if (span === undefined) return;
    if (status !== undefined) span.setAttribute('http.response.status_code', status);
    failSpan(span, errorType);
    span.end();
    this.#attempt = undefined;
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
  finish(ctx: RequestContext): void {
    if (!this.recording) return;
    const errorType =
      ctx.error?.code ??
      (ctx.status >= 400 ? String(ctx.status) : ctx.clientAborted ? 'client_aborted' : undefined);
    const end = performance.timeOrigin + performance.now();
    const attempt = this.#attempt;
    if (attempt !== undefined) {
      setOutcome(attempt, ctx);
      if (ctx.body !== undefined) {
        const params = telemetryOf(ctx.clientFormat)?.requestAttributes(ctx.body);
        if (params !== undefined) attempt.setAttributes(params);
      }
      const facts = this.facts;
      if (facts.id !== undefined) attempt.setAttribute('gen_ai.response.id', facts.id);
      if (facts.model !== undefined) attempt.setAttribute('gen_ai.response.model', facts.model);
      if (facts.finishReasons !== undefined)
        attempt.setAttribute('gen_ai.response.finish_reasons', facts.finishReasons);
      if (errorType !== undefined) failSpan(attempt, errorType);
      attempt.end(end);
    }
    const server = this.#server;
    setOutcome(server, ctx);
    server.setAttribute('router.stream', ctx.stream);
    if (ctx.model !== undefined) server.setAttribute('gen_ai.request.model', ctx.model);
    if (ctx.usageStage !== undefined) server.setAttribute('router.usage_stage', ctx.usageStage);
    if (ctx.principal?.subjectId !== undefined)
      server.setAttribute('router.subject_id', ctx.principal.subjectId);
    if (ctx.firstTokenMs !== undefined)
      server.setAttribute('router.time_to_first_token_ms', Math.round(ctx.firstTokenMs * 1000) / 1000);
    if (ctx.clientAborted) server.setAttribute('router.client_aborted', true);
    if (errorType !== undefined) failSpan(server, errorType);
    server.end(end);
  }
}

/** What both spans say of the outcome: status, provider, usage. */
function setOutcome(span: Span, ctx: RequestContext): void {
  span.setAttribute('http.response.status_code', ctx.status);
  if (ctx.provider !== undefined) span.setAttribute('gen_ai.provider.name', ctx.provider);
  if (ctx.usage !== undefined) {
    span.setAttribute('gen_ai.usage.input_tokens', ctx.usage.inputTokens);
    span.setAttribute('gen_ai.usage.output_tokens', ctx.usage.outputTokens);
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
