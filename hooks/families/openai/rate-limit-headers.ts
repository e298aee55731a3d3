// The gateway's limits as OpenAI's API reports its own: `x-ratelimit-{limit,remaining,reset}-requests`
// and `-tokens`, the reset a duration (`1s`, `6m0s`), which its SDKs and clients read.

import type { DimensionState } from '../../../common/rate-limit-types.ts';
import type { RateLimitState } from '../types.ts';

/** A duration in OpenAI's form, rounded up to whole seconds. */
export function openaiDuration(ms: number): string {
  const s = Math.ceil(Math.max(0, ms) / 1000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${s % 60}s`;
}

function add(out: Record<string, string>, suffix: string, d: DimensionState | undefined): void {
  if (d === undefined) return;
  out[`x-ratelimit-limit-${suffix}`] = String(d.limit);
  out[`x-ratelimit-remaining-${suffix}`] = String(d.remaining);
  out[`x-ratelimit-reset-${suffix}`] = openaiDuration(d.resetMs);
}

export function openaiRateLimitHeaders(state: RateLimitState): Record<string, string> {
  const out: Record<string, string> = {};
  add(out, 'requests', state.requests);
  add(out, 'tokens', state.tokens);
  return out;
}

export const OPENAI_RATE_LIMIT_PREFIXES: readonly string[] = ['x-ratelimit-'];
