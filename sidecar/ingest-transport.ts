// The sidecar's transport for the delivery loop (billing/delivery/delivery-loop.ts): one usage event to
// billing ingest. Shared by the queues the sidecar delivers (the outbox, the stream, replayed dead
// letters), with the log line of a failed ingest.

import type { Logger } from 'pino';
import type { IngestResult } from '../billing/billing-client.ts';
import type { FailureReport, Transport } from '../billing/delivery/delivery-queue.ts';
import type { UsageEvent } from '../billing/event/usage-event.ts';

export interface IngestClient {
  /** `traceparent`: the request's, for the ingest's span (never in the body). */
  ingest(event: UsageEvent, signal?: AbortSignal, traceparent?: string): Promise<IngestResult>;
  /** BillingClient.probe; without it the service is taken to answer. */
  probe?(): Promise<boolean>;
}

/** Delivers an entry's event (and the traceparent stored beside it) with `client`. */
export function ingestTransport<E>(
  client: IngestClient,
  eventOf: (entry: E) => { readonly event: UsageEvent; readonly traceparent?: string | undefined },
): Transport<E> {
  return {
    send(entry, signal) {
      const { event, traceparent } = eventOf(entry);
      return client.ingest(event, signal, traceparent);
    },
    ...(client.probe === undefined ? {} : { probe: () => client.probe?.() ?? Promise.resolve(true) }),
  };
}

export function logIngestFailure(logger: Logger | undefined, event: UsageEvent, report: FailureReport): void {
  const { result } = report;
  logger?.warn(
    {
      request_id: event.external_event_id,
      code: result.code,
      status: result.status,
      attempts: report.attempts,
      failures: report.failures,
      counted: report.counted,
      ...(result.kind === 'permanent' && result.hint ? { hint: result.hint } : {}),
    },
    'billing ingest failed',
  );
}
