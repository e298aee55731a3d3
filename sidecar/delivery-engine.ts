// The delivery engine of both billing queues (docs/billing.md "Retry policy"). It owns what does not
// depend on the queue: sending one event (the ingests in flight, a client that throws taken as a failed
// attempt, every ingest in flight aborted by stop), the counters and last error both report, whether a
// failure counts toward max_attempts and when the count reaches the dead letter, and the backoff between
// tries. The queue adapters own reading, positions, where attempt counts are kept and the dead letter
// itself: sidecar/delivery-worker.ts (the file outbox: in order, checkpointed) and
// sidecar/stream-consumer.ts (the Redis stream: per entry, acknowledged).

import type { IngestResult } from '../billing/billing-client.ts';
import type { UsageEvent } from '../billing/event/usage-event.ts';
import {
  abortableSleep,
  backoffDelay,
  classifyFailure,
  countsAsAttempt,
  errorText,
  type FailureClass,
  type IngestFailure,
  thrownFailure,
} from './delivery-policy.ts';

export interface IngestClient {
  /** `traceparent`: the request's, for the ingest's span (never in the body). */
  ingest(event: UsageEvent, signal?: AbortSignal, traceparent?: string): Promise<IngestResult>;
  /** BillingClient.probe; without it the service is taken to answer. */
  probe?(): Promise<boolean>;
}

export interface DeliveryError {
  code: string;
  status: number | undefined;
  message: string;
  /** ISO time. */
  at: string;
}

/** How one send ended. `stopped`: aborted by stop, which is not an attempt (the event goes again later). */
export type SendOutcome =
  | { readonly kind: 'ok' }
  | { readonly kind: 'stopped' }
  | { readonly kind: 'failed'; readonly result: IngestFailure; readonly failure: FailureClass };

export interface DeliveryEngineOptions {
  readonly client: IngestClient;
  readonly retryIntervalMs: number;
  readonly maxRetryIntervalMs: number;
  /** Counted attempts after which an event goes to the dead letter. */
  readonly maxAttempts: number;
  /** Jitter source in [0, 1) (default Math.random). */
  readonly random?: () => number;
}

export class DeliveryEngine {
  readonly counters: {
    delivered: number;
    failedAttempts: number;
    deadLettered: number;
    lastError: DeliveryError | undefined;
  } = { delivered: 0, failedAttempts: 0, deadLettered: 0, lastError: undefined };
  /** Ingests in flight (sends that count toward the window). */
  inFlight = 0;
  readonly #opts: DeliveryEngineOptions;
  readonly #random: () => number;
  #stopping = false;
  readonly #stop = new AbortController();
  // One signal for every ingest in flight: a controller per event cost an abort listener per delivery.
  readonly #inflight = new AbortController();

  constructor(opts: DeliveryEngineOptions) {
    this.#opts = opts;
    this.#random = opts.random ?? Math.random;
  }

  get stopping(): boolean {
    return this.#stopping;
  }

  /** Aborts when stop begins: waits end early, never a retry delay waited out. */
  get stopSignal(): AbortSignal {
    return this.#stop.signal;
  }

  /**
   * Sends one event. `inFlight: false` for sends beside the window (dead-letter replay);
   * `countDelivered: false` when the caller counts the delivery after recording it (delivered()).
   */
  async send(
    event: UsageEvent,
    opts: {
      readonly inFlight?: boolean;
      readonly countDelivered?: boolean;
      readonly traceparent?: string | undefined;
    } = {},
  ): Promise<SendOutcome> {
    const inWindow = opts.inFlight ?? true;
    if (inWindow) this.inFlight++;
    // Through a promise chain so that even a synchronous throw of the client ends as a failure.
    const result = await Promise.resolve()
      .then(() => this.#opts.client.ingest(event, this.#inflight.signal, opts.traceparent))
      .catch((err: unknown): IngestResult => thrownFailure(errorText(err)));
    if (inWindow) this.inFlight--;
    if (result.kind === 'ok') {
      if (opts.countDelivered ?? true) this.counters.delivered++;
      return { kind: 'ok' };
    }
    if (result.code === 'aborted' && this.#stopping) return { kind: 'stopped' };
    this.counters.failedAttempts++;
    this.recordError(result.code, result.status, result.message);
    return { kind: 'failed', result, failure: classifyFailure(result) };
  }

  /** Whether a failure counts toward max_attempts (sidecar/delivery-policy.ts). */
  counts(failure: FailureClass, otherEventAccepted: () => Promise<boolean | undefined>): Promise<boolean> {
    return countsAsAttempt(failure, {
      otherEventAccepted,
      serviceAnswers: () => this.#opts.client.probe?.() ?? Promise.resolve(true),
    });
  }

  /** Whether this many counted attempts send an event to the dead letter. */
  exhausted(attempts: number): boolean {
    return attempts >= this.#opts.maxAttempts;
  }

  /** The wait before the next try of an event that failed `failures` times in a row. */
  backoff(failures: number): number {
    return backoffDelay(failures, this.#opts.retryIntervalMs, this.#opts.maxRetryIntervalMs, this.#random);
  }

  /** Waits `ms`, or less when stop begins. */
  sleep(ms: number): Promise<void> {
    return abortableSleep(ms, this.#stop.signal);
  }

  delivered(): void {
    this.counters.delivered++;
  }

  deadLettered(): void {
    this.counters.deadLettered++;
  }

  recordError(code: string, status: number | undefined, message: string): void {
    this.counters.lastError = { code, status, message, at: new Date().toISOString() };
  }

  /** Stops: waits end, and with `abort` every ingest in flight is aborted (not counted as an attempt). */
  stop(abort: boolean): void {
    this.#stopping = true;
    this.#stop.abort();
    if (abort) this.#inflight.abort();
  }
}
