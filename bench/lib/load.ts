// Request-level load: autocannon for throughput at a fixed concurrency, and a plain sequential undici
// loop for latency at concurrency 1 (autocannon's histogram has millisecond resolution; the targets
// are in tenths of a millisecond).

import autocannon from 'autocannon';
import { Client } from 'undici';
import { round } from './proc.ts';
import { type Summary, summarize } from './stats.ts';

/** One request shape against one peer. */
export interface HttpTarget {
  origin: string;
  path: string;
  method: 'POST' | 'GET';
  headers: Record<string, string>;
  body?: string;
}

export interface ThroughputResult {
  connections: number;
  durationS: number;
  requestsPerSec: number;
  total2xx: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  /** autocannon's latencies, whole milliseconds. */
  latencyP50Ms: number;
  latencyP99Ms: number;
  mbPerSec: number;
  /** Requests/s of every round when measured in rounds (the row shows the median round). */
  rounds?: number[];
}

/** A target's request as autocannon takes it. */
export function autocannonRequest(target: HttpTarget): {
  url: string;
  method: HttpTarget['method'];
  headers: Record<string, string>;
  body?: string;
} {
  return {
    url: target.origin + target.path,
    method: target.method,
    headers: target.headers,
    body: target.body,
  };
}

export async function throughput(
  target: HttpTarget,
  connections: number,
  durationS: number,
): Promise<ThroughputResult> {
  const result = await autocannon({
    ...autocannonRequest(target),
    connections,
    duration: durationS,
    timeout: 30,
  });
  return {
    connections,
    durationS,
    requestsPerSec: round(result['2xx'] / result.duration, 1),
    total2xx: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    latencyP50Ms: result.latency.p50,
    latencyP99Ms: result.latency.p99,
    mbPerSec: round(result.throughput.average / 1e6, 2),
  };
}

export interface LatencyResult {
  requests: number;
  errors: number;
  /** First failure seen (status and the start of the body), for the report. */
  firstError?: string;
  ms: Summary;
  /** Median of each round's p50 when measured in rounds. */
  roundP50s?: number[];
}

/** `count` requests one after another on one keep-alive connection, after `warmup` unmeasured ones. */
export async function sequentialLatency(
  target: HttpTarget,
  count: number,
  warmup: number,
): Promise<LatencyResult> {
  const { samples, errors, firstError } = await latencySamples(target, count, warmup);
  return { requests: count, errors, firstError, ms: summarize(samples) };
}

/** The raw timings of sequentialLatency (ms, in order), for runs measured in rounds. */
export async function latencySamples(
  target: HttpTarget,
  count: number,
  warmup: number,
): Promise<{ samples: Float64Array; errors: number; firstError?: string }> {
  const client = new Client(target.origin, { pipelining: 1, keepAliveTimeout: 60_000 });
  const samples = new Float64Array(count);
  let errors = 0;
  let firstError: string | undefined;
  try {
    for (let i = -warmup; i < count; i++) {
      const t0 = performance.now();
      const res = await client.request({
        path: target.path,
        method: target.method,
        headers: target.headers,
        body: target.body,
      });
      const text = await res.body.text();
      const elapsed = performance.now() - t0;
      if (res.statusCode >= 300) {
        errors++;
        firstError ??= `${res.statusCode} ${text.slice(0, 300)}`;
      }
      if (i >= 0) samples[i] = elapsed;
    }
  } finally {
    await client.close();
  }
  return { samples, errors, firstError };
}

/** One request, for checking a peer works before measuring it: status and the start of the body. */
export async function probe(target: HttpTarget): Promise<{ status: number; body: string }> {
  const res = await fetch(target.origin + target.path, {
    method: target.method,
    headers: target.headers,
    body: target.body,
    signal: AbortSignal.timeout(15_000),
  });
  return { status: res.status, body: (await res.text()).slice(0, 600) };
}
