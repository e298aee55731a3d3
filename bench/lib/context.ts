// What every scenario gets: the settings of this run (full or smoke), the running peers, and a helper
// that measures each peer in turn and records a failure instead of stopping the run.

import { setTimeout as sleep } from 'node:timers/promises';
import { type HttpTarget, probe } from './load.ts';
import type { Peer, PeerId, Unavailable, UpstreamSimProcess, Workspace } from './peers.ts';

export interface Settings {
  smoke: boolean;
  chat: {
    warmupS: number;
    throughputS: number;
    /** Throughput is measured in this many interleaved rounds; each peer keeps its median. */
    rounds: number;
    connections: number;
    latencyCount: number;
    latencyWarmup: number;
  };
  stream: {
    chunks: number;
    delayMs: number;
    lowConcurrency: number;
    lowMs: number;
    bigConcurrency: number;
    bigMs: number;
  };
  translate: { lowConcurrency: number; lowMs: number; unpacedConcurrency: number; unpacedMs: number };
  growth: {
    promptBytes: number[];
    promptConnections: number;
    promptS: number;
    streams: number[];
    streamChunks: number;
    streamDelayMs: number;
    streamMs: number;
  };
  backlog: { events: number; timeoutMs: number };
  /** Per variant of the shards scenario. */
  shards: { events: number; timeoutMs: number };
  /**
   * Concurrent OpenAI Realtime sessions, one text response of `chunks` deltas `delayMs` apart each, in
   * `rounds` interleaved rounds per peer after a warm-up round.
   */
  realtime: {
    sessions: number;
    chunks: number;
    delayMs: number;
    rampMs: number;
    timeoutMs: number;
    rounds: number;
  };
  abuse: {
    /** /healthz is requested on this schedule, whatever the answers do. */
    probeIntervalMs: number;
    baselineMs: number;
    idleConnections: number;
    connectBatch: number;
    holdMs: number;
    abortPromptBytes: number;
    abortConcurrency: number;
    abortMs: number;
  };
}

export const FULL: Settings = {
  smoke: false,
  chat: { warmupS: 25, throughputS: 27, rounds: 9, connections: 64, latencyCount: 5000, latencyWarmup: 500 },
  stream: { chunks: 50, delayMs: 10, lowConcurrency: 10, lowMs: 5000, bigConcurrency: 1000, bigMs: 6000 },
  translate: { lowConcurrency: 10, lowMs: 5000, unpacedConcurrency: 64, unpacedMs: 5000 },
  growth: {
    promptBytes: [1024, 100 * 1024, 1024 * 1024],
    promptConnections: 16,
    promptS: 3,
    streams: [100, 1000, 5000],
    streamChunks: 20,
    streamDelayMs: 100,
    streamMs: 6000,
  },
  backlog: { events: 100_000, timeoutMs: 300_000 },
  shards: { events: 100_000, timeoutMs: 120_000 },
  realtime: { sessions: 500, chunks: 20, delayMs: 100, rampMs: 1000, timeoutMs: 60_000, rounds: 3 },
  // 10,000 idle connections stay within the bench process's own descriptor limit (ulimit -n).
  abuse: {
    probeIntervalMs: 10,
    baselineMs: 3000,
    idleConnections: 10_000,
    connectBatch: 500,
    holdMs: 10_000,
    abortPromptBytes: 150 * 1024,
    abortConcurrency: 2,
    abortMs: 60_000,
  },
};

export const SMOKE: Settings = {
  smoke: true,
  chat: { warmupS: 0.2, throughputS: 1, rounds: 1, connections: 16, latencyCount: 100, latencyWarmup: 10 },
  stream: { chunks: 10, delayMs: 10, lowConcurrency: 4, lowMs: 600, bigConcurrency: 40, bigMs: 800 },
  translate: { lowConcurrency: 4, lowMs: 600, unpacedConcurrency: 8, unpacedMs: 600 },
  growth: {
    promptBytes: [1024, 100 * 1024, 1024 * 1024],
    promptConnections: 4,
    promptS: 0.5,
    streams: [10, 20, 50],
    streamChunks: 5,
    streamDelayMs: 50,
    streamMs: 600,
  },
  backlog: { events: 1000, timeoutMs: 60_000 },
  shards: { events: 1000, timeoutMs: 60_000 },
  realtime: { sessions: 10, chunks: 5, delayMs: 50, rampMs: 100, timeoutMs: 20_000, rounds: 1 },
  abuse: {
    probeIntervalMs: 10,
    baselineMs: 200,
    idleConnections: 100,
    connectBatch: 50,
    holdMs: 300,
    abortPromptBytes: 1024,
    abortConcurrency: 1,
    abortMs: 500,
  },
};

export type Measured<T> = T | { error: string };

export interface BenchContext {
  settings: Settings;
  workspace: Workspace;
  upstream: UpstreamSimProcess;
  peers: Map<PeerId, Peer>;
  unavailable: Unavailable[];
  /** Progress line on stderr. */
  log(message: string): void;
}

export function isError<T>(m: Measured<T> | undefined): m is { error: string } {
  return m !== undefined && typeof m === 'object' && m !== null && 'error' in m;
}

/**
 * Runs `measure` for each listed peer that is running, one after another (never two peers at once, so
 * they do not compete for the two cores). A peer whose probe request fails is recorded with the request
 * and the answer, and skipped.
 */
export async function eachPeer<T>(
  ctx: BenchContext,
  ids: readonly PeerId[],
  label: string,
  targetOf: (peer: Peer) => HttpTarget,
  measure: (peer: Peer, target: HttpTarget) => Promise<T>,
): Promise<Partial<Record<PeerId, Measured<T>>>> {
  const out: Partial<Record<PeerId, Measured<T>>> = {};
  for (const id of ids) {
    const peer = ctx.peers.get(id);
    if (peer === undefined) continue;
    const target = targetOf(peer);
    ctx.log(`  ${label}: ${id}`);
    try {
      const answer = await probe(target);
      if (answer.status !== 200 || answer.body.startsWith('{"error"')) {
        out[id] = {
          error: `probe ${target.method} ${target.path} body ${target.body?.slice(0, 200)} -> ${answer.status} ${answer.body.slice(0, 400)}`,
        };
        continue;
      }
      out[id] = await measure(peer, target);
    } catch (err) {
      out[id] = { error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) };
    }
    if (!peer.service.alive()) {
      out[id] = { error: `${id} process died: ${peer.service.output().slice(-800)}` };
    }
    // Let sockets close and the peer settle before the next one.
    await sleep(ctx.settings.smoke ? 50 : 500);
  }
  return out;
}
