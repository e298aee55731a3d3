// Delivers one shard of the billing stream (shared-store mode) to billing ingest, at least once: the
// delivery loop (billing/delivery/delivery-loop.ts) per entry over the stream queue
// (sidecar/stream-queue.ts), which has the group semantics. Up to `window` ingests in flight; each entry
// is retried on its own; an uncounted failure (the service looks unavailable) stops new reads until
// the service answers; a counted one holds only its own entry.

import type { Logger } from 'pino';
import { DeliveryLoop } from '../billing/delivery/delivery-loop.ts';
import { jitteredDelay } from '../common/backoff.ts';
import type { BillingConfig, StoreConfig } from '../common/config-types.ts';
import {
  closeRedisClient,
  createKeyLayout,
  createRedisClient,
  defaultConsumerName,
  waitReady,
} from '../store/redis-client.ts';
import { streamBacklog } from '../store/stream-ledger.ts';
import type { DeliveryError } from './delivery-worker.ts';
import { type IngestClient, ingestTransport } from './ingest-transport.ts';
import { type EventEntry, type StreamEntry, StreamQueue } from './stream-queue.ts';

export interface StreamConsumerOptions {
  readonly store: StoreConfig;
  readonly billing: Pick<BillingConfig, 'retryIntervalMs' | 'maxRetryIntervalMs'> &
    Partial<Pick<BillingConfig, 'deliveryLingerMs' | 'ledgerRetentionH'>>;
  readonly client: IngestClient;
  readonly logger?: Logger;
  /** Ingests in flight at most (default 16). */
  readonly window?: number;
  /** XREADGROUP BLOCK time when the stream is empty (default 1000 ms). */
  readonly blockMs?: number;
  /** How often pending entries of other consumers are checked for reclaiming (default reclaim_idle_ms / 2). */
  readonly reclaimIntervalMs?: number;
  /** Jitter source in [0, 1) (default Math.random). */
  readonly random?: () => number;
  /** Which of the billing_stream_shards streams (default 0). */
  readonly shard?: number;
  /** How often delivered entries kept as the ledger are trimmed by age (default 60 s). */
  readonly trimIntervalMs?: number;
}

export interface StreamConsumerCounters {
  delivered: number;
  failedAttempts: number;
  deadLettered: number;
  reclaimed: number;
  inFlight: number;
  lastError: DeliveryError | undefined;
}

export interface StreamStatus {
  /**
   * Entries still to deliver: queued or being delivered (delivered entries kept as the ledger are not
   * counted, store/stream-ledger.ts).
   */
  pending: number;
  /** Entries delivered to some consumer and not yet acknowledged (XPENDING). */
  claimed: number;
  deadLetter: number;
}

export interface StreamConsumer {
  readonly name: string;
  counters(): StreamConsumerCounters;
  /** Backlog / XPENDING / XLEN of the dead-letter stream; throws when the store is down. */
  status(): Promise<StreamStatus>;
  /**
   * Lets in-flight ingests end (or aborts them), hands back the entries it held but did not deliver
   * (re-added to the stream for any consumer), then closes the connections.
   */
  stop(opts?: { abort?: boolean }): Promise<void>;
}

