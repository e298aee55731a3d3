// Scenario 7: one host, several processes. The same chat load (c=64) against one gateway process and
// against `workers: 2`, in interleaved rounds, with the CPU of each process tree read from /proc: requests
// per second and CPU per request. On a machine whose cores are shared with the load generator and the
// simulator, more workers cannot show more throughput; CPU per request says whether a worker costs what
// a lone process does (the primary's share included: it accepts connections and hands them on).

import { type BenchContext, eachPeer, isError, type Measured } from '../lib/context.ts';
import { throughput } from '../lib/load.ts';
import type { PeerId } from '../lib/peers.ts';
import { monitorResources, round } from '../lib/proc.ts';
import { chatTarget } from '../lib/requests.ts';

export const WORKERS_PEERS: PeerId[] = ['gateway', 'gateway-2w'];

export interface WorkersRun {
  requestsPerSec: number;
  /** CPU of the whole process tree (primary, workers) per request served, µs. */
  cpuUsPerRequest: number;
  /** Per round, in measuring order. */
  rounds: { requestsPerSec: number; cpuUsPerRequest: number }[];
}

export interface WorkersResult {
  connections: number;
  cores: number;
  runs: Partial<Record<PeerId, Measured<WorkersRun>>>;
}

export async function runWorkers(ctx: BenchContext, cores: number): Promise<WorkersResult> {
  const s = ctx.settings.chat;
  const perRound: Record<string, { requestsPerSec: number; cpuUsPerRequest: number }[]> = {};
  const failures: Partial<Record<PeerId, Measured<WorkersRun>>> = {};
  for (let r = 0; r < s.rounds; r++) {
    // The order flips every round so that neither peer always follows the other.
    const order = r % 2 === 0 ? WORKERS_PEERS : [...WORKERS_PEERS].reverse();
    const measured = await eachPeer(
      ctx,
      order,
      `workers c=${s.connections} (round ${r + 1}/${s.rounds})`,
      (peer) => chatTarget(peer, ctx.upstream.url),
      async (peer, target) => {
        if (r === 0) await throughput(target, s.connections, s.warmupS);
        const monitor = await monitorResources(peer.service.pid);
        const t = await throughput(target, s.connections, s.throughputS / s.rounds);
        const use = await monitor.stop();
        const served = t.total2xx;
        return {
          requestsPerSec: t.requestsPerSec,
          cpuUsPerRequest:
            served === 0 ? Number.NaN : round(((use.cpuPercent / 100) * t.durationS * 1e6) / served, 1),
        };
      },
    );
    for (const [id, m] of Object.entries(measured) as [
      PeerId,
      Measured<{ requestsPerSec: number; cpuUsPerRequest: number }>,
    ][]) {
      if (isError(m)) failures[id] ??= m;
      else {
        perRound[id] ??= [];
        perRound[id].push(m);
      }
    }
  }
  const runs: Partial<Record<PeerId, Measured<WorkersRun>>> = { ...failures };
  for (const [id, rounds] of Object.entries(perRound) as [PeerId, WorkersRun['rounds']][]) {
    runs[id] = {
      requestsPerSec: median(rounds.map((x) => x.requestsPerSec)),
      cpuUsPerRequest: median(rounds.map((x) => x.cpuUsPerRequest)),
      rounds,
    };
  }
  return { connections: s.connections, cores, runs };
}

function median(values: number[]): number {
  const sorted = values.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
  return sorted.length === 0 ? Number.NaN : sorted[Math.floor(sorted.length / 2)]!;
}
