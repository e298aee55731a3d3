// Scenario 1: non-streaming chat with a small body. Throughput at concurrency 64 (autocannon, after a
// warm-up long enough for V8's compilation to settle) and latency at concurrency 1 (sequential
// requests, sub-millisecond resolution).

import { type BenchContext, eachPeer, isError, type Measured } from '../lib/context.ts';
import { type LatencyResult, latencySamples, type ThroughputResult, throughput } from '../lib/load.ts';
import { type PeerId, waitForBillingDrain } from '../lib/peers.ts';
import { chatTarget } from '../lib/requests.ts';
import { summarize } from '../lib/stats.ts';

export interface ChatResult {
  throughput: Partial<Record<PeerId, Measured<ThroughputResult>>>;
  latency: Partial<Record<PeerId, Measured<LatencyResult>>>;
  /** The gateway at `log.level: warn` still wrote per-request access log lines (so every row paid for them). */
  accessLogAtWarn?: boolean;
}

export const CHAT_PEERS: PeerId[] = [
  'direct',
  'nginx',
  'node-floor',
  'gateway',
  'gateway-billing',
  'gateway-redis',
  'portkey',
  'gateway-info-log',
  'gateway-traced',
];

const BILLING_PEERS: ReadonlySet<PeerId> = new Set(['gateway-billing', 'gateway-redis']);

export async function runChat(ctx: BenchContext): Promise<ChatResult> {
  const s = ctx.settings.chat;
  const targetOf = (peer: Parameters<typeof chatTarget>[0]) => chatTarget(peer, ctx.upstream.url);
  // The machine is shared by the load generator, the simulator and the peer, and runs vary by tens of
  // percent: measure in rounds (every peer once per round, so a noisy minute hits all of them) and keep
  // each peer's median round. Every other round runs the peers in reverse order: what a peer's run
  // leaves behind (the load generator's garbage, a sidecar's last deliveries) then weighs on each alike.
  const rounds: Partial<Record<PeerId, Measured<ThroughputResult>>>[] = [];
  for (let round = 0; round < s.rounds; round++) {
    rounds.push(
      await eachPeer(
        ctx,
        inRoundOrder(CHAT_PEERS, round),
        `chat throughput c=${s.connections} (round ${round + 1}/${s.rounds})`,
        targetOf,
        async (peer, target) => {
          const billing = BILLING_PEERS.has(peer.id);
          if (round === 0) {
            await throughput(target, s.connections, s.warmupS);
            if (billing) await waitForBillingDrain(peer);
          }
          const result = await throughput(target, s.connections, s.throughputS / s.rounds);
          // The sidecar keeps delivering this round's events after it: let it finish before the next
          // peer's round, so that its work is not charged to that peer.
          if (billing) await waitForBillingDrain(peer);
          return result;
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
    const sorted = [...good].sort((a, b) => a.requestsPerSec - b.requestsPerSec);
    // Rounds stay in measuring order (a failed round is NaN): the report pairs peers round by round.
    const inOrder = rounds.map((r) => {
      const x = r[id];
      return x === undefined || isError(x) ? Number.NaN : x.requestsPerSec;
    });
    tp[id] = { ...sorted[Math.floor(sorted.length / 2)]!, rounds: inOrder };
  }
  // Latency at c=1 in the same interleaved rounds, every sample pooled per peer: a slow minute of the
  // machine then lands on every peer alike instead of on whichever peer it happened to meet.
  const latencyPeers = CHAT_PEERS.filter((id) => id !== 'gateway-info-log' && id !== 'gateway-traced');
  const perRound = Math.max(1, Math.round(s.latencyCount / s.rounds));
  const pooled = new Map<
    PeerId,
    { samples: Float64Array[]; p50s: number[]; errors: number; firstError?: string }
  >();
  const latency: Partial<Record<PeerId, Measured<LatencyResult>>> = {};
  for (let round = 0; round < s.rounds; round++) {
    const measured = await eachPeer(
      ctx,
      inRoundOrder(latencyPeers, round),
      `chat latency c=1 (round ${round + 1}/${s.rounds})`,
      targetOf,
      (_p, target) => latencySamples(target, perRound, round === 0 ? s.latencyWarmup : s.latencyWarmup / 5),
    );
    for (const id of latencyPeers) {
      const m = measured[id];
      if (m === undefined) continue;
      if (isError(m)) {
        latency[id] ??= m;
        continue;
      }
      const acc = pooled.get(id) ?? { samples: [], p50s: [], errors: 0 };
      acc.samples.push(m.samples);
      acc.p50s.push(summarize(Float64Array.from(m.samples)).p50);
      acc.errors += m.errors;
      acc.firstError ??= m.firstError;
      pooled.set(id, acc);
    }
  }
  for (const [id, acc] of pooled) {
    const all = new Float64Array(acc.samples.reduce((n, a) => n + a.length, 0));
    let at = 0;
    for (const a of acc.samples) {
      all.set(a, at);
      at += a.length;
    }
    latency[id] = {
      requests: all.length,
      errors: acc.errors,
      firstError: acc.firstError,
      ms: summarize(all),
      roundP50s: acc.p50s,
    };
  }
  const quiet = ctx.peers.get('gateway');
  const accessLogAtWarn =
    quiet === undefined ? undefined : quiet.service.output().includes('"msg":"request"');
  return { throughput: tp, latency, accessLogAtWarn };
}

/** The peers of round `round`: as listed in even rounds, reversed in odd ones. */
export function inRoundOrder<T>(peers: readonly T[], round: number): readonly T[] {
  return round % 2 === 0 ? peers : [...peers].reverse();
}
