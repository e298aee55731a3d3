// The retry decision of the delivery loop (billing/delivery/delivery-loop.ts), for every queue: which
// failed sends count toward max_attempts. docs/billing.md "Retry policy" states the rules; the point is
// that a failure caused by one event leads it to the dead letter while an outage of any length never
// does. The delays between tries come from common/backoff.ts.

import type { IngestResult } from '../billing-client.ts';

export type IngestFailure = Exclude<IngestResult, { kind: 'ok' }>;

/**
 * - `outage`: the service is unreachable or overloaded (refused, timeout, 408, 429, 502, 503, 504).
 * - `event`: the service refused this event (4xx, 413 included).
 * - `server_error`: another 5xx; the event or the service, depending on whether other events pass.
 * - `connection_reset`: the connection closed with no answer, typically a body the service would not
 *   take; the event when the service answers otherwise, an outage when it does not.
 */
export type FailureClass = 'outage' | 'event' | 'server_error' | 'connection_reset';

export function classifyFailure(r: IngestFailure): FailureClass {
  if (r.kind === 'permanent') return 'event';
  if (r.code === 'connection_reset') return 'connection_reset';
  return r.unavailable ? 'outage' : 'server_error';
}

/** Whether a failure of this class is evidence against the service rather than against one event. */
export function blamesService(cls: FailureClass): boolean {
  return cls === 'outage' || cls === 'server_error';
}

/** What a delivery path can find out about the service when a failure is ambiguous. */
export interface ServiceEvidence {
  /** Whether another event is accepted now; undefined when there is no other event to ask with. */
  otherEventAccepted(): Promise<boolean | undefined>;
  /** Whether the service answers a request that carries no event (BillingClient.probe). */
  serviceAnswers(): Promise<boolean>;
}

/** Whether a failure counts toward max_attempts; only counted failures can lead to the dead letter. */
export async function countsAsAttempt(cls: FailureClass, evidence: ServiceEvidence): Promise<boolean> {
  switch (cls) {
    case 'event':
      return true;
    case 'outage':
      return false;
    case 'server_error':
      return (await evidence.otherEventAccepted()) ?? (await evidence.serviceAnswers());
    case 'connection_reset':
      return evidence.serviceAnswers();
  }
}

/** The failure of a send that threw instead of answering (a bug, not the service): retried. */
export function thrownFailure(message: string): IngestFailure {
  return { kind: 'retryable', status: undefined, code: 'client_error', message, unavailable: true };
}

/** Sleep `ms`, or less when `signal` aborts (stopping never waits out a retry delay). */
export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted || ms <= 0) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
