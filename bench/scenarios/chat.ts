// Scenario 1: non-streaming chat with a small body. Throughput at concurrency 64 (autocannon, after a
// short warm-up) and latency at concurrency 1 (sequential requests, sub-millisecond resolution).

import { type BenchContext, eachPeer, isError, type Measured } from '../lib/context.ts';
import { type LatencyResult, sequentialLatency, type ThroughputResult, throughput } from '../lib/load.ts';
import type { PeerId } from '../lib/peers.ts';
import { chatTarget } from '../lib/requests.ts';

export interface ChatResult {
  throughput: Partial<Record<PeerId, Measured<ThroughputResult>>>;
  latency: Partial<Record<PeerId, Measured<LatencyResult>>>;
  /** The gateway at `log.level: warn` still wrote per-request access log lines (so every row paid for them). */
  accessLogAtWarn?: boolean;
}

export const CHAT_PEERS: PeerId[] = [
  'direct',
  'nginx',
  'gateway',
  'gateway-billing',
  'gateway-redis',
  'portkey',
  'gateway-info-log',
];

export async function runChat(ctx: BenchContext): Promise<ChatResult> {
  const s = ctx.settings.chat;
  const targetOf = (peer: Parameters<typeof chatTarget>[0]) => chatTarget(peer, ctx.upstream.url);
  // The machine is shared by the load generator, the simulator and the peer, and runs vary by tens of
  // percent: measure in rounds (every peer once per round, so a noisy minute hits all of them) and keep
  // each peer's median round.
  const rounds: Partial<Record<PeerId, Measured<ThroughputResult>>>[] = [];
  for (let round = 0; round < s.rounds; round++) {
    rounds.push(
      await eachPeer(
        ctx,
        CHAT_PEERS,
        `chat throughput c=${s.connections} (round ${round + 1}/${s.rounds})`,
        targetOf,
        async (_p, target) => {
          if (round === 0) await throughput(target, s.connections, s.warmupS);
          return throughput(target, s.connections, s.throughputS / s.rounds);
        },
      ),
    );
  }
  const tp: Partial<Record<PeerId, Measured<ThroughputResult>>> = {};
  for (const id of CHAT_PEERS) {
    const results = rounds.map((r) => r[id]).filter((r) => r !== undefined);
    if (results.length === 0) continue;
    const good = results.filter((r): r is ThroughputResult => !isError(r));
    if (good.length === 0) {
      tp[id] = results[0];
      continue;
    }
    good.sort((a, b) => a.requestsPerSec - b.requestsPerSec);
    tp[id] = { ...good[Math.floor(good.length / 2)], rounds: good.map((g) => g.requestsPerSec) };
  }
  const latencyPeers = CHAT_PEERS.filter((id) => id !== 'gateway-info-log');
  const latency = await eachPeer(ctx, latencyPeers, 'chat latency c=1', targetOf, (_p, target) =>
    sequentialLatency(target, s.latencyCount, s.latencyWarmup),
  );
  const quiet = ctx.peers.get('gateway');
  const accessLogAtWarn =
    quiet === undefined ? undefined : quiet.service.output().includes('"msg":"request"');
  return { throughput: tp, latency, accessLogAtWarn };
}
