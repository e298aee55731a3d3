// Scenario 3: the translation path. Completion-style streams answered by an Anthropic upstream (the
// gateway's anthropic provider maps chat.completions -> Messages and the stream back; Portkey does the
// same with x-portkey-provider: anthropic), against the native Messages stream straight from the
// simulator and through nginx. Paced streams show the added latency, unpaced ones the CPU cost.

import { type BenchContext, eachPeer, type Measured } from '../lib/context.ts';
import type { PeerId } from '../lib/peers.ts';
import { pacedModel, TRANSLATE_MODEL, translateTarget } from '../lib/requests.ts';
import { runStreams, type StreamLoadResult } from '../lib/stream-client.ts';

export type UnpacedResult = StreamLoadResult & { streamsPerSec: number };

export interface TranslateResult {
  pacedModel: string;
  unpacedModel: string;
  paced: Partial<Record<PeerId, Measured<StreamLoadResult>>>;
  unpaced: Partial<Record<PeerId, Measured<UnpacedResult>>>;
}

export const TRANSLATE_PEERS: PeerId[] = ['direct', 'nginx', 'gateway', 'portkey'];

export async function runTranslate(ctx: BenchContext): Promise<TranslateResult> {
  const s = ctx.settings.translate;
  const st = ctx.settings.stream;
  const paced = pacedModel(TRANSLATE_MODEL, st.chunks, st.delayMs);
  const unpaced = pacedModel(TRANSLATE_MODEL, st.chunks, 0);
  const pacedRuns = await eachPeer(
    ctx,
    TRANSLATE_PEERS,
    `translate paced c=${s.lowConcurrency}`,
    (peer) => translateTarget(peer, ctx.upstream.url, paced),
    (_p, target) => runStreams({ target, concurrency: s.lowConcurrency, durationMs: s.lowMs }),
  );
  const unpacedRuns = await eachPeer(
    ctx,
    TRANSLATE_PEERS,
    `translate unpaced c=${s.unpacedConcurrency}`,
    (peer) => translateTarget(peer, ctx.upstream.url, unpaced),
    async (_p, target) => {
      const r = await runStreams({
        target,
        concurrency: s.unpacedConcurrency,
        durationMs: s.unpacedMs,
        rampMs: 0,
      });
      return { ...r, streamsPerSec: Math.round((r.streams / r.wallMs) * 10_000) / 10 };
    },
  );
  return { pacedModel: paced, unpacedModel: unpaced, paced: pacedRuns, unpaced: unpacedRuns };
}
