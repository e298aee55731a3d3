// The port between the delivery loop (billing/delivery/delivery-loop.ts) and a queue it delivers, and
// what else the loop is given (transport, retry policy, window): the
// file outbox (sidecar/delivery-worker.ts), the Redis stream of one shard (sidecar/stream-consumer.ts),
// the dead letters queued for replay (sidecar/replay-queue.ts) and the spool (billing/event-spool.ts).
// The loop owns the window, retries, backoff, which failures count, the dead-letter decision and stop; a
// queue owns reading, positions, where counted attempts are kept, the dead letter itself and what it
// hands back at stop. The transport is what the loop calls to deliver one entry.

import type { FailureClass, IngestFailure } from './delivery-policy.ts';

/** What one send came to: an ingest answer, or a move to the stream, in the same shape. */
export type SendResult = { readonly kind: 'ok' } | IngestFailure;

export interface Transport<E> {
  /** `signal` aborts when the loop stops with `abort: true`; an aborted send answers code `aborted`. */
  send(entry: E, signal: AbortSignal): Promise<SendResult>;
  /** Whether the service answers a request that carries no entry (default: it does). */
  probe?(): Promise<boolean>;
}

/** How an entry left the loop. `dropped`: it is no longer this loop's (another consumer has it). */
export type Settlement = 'delivered' | 'passed' | 'dead-lettered' | 'dropped';

export interface FailureReport {
  readonly result: IngestFailure;
  readonly failure: FailureClass;
  /** Counted attempts, this one included when it counted. */
  readonly attempts: number;
  /** Failures in a row, counted or not (the backoff exponent). */
  readonly failures: number;
  readonly counted: boolean;
  /** The wait before the next try; undefined when the entry goes to the dead letter instead. */
  readonly retryInMs: number | undefined;
}

export interface DeliveryQueue<E> {
  /**
   * Up to `max` entries not handed out yet, in queue order; fewer when the queue has no more now. May
   * wait for news itself (a blocking read) as long as `signal` does not abort.
   */
  read(max: number, signal: AbortSignal): Promise<readonly E[]>;
  /** Counted attempts the entry had before this loop read it (a checkpoint, a shared hash). */
  attempts(entry: E): number;
  /** `pass`: nothing to send (a position marker); a failure: unreadable, to the dead letter at once. */
  unsendable?(entry: E): 'pass' | IngestFailure | undefined;
  /**
   * Keeps one more counted attempt (`attempts` is the new count) and resolves to the count to judge by.
   * Does not throw: a count it could not keep is reported by resolving to the old one. Not called for
   * the attempt that reaches max_attempts: deadLetter gets that count.
   */
  recordAttempt(entry: E, attempts: number, result: IngestFailure): Promise<number>;
  /** Before a retry: false when the entry is no longer this loop's to send. Does not throw. */
  stillHeld?(entry: E): Promise<boolean>;
  /** A failure was judged (for the log). */
  failed?(entry: E, report: FailureReport): void;
  /**
   * Moves the entry to the dead letter with its counted attempts; false when it was not this loop's
   * any more. May throw (tried again).
   */
  deadLetter(entry: E, attempts: number, result: IngestFailure): Promise<boolean>;
  /** The entry leaves the loop; in an in-order loop, in read order. */
  settle(entry: E, how: Settlement): void;
  /** In-order: a delivered entry waiting behind the head keeps only what settle needs. */
  compact?(entry: E): E;
  /**
   * Each turn of the loop: write what is due (a checkpoint; with `idle`, nothing held and nothing more
   * to read, everything). Resolves to the longest the loop may then wait for news (undefined: until
   * woken).
   */
  housekeep?(idle: boolean): number | undefined | Promise<number | undefined>;
  /** A read, dead letter or housekeeping threw: what to record, and the wait before trying again. */
  loopError(err: unknown, failures: number): { readonly code: string; readonly retryInMs: number };
  /** After the loop ended: `unfinished` entries were neither delivered nor dead-lettered. */
  close(unfinished: readonly E[]): Promise<void>;
}

export interface DeliveryError {
  code: string;
  status: number | undefined;
  message: string;
  /** ISO time. */
  at: string;
}

export interface LoopCounters {
  delivered: number;
  failedAttempts: number;
  deadLettered: number;
  lastError: DeliveryError | undefined;
}

export interface RetryPolicy {
  /** Counted attempts after which an entry goes to the dead letter. */
  readonly maxAttempts: number;
  /** The wait before the next try of an entry that failed `failures` times in a row (common/backoff.ts). */
  readonly delay: (failures: number) => number;
}

export interface DeliveryLoopOptions<E> {
  readonly queue: DeliveryQueue<E>;
  readonly transport: Transport<E>;
  readonly order: 'in-order' | 'per-entry';
  /** Sends in flight at most. */
  readonly window: number;
  readonly retry: RetryPolicy;
  /** Timer of the retry waits (default setTimeout-based); tests may record the delays. */
  readonly sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** Read only while fewer than this many entries are held (default: as many as may be held). */
  readonly refillBelow?: number;
  /** The queue's read waits for news itself: after a short read, read again at once. */
  readonly readWaits?: boolean;
  /** In-order: entries held past a head retried for a counted failure (default 4096). */
  readonly readAhead?: number;
}
