// Prometheus metrics of the gateway (prom-client), one registry per process. Label sets are small and
// bounded (provider, api, HTTP status code, stream, configured model ids) so cardinality stays flat
// whatever clients send. The GenAI semantic-convention histograms are proxy/genai-metrics.ts.

import client from 'prom-client';
import { setBounded } from '../common/bounded-map.ts';
import type { GatewayMetrics, RelayCounter } from '../common/gateway-metrics.ts';
import { NO_SPANS, type SpanExportCounters } from '../common/span-export.ts';
import { registerTraceMetrics } from '../common/trace-metrics.ts';
import type { RequestContext } from '../common/types.ts';
import { FastCounter, FastHistogram } from './fast-metrics.ts';
import {
  createGenAiMetrics,
  errorTypeOf,
  type GenAiSeries,
  modelLabel,
  observeGenAi,
} from './genai-metrics.ts';

/** Label sets kept ready; statuses and providers are few, this only bounds pathological cases. */
const MAX_CACHED_SERIES = 2048;

const NO_MODELS: ReadonlySet<string> = new Set();

/**
 * The results of router_billing_events_total: an event on record (queued) or lost (queue_failed); no
 * event because the reply failed (skip_status, only_billable_success), names no subject
 * (skip_no_subject), billing is off (skip_disabled) or the stream was interrupted under
 * billing.interrupted_stream: void (void_interrupted); a token count (not_billable, not a model call).
 */
export const BILLING_RESULTS = [
  'queued',
  'queue_failed',
  'skip_status',
  'skip_no_subject',
  'skip_disabled',
  'void_interrupted',
  'not_billable',
] as const;

/**
 * The reasons of router_unreported_requests_total: a successful reply whose usage could not be metered
 * (no_usage), or a client gone before the provider answered (client_aborted: no reply, no usage).
 */
export const UNREPORTED_REASONS = ['no_usage', 'client_aborted'] as const;

