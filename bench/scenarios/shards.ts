// Billing events per Redis stream shard (docs/scaling.md). For each variant (one endpoint or a cluster of
// three primaries; 1 or 4 shards) writes N usage events into the shards' streams, as the gateway's queue
// would while no sidecar runs, then starts one sidecar against the billing simulator and measures how
// fast it drains them and the CPU the drain costs the sidecar and Redis.

import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, Redis } from 'ioredis';
import { loadConfig } from '../../config/load.ts';
import { createKeyLayout } from '../../store/redis-client.ts';
import type { BenchContext, Measured } from '../lib/context.ts';
import { SIDECAR_V8_FLAGS, startBillingSimProcess, startRedis, writeGatewayConfig } from '../lib/peers.ts';
import { freePort, hwmMb, rssMb, startService } from '../lib/proc.ts';
import { startRedisCluster } from '../lib/redis-cluster.ts';
import { usageEvent } from './backlog.ts';

const VARIANTS = [
  { label: 'endpoint, 1 shard', cluster: false, shards: 1 },
  { label: 'endpoint, 4 shards', cluster: false, shards: 4 },
  { label: 'cluster of 3, 1 shard', cluster: true, shards: 1 },
  { label: 'cluster of 3, 4 shards', cluster: true, shards: 4 },
];

export interface ShardsRun {
  cluster: boolean;
  shards: number;
  events: number;
  /** XADDs from the bench, pipelined per shard. */
  writeEventsPerSec: number;
  /** Sidecar spawn -> streams empty. */
  drainMs: number;
  /** The figures below cover sidecar ready (first /readyz answer) -> streams empty, and the events delivered meanwhile. */
  drainAfterReadyMs: number;
  measuredEvents: number;
  eventsPerSec: number;
  eventsPerSecPerShard: number;
  sidecarCpuUsPerEvent: number;
  /** Summed over the Redis servers (three in a cluster). */
  redisCpuUsPerEvent: number;
  /** The billing simulator stands in for a remote service; its share says how much of the machine it took. */
  billingSimCpuUsPerEvent: number;
  sidecarPeakRssMb: number;
  sidecarHwmMb: number;
  delivered: number;
  acceptedByBillingSim: number;
  drained: boolean;
  lastReadyz?: string;
}

export interface ShardsResult {
  cores: number;
  runs: Record<string, Measured<ShardsRun>>;
}

interface Readyz {
  delivery?: { pending?: number | null; delivered?: number };
}

interface Store {
  addr: string;
  pids: number[];
  stop(): Promise<void>;
}

export async function runShards(ctx: BenchContext): Promise<ShardsResult> {
  const runs: Record<string, Measured<ShardsRun>> = {};
  for (const [i, v] of VARIANTS.entries()) {
    ctx.log(`  shards: ${v.label}`);
    runs[v.label] = await runVariant(ctx, `shards-${i}`, v).catch((err: unknown) => ({
      error: err instanceof Error ? err.message : String(err),
    }));
  }
  return { cores: availableParallelism(), runs };
}

async function startStore(ctx: BenchContext, name: string, cluster: boolean): Promise<Store> {
  if (cluster) {
    const c = await startRedisCluster(ctx.workspace, `redis-${name}`);
    if ('reason' in c) throw new Error(c.reason);
    return { addr: c.seeds, pids: c.services.map((s) => s.pid), stop: c.stop };
  }
  const r = await startRedis(ctx.workspace);
  if ('reason' in r) throw new Error(r.reason);
  return { addr: r.url, pids: [r.service.pid], stop: () => r.service.stop() };
}

async function runVariant(
  ctx: BenchContext,
  name: string,
  v: { cluster: boolean; shards: number },
): Promise<ShardsRun> {
  const n = ctx.settings.shards.events;
  const store = await startStore(ctx, name, v.cluster);
  try {
    const billing = await startBillingSimProcess(ctx.workspace, `billing-sim-${name}`);
    try {
      const sidecarPort = await freePort();
      const configFile = await writeGatewayConfig(ctx.workspace, name, {
        listenPort: await freePort(),
        billingUrl: billing.url,
        redisUrl: store.addr,
        store: { cluster: v.cluster, shards: v.shards },
        sidecarPort,
      });
      // The sidecar's own reading of the file, so the streams written are the ones it consumes.
      const { config } = await loadConfig(configFile);
      if (config === undefined) throw new Error(`${configFile} does not load`);
      const streams = createKeyLayout(config.store).shards.map((s) => s.stream);
      const writeMs = await writeEvents(store.addr, v.cluster, streams, n);
      const drain = await drainWithSidecar(ctx, name, configFile, sidecarPort, n, {
        redis: store.pids,
        billingSim: [billing.service.pid],
      });
      const state = (await fetch(`${billing.url}/_sim/state`).then((r) => r.json())) as {
        accepted?: unknown;
      };
      return {
        cluster: v.cluster,
        shards: v.shards,
        events: n,
        writeEventsPerSec: Math.round(n / (writeMs / 1000)),
        ...drain,
        eventsPerSecPerShard: Math.round(drain.eventsPerSec / v.shards),
        acceptedByBillingSim: typeof state.accepted === 'number' ? state.accepted : -1,
      };
    } finally {
      await billing.service.stop();
    }
  } finally {
    await store.stop();
  }
}

