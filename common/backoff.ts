// The one exponential backoff: every loop that retries (delivery, the spool's mover, Redis reconnects,
// span export, webhook forwarding, the outbox lock's wait) and the restart policy take their delays from
// here; a site that jitters otherwise (Redis: 75-100%) applies that to backoffDelay's value.

/** `baseMs` doubled for each attempt after the first, capped at `capMs` (attempt 1 waits `baseMs`). */
export function backoffDelay(attempt: number, baseMs: number, capMs: number): number {
  return Math.min(capMs, baseMs * 2 ** Math.max(0, Math.min(attempt - 1, 30)));
}

/**
 * Full jitter: uniform in [0, backoffDelay), so that many clients retrying after one outage spread out
 * instead of arriving together.
 */
export function jitteredDelay(
  attempt: number,
  baseMs: number,
  capMs: number,
  random: () => number = Math.random,
): number {
  return Math.floor(random() * backoffDelay(attempt, baseMs, capMs));
}