export function createGatewayMetrics(): GatewayMetrics {
  const registry = new client.Registry();
  // Unprefixed (process_*, nodejs_*): the names stock Node.js dashboards and alerts expect.
  client.collectDefaultMetrics({ register: registry });
  const { observeRequest, observeSessionResponse } = requestObserver(registry);
  const activeStreams = gauge(registry, 'router_active_streams', 'Streaming replies in flight');
  const billingEnqueued = new FastCounter(
    registry,
    'router_billing_events_total',
    `Served requests by usage-event result: ${BILLING_RESULTS.join(', ')}`,
    ['result'],
  );
  // Every series exists from the start (at 0), so the served-billed gap (docs/billing.md) is a
  // difference of series a scrape always finds.
  for (const result of BILLING_RESULTS) billingEnqueued.series(result);
  let eventsInFlight = 0;
  new client.Gauge({
    name: 'router_billing_events_in_flight',
    help: 'Usage events handed to the queue whose write has neither succeeded nor failed yet',
    registers: [registry],
    collect() {
      this.set(eventsInFlight);
    },
  });
  const balanceChecks = counter(
    registry,
    'router_balance_checks_total',
    'Balance pre-checks by result',
    'result',
  );
  const storeErrors = counter(
    registry,
    'router_store_errors_total',
    'Shared-store (Redis) operations of the gateway that failed, each once, by operation (view, rateLimits, the response store, ...)',
    'operation',
  );
  const unpricedModels = new FastCounter(
    registry,
    'router_unpriced_requests_total',
    'Metered requests whose model has no price',
    ['provider'],
  );
  const unpricedServedModels = gauge(
    registry,
    'router_unpriced_models',
    'Models the registry serves that have no price (billing on)',
  );
  const unmeteredRequests = new FastCounter(
    registry,
    'router_unreported_requests_total',
    `Served requests that have no usage event, by reason: ${UNREPORTED_REASONS.join(', ')}`,
    ['reason'],
  );
  for (const reason of UNREPORTED_REASONS) unmeteredRequests.series(reason);
  let openConnections = () => 0;
  new client.Gauge({
    name: 'router_client_connections',
    help: 'Client connections open',
    registers: [registry],
    collect() {
      this.set(openConnections());
    },
  });
  let traceSpans: Readonly<SpanExportCounters> = NO_SPANS;
  registerTraceMetrics(registry, () => traceSpans);
  const connectionsMax = gauge(
    registry,
    'router_client_connections_max',
    'limits.max_connections in force (lowered to fit the file-descriptor limit)',
  );
  const connectionsShed = counter(
    registry,
    'router_connections_shed_total',
    'Client connections closed at the connection cap: idle (oldest idle closed) or refused',
    'reason',
  );
  const clientTimeouts = counter(
    registry,
    'router_client_timeouts_total',
    'Client connections closed by a timeout: header, body or keepalive',
    'kind',
  );
  const clientRejected = counter(
    registry,
    'router_client_rejected_total',
    'Requests refused before parsing: header_too_large, url_too_long, malformed',
    'reason',
  );
  const subjectStateNotices = counter(
    registry,
    'router_subject_state_notices_total',
    'Subject state changes applied before the sidecar answered a webhook: told by it (notice) or by the primary of several workers (relay)',
    'via',
  );
  const realtimeSessions = gauge(registry, 'router_realtime_sessions', 'Realtime (WebSocket) sessions open');
  const realtimeFrames = realtimeFrameCounters(registry);
  const limitedRequests = counter(
    registry,
    'router_limited_requests_total',
    'Requests refused by a rate limit (requests, tokens, concurrency) or a key model list (model), or admitted unchecked while the store was unreachable (store_unavailable)',
    'limit',
  );
  // Fields, not a map by name: every admitted request writes one to three of them.
  const lowestRemaining = { requests: 1, tokens: 1, concurrency: 1 };
  new client.Gauge({
    name: 'router_rate_limit_remaining_ratio',
    help: 'Lowest remaining share of a rate limit (0-1) after an admission since the last scrape, by dimension; 1 when none was limited',
    labelNames: ['limit'],
    registers: [registry],
    collect() {
      for (const d of ['requests', 'tokens', 'concurrency'] as const) {
        this.set({ limit: d }, lowestRemaining[d]);
        lowestRemaining[d] = 1;
      }
    },
  });
  return {
    limitedRequests,
    observeLimitRemaining(dimension, ratio) {
      if (ratio < lowestRemaining[dimension]) lowestRemaining[dimension] = ratio;
    },
    registry,
    activeStreams,
    billingEnqueued,
    balanceChecks,
    storeErrors,
    unpricedModels,
    unpricedServedModels,
    unmeteredRequests,
    billingInFlight: {
      add(n) {
        eventsInFlight += n;
      },
    },
    connectionsShed,
    clientTimeouts,
    clientRejected,
    subjectStateNotices,
    realtimeSessions,
    realtimeFrames,
    trackConnections(open, max) {
      openConnections = open;
      connectionsMax.set(max);
    },
    trackTraces(spans) {
      traceSpans = spans;
    },
    observeRequest,
    observeSessionResponse,
  };
}

/**
 * The per-request series, in the fast implementations (proxy/fast-metrics.ts; the other metrics are
 * rare), and the function that counts a request in them.
 */
