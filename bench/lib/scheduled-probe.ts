// A request on a fixed schedule, timed from when it was due, run in a process of its own: the bench
// process opens thousands of sockets and builds large prompts while it probes, and its own stalls (its
// event loop, its garbage collector) would otherwise count as the gateway's. `startScheduledProbe` forks
// this file; the child probes until told to stop and sends back what it measured. Given the gateway's
// pid, each request also reads how long the gateway's main thread and the probe's own thread ran and
// waited for a CPU meanwhile (/proc schedstat), which tells a stall of the gateway's loop from the
// scheduler's queue on a shared machine; the slowest requests keep those figures. The child runs at
// PROBE_NICE where that is permitted: its own wait for a CPU would otherwise read as the gateway's delay.

import { fork } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import type { HttpTarget } from './load.ts';
import { reniceThreads, round, threadSchedMs } from './proc.ts';
import { type Summary, summarize } from './stats.ts';

/** One request, timed from when it was due, and what the two threads did in that time (ms). */
export interface SlowRequest {
  ms: number;
  /** How late the probe sent it (its own timer and event loop). */
  lateMs: number;
  /** The gateway's main thread: on a CPU, and runnable but waiting for one. */
  gatewayRunMs?: number;
  gatewayWaitMs?: number;
  /** The probe's thread, runnable but waiting for a CPU. */
  probeWaitMs?: number;
}

export interface LoopResult {
  ok: number;
  failed: number;
  firstError?: string;
  ms: Summary;
  /** The slowest requests, slowest first (with the gateway's pid given). */
  slowest?: SlowRequest[];
  /** The probe process's nice value, when it was raised above the default. */
  probeNice?: number;
}

const PROBE_NICE = -10;
const WARM_ROUNDS = 5;

const SLOWEST_KEPT = 5;

function schedDelta(
  path: string,
  from: { runMs: number; waitMs: number } | undefined,
): { runMs: number; waitMs: number } | undefined {
  const to = from && threadSchedMs(path);
  return to && { runMs: round(to.runMs - from!.runMs), waitMs: round(to.waitMs - from!.waitMs) };
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
  gatewayPid?: number,
  warmed?: () => void,
): Promise<LoopResult> {
  const pool = new Pool(target.origin, { connections: 8, pipelining: 1, keepAliveTimeout: 60_000 });
  if (warmed !== undefined) {
    // A new process's first requests are slow for its own reasons (compiling, connecting).
    for (let round = 0; round < WARM_ROUNDS; round++) {
      const warm = () => pool.request({ path: target.path, method: target.method, headers: target.headers });
      await Promise.all(Array.from({ length: 8 }, async () => (await warm()).body.text()));
    }
    warmed();
  }
  const samples: number[] = [];
  const slowest: SlowRequest[] = [];
  const gatewayPath = `/proc/${gatewayPid}/task/${gatewayPid}/schedstat`;
  const probePath = '/proc/thread-self/schedstat';
  let failed = 0;
  let firstError: string | undefined;
  const pending: Promise<void>[] = [];
  let due = performance.now();
  while (!stop()) {
    const scheduled = due;
    const lateMs = round(performance.now() - scheduled);
    const gatewayFrom = gatewayPid === undefined ? undefined : threadSchedMs(gatewayPath);
    const probeFrom = gatewayPid === undefined ? undefined : threadSchedMs(probePath);
    pending.push(
      pool.request({ path: target.path, method: target.method, headers: target.headers }).then(
        async (res) => {
          const text = await res.body.text();
          if (res.statusCode >= 300) {
            failed++;
            firstError ??= `${res.statusCode} ${text.slice(0, 200)}`;
            return;
          }
          const ms = performance.now() - scheduled;
          samples.push(ms);
          if (gatewayPid === undefined) return;
          if (slowest.length === SLOWEST_KEPT && ms <= slowest[SLOWEST_KEPT - 1]!.ms) return;
          const gateway = schedDelta(gatewayPath, gatewayFrom);
          slowest.push({
            ms: round(ms),
            lateMs,
            gatewayRunMs: gateway?.runMs,
            gatewayWaitMs: gateway?.waitMs,
            probeWaitMs: schedDelta(probePath, probeFrom)?.waitMs,
          });
          slowest.sort((a, b) => b.ms - a.ms);
          slowest.length = Math.min(slowest.length, SLOWEST_KEPT);
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
  return {
    ok: samples.length,
    failed,
    firstError,
    ms: summarize(samples),
    ...(gatewayPid === undefined ? {} : { slowest }),
  };
}

interface ProbeStart {
  target: HttpTarget;
  intervalMs: number;
  gatewayPid?: number;
}

/**
 * Starts the probe in a child process and resolves once it has warmed up and started its schedule;
 * `stop()` ends it and resolves to what it measured.
 */
export async function startScheduledProbe(
  target: HttpTarget,
  intervalMs: number,
  gatewayPid?: number,
): Promise<{ stop(): Promise<LoopResult> }> {
  const child = fork(fileURLToPath(import.meta.url), ['--child'], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const { promise: started, resolve: ready } = Promise.withResolvers<void>();
  const result = new Promise<LoopResult>((resolve, reject) => {
    child.on('message', (m) => (m === 'ready' ? ready() : resolve(m as LoopResult)));
    child.once('exit', (code) => reject(new Error(`the /healthz probe exited (${code}) before its result`)));
  });
  await new Promise<void>((resolve) => child.once('spawn', () => resolve()));
  child.send({ target, intervalMs, gatewayPid } satisfies ProbeStart);
  await Promise.race([started, result]);
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
    void (async () => {
      const raised = await reniceThreads(process.pid, PROBE_NICE);
      const r = await scheduledLoop(
        start.target,
        start.intervalMs,
        () => stopped,
        start.gatewayPid,
        () => process.send?.('ready'),
      );
      process.send?.(raised === undefined ? r : { ...r, probeNice: PROBE_NICE }, () => process.exit(0));
    })();
  });
}
