// Scenario 4: growth. Larger prompts (1 KB, 100 KB, 1 MB, non-streaming) and more concurrent streams
// (100, 1,000, 5,000), watching throughput, latency, memory and CPU of each peer. The streams here are
// slower (20 deltas 100 ms apart) than in scenario 2 so that 5,000 of them stay within what the
// simulator and the client can produce and read on two cores.

import { type BenchContext, eachPeer, type Measured } from '../lib/context.ts';
import { type ThroughputResult, throughput } from '../lib/load.ts';
import type { PeerId } from '../lib/peers.ts';
import { monitorResources, type ResourceUse } from '../lib/proc.ts';
import { CHAT_MODEL, chatTarget, pacedModel, promptOfSize } from '../lib/requests.ts';
import { type StreamWithResources, streamsWithResources } from './stream.ts';

export type PromptResult = ThroughputResult & { resources: ResourceUse };

export interface GrowthResult {
  streamModel: string;
  prompts: Record<string, Partial<Record<PeerId, Measured<PromptResult>>>>;
  streams: Record<string, Partial<Record<PeerId, Measured<StreamWithResources>>>>;
}

export const GROWTH_PEERS: PeerId[] = ['direct', 'nginx', 'gateway', 'gateway-2w', 'portkey'];

export function sizeLabel(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${bytes / (1024 * 1024)} MB` : `${bytes / 1024} KB`;
}

export async function runGrowth(ctx: BenchContext): Promise<GrowthResult> {
  const s = ctx.settings.growth;
  const prompts: GrowthResult['prompts'] = {};
  for (const bytes of s.promptBytes) {
    const content = promptOfSize(bytes);
    prompts[sizeLabel(bytes)] = await eachPeer(
      ctx,
      GROWTH_PEERS,
      `prompt ${sizeLabel(bytes)}`,
      (peer) => chatTarget(peer, ctx.upstream.url, { content }),
      async (peer, target) => {
        const monitor = await monitorResources(peer.service.pid);
        try {
          const r = await throughput(target, s.promptConnections, s.promptS);
          return { ...r, resources: await monitor.stop() };
        } catch (err) {
          await monitor.stop();
          throw err;
        }
      },
    );
  }
  const streamModel = pacedModel(CHAT_MODEL, s.streamChunks, s.streamDelayMs);
  const streams: GrowthResult['streams'] = {};
  for (const n of s.streams) {
    streams[String(n)] = await eachPeer(
      ctx,
      GROWTH_PEERS,
      `${n} streams`,
      (peer) => chatTarget(peer, ctx.upstream.url, { model: streamModel, stream: true }),
      (peer, target) =>
        streamsWithResources(peer.service.pid, {
          target,
          concurrency: n,
          durationMs: s.streamMs,
          rampMs: Math.min(2000, n),
          timeoutMs: 60_000,
        }),
    );
  }
  return { streamModel, prompts, streams };
}
