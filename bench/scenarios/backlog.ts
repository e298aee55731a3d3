// Scenario 5: billing backlog. Writes N usage events into a fresh outbox (as the gateway would while the
// billing service is down), then starts the sidecar process against the billing simulator and measures
// how fast it drains the outbox and how much memory it needs doing so.

import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { UsageEvent } from '../../billing/event/usage-event.ts';
import { buildUsageEvent } from '../../billing/event-builder.ts';
import { openOutboxWriter } from '../../billing/outbox/writer.ts';
import { compilePricing } from '../../billing/pricing.ts';
import type { BenchContext } from '../lib/context.ts';
import { SIDECAR_V8_FLAGS, startBillingSimProcess, writeGatewayConfig } from '../lib/peers.ts';
import { freePort, hwmMb, rssMb, startService } from '../lib/proc.ts';

export interface BacklogResult {
  events: number;
  /** Time to append and fsync all events through the outbox writer, in this process. */
  writeMs: number;
  writeEventsPerSec: number;
  /** Sidecar spawn -> outbox empty. */
  drainMs: number;
  /** Sidecar ready (/readyz answered) -> outbox empty. */
  drainAfterReadyMs: number;
  eventsPerSec: number;
  delivered: number;
  acceptedByBillingSim: number;
  sidecarPeakRssMb: number;
  sidecarHwmMb: number;
  drained: boolean;
  lastReadyz?: string;
}

const { pricing } = compilePricing([
  {
    file: 'bench-pricing.yaml',
    text: 'prices:\n  - { provider: openai, model: gpt-5.4-mini, cost: { input: 0.15, output: 0.6 } }\n',
  },
]);
const price = pricing.lookup('openai', 'gpt-5.4-mini');

/**
 * Event `i` of a run, made by the gateway's builder: appended at once, the outbox holds the compact line
 * the gateway writes for it (billing/outbox/compact-line.ts).
 */
export function usageEvent(runId: string, i: number): UsageEvent {
  return buildUsageEvent({
    requestId: `bench-${runId}-${i}`,
    occurredAtMs: Date.now(),
    provider: 'openai',
    api: 'chat.completions',
    model: 'gpt-5.4-mini',
    stream: false,
    status: 200,
    usage: { inputTokens: 12, outputTokens: 5, totalTokens: 17 },
    usageStage: 'upstream',
    subjectType: 'api_key',
    subjectId: 'bench',
    source: 'router',
    completionStyle: true,
    price,
  });
}

interface Readyz {
  delivery?: { pending?: number; delivered?: number };
}

export async function runBacklog(ctx: BenchContext): Promise<BacklogResult> {
  const n = ctx.settings.backlog.events;
  const runId = Date.now().toString(36);
  const sidecarPort = await freePort();
  const billing = await startBillingSimProcess(ctx.workspace, 'billing-sim-backlog');
  const configFile = await writeGatewayConfig(ctx.workspace, 'backlog', {
    listenPort: await freePort(),
    billingUrl: billing.url,
    sidecarPort,
  });
  const outboxDir = join(ctx.workspace.tmp, 'backlog', 'outbox');
  try {
    ctx.log(`  backlog: writing ${n} events`);
    const writeStart = performance.now();
    const writer = await openOutboxWriter(outboxDir);
    const batch = 5000;
    for (let i = 0; i < n; i += batch) {
      const appends: Promise<void>[] = [];
      for (let j = i; j < Math.min(n, i + batch); j++) appends.push(writer.append(usageEvent(runId, j)));
      await Promise.all(appends);
    }
    await writer.close();
    const writeMs = performance.now() - writeStart;

    ctx.log('  backlog: draining');
    const spawned = performance.now();
    const sidecar = startService(
      'sidecar-backlog',
      process.execPath,
      // The flags router-billing runs with, plus the bench's profiling ones.
      [
        ...SIDECAR_V8_FLAGS,
        ...ctx.workspace.sidecarNodeFlags('backlog'),
        join(ctx.workspace.repo, 'bin/sidecar-main.ts'),
        '-c',
        configFile,
      ],
      { logFile: join(ctx.workspace.tmp, 'sidecar-backlog.log') },
    );
    let readyAt: number | undefined;
    let peakRss = 0;
    let drainedAt: number | undefined;
    let delivered = 0;
    let last = '';
    const deadline = spawned + ctx.settings.backlog.timeoutMs;
    try {
      while (performance.now() < deadline) {
        if (!sidecar.alive()) throw new Error(`sidecar exited: ${sidecar.output().slice(-1000)}`);
        peakRss = Math.max(peakRss, await rssMb(sidecar.pid));
        try {
          const res = await fetch(`http://127.0.0.1:${sidecarPort}/readyz`, {
            signal: AbortSignal.timeout(2000),
          });
          last = await res.text();
          readyAt ??= performance.now();
          const body = JSON.parse(last) as Readyz;
          delivered = body.delivery?.delivered ?? delivered;
          if (body.delivery?.pending === 0 && delivered >= n) {
            drainedAt = performance.now();
            break;
          }
        } catch {
          // not listening yet
        }
        await sleep(100);
      }
      const hwm = await hwmMb(sidecar.pid);
      const state = (await fetch(`${billing.url}/_sim/state`).then((r) => r.json())) as Record<
        string,
        unknown
      >;
      const end = drainedAt ?? performance.now();
      const drainAfterReadyMs = end - (readyAt ?? spawned);
      return {
        events: n,
        writeMs: Math.round(writeMs),
        writeEventsPerSec: Math.round(n / (writeMs / 1000)),
        drainMs: Math.round(end - spawned),
        drainAfterReadyMs: Math.round(drainAfterReadyMs),
        eventsPerSec: Math.round(delivered / (drainAfterReadyMs / 1000)),
        delivered,
        acceptedByBillingSim: acceptedCount(state),
        sidecarPeakRssMb: peakRss,
        sidecarHwmMb: hwm,
        drained: drainedAt !== undefined,
        lastReadyz: drainedAt === undefined ? last.slice(0, 500) : undefined,
      };
    } finally {
      await sidecar.stop();
    }
  } finally {
    await billing.service.stop();
  }
}

/** The simulator's count of accepted events, wherever its state puts it. */
function acceptedCount(state: Record<string, unknown>): number {
  return typeof state.accepted === 'number' ? state.accepted : -1;
}
