// Scenario 6: abuse. How the gateway serves real traffic while clients misbehave: (a) thousands of idle
// connections opened against it (it sheds them at limits.max_connections, lowered to fit its
// file-descriptor limit), and (b) streaming requests with a large space-less prompt aborted right after
// their first chunk, in a loop (billing on: each aborted stream has its usage estimated from the
// prompt). Through both, a /healthz loop in a process of its own measures latency, a chat loop counts
// successes, and the gateway's RSS is sampled. In (b) the load client (this process) and the upstream
// simulator stand in for other machines, so they run at LOAD_NICE: what the probe measures is the
// gateway, not the gateway queued for a CPU behind the bench's own load on two shared cores.

import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'undici';
import { type BenchContext, eachPeer, type Measured } from '../lib/context.ts';
import type { HttpTarget } from '../lib/load.ts';
import type { Peer, PeerId } from '../lib/peers.ts';
import { monitorResources, type ResourceUse, reniceThreads } from '../lib/proc.ts';
import { CHAT_MODEL, chatTarget, pacedModel } from '../lib/requests.ts';
import { type LoopResult, scheduledLoop, startScheduledProbe } from '../lib/scheduled-probe.ts';
import { summarize } from '../lib/stats.ts';

export type { LoopResult } from '../lib/scheduled-probe.ts';

export const ABUSE_PEERS: PeerId[] = ['gateway-billing'];

const LOAD_NICE = 19;

export interface IdleFloodResult {
  /** Idle connections the bench opened (connect succeeded). */
  opened: number;
  /** Of those, closed by the gateway while the phase lasted. */
  closedByGateway: number;
  /** Connect attempts that failed outright. */
  connectErrors: number;
  holdMs: number;
  healthz: LoopResult;
  chat: LoopResult;
  resources: ResourceUse;
  /** The gateway's own counters after the phase (router_connections_shed_total, ...). */
  gatewayMetrics: Record<string, number>;
  /** The connections released at once after the phase, with a probe of its own, until the gateway closed them. */
  release?: { ms: number; healthz: LoopResult };
}

export interface AbortLoopResult {
  promptBytes: number;
  concurrency: number;
  durationMs: number;
  aborted: number;
  failed: number;
  /** The nice value of the load client and the upstream simulator (absent: not permitted, left at 0). */
  loadNice?: number;
  healthz: LoopResult;
  resources: ResourceUse;
}

export interface AbuseResult {
  /** /healthz alone, before either phase. */
  baseline: LoopResult;
  idle: IdleFloodResult;
  aborts: AbortLoopResult;
}

function healthzTarget(peer: Peer): HttpTarget {
  return { origin: peer.origin, path: '/healthz', method: 'GET', headers: {} };
}

/** Requests one after another on one keep-alive connection until `stop()` says so (at least `min`). */
async function loop(target: HttpTarget, stop: () => boolean, min = 1): Promise<LoopResult> {
  const client = new Client(target.origin, { pipelining: 1, keepAliveTimeout: 60_000 });
  const samples: number[] = [];
  let failed = 0;
  let firstError: string | undefined;
  try {
    while (samples.length + failed < min || !stop()) {
      const t0 = performance.now();
      try {
        const res = await client.request({
          path: target.path,
          method: target.method,
          headers: target.headers,
          body: target.body,
        });
        const text = await res.body.text();
        if (res.statusCode >= 300) {
          failed++;
          firstError ??= `${res.statusCode} ${text.slice(0, 200)}`;
        } else samples.push(performance.now() - t0);
      } catch (err) {
        failed++;
        firstError ??= err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      }
    }
  } finally {
    await client.close().catch(() => undefined);
  }
  return { ok: samples.length, failed, firstError, ms: summarize(samples) };
}

/** Opens `count` idle TCP connections, `batch` connects at a time; counts those the peer closes. */
async function openIdle(
  origin: string,
  count: number,
  batch: number,
): Promise<{ sockets: Socket[]; closedByPeer: () => number; connectErrors: number }> {
  const { hostname, port } = new URL(origin);
  const sockets: Socket[] = [];
  let closedByPeer = 0;
  let connectErrors = 0;
  let releasing = false;
  const one = () =>
    new Promise<void>((resolve) => {
      const s = connect(Number(port), hostname);
      s.on('error', () => undefined);
      s.once('connect', () => {
        sockets.push(s);
        s.once('close', () => {
          if (!releasing) closedByPeer++;
        });
        resolve();
      });
      s.once('close', () => {
        if (s.connecting) connectErrors++;
        resolve();
      });
    });
  for (let i = 0; i < count; i += batch) {
    await Promise.all(Array.from({ length: Math.min(batch, count - i) }, one));
  }
  return {
    sockets,
    closedByPeer: () => {
      releasing = true;
      return closedByPeer;
    },
    connectErrors,
  };
}

async function gatewayCounters(origin: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${origin}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m =
      /^(router_(?:connections_shed_total|client_timeouts_total|client_connections_max)\S*) (\S+)$/.exec(
        line,
      );
    if (m) out[m[1]!] = Number(m[2]);
  }
  return out;
}

