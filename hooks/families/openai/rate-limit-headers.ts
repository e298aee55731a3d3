// The gateway's limits as OpenAI's API reports its own: `x-ratelimit-{limit,remaining,reset}-requests`
// and `-tokens`, the reset a duration (`1s`, `6m0s`), which its SDKs and clients read.

import type { RateLimitState } from '../types.ts';

function duration(s: number): string {
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${s % 60}s`;
}

// A window's reset is at most a minute away: those durations are made once, not per reply.
const MINUTE = Array.from({ length: 61 }, (_, s) => duration(s));

/** A duration in OpenAI's form, rounded up to whole seconds. */
export function openaiDuration(ms: number): string {
  const s = Math.ceil(Math.max(0, ms) / 1000);
  return MINUTE[s] ?? duration(s);
}

// Names written out, not built per reply: a name made at run time is hashed again as every new key.
export function openaiRateLimitHeaders(
  state: RateLimitState,
  _now: number,
  out: Record<string, string> = {},
): Record<string, string> {
  const r = state.requests;
  if (r !== undefined) {
    out['x-ratelimit-limit-requests'] = String(r.limit);
    out['x-ratelimit-remaining-requests'] = String(r.remaining);
    out['x-ratelimit-reset-requests'] = openaiDuration(r.resetMs);
  }
  const t = state.tokens;
  if (t !== undefined) {
    out['x-ratelimit-limit-tokens'] = String(t.limit);
    out['x-ratelimit-remaining-tokens'] = String(t.remaining);
    out['x-ratelimit-reset-tokens'] = openaiDuration(t.resetMs);
  }
  return out;
}

export const OPENAI_RATE_LIMIT_PREFIXES: readonly string[] = ['x-ratelimit-'];
