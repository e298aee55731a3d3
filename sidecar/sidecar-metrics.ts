// Prometheus metrics of the billing sidecar (router-billing), served on its own port at GET /metrics.
// Delivery numbers are read from the worker when scraped (it already counts them), so the hot path pays
// nothing. Webhook outcomes are counted by the webhook handler through countWebhook(): the counter is one
// per process (one sidecar per process in production) and is registered in every sidecar's registry.

import client from 'prom-client';
import { NO_SPANS, type SpanExportCounters } from '../common/span-export.ts';
import { registerTraceMetrics } from '../common/trace-metrics.ts';
import type { DeliveryCounters } from './delivery-worker.ts';

/** Webhook event kinds of the billing service; anything else is counted as `other`. */
export const WEBHOOK_KINDS = [
  'wallet.insufficient_balance',
  'wallet.balance_changed',
  'wallet.available_balance.threshold_crossed',
  'usage_limit.exhausted',
] as const;

/**
 * Suggested `result` values: `applied` (state updated), `duplicate` (id seen before), `ignored` (valid but
 * no effect), `unauthorized` (bad / missing / stale signature), `bad_request` (unreadable body, no id),
 * `error` (store or disk failure).
 */
export type WebhookResult = 'applied' | 'duplicate' | 'ignored' | 'unauthorized' | 'bad_request' | 'error';

/** Webhooks received by kind and result. Prefer countWebhook(), which keeps `kind` bounded. */
export const webhooksTotal = new client.Counter({
  name: 'router_billing_webhooks_total',
  help: 'Billing webhooks received, by event kind and result',
  labelNames: ['kind', 'result'] as const,
  registers: [],
});

const KNOWN_KINDS: ReadonlySet<string> = new Set(WEBHOOK_KINDS);

/**
 * Count one webhook. `kind` is the event type from the body, or undefined when it could not be read
 * (unverified requests must not choose label values: a caller could otherwise grow the series without
 * bound, so unknown kinds become `other` and unreadable ones `unknown`).
 */
export function countWebhook(kind: string | undefined, result: WebhookResult): void {
  const label = kind === undefined ? 'unknown' : KNOWN_KINDS.has(kind) ? kind : 'other';
  webhooksTotal.inc({ kind: label, result });
}

/** What the metrics read from the delivery side (the file-mode worker or the stream consumer). */
export interface DeliverySource {
  counters(): Pick<DeliveryCounters, 'delivered' | 'failedAttempts' | 'deadLettered' | 'inFlight'>;
  /** Events waiting to be delivered. */
  pending(): Promise<number>;
}

/** Dead-lettered events currently on disk or in the dead-letter stream (all processes, all time). */
export interface DeadLetterSource {
  read(): Promise<{ deadLettered: number }>;
}

/** The shared-store stream consumer seen as the two sources above (one XLEN round per scrape each). */
export function streamConsumerSources(consumer: {
  counters(): Pick<DeliveryCounters, 'delivered' | 'failedAttempts' | 'deadLettered' | 'inFlight'>;
  status(): Promise<{ pending: number; deadLetter: number }>;
}): { delivery: DeliverySource; deadLetters: DeadLetterSource } {
  return {
    delivery: {
      counters: () => consumer.counters(),
      pending: async () => (await consumer.status()).pending,
    },
    deadLetters: { read: async () => ({ deadLettered: (await consumer.status()).deadLetter }) },
  };
}

export interface SidecarMetrics {
  readonly registry: client.Registry;
  /** Prometheus text format. */
  text(): Promise<string>;
  readonly contentType: string;
}

export function createSidecarMetrics(
  delivery: DeliverySource | undefined,
  deadLetters: DeadLetterSource | undefined,
  /** The span export counters of the sidecar's own tracer (live; all 0 without one). */
  spans: Readonly<SpanExportCounters> = NO_SPANS,
): SidecarMetrics {
  const registry = new client.Registry();
  // Unprefixed like the gateway's: Prometheus tells the two apart by their scrape job.
  client.collectDefaultMetrics({ register: registry });
  registry.registerMetric(webhooksTotal);
  registerTraceMetrics(registry, () => spans);

  new client.Counter({
    name: 'router_billing_deliveries_total',
    help: 'Ingest attempts by result: ok (accepted by billing) or failed (will be retried or dead-lettered)',
    labelNames: ['result'] as const,
    registers: [registry],
    collect() {
      this.reset();
      const c = delivery?.counters();
      this.inc({ result: 'ok' }, c?.delivered ?? 0);
      this.inc({ result: 'failed' }, c?.failedAttempts ?? 0);
    },
  });
  new client.Counter({
    name: 'router_billing_dead_letters_total',
    help: 'Events this process moved to the dead letter after billing_max_attempts / max_attempts',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(delivery?.counters().deadLettered ?? 0);
    },
  });
  lastGoodGauge(
    registry,
    'router_billing_dead_letter_events',
    'Events in the dead letter (file or stream) waiting for an operator',
    deadLetters === undefined ? undefined : () => deadLetters.read().then((r) => r.deadLettered),
  );
  lastGoodGauge(
    registry,
    'router_billing_queue_depth',
    'Usage events queued and not yet delivered',
    delivery === undefined ? undefined : () => delivery.pending(),
  );
  new client.Gauge({
    name: 'router_billing_deliveries_in_flight',
    help: 'Ingest calls in flight',
    registers: [registry],
    collect() {
      this.set(delivery?.counters().inFlight ?? 0);
    },
  });

  return {
    registry,
    contentType: registry.contentType,
    text: () => registry.metrics(),
  };
}

/**
 * A gauge read at scrape time; 0 when there is nothing to read, and the last value when a read fails
 * (store down, disk error) rather than failing the scrape.
 */
function lastGoodGauge(
  registry: client.Registry,
  name: string,
  help: string,
  read: (() => Promise<number>) | undefined,
): void {
  new client.Gauge({
    name,
    help,
    registers: [registry],
    async collect() {
      if (read === undefined) {
        this.set(0);
        return;
      }
      const n = await read().catch(() => undefined);
      if (n !== undefined) this.set(n);
    },
  });
}
