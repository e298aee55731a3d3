// The one restart policy of every process `router` supervises: its workers (proxy/workers/primary.ts)
// and the billing sidecar (proxy/sidecar-supervisor.ts). Pure: crash times and a clock value in, a
// decision out, so its numbers are tested without timers (test/common/restart-policy.test.ts).

import { backoffDelay } from './backoff.ts';

export interface RestartPolicy {
  /** A process that crashed fewer times than this within `quickWindowMs` is restarted at once. */
  readonly quickCrashes: number;
  readonly quickWindowMs: number;
  /** The first delay past the quick restarts; it doubles with each further crash, up to `maxDelayMs`. */
  readonly firstDelayMs: number;
  readonly maxDelayMs: number;
  /** The primary gives up after this many crashes of its workers within `giveUpWindowMs`, none serving. */
  readonly giveUpCrashes: number;
  readonly giveUpWindowMs: number;
}

export const RESTART_POLICY: RestartPolicy = {
  quickCrashes: 5,
  quickWindowMs: 60_000,
  firstDelayMs: 500,
  maxDelayMs: 5_000,
  giveUpCrashes: 20,
  giveUpWindowMs: 600_000,
};

/** How many of `crashes` (ms timestamps) lie within the `windowMs` that ends at `now`. */
function within(crashes: readonly number[], now: number, windowMs: number): number {
  let n = 0;
  for (const t of crashes) if (t > now - windowMs && t <= now) n++;
  return n;
}

/** The crash times a supervisor keeps: those any of the policy's windows still counts at `now`. */
export function keptCrashes(
  crashes: readonly number[],
  now: number,
  policy: RestartPolicy = RESTART_POLICY,
): number[] {
  const windowMs = Math.max(policy.quickWindowMs, policy.giveUpWindowMs);
  return crashes.filter((t) => t > now - windowMs && t <= now);
}

/**
 * The delay before restarting a process that has just crashed (at `now`); `crashes` are its crash
 * times, this one included.
 */
export function restartDelayMs(
  crashes: readonly number[],
  now: number,
  policy: RestartPolicy = RESTART_POLICY,
): number {
  const recent = within(crashes, now, policy.quickWindowMs);
  if (recent < policy.quickCrashes) return 0;
  // The first crash past the quick restarts is the backoff's first attempt.
  return backoffDelay(recent - policy.quickCrashes + 1, policy.firstDelayMs, policy.maxDelayMs);
}

/**
 * Whether the primary stops (exit 1, for its own supervisor to restart the unit): `crashes` are those
 * of all its workers, and none of them is serving.
 */
export function givesUp(
  crashes: readonly number[],
  now: number,
  serving: boolean,
  policy: RestartPolicy = RESTART_POLICY,
): boolean {
  return !serving && within(crashes, now, policy.giveUpWindowMs) >= policy.giveUpCrashes;
}