/** N events round-robin over the streams, in the entry format of proxy/redis-queue.ts; returns ms. */
async function writeEvents(addr: string, cluster: boolean, streams: string[], n: number): Promise<number> {
  const seeds = addr.split(',').map((u) => new URL(u));
  const client = cluster
    ? new Cluster(seeds.map((u) => ({ host: u.hostname, port: Number(u.port) })))
    : new Redis(addr);
  const runId = Date.now().toString(36);
  const started = performance.now();
  try {
    const batch = 4000;
    for (let i = 0; i < n; i += batch) {
      // One pipeline per stream: in a cluster each stream is one slot, so one node.
      const pipes = streams.map(() => client.pipeline());
      for (let j = i; j < Math.min(n, i + batch); j++) {
        const k = j % streams.length;
        pipes[k]!.xadd(streams[k]!, '*', 'payload', JSON.stringify(usageEvent(runId, j)));
      }
      const replies = await Promise.all(pipes.filter((p) => p.length > 0).map((p) => p.exec()));
      for (const [err] of replies.flatMap((r) => r ?? [])) if (err) throw err;
    }
    const queued = (await Promise.all(streams.map((s) => client.xlen(s)))).reduce((a, b) => a + b, 0);
    if (queued !== n) throw new Error(`wrote ${n} events but the streams hold ${queued}`);
    return performance.now() - started;
  } finally {
    client.disconnect();
  }
}

type Drain = Omit<
  ShardsRun,
  'cluster' | 'shards' | 'events' | 'writeEventsPerSec' | 'eventsPerSecPerShard' | 'acceptedByBillingSim'
>;

async function drainWithSidecar(
  ctx: BenchContext,
  name: string,
  configFile: string,
  sidecarPort: number,
  n: number,
  pids: { redis: number[]; billingSim: number[] },
): Promise<Drain> {
  const spawned = performance.now();
  const sidecar = startService(
    `sidecar-${name}`,
    process.execPath,
    [
      ...SIDECAR_V8_FLAGS,
      ...ctx.workspace.sidecarNodeFlags(name),
      join(ctx.workspace.repo, 'bin/sidecar-main.ts'),
      '-c',
      configFile,
    ],
    { logFile: join(ctx.workspace.tmp, `sidecar-${name}.log`) },
  );
  const snapshot = async (delivered: number) => ({
    at: performance.now(),
    delivered,
    sidecar: await cpuTicks([sidecar.pid]),
    redis: await cpuTicks(pids.redis),
    billingSim: await cpuTicks(pids.billingSim),
  });
  const atSpawn = await snapshot(0);
  let ready: typeof atSpawn | undefined;
  let drainedAt: number | undefined;
  let delivered = 0;
  let peakRss = 0;
  let last = '';
  const deadline = spawned + ctx.settings.shards.timeoutMs;
  try {
    while (performance.now() < deadline) {
      if (!sidecar.alive()) throw new Error(`sidecar exited: ${sidecar.output().slice(-1000)}`);
      peakRss = Math.max(peakRss, await rssMb(sidecar.pid));
      try {
        const res = await fetch(`http://127.0.0.1:${sidecarPort}/readyz`, {
          signal: AbortSignal.timeout(2000),
        });
        last = await res.text();
        const body = JSON.parse(last) as Readyz;
        delivered = body.delivery?.delivered ?? delivered;
        ready ??= await snapshot(delivered);
        if (body.delivery?.pending === 0 && delivered >= n) {
          drainedAt = performance.now();
          break;
        }
      } catch {
        // not listening yet
      }
      // Often until ready: what the sidecar delivers before its first answer is not measured.
      await sleep(ready === undefined ? 10 : 100);
    }
    const to = await snapshot(delivered);
    const end = drainedAt ?? to.at;
    const from = ready ?? atSpawn;
    const measured = delivered - from.delivered;
    const usPerEvent = (ticks: number) =>
      measured > 0 ? round((ticks / ticksPerSecond() / measured) * 1e6) : 0;
    const drainAfterReadyMs = end - from.at;
    return {
      drainMs: Math.round(end - spawned),
      drainAfterReadyMs: Math.round(drainAfterReadyMs),
      measuredEvents: measured,
      eventsPerSec: Math.round(measured / (drainAfterReadyMs / 1000)),
      sidecarCpuUsPerEvent: usPerEvent(to.sidecar - from.sidecar),
      redisCpuUsPerEvent: usPerEvent(to.redis - from.redis),
      billingSimCpuUsPerEvent: usPerEvent(to.billingSim - from.billingSim),
      sidecarPeakRssMb: peakRss,
      sidecarHwmMb: await hwmMb(sidecar.pid),
      delivered,
      drained: drainedAt !== undefined,
      lastReadyz: drainedAt === undefined ? last.slice(0, 500) : undefined,
    };
  } finally {
    await sidecar.stop();
  }
}

let clockTicks: number | undefined;
function ticksPerSecond(): number {
  clockTicks ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  return clockTicks;
}

/** utime + stime of the processes, in clock ticks (/proc/<pid>/stat fields 14 and 15). */
async function cpuTicks(pids: readonly number[]): Promise<number> {
  let ticks = 0;
  for (const pid of pids) {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // After the command name, which may itself contain spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    ticks += Number(fields[11]) + Number(fields[12]);
  }
  return ticks;
}

function round(x: number): number {
  return Math.round(x * 10) / 10;
}
