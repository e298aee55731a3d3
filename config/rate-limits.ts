// The limit fields shared by rate_limits in the main file and `limits` on a keys-file entry.

import type { RateLimits } from '../common/rate-limit-types.ts';

/** The snake_case limit fields as written. */
export interface RawRateLimits {
  readonly requests_per_minute?: number;
  readonly tokens_per_minute?: number;
  readonly max_concurrent?: number;
}

/** Only the limits that are set: an absent field is no limit (or the default's, where one applies). */
export function toRateLimitFields(raw: RawRateLimits): RateLimits {
  return {
    ...(raw.requests_per_minute === undefined ? {} : { requestsPerMinute: raw.requests_per_minute }),
    ...(raw.tokens_per_minute === undefined ? {} : { tokensPerMinute: raw.tokens_per_minute }),
    ...(raw.max_concurrent === undefined ? {} : { maxConcurrent: raw.max_concurrent }),
  };
}

/** Why `models: []` is refused, after the key's path; it would allow no model at all. */
export const EMPTY_MODELS =
  'models is an empty list, which would allow no model: leave models out to allow every model, or list ids or patterns such as "gpt-*"';
