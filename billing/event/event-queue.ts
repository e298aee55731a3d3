// The usage-event queue as the gateway's enqueue hook sees it; the file outbox and the Redis stream are
// its two writers.

import type { TokenEvent } from './token-event.ts';
import type { UsageEvent } from './usage-event.ts';

/** The usage-event queue as the gateway sees it: resolves once the event is durably queued. */
export interface EventQueue {
  /**
   * Resolves once the event is on record durably (rejects when it could not be). The events a queue puts
   * on record together (one event-loop turn's) share one promise, which fails when any of them failed.
   * `traceparent`: the request's, stored beside the event for the delivery's span (never sent).
   */
  enqueue(event: UsageEvent, traceparent?: string): Promise<void>;
  /** enqueue() of a token event (billing/event/token-event.ts), for a queue that writes it from its parts. */
  enqueueTokens?(event: TokenEvent, traceparent?: string): Promise<void>;
  /**
   * When the queue puts events on record in batches (the outbox: one write per event-loop turn), the
   * promise of the pending batch; the reply's last byte waits for it. Undefined: nothing is pending.
   */
  recorded?(): Promise<void> | undefined;
}
