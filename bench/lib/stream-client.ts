// Streaming load client. It runs in its own node process (runStreams spawns this file) so that the
// timestamps of SSE events are not delayed by the bench runner's other work. Each of `concurrency`
// workers opens one connection and runs streams back to back until the duration or the stream count is
// reached; every SSE event is timestamped when the body chunk carrying it arrives.

import { fileURLToPath } from 'node:url';
import { createParser } from 'eventsource-parser';
import { Pool } from 'undici';
import type { HttpTarget } from './load.ts';
import { runJsonChild } from './proc.ts';
import { type Summary, summarize } from './stats.ts';

export interface StreamLoadOptions {
  target: HttpTarget;
  concurrency: number;
  /** Stop starting new streams after this long. */
  durationMs: number;
  /** Stop after this many streams in total (default: unlimited within the duration). */
  maxStreams?: number;
  /** Stagger worker starts over this window so streams are not in lock-step (default 500 ms). */
  rampMs?: number;
  /** Per-stream limit for headers and for silence between chunks (default 30 s). */
  timeoutMs?: number;
}

export interface StreamLoadResult {
  concurrency: number;
  streams: number;
  errors: number;
  firstError?: string;
  /** Events per completed stream, averaged (detects truncated streams). */
  eventsPerStream: number;
  /** Request sent -> first body byte, ms. */
  ttfbMs: Summary;
  /** Gaps between consecutive text-carrying SSE events of one stream, ms. */
  gapMs: Summary;
  wallMs: number;
}

interface Collector {
  ttfb: number[];
  gaps: number[];
  streams: number;
  events: number;
  errors: number;
  firstError?: string;
}

/**
 * Events that carry generated text: OpenAI-style chunks with non-empty `delta.content`, Anthropic
 * `text_delta`s. Gaps are measured between these only, so that events a proxy legitimately adds,
 * drops or merges (role chunk, usage chunk, [DONE], content_block_stop, ping) do not count as delay.
 */
const CONTENT_RE = /"content":"[^"]|"text_delta"/;

async function oneStream(pool: Pool, target: HttpTarget, c: Collector, timeoutMs: number): Promise<void> {
  const t0 = performance.now();
  let last = -1;
  let now = 0;
  let events = 0;
  const parser = createParser({
    onEvent(event) {
      events++;
      if (!CONTENT_RE.test(event.data)) return;
      // Every event completed by one chunk arrived when the chunk did.
      if (last >= 0) c.gaps.push(now - last);
      last = now;
    },
  });
  try {
    const res = await pool.request({
      path: target.path,
      method: target.method,
      headers: target.headers,
      body: target.body,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    if (res.statusCode !== 200) {
      const text = await res.body.text();
      c.errors++;
      c.firstError ??= `${res.statusCode} ${text.slice(0, 300)}`;
      return;
    }
    let first = true;
    for await (const chunk of res.body) {
      now = performance.now();
      if (first) {
        c.ttfb.push(now - t0);
        first = false;
      }
      parser.feed(chunk.toString());
    }
    c.streams++;
    c.events += events;
  } catch (err) {
    c.errors++;
    c.firstError ??= err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  }
}

export async function streamLoad(opts: StreamLoadOptions): Promise<StreamLoadResult> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const rampMs = opts.rampMs ?? 500;
  const pool = new Pool(opts.target.origin, {
    connections: opts.concurrency,
    pipelining: 1,
    keepAliveTimeout: 60_000,
    connect: { timeout: timeoutMs },
  });
  const c: Collector = { ttfb: [], gaps: [], streams: 0, events: 0, errors: 0 };
  const started = performance.now();
  const deadline = started + opts.durationMs;
  const max = opts.maxStreams ?? Number.POSITIVE_INFINITY;
  let launched = 0;
  async function worker(index: number): Promise<void> {
    await new Promise((r) => setTimeout(r, (index * rampMs) / opts.concurrency));
    while (performance.now() < deadline && launched < max) {
      launched++;
      await oneStream(pool, opts.target, c, timeoutMs);
    }
  }
  await Promise.all(Array.from({ length: opts.concurrency }, (_, i) => worker(i)));
  const wallMs = performance.now() - started;
  await pool.close();
  return {
    concurrency: opts.concurrency,
    streams: c.streams,
    errors: c.errors,
    firstError: c.firstError,
    eventsPerStream: c.streams === 0 ? 0 : Math.round((c.events / c.streams) * 10) / 10,
    ttfbMs: summarize(c.ttfb),
    gapMs: summarize(c.gaps),
    wallMs: Math.round(wallMs),
  };
}

const SELF = fileURLToPath(import.meta.url);

/** Runs streamLoad in a separate node process and returns its result. */
export function runStreams(opts: StreamLoadOptions): Promise<StreamLoadResult> {
  return runJsonChild<StreamLoadResult>(SELF, opts, 'stream client');
}

if (import.meta.main) {
  const opts = JSON.parse(process.argv[2] ?? '{}') as StreamLoadOptions;
  const result = await streamLoad(opts);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
