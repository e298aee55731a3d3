// The gateway's limits as Anthropic's API reports its own: `anthropic-ratelimit-requests-{limit,
// remaining,reset}` and `-tokens-`, the reset an RFC 3339 time.

import type { RateLimitState } from '../types.ts';

/** RFC 3339 at whole seconds, rounded up so a client waiting for it never comes back early. */
export function rfc3339After(now: number, ms: number): string {
  return new Date(Math.ceil((now + Math.max(0, ms)) / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

// Names written out, not built per reply: a name made at run time is hashed again as every new key.
export function anthropicRateLimitHeaders(
  state: RateLimitState,
  now: number,
  out: Record<string, string> = {},
): Record<string, string> {
  const r = state.requests;
  if (r !== undefined) {
    out['anthropic-ratelimit-requests-limit'] = String(r.limit);
    out['anthropic-ratelimit-requests-remaining'] = String(r.remaining);
    out['anthropic-ratelimit-requests-reset'] = rfc3339After(now, r.resetMs);
  }
  const t = state.tokens;
  if (t !== undefined) {
    out['anthropic-ratelimit-tokens-limit'] = String(t.limit);
    out['anthropic-ratelimit-tokens-remaining'] = String(t.remaining);
    out['anthropic-ratelimit-tokens-reset'] = rfc3339After(now, t.resetMs);
  }
  return out;
}

export const ANTHROPIC_RATE_LIMIT_PREFIXES: readonly string[] = ['anthropic-ratelimit-'];
