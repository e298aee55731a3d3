// Percentiles over raw samples (sorted arrays: exact, and cheap at the bench's sample counts).

import { round } from './proc.ts';

export interface Summary {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

/** Summary in the samples' unit, rounded to 3 decimals. Sorts `samples` in place. */
export function summarize(samples: number[] | Float64Array): Summary {
  samples.sort((a, b) => a - b);
  let sum = 0;
  for (let i = 0; i < samples.length; i++) sum += samples[i]!;
  return {
    count: samples.length,
    mean: round(samples.length === 0 ? Number.NaN : sum / samples.length),
    p50: round(percentile(samples, 50)),
    p90: round(percentile(samples, 90)),
    p99: round(percentile(samples, 99)),
    max: round(samples.length === 0 ? Number.NaN : samples[samples.length - 1]!),
  };
}