function requestObserver(
  registry: client.Registry,
): Pick<GatewayMetrics, 'observeRequest' | 'observeSessionResponse'> {
  const requests = new FastCounter(
    registry,
    'router_requests_total',
    'Proxied requests by provider, api, status and stream flag',
    ['provider', 'api', 'status', 'stream'],
  );
  const latency = new FastHistogram(
    registry,
    'router_request_duration_seconds',
    'Time from request arrival to the end of the reply',
    ['api', 'stream'],
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
  );
  const ttfb = new FastHistogram(
    registry,
    'router_upstream_ttfb_seconds',
    'Time from sending the upstream request to its response head',
    ['provider'],
    [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  );
  const tokens = new FastCounter(
    registry,
    'router_tokens_total',
    'Tokens metered, by provider, direction (input/output) and stage (upstream/estimated)',
    ['provider', 'direction', 'stage'],
  );
  const genai = createGenAiMetrics(registry);
  const series = new Map<string, Series>();
  const seriesOf = (ctx: RequestContext, provider: string): Series => {
    const stream = ctx.stream ? 'true' : 'false';
    const key = `${provider}\u0000${ctx.api}\u0000${ctx.status}\u0000${stream}`;
    let s = series.get(key);
    if (s === undefined) {
      s = {
        requests: requests.series(provider, ctx.api, String(ctx.status), stream),
        latency: latency.series(ctx.api, stream),
        ttfb: ttfb.series(provider),
        inputUpstream: tokens.series(provider, 'input', 'upstream'),
        outputUpstream: tokens.series(provider, 'output', 'upstream'),
        inputEstimated: tokens.series(provider, 'input', 'estimated'),
        outputEstimated: tokens.series(provider, 'output', 'estimated'),
        genai: new Map(),
      };
      setBounded(series, key, s, MAX_CACHED_SERIES);
    }
    return s;
  };
  const countTokens = (s: Series, ctx: RequestContext): void => {
    if (ctx.usage === undefined) return;
    const estimated = ctx.usageStage === 'estimated';
    (estimated ? s.inputEstimated : s.inputUpstream).inc(ctx.usage.inputTokens);
    (estimated ? s.outputEstimated : s.outputUpstream).inc(ctx.usage.outputTokens);
  };
  const observeSessionResponse = (ctx: RequestContext): void => {
    const s = seriesOf(ctx, ctx.provider ?? 'none');
    s.requests.inc();
    countTokens(s, ctx);
  };
  const observeRequest: GatewayMetrics['observeRequest'] = (ctx, durationMs, models = NO_MODELS) => {
    const provider = ctx.provider ?? 'none';
    const s = seriesOf(ctx, provider);
    s.requests.inc();
    s.latency.observe(durationMs / 1000);
    if (ctx.upstreamTtfbMs !== undefined) s.ttfb.observe(ctx.upstreamTtfbMs / 1000);
    countTokens(s, ctx);
    if (ctx.provider === undefined) return;
    const model = modelLabel(ctx.model, models);
    const errorType = errorTypeOf(ctx);
    // The status (part of this series' key) decides the error type except after a failed or
    // abandoned stream: those rare requests skip the cache.
    const cacheable = ctx.status >= 400 || errorType === '';
    let g = cacheable ? s.genai.get(model) : undefined;
    if (g === undefined) {
      g = genai.series(provider, ctx.api, model, errorType);
      if (cacheable) setBounded(s.genai, model, g, MAX_CACHED_SERIES);
    }
    observeGenAi(g, ctx, durationMs, errorType);
  };
  return { observeRequest, observeSessionResponse };
}

// Labelled children per label set, so a request does one map lookup instead of hashing label
// objects for every series it touches (a measurable share of the hot path).
interface Series {
  requests: { inc(by?: number): void };
  latency: { observe(v: number): void };
  ttfb: { observe(v: number): void };
  inputUpstream: { inc(by?: number): void };
  outputUpstream: { inc(by?: number): void };
  inputEstimated: { inc(by?: number): void };
  outputEstimated: { inc(by?: number): void };
  /** GenAI series by model label, for the error type this status implies. */
  genai: Map<string, GenAiSeries>;
}

/** Realtime frames and bytes relayed, a series pair per direction. */
function realtimeFrameCounters(registry: client.Registry): GatewayMetrics['realtimeFrames'] {
  const frames = new FastCounter(
    registry,
    'router_realtime_frames_total',
    'Realtime frames relayed, by direction (to_upstream, to_client)',
    ['direction'],
  );
  const bytes = new FastCounter(
    registry,
    'router_realtime_bytes_total',
    'Realtime payload bytes relayed, by direction (to_upstream, to_client)',
    ['direction'],
  );
  const relayCounter = (direction: string): RelayCounter => {
    const f = frames.series(direction);
    const b = bytes.series(direction);
    return {
      frame(n: number) {
        f.inc();
        b.inc(n);
      },
    };
  };
  return { toUpstream: relayCounter('to_upstream'), toClient: relayCounter('to_client') };
}

// One label per counter is all the gateway's own counters need.
function counter<L extends string>(
  registry: client.Registry,
  name: string,
  help: string,
  label: L,
): client.Counter<L> {
  return new client.Counter({ name, help, labelNames: [label] as const, registers: [registry] });
}

function gauge(registry: client.Registry, name: string, help: string): client.Gauge {
  return new client.Gauge({ name, help, registers: [registry] });
}
