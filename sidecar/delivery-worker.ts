// Delivers the file-mode outbox of one directory to billing ingest, in order, at least once: the
// delivery loop (billing/delivery/delivery-loop.ts) in order over the outbox queue
// (sidecar/outbox-queue.ts), and a second loop, one event at a time, over the dead letters marked for
// replay (sidecar/replay-queue.ts). This file wires them to the directory: fs.watch with its linger,
// the poll fallback, the counters both report.

import { type FSWatcher, watch } from 'node:fs';
import type { Logger } from 'pino';
import { DeliveryLoop } from '../billing/delivery/delivery-loop.ts';
import type { DeliveryError, RetryPolicy } from '../billing/delivery/delivery-queue.ts';
import { type OutboxItem, type OutboxReaderOptions, openOutboxReader } from '../billing/outbox/reader.ts';
import { openOutboxStatus } from '../billing/outbox/status.ts';
import { jitteredDelay } from '../common/backoff.ts';
import type { BillingConfig } from '../common/config-types.ts';
import { errorText } from '../common/errors.ts';
import { DeadLetterFile, type DeadLetterRecord, type ReplayReport } from './dead-letter-file.ts';
import { type IngestClient, ingestTransport } from './ingest-transport.ts';
import { type EventItem, OutboxQueue } from './outbox-queue.ts';
import { ReplayQueue } from './replay-queue.ts';

export type { DeliveryError } from '../billing/delivery/delivery-queue.ts';
export type { IngestClient } from './ingest-transport.ts';

export interface DeliveryWorkerOptions {
  config: Pick<BillingConfig, 'outboxDir' | 'retryIntervalMs' | 'maxRetryIntervalMs' | 'maxAttempts'> &
    Partial<Pick<BillingConfig, 'deliveryLingerMs' | 'ledgerRetentionH'>>;
  client: IngestClient;
  /** Ingests in flight at most (default 16). 1 gives strict one-by-one delivery. */
  window?: number;
  /** Write the checkpoint after this many done items (default 500) ... */
  checkpointEvery?: number;
  /** ... or this long after the first uncheckpointed one (default 200 ms), and whenever idle. */
  checkpointIntervalMs?: number;
  /** Fallback poll when fs.watch misses a change or is unavailable (default 1000 ms). */
  pollIntervalMs?: number;
  /** Use fs.watch on the outbox directory (default true). */
  watch?: boolean;
  /** Jitter source in [0, 1) (default Math.random). */
  random?: () => number;
  /** Timer used for backoff waits (default setTimeout-based); tests may record the delays. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  logger?: Logger;
  reader?: OutboxReaderOptions;
  /** How often delivered segments are trimmed by age (default 60 s). */
  trimIntervalMs?: number;
}

export interface DeliveryCounters {
  delivered: number;
  failedAttempts: number;
  deadLettered: number;
  quarantined: number;
  inFlight: number;
  lastError: DeliveryError | undefined;
}

export interface DeliveryWorker {
  counters(): DeliveryCounters;
  /** Events on disk not yet passed by the in-memory checkpoint (an estimate, see outbox/status.ts). */
  pending(): Promise<number>;
  /** Look at the outbox now (fs.watch does this too). */
  wake(): void;
  /**
   * Resolves once every event that was complete on disk when called is done (delivered, dead-lettered
   * or quarantined) and the checkpoint is written. Never resolves during an outage; rejects on stop.
   */
  waitForDrain(): Promise<void>;
  /** Queues dead-lettered events for replay (every one when `ids` is undefined); a dry run only reports. */
  replayDeadLetters(ids: readonly string[] | undefined, dryRun: boolean): Promise<ReplayReport>;
  /** Lets the in-flight ingests end (or aborts them with abort: true), writes the checkpoint, closes. */
  stop(opts?: { abort?: boolean }): Promise<void>;
}

