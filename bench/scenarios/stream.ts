// Scenario 2: streaming chat, `chunks` deltas `delayMs` apart. At low concurrency: time to first byte
// and the gaps between events (the proxy's added delay). At 1,000 concurrent streams: the same plus
// the peer's resident memory and CPU, read from /proc while the streams run.

import { type BenchContext, eachPeer, type Measured } from '../lib/context.ts';
import type { PeerId } from '../lib/peers.ts';
import { monitorResources, type ResourceUse } from '../lib/proc.ts';
import { CHAT_MODEL, chatTarget, pacedModel } from '../lib/requests.ts';
import { runStreams, type StreamLoadResult } from '../lib/stream-client.ts';

export type StreamWithResources = StreamLoadResult & { resources: ResourceUse };

export interface StreamResult {
  model: string;
  low: Partial<Record<PeerId, Measured<StreamLoadResult>>>;
  many: Partial<Record<PeerId, Measured<StreamWithResources>>>;
}

export const STREAM_PEERS: PeerId[] = [
  'direct',
  'nginx',
  'node-floor',
  'gateway',
  'gateway-billing',
  'gateway-redis',
  'portkey',
];

export async function runStream(ctx: BenchContext): Promise<StreamResult> {
  const s = ctx.settings.stream;
  const model = pacedModel(CHAT_MODEL, s.chunks, s.delayMs);
  const targetOf = (peer: Parameters<typeof chatTarget>[0]) =>
    chatTarget(peer, ctx.upstream.url, { model, stream: true });
  const low = await eachPeer(ctx, STREAM_PEERS, `stream c=${s.lowConcurrency}`, targetOf, (_p, target) =>
    runStreams({ target, concurrency: s.lowConcurrency, durationMs: s.lowMs }),
  );
  const many = await eachPeer(ctx, STREAM_PEERS, `stream c=${s.bigConcurrency}`, targetOf, (peer, target) =>
    streamsWithResources(peer.service.pid, { target, concurrency: s.bigConcurrency, durationMs: s.bigMs }),
  );
  return { model, low, many };
}

export async function streamsWithResources(
  pid: number,
  opts: Parameters<typeof runStreams>[0],
): Promise<StreamWithResources> {
  const monitor = await monitorResources(pid);
  try {
    const result = await runStreams(opts);
    return { ...result, resources: await monitor.stop() };
  } catch (err) {
    await monitor.stop();
    throw err;
  }
}
