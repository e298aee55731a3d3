// Which counters the rate limiter keeps its counts in: the shared store's (exact across instances),
// else the primary's for a worker of `workers: n` (exact across the host), else this process's.

import type { RouterConfig } from '../common/config-types.ts';
import type { GatewayMetrics } from '../common/gateway-metrics.ts';
import { hasLimits, type RateLimitCounters } from '../common/rate-limit-types.ts';
import type { StateStore } from '../common/store-types.ts';
import { createRateLimiter, type RateLimiter } from '../hooks/builtin/rate-limit.ts';
import { MemoryRateLimits } from '../store/memory-rate-limits.ts';
import type { ClusterLink } from './workers/worker-link.ts';

/** Whether router.yaml or the keys file sets any rate limit or model list. */
export function limitsConfigured(config: RouterConfig): boolean {
  return (
    rateLimitsConfigured(config) ||
    config.rateLimits.perKey.models !== undefined ||
    config.keys.accessKeys.some((k) => k.limits !== undefined)
  );
}

/** Whether router.yaml sets any rate limit (then every request with a subject is admitted). */
export function rateLimitsConfigured(config: RouterConfig): boolean {
  const r = config.rateLimits;
  return hasLimits(r.perKey) || hasLimits(r.perSubject) || r.subjects.size > 0;
}

export function openRateLimiter(
  config: RouterConfig,
  store: StateStore | undefined,
  cluster: ClusterLink | undefined,
  metrics: GatewayMetrics,
): RateLimiter {
  const counters: RateLimitCounters = store?.rateLimits ?? cluster?.rateLimits ?? new MemoryRateLimits();
  return createRateLimiter({
    config: config.rateLimits,
    counters,
    storedSubjectLimits: store?.rateLimits !== undefined && rateLimitsConfigured(config),
    metrics: {
      limited: (limit) => metrics.limitedRequests.inc({ limit }),
      remaining: (dimension, ratio) => metrics.observeLimitRemaining(dimension, ratio),
    },
  });
}