/** Waits (at most 30 s) until the gateway has at most `most` client connections open. */
async function connectionsClosed(origin: string, most: number): Promise<void> {
  const deadline = performance.now() + 30_000;
  while (performance.now() < deadline) {
    const text = await (await fetch(`${origin}/metrics`)).text();
    const open = /^router_client_connections (\S+)$/m.exec(text);
    if (open === null || Number(open[1]) <= most) return;
    await sleep(100);
  }
}

/** Streams started and aborted as soon as their first body chunk arrives, `concurrency` at a time. */
async function abortLoop(
  target: (n: number) => HttpTarget,
  concurrency: number,
  stop: () => boolean,
): Promise<{ aborted: number; failed: number }> {
  let aborted = 0;
  let failed = 0;
  let sent = 0;
  const worker = async () => {
    while (!stop()) {
      const t = target(sent++);
      const client = new Client(t.origin);
      try {
        const res = await client.request({
          path: t.path,
          method: t.method,
          headers: t.headers,
          body: t.body,
        });
        if (res.statusCode !== 200) {
          failed++;
          await res.body.text();
          continue;
        }
        for await (const _chunk of res.body) break;
        aborted++;
      } catch {
        failed++;
      } finally {
        await client.destroy().catch(() => undefined);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { aborted, failed };
}

export async function runAbuse(ctx: BenchContext): Promise<Partial<Record<PeerId, Measured<AbuseResult>>>> {
  const s = ctx.settings.abuse;
  return eachPeer(
    ctx,
    ABUSE_PEERS,
    'abuse',
    (peer) => healthzTarget(peer),
    async (peer, healthz) => {
      const chat = chatTarget(peer, ctx.upstream.url);
      let until = performance.now() + s.baselineMs;
      const baseline = await scheduledLoop(healthz, s.probeIntervalMs, () => performance.now() > until);

      // (a) idle connections, opened while /healthz and chat requests keep running.
      ctx.log(`    ${s.idleConnections} idle connections`);
      let monitor = await monitorResources(peer.service.pid);
      let holding = true;
      const idleProbe = await startScheduledProbe(healthz, s.probeIntervalMs);
      const chatLoop = loop(chat, () => !holding);
      const t0 = performance.now();
      const idle = await openIdle(peer.origin, s.idleConnections, s.connectBatch);
      await sleep(s.holdMs);
      const holdMs = Math.round(performance.now() - t0);
      const closedByGateway = idle.closedByPeer();
      const gatewayMetrics = await gatewayCounters(peer.origin);
      holding = false;
      const [idleHealthz, idleChat] = await Promise.all([idleProbe.stop(), chatLoop]);
      const idleResources = await monitor.stop();
      // Released all at once with a probe of their own: the gateway closing them is neither (a)'s opening
      // and holding them nor a delay while (b) estimates, and (b) starts once they are closed.
      const releaseProbe = await startScheduledProbe(healthz, s.probeIntervalMs);
      const released = performance.now();
      for (const sock of idle.sockets) sock.destroy();
      await connectionsClosed(peer.origin, 16);
      const releaseMs = Math.round(performance.now() - released);
      const releaseHealthz = await releaseProbe.stop();

      // (b) streams with a large space-less prompt, aborted after their first chunk.
      ctx.log(`    aborted streams, ${s.abortPromptBytes} byte prompts`);
      // Each prompt starts with its own number; the run of 'x' after it is the same every time.
      const stream = (n: number) =>
        chatTarget(peer, ctx.upstream.url, {
          model: pacedModel(CHAT_MODEL, 20, 50),
          stream: true,
          content: `${n}`.padEnd(s.abortPromptBytes, 'x'),
        });
      monitor = await monitorResources(peer.service.pid);
      const abortProbe = await startScheduledProbe(healthz, s.probeIntervalMs, peer.service.pid);
      // After the probe's fork, which would inherit this process's priority.
      const undo = await Promise.all(
        [process.pid, ctx.upstream.service.pid].map((pid) => reniceThreads(pid, LOAD_NICE)),
      );
      until = performance.now() + s.abortMs;
      const stop = () => performance.now() > until;
      const started = performance.now();
      const aborts = await abortLoop(stream, s.abortConcurrency, stop);
      for (const u of undo) u?.();
      const abortHealthz = await abortProbe.stop();
      return {
        baseline,
        idle: {
          opened: idle.sockets.length,
          closedByGateway,
          connectErrors: idle.connectErrors,
          holdMs,
          healthz: idleHealthz,
          chat: idleChat,
          resources: idleResources,
          gatewayMetrics,
          release: { ms: releaseMs, healthz: releaseHealthz },
        },
        aborts: {
          promptBytes: s.abortPromptBytes,
          concurrency: s.abortConcurrency,
          durationMs: Math.round(performance.now() - started),
          aborted: aborts.aborted,
          failed: aborts.failed,
          ...(undo.every((u) => u !== undefined) ? { loadNice: LOAD_NICE } : {}),
          healthz: abortHealthz,
          resources: await monitor.stop(),
        },
      };
    },
  );
}
