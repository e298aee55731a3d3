// File-mode delivery of an outbox directory and its slots (billing/outbox/slots.ts): one delivery worker
// per directory, each with its own reader lock, checkpoint and dead letters, seen by the sidecar as one
// worker. A slot that appears later (another gateway started) is picked up at the next look.

import { outboxDirs, slotDeadLetterId, slotOfDeadLetterId } from '../billing/outbox/slots.ts';
import { type OutboxStatus, type OutboxStatusView, openOutboxStatus } from '../billing/outbox/status.ts';
import { errorText } from '../common/errors.ts';
import type { ReplayReport } from './dead-letter-file.ts';
import {
  type DeliveryCounters,
  type DeliveryWorker,
  type DeliveryWorkerOptions,
  startDeliveryWorker,
} from './delivery-worker.ts';

export interface SlottedDelivery extends DeliveryWorker {
  /** The outbox status of every directory, summed. */
  readonly status: OutboxStatusView;
  /** The directories being delivered. */
  dirs(): readonly string[];
}

export async function startSlottedDelivery(
  opts: DeliveryWorkerOptions & { scanIntervalMs?: number },
): Promise<SlottedDelivery> {
  const root = opts.config.outboxDir;
  const workers = new Map<string, DeliveryWorker>();
  const statuses = new Map<string, OutboxStatusView>();
  let stopped = false;
  let scanning: Promise<void> | undefined;

  async function scan(): Promise<void> {
    for (const dir of await outboxDirs(root)) {
      if (stopped || workers.has(dir)) continue;
      workers.set(dir, await startDeliveryWorker({ ...opts, config: { ...opts.config, outboxDir: dir } }));
      statuses.set(dir, openOutboxStatus(dir));
      if (dir !== root) opts.logger?.info({ dir }, 'delivering an outbox slot');
    }
  }
  function rescan(): Promise<void> {
    scanning ??= scan().finally(() => {
      scanning = undefined;
    });
    return scanning;
  }

  await scan();
  const timer = setInterval(
    () => {
      rescan().catch((err: unknown) => opts.logger?.warn({ err: errorText(err) }, 'outbox slot scan failed'));
    },
    opts.scanIntervalMs ?? opts.pollIntervalMs ?? 1000,
  );
  timer.unref();

  const all = () => [...workers.values()];
  return {
    dirs: () => [...workers.keys()],
    counters(): DeliveryCounters {
      const sum: DeliveryCounters = {
        delivered: 0,
        failedAttempts: 0,
        deadLettered: 0,
        quarantined: 0,
        inFlight: 0,
        lastError: undefined,
      };
      for (const w of all()) {
        const c = w.counters();
        sum.delivered += c.delivered;
        sum.failedAttempts += c.failedAttempts;
        sum.deadLettered += c.deadLettered;
        sum.quarantined += c.quarantined;
        sum.inFlight += c.inFlight;
        // ISO times compare as strings: the most recent error of any directory.
        if (c.lastError !== undefined && (sum.lastError === undefined || c.lastError.at > sum.lastError.at)) {
          sum.lastError = c.lastError;
        }
      }
      return sum;
    },
    async pending() {
      let total = 0;
      for (const w of all()) total += await w.pending();
      return total;
    },
    wake() {
      for (const w of all()) w.wake();
      void rescan().catch(() => undefined);
    },
    async waitForDrain() {
      await rescan();
      await Promise.all(all().map((w) => w.waitForDrain()));
    },
    async replayDeadLetters(ids, dryRun): Promise<ReplayReport> {
      const qualify = (dir: string, r: ReplayReport['results'][number]) => ({
        ...r,
        id: slotDeadLetterId(root, dir, r.id),
      });
      if (ids === undefined) {
        const results: ReplayReport['results'] = [];
        for (const [dir, w] of workers) {
          results.push(...(await w.replayDeadLetters(undefined, dryRun)).results.map((r) => qualify(dir, r)));
        }
        return { results, dry_run: dryRun };
      }
      const byDir = new Map<string, string[]>();
      for (const id of ids) {
        const at = slotOfDeadLetterId(root, id);
        byDir.set(at.dir, [...(byDir.get(at.dir) ?? []), at.id]);
      }
      const found = new Map<string, ReplayReport['results'][number]>();
      for (const [dir, local] of byDir) {
        const w = workers.get(dir);
        if (w === undefined) continue;
        for (const r of (await w.replayDeadLetters(local, dryRun)).results) {
          const q = qualify(dir, r);
          found.set(q.id, q);
        }
      }
      return { results: ids.map((id) => found.get(id) ?? { id, outcome: 'not_found' }), dry_run: dryRun };
    },
    async stop(stopOpts) {
      stopped = true;
      clearInterval(timer);
      await scanning?.catch(() => undefined);
      await Promise.all(all().map((w) => w.stop(stopOpts)));
    },
    status: {
      async read(): Promise<OutboxStatus> {
        const sum: OutboxStatus = {
          pendingEvents: 0,
          pendingBytes: 0,
          deadLettered: 0,
          quarantined: 0,
          segments: 0,
        };
        for (const view of statuses.values()) {
          const s = await view.read();
          sum.pendingEvents += s.pendingEvents;
          sum.pendingBytes += s.pendingBytes;
          sum.deadLettered += s.deadLettered;
          sum.quarantined += s.quarantined;
          sum.segments += s.segments;
        }
        return sum;
      },
    },
  };
}
