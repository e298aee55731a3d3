// The gateway's limits as Anthropic's API reports its own: `anthropic-ratelimit-requests-{limit,
// remaining,reset}` and `-tokens-`, the reset an RFC 3339 time.

import type { DimensionState } from '../../../common/rate-limit-types.ts';
import type { RateLimitState } from '../types.ts';

/** RFC 3339 at whole seconds, rounded up so a client waiting for it never comes back early. */
export function rfc3339After(now: number, ms: number): string {
  return new Date(Math.ceil((now + Math.max(0, ms)) / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

function add(out: Record<string, string>, name: string, d: DimensionState | undefined, now: number): void {
  if (d === undefined) return;
  out[`anthropic-ratelimit-${name}-limit`] = String(d.limit);
  out[`anthropic-ratelimit-${name}-remaining`] = String(d.remaining);
  out[`anthropic-ratelimit-${name}-reset`] = rfc3339After(now, d.resetMs);
}

export function anthropicRateLimitHeaders(state: RateLimitState, now: number): Record<string, string> {
  const out: Record<string, string> = {};
  add(out, 'requests', state.requests, now);
  add(out, 'tokens', state.tokens, now);
  return out;
}

export const ANTHROPIC_RATE_LIMIT_PREFIXES: readonly string[] = ['anthropic-ratelimit-'];