export async function startDeliveryWorker(opts: DeliveryWorkerOptions): Promise<DeliveryWorker> {
  const { config, client, logger } = opts;
  const pollIntervalMs = opts.pollIntervalMs ?? 1000;
  const random = opts.random ?? Math.random;
  const retry: RetryPolicy = {
    maxAttempts: config.maxAttempts,
    delay: (failures) => jitteredDelay(failures, config.retryIntervalMs, config.maxRetryIntervalMs, random),
  };
  // Delivered segments stay as the ledger for billing.ledger_retention_h (docs/billing.md "The ledger").
  const reader = await openOutboxReader(config.outboxDir, {
    retentionMs: (config.ledgerRetentionH ?? 0) * 3_600_000,
    ...opts.reader,
  });
  const deadLetters = new DeadLetterFile(config.outboxDir, opts.reader?.onFsync);
  const status = openOutboxStatus(config.outboxDir);
  const queue = new OutboxQueue(reader, deadLetters, {
    checkpointEvery: opts.checkpointEvery ?? 500,
    checkpointIntervalMs: opts.checkpointIntervalMs ?? 200,
    pollIntervalMs,
    ...(opts.trimIntervalMs === undefined ? {} : { trimIntervalMs: opts.trimIntervalMs }),
    logger,
  });
  const outbox = new DeliveryLoop<OutboxItem>({
    queue,
    transport: ingestTransport(client, (item) => item as EventItem),
    order: 'in-order',
    window: opts.window ?? 16,
    retry,
    sleep: opts.sleep,
  });
  const replay = new DeliveryLoop<DeadLetterRecord>({
    queue: new ReplayQueue(deadLetters, {
      maxAttempts: config.maxAttempts,
      retryInMs: pollIntervalMs,
      logger,
    }),
    transport: ingestTransport(client, (record) => record),
    order: 'in-order',
    window: 1,
    retry,
    sleep: opts.sleep,
  });
  const watcher = watchOutbox(
    config.outboxDir,
    opts.watch ?? true,
    config.deliveryLingerMs ?? 0,
    outbox,
    logger,
  );

  let stopped: Promise<void> | undefined;
  return {
    counters: () => countersOf(outbox, replay, reader.quarantined()),
    pending: async () => (await status.read(queue.committed)).pendingEvents,
    wake: () => outbox.wake(),
    waitForDrain: () => outbox.waitForDrain(),
    replayDeadLetters: async (ids, dryRun) => {
      const report = await deadLetters.markForReplay(ids, dryRun);
      if (!dryRun) replay.wake();
      return report;
    },
    stop(stopOpts = {}) {
      stopped ??= (async () => {
        watcher.close();
        await Promise.all([outbox.stop(stopOpts), replay.stop(stopOpts)]);
      })();
      return stopped;
    },
  } satisfies DeliveryWorker;
}

/** The outbox's counters with the replayed dead letters' deliveries, failures and last error. */
function countersOf(
  outbox: DeliveryLoop<OutboxItem>,
  replay: DeliveryLoop<DeadLetterRecord>,
  quarantined: number,
): DeliveryCounters {
  const a = outbox.counters;
  const b = replay.counters;
  const lastError =
    a.lastError === undefined || (b.lastError !== undefined && b.lastError.at > a.lastError.at)
      ? b.lastError
      : a.lastError;
  return {
    delivered: a.delivered + b.delivered,
    failedAttempts: a.failedAttempts + b.failedAttempts,
    deadLettered: a.deadLettered,
    quarantined,
    inFlight: outbox.inFlight,
    lastError,
  };
}

/**
 * Wakes the loop when the gateway appends. A change seen while idle is read after delivery_linger_ms,
 * not at once: under steady load the gateway appends an event every fraction of a millisecond, and
 * reading each on its own wake-up cost the sidecar (and the cores it shares with the gateway) a loop
 * turn, a read(2) and a checkpoint per event.
 */
function watchOutbox(
  dir: string,
  enabled: boolean,
  lingerMs: number,
  loop: { wake(): void },
  logger: Logger | undefined,
): { close(): void } {
  let lingerTimer: NodeJS.Timeout | undefined;
  function wakeSoon(): void {
    if (lingerMs <= 0) {
      loop.wake();
      return;
    }
    lingerTimer ??= setTimeout(() => {
      lingerTimer = undefined;
      loop.wake();
    }, lingerMs);
  }
  let watcher: FSWatcher | undefined;
  if (enabled) {
    try {
      watcher = watch(dir, { persistent: false }, (_event, name) => {
        // Our own checkpoint/quarantine writes are not news.
        if (name === null || name === 'events.jsonl' || name.startsWith('segment-')) wakeSoon();
      });
      watcher.on('error', (err) =>
        logger?.warn({ err: errorText(err) }, 'outbox watch failed; polling only'),
      );
    } catch (err) {
      logger?.warn({ err: errorText(err) }, 'fs.watch unavailable; polling the outbox');
    }
  }
  return {
    close() {
      if (lingerTimer !== undefined) clearTimeout(lingerTimer);
      watcher?.close();
    },
  };
}
