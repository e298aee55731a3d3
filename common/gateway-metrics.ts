// The gateway's metrics as hooks and wiring see them; proxy/metrics.ts builds them on prom-client.

import type client from 'prom-client';
import type { SpanExportCounters } from './span-export.ts';
import type { RequestContext } from './types.ts';

/** Frames and bytes of one direction of the realtime relay. */
export interface RelayCounter {
  frame(bytes: number): void;
}

/** A counter of the request path: a series is resolved once and kept (proxy/fast-metrics.ts). */
export interface SeriesCounter {
  /** The series for these label values, in the counter's label order. */
  series(...values: string[]): { inc(by?: number): void };
}

export interface GatewayMetrics {
  readonly registry: client.Registry;
  /**
   * One finished request. `models`: the exact model ids of the registry in force; any other requested
   * model is labelled `other` on the GenAI series (none given: all are).
   */
  observeRequest(ctx: RequestContext, durationMs: number, models?: ReadonlySet<string>): void;
  /**
   * One model response of a realtime session, billed as a request of its own (proxy/realtime-record.ts):
   * counted in router_requests_total and router_tokens_total, so served and billed stay one number.
   */
  observeSessionResponse(ctx: RequestContext): void;
  readonly activeStreams: client.Gauge;
  /** Served requests by usage-event result (label `result`; proxy/metrics.ts BILLING_RESULTS). */
  readonly billingEnqueued: SeriesCounter;
  readonly balanceChecks: client.Counter<'result'>;
  readonly storeErrors: client.Counter<'operation'>;
  /** Metered requests whose model has no price (label `provider`). */
  readonly unpricedModels: SeriesCounter;
  /** Served models (registry routes) without a price, counted when billing starts or reloads. */
  readonly unpricedServedModels: client.Gauge;
  /** Served requests without a usage event, by reason (proxy/metrics.ts UNREPORTED_REASONS). */
  readonly unmeteredRequests: SeriesCounter;
  /** Usage events handed to the queue whose outcome (queued, queue_failed) is not known yet. */
  readonly billingInFlight: { add(n: number): void };
  /** Client connections closed to make room (idle) or turned away (refused) at limits.max_connections. */
  readonly connectionsShed: client.Counter<'reason'>;
  /** Client timeouts that fired: header, body, keepalive. */
  readonly clientTimeouts: client.Counter<'kind'>;
  /** Requests refused before they were parsed: header_too_large, url_too_long, malformed. */
  readonly clientRejected: client.Counter<'reason'>;
  /** Subject state changes applied: told by the sidecar (`notice`) or relayed by the primary (`relay`). */
  readonly subjectStateNotices: client.Counter<'via'>;
  /** Realtime sessions: open now; frames and bytes relayed by direction (`to_upstream`, `to_client`). */
  readonly realtimeSessions: client.Gauge;
  readonly realtimeFrames: { readonly toUpstream: RelayCounter; readonly toClient: RelayCounter };
  /** Requests a rate limit refused (`requests`, `tokens`, `concurrency`, `model`) or admitted unchecked (`store_unavailable`). */
  readonly limitedRequests: client.Counter<'limit'>;
  /** The lowest remaining share of a rate limit seen by an admission since the last scrape. */
  observeLimitRemaining(dimension: 'requests' | 'tokens' | 'concurrency', ratio: number): void;
  /** Where the open-connections gauge reads from, and the cap in force. */
  trackConnections(open: () => number, max: number): void;
  /** The span export counters of the process's tracer (live: read at every scrape). */
  trackTraces(spans: Readonly<SpanExportCounters>): void;
}
