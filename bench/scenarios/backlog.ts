// Scenario 5: billing backlog. Writes N usage events into a fresh outbox (as the gateway would while the
// billing service is down), then starts the sidecar process against the billing simulator and measures
// how fast it drains the outbox and how much memory it needs doing so.

import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { openOutboxWriter } from '../../billing/outbox-writer.ts';
import type { UsageEvent } from '../../common/usage-event.ts';
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

export function usageEvent(runId: string, i: number): UsageEvent {
  const rid = `bench-${runId}-${i}`;
  return {
    source: 'router',
    external_event_id: rid,
    idempotency_key: `router:${rid}`,
    occurred_at: Math.floor(Date.now() / 1000),
    subject_type: 'api_key',
    subject_id: 'bench',
    raw_json: {
      provider: 'openai',
      api: 'chat.completions',
      model: 'gpt-5.4-mini',
      stream: false,
      status: 200,
      usage_stage: 'upstream',
      usage: {
        input_tokens: 12,
        output_tokens: 5,
        total_tokens: 17,
        prompt_tokens: 12,
        completion_tokens: 5,
      },
      meta: { subject_type: 'api_key', subject_id: 'bench', request_id: rid },
    },
    'x-billing': {
      items: [
        { metric: 'prompt_tokens', quantity: 12, unit: 'token' },
        { metric: 'completion_tokens', quantity: 5, unit: 'token' },
      ],
      pricing_hints: {
        prompt_tokens: { unit_price: 0.15, pricing_unit: 1_000_000, currency: 'USD' },
        completion_tokens: { unit_price: 0.6, pricing_unit: 1_000_000, currency: 'USD' },
      },
    },
  };
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