export async function startStreamConsumer(opts: StreamConsumerOptions): Promise<StreamConsumer> {
  const { store, billing, client, logger } = opts;
  const window = Math.max(1, opts.window ?? 16);
  const blockMs = Math.max(1, opts.blockMs ?? 1000);
  const lingerMs = billing.deliveryLingerMs ?? 0;
  const random = opts.random ?? Math.random;
  const name = store.billingConsumerName === '' ? defaultConsumerName() : store.billingConsumerName;
  const group = store.billingConsumerGroup;
  const shard = opts.shard ?? 0;
  const keys = createKeyLayout(store).shards[shard];
  if (keys === undefined) throw new Error(`no billing stream shard ${shard}`);

  const cmd = createRedisClient(store, { logger, connectionName: `router-billing:${name}:${shard}` });
  // Blocking reads hold the connection for up to blockMs: their own client with a longer timeout.
  const reader = createRedisClient(store, {
    commandTimeoutMs: blockMs + store.operationTimeoutMs,
    connectionName: `router-billing-read:${name}:${shard}`,
  });
  await Promise.all([waitReady(cmd, 2000), waitReady(reader, 2000)]);

  const queue = new StreamQueue({
    store,
    keys,
    name,
    cmd,
    reader,
    blockMs,
    lingerMs,
    reclaimIntervalMs: Math.max(10, opts.reclaimIntervalMs ?? Math.floor(store.reclaimIdleMs / 2)),
    random,
    logger,
    recordError: (code, message) => loop.recordError(code, undefined, message),
    // Delivered entries stay as the ledger (docs/billing.md "The ledger").
    retentionMs: (billing.ledgerRetentionH ?? 0) * 3_600_000,
    ...(opts.trimIntervalMs === undefined ? {} : { trimIntervalMs: opts.trimIntervalMs }),
  });
  const loop = new DeliveryLoop<StreamEntry>({
    queue,
    transport: ingestTransport(client, (entry) => entry as EventEntry),
    order: 'per-entry',
    window,
    retry: {
      maxAttempts: store.billingMaxAttempts,
      delay: (failures) =>
        jitteredDelay(failures, billing.retryIntervalMs, billing.maxRetryIntervalMs, random),
    },
    // With a linger, refill only once half the window is free: reading as each slot frees up cost a
    // XREADGROUP round trip per event or two under steady load.
    refillBelow: lingerMs > 0 ? Math.ceil(window / 2) : window,
    readWaits: true,
  });
  logger?.info({ consumer: name, group, stream: keys.stream }, 'billing stream consumer started');

  let stopped: Promise<void> | undefined;
  return {
    name,
    counters: () => ({ ...loop.counters, reclaimed: queue.reclaimed, inFlight: loop.inFlight }),
    status: () => streamStatus(cmd, keys, group),
    stop(stopOpts = {}) {
      stopped ??= (async () => {
        const done = loop.stop(stopOpts);
        queue.interrupt();
        await done;
        await closeRedisClient(cmd);
        logger?.info(
          { consumer: name, delivered: loop.counters.delivered },
          'billing stream consumer stopped',
        );
      })();
      return stopped;
    },
  } satisfies StreamConsumer;
}

async function streamStatus(
  cmd: ReturnType<typeof createRedisClient>,
  keys: { stream: string; deadLetter: string },
  group: string,
): Promise<StreamStatus> {
  const [backlog, reply] = await Promise.all([
    streamBacklog(cmd, keys.stream, group),
    cmd.pipeline().xpending(keys.stream, group).xlen(keys.deadLetter).exec(),
  ]);
  const [pendR, deadR] = reply ?? [];
  if (reply === null || pendR === undefined || deadR === undefined) {
    throw new Error('store did not answer');
  }
  for (const [err] of reply) {
    if (err && !err.message.startsWith('NOGROUP')) throw err;
  }
  const pend = pendR[1] as [number, ...unknown[]] | null;
  return {
    pending: backlog,
    claimed: Array.isArray(pend) ? Number(pend[0] ?? 0) : 0,
    deadLetter: Number(deadR[1] ?? 0),
  };
}

/**
 * One consumer per billing stream shard (store.billing_stream_shards), seen as one: counters and status
 * add up, stop stops them all. Each shard has its own connections, so a blocking read of one never
 * holds up another (in a cluster the shards live on different nodes).
 */
export async function startShardedConsumers(opts: StreamConsumerOptions): Promise<StreamConsumer> {
  const count = Math.max(1, opts.store.billingStreamShards);
  if (count === 1) return startStreamConsumer(opts);
  const consumers = await Promise.all(
    Array.from({ length: count }, (_, shard) => startStreamConsumer({ ...opts, shard })),
  );
  return {
    name: consumers[0]!.name,
    counters() {
      const all = consumers.map((c) => c.counters());
      return {
        delivered: all.reduce((n, c) => n + c.delivered, 0),
        failedAttempts: all.reduce((n, c) => n + c.failedAttempts, 0),
        deadLettered: all.reduce((n, c) => n + c.deadLettered, 0),
        reclaimed: all.reduce((n, c) => n + c.reclaimed, 0),
        inFlight: all.reduce((n, c) => n + c.inFlight, 0),
        lastError: all.find((c) => c.lastError !== undefined)?.lastError,
      };
    },
    async status() {
      const all = await Promise.all(consumers.map((c) => c.status()));
      return {
        pending: all.reduce((n, s) => n + s.pending, 0),
        claimed: all.reduce((n, s) => n + s.claimed, 0),
        deadLetter: all.reduce((n, s) => n + s.deadLetter, 0),
      };
    },
    async stop(stopOpts) {
      await Promise.all(consumers.map((c) => c.stop(stopOpts)));
    },
  };
}
