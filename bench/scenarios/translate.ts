// Scenario 3: the translation path. Completion-style streams answered by an Anthropic upstream (the
// gateway's anthropic provider maps chat.completions -> Messages and the stream back; Portkey does the
// same with x-portkey-provider: anthropic), against the native Messages stream straight from the
// simulator and through nginx. Paced streams show the added latency, unpaced ones the CPU cost.

import { type BenchContext, eachPeer, type Measured } from '../lib/context.ts';
import type { PeerId } from '../lib/peers.ts';
import { monitorResources } from '../lib/proc.ts';
import { nativeMessagesTarget, pacedModel, TRANSLATE_MODEL, translateTarget } from '../lib/requests.ts';
import { runStreams, type StreamLoadResult } from '../lib/stream-client.ts';

export type UnpacedResult = StreamLoadResult & { streamsPerSec: number };

/** The gateway's CPU per stream on one unpaced run. */
export interface CpuPerStream {
  streams: number;
  cpuPercent: number;
  /** CPU time of the gateway process tree per completed stream, microseconds. */
  cpuUsPerStream: number;
}

export interface TranslateResult {
  pacedModel: string;
  unpacedModel: string;
  paced: Partial<Record<PeerId, Measured<StreamLoadResult>>>;
  unpaced: Partial<Record<PeerId, Measured<UnpacedResult>>>;
  /**
   * The same upstream stream through the gateway, translated (chat.completions client) and untranslated
   * (native Messages client), one after the other at the unpaced concurrency; the goal is translated /
   * native <= 2.
   */
  gatewayCpu?: Measured<{ translated: CpuPerStream; native: CpuPerStream; ratio: number }>;
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
  return {
    pacedModel: paced,
    unpacedModel: unpaced,
    paced: pacedRuns,
    unpaced: unpacedRuns,
    gatewayCpu: await gatewayCpu(ctx, unpaced),
  };
}

async function gatewayCpu(ctx: BenchContext, model: string): Promise<TranslateResult['gatewayCpu']> {
  const peer = ctx.peers.get('gateway');
  if (peer === undefined) return undefined;
  const s = ctx.settings.translate;
  const measure = async (target: ReturnType<typeof translateTarget>): Promise<CpuPerStream> => {
    const monitor = await monitorResources(peer.service.pid);
    const r = await runStreams({
      target,
      concurrency: s.unpacedConcurrency,
      durationMs: s.unpacedMs,
      rampMs: 0,
    });
    const { cpuPercent } = await monitor.stop();
    if (r.errors > 0) throw new Error(`${r.errors} stream errors: ${r.firstError ?? ''}`);
    const cpuUs = (cpuPercent / 100) * r.wallMs * 1000;
    return { streams: r.streams, cpuPercent, cpuUsPerStream: Math.round(cpuUs / Math.max(1, r.streams)) };
  };
  try {
    // Rounds alternate the two so drift on the shared machine hits both; the median round is kept.
    const rounds: { translated: CpuPerStream; native: CpuPerStream; ratio: number }[] = [];
    for (let round = 1; round <= (ctx.settings.smoke ? 1 : 3); round++) {
      ctx.log(`  translate cpu round ${round}: gateway native Messages, then translated`);
      const native = await measure(nativeMessagesTarget(peer, ctx.upstream.url, model));
      const translated = await measure(translateTarget(peer, ctx.upstream.url, model));
      const ratio = Math.round((translated.cpuUsPerStream / native.cpuUsPerStream) * 100) / 100;
      rounds.push({ translated, native, ratio });
    }
    rounds.sort((a, b) => a.ratio - b.ratio);
    return rounds[Math.floor(rounds.length / 2)];
  } catch (err) {
    return { error: err instanceof Error ? err.message : String(err) };
  }
}
