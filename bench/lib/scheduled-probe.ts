// A request on a fixed schedule, timed from when it was due, run in a process of its own: the bench
// process opens thousands of sockets and builds large prompts while it probes, and its own stalls (its
// event loop, its garbage collector) would otherwise count as the gateway's. `startScheduledProbe` forks
// this file; the child probes until told to stop and sends back what it measured.

import { fork } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import type { HttpTarget } from './load.ts';
import { type Summary, summarize } from './stats.ts';

export interface LoopResult {
  ok: number;
  failed: number;
  firstError?: string;
  ms: Summary;
}

/**
 * Requests sent every `intervalMs`, whatever the answers do, each timed from when it was due: a gateway
 * that stalls for a second shows a second of latency on every request due in it, not on one request (a
 * sequential loop would hide the stall in its p99).
 */
export async function scheduledLoop(
  target: HttpTarget,
  intervalMs: number,
  stop: () => boolean,
): Promise<LoopResult> {
  const pool = new Pool(target.origin, { connections: 8, pipelining: 1, keepAliveTimeout: 60_000 });
  const samples: number[] = [];
  let failed = 0;
  let firstError: string | undefined;
  const pending: Promise<void>[] = [];
  let due = performance.now();
  while (!stop()) {
    const scheduled = due;
    pending.push(
      pool.request({ path: target.path, method: target.method, headers: target.headers }).then(
        async (res) => {
          const text = await res.body.text();
          if (res.statusCode >= 300) {
            failed++;
            firstError ??= `${res.statusCode} ${text.slice(0, 200)}`;
          } else samples.push(performance.now() - scheduled);
        },
        (err: unknown) => {
          failed++;
          firstError ??= err instanceof Error ? `${err.name}: ${err.message}` : String(err);
        },
      ),
    );
    due += intervalMs;
    const wait = due - performance.now();
    // Timers truncate to whole milliseconds: rounding down would send early and time from the future.
    if (wait > 0) await sleep(Math.ceil(wait));
  }
  await Promise.all(pending);
  await pool.close().catch(() => undefined);
  return { ok: samples.length, failed, firstError, ms: summarize(samples) };
}

interface ProbeStart {
  target: HttpTarget;
  intervalMs: number;
}

/** Starts the probe in a child process; `stop()` ends it and resolves to what it measured. */
export async function startScheduledProbe(
  target: HttpTarget,
  intervalMs: number,
): Promise<{ stop(): Promise<LoopResult> }> {
  const child = fork(fileURLToPath(import.meta.url), ['--child'], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const result = new Promise<LoopResult>((resolve, reject) => {
    child.once('message', (m) => resolve(m as LoopResult));
    child.once('exit', (code) => reject(new Error(`the /healthz probe exited (${code}) before its result`)));
  });
  await new Promise<void>((resolve) => child.once('spawn', () => resolve()));
  child.send({ target, intervalMs } satisfies ProbeStart);
  return {
    async stop() {
      child.send('stop');
      return result;
    },
  };
}

if (process.argv.includes('--child')) {
  process.once('message', (start: ProbeStart) => {
    let stopped = false;
    process.on('message', (m) => {
      if (m === 'stop') stopped = true;
    });
    void scheduledLoop(start.target, start.intervalMs, () => stopped).then((r) => {
      process.send?.(r, () => process.exit(0));
    });
  });
}
