// The local spool of shared-store mode (docs/operations.md "The spool (Redis away)"): usage events the
// billing stream could not take (Redis down, or an XADD whose outcome is unknown) are appended to a file
// outbox of their own, <outbox_dir>/spool/<slot>/ (billing/outbox/layout.ts), and this process moves them
// to the stream once Redis answers again.
//
// Exactly once into the stream: a moved event is XADDed by one script together with SET NX of a marker
// named by its idempotency key (`<stream>:moved:<key>`, kept MOVED_MARKER_TTL_MS), and the spool's
// checkpoint passes the batch only after the script returned. A mover that dies between the two moves
// the batch again after restart; the markers make the script skip what is already on the stream. A
// script runs atomically, and with AOF it is logged as one MULTI/EXEC, so a Redis crash keeps both the
// marker and the entry or neither.
//
// Slots: each process writes the first slot whose writer lock it can take (one gateway per host takes
// slot 0), and drains, besides its own, every slot left by a process that is gone.
//
// The mover is the delivery loop (billing/delivery/delivery-loop.ts) in order, one batch at a time, over
// the slots (SpoolQueue below); its transport is the script, and every failure is an outage: retried
// with backoff for as long as it lasts, a move waiting while Redis is away.

import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { backoffDelay } from '../common/backoff.ts';
import type { StoreConfig } from '../common/config-types.ts';
import { errorText } from '../common/errors.ts';
import { sharedByKey } from '../common/shared-by-key.ts';
import { closeRedisClient, createKeyLayout, createRedisClient, type Redis } from '../store/redis-client.ts';
import { DeliveryLoop } from './delivery/delivery-loop.ts';
import type { DeliveryQueue, FailureReport, Transport } from './delivery/delivery-queue.ts';
import type { UsageEvent } from './event/usage-event.ts';
import { queuedJson } from './event/usage-event-json.ts';
import { SPOOL_DIR } from './outbox/layout.ts';
import { type OutboxItem, type OutboxReader, openOutboxReader, positionAfter } from './outbox/reader.ts';
import { openOutboxStatus } from './outbox/status.ts';
import { OutboxLockedError, type OutboxWriter, openOutboxWriter } from './outbox/writer.ts';

/** Long enough to outlast any restart of a mover between its script and its checkpoint. */
export const MOVED_MARKER_TTL_MS = 24 * 60 * 60 * 1000;

const MOVE_BATCH = 64;
const MAX_SLOTS = 64;
const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 5000;
/** How long close() keeps moving when Redis is up, so a clean shutdown leaves nothing behind. */
const CLOSE_MOVE_MS = 2000;

// KEYS: stream, then one marker per event. ARGV: marker TTL (ms), then the payloads in KEYS order.
const MOVE = `
local added = 0
for i = 2, #KEYS do
  if redis.call('SET', KEYS[i], '1', 'NX', 'PX', ARGV[1]) then
    redis.call('XADD', KEYS[1], '*', 'payload', ARGV[i])
    added = added + 1
  end
end
return added
`;

export interface EventSpool {
  /** The slot directory this process appends to. */
  readonly dir: string;
  /** Resolves once the event is durable in the spool. */
  append(event: UsageEvent, traceparent?: string): Promise<void>;
  /** As OutboxWriter.recorded: the spool's pending write of this turn, if any. */
  recorded(): Promise<void> | undefined;
  /** Events in the spool (every slot this process drains) not yet moved to the stream. */
  pending(): Promise<number>;
  /** Moves what it can within a short bound when Redis is up, then closes files and connection. */
  close(): Promise<void>;
}

interface Source {
  readonly dir: string;
  readonly writer: OutboxWriter;
  readonly reader: OutboxReader;
}

export async function openEventSpool(
  root: string,
  store: StoreConfig,
  opts: { logger?: Logger; markerTtlMs?: number } = {},
): Promise<EventSpool> {
  const log = opts.logger;
  const spoolRoot = join(root, SPOOL_DIR);
  const onError = (err: unknown) => log?.error({ err: errorText(err) }, 'spool write failed');
  let own: OutboxWriter | undefined;
  for (let slot = 0; slot < MAX_SLOTS && own === undefined; slot++) {
    try {
      own = await openOutboxWriter(join(spoolRoot, String(slot)), { onError });
    } catch (err) {
      if (!(err instanceof OutboxLockedError)) throw err;
    }
  }
  if (own === undefined) throw new Error(`no free spool slot under ${spoolRoot}`);
  const writer = own;
  const sources: Source[] = [];
  try {
    sources.push({ dir: writer.dir, writer, reader: await openOutboxReader(writer.dir) });
    for (const name of await readdir(spoolRoot)) {
      const dir = join(spoolRoot, name);
      if (dir === writer.dir || !/^\d+$/.test(name)) continue;
      // A slot whose writer is gone: holding its writer lock keeps a new process out while it drains.
      let w: OutboxWriter;
      try {
        w = await openOutboxWriter(dir, { onError });
      } catch (err) {
        if (err instanceof OutboxLockedError) continue;
        throw err;
      }
      try {
        sources.push({ dir, writer: w, reader: await openOutboxReader(dir) });
      } catch (err) {
        await w.close();
        if (!(err instanceof OutboxLockedError)) throw err;
      }
    }
  } catch (err) {
    await closeSources(sources);
    if (!sources.some((s) => s.writer === writer)) await writer.close();
    throw err;
  }

  // Always shard 0: a batch moved again after an unanswered move must meet its markers (same slot).
  const target = createKeyLayout(store).shards[0]!.stream;
  const client: Redis = createRedisClient(store, { logger: log, connectionName: 'router-gateway-spool' });
  const statuses = sources.map((s) => openOutboxStatus(s.dir));
  const closing = new AbortController();
  const queue = new SpoolQueue(sources, log);
  const mover = new DeliveryLoop<SpoolBatch>({
    queue,
    transport: moveTransport(
      client,
      store,
      target,
      String(opts.markerTtlMs ?? MOVED_MARKER_TTL_MS),
      closing.signal,
    ),
    order: 'in-order',
    window: 1,
    // Every failure of a move is the store's (an outage): retried for as long as it lasts, never dropped.
    retry: {
      maxAttempts: Number.POSITIVE_INFINITY,
      delay: (failures) => backoffDelay(failures, RETRY_MIN_MS, RETRY_MAX_MS),
    },
  });
  let closed = false;

  return {
    dir: writer.dir,
    append(event, traceparent) {
      return writer.append(event, traceparent).then(() => mover.wake());
    },
    recorded: () => writer.recorded(),
    async pending() {
      let n = 0;
      for (const s of statuses) n += (await s.read()).pendingEvents;
      return n + writer.pending();
    },
    async close() {
      if (closed) return;
      closed = true;
      if (client.status === 'ready') await drainWithin(mover, queue, CLOSE_MOVE_MS);
      const stopped = mover.stop();
      closing.abort(); // a move waiting for Redis gives up
      await stopped;
      await closeRedisClient(client);
      await closeSources(sources);
    },
  };
}

/** A batch of one spool slot: up to MOVE_BATCH events and the position items among them. */
interface SpoolBatch {
  readonly src: Source;
  readonly items: readonly OutboxItem[];
  readonly events: readonly Extract<OutboxItem, { kind: 'event' }>[];
}

/**
 * The spool as a queue of the delivery loop (billing/delivery/delivery-queue.ts), in order: batches of
 * each slot in turn, the slot's checkpoint passing a batch once it is on the stream.
 */
class SpoolQueue implements DeliveryQueue<SpoolBatch> {
  readonly #sources: readonly Source[];
  readonly #log: Logger | undefined;
  #moved = 0;
  // Checkpoints one at a time, in order.
  #commits: Promise<void> = Promise.resolve();
  #onFailure: (() => void) | undefined;

  constructor(sources: readonly Source[], log: Logger | undefined) {
    this.#sources = sources;
    this.#log = log;
  }

  async read(max: number): Promise<readonly SpoolBatch[]> {
    for (const src of this.#sources) {
      if (max <= 0) break;
      const items: OutboxItem[] = [];
      const events: Extract<OutboxItem, { kind: 'event' }>[] = [];
      while (events.length < MOVE_BATCH) {
        const item = await src.reader.next();
        if (item === undefined) break;
        items.push(item);
        if (item.kind === 'event') events.push(item);
      }
      if (items.length > 0) return [{ src, items, events }];
    }
    return [];
  }

  attempts(): number {
    return 0;
  }

  unsendable(batch: SpoolBatch): 'pass' | undefined {
    return batch.events.length === 0 ? 'pass' : undefined;
  }

  async recordAttempt(_batch: SpoolBatch, attempts: number): Promise<number> {
    return attempts;
  }

  /** Resolves at the next failed move. */
  nextFailure(): Promise<void> {
    return new Promise((resolve) => {
      this.#onFailure = resolve;
    });
  }

  failed(_batch: SpoolBatch, report: FailureReport): void {
    this.#onFailure?.();
    this.#onFailure = undefined;
    if (report.failures === 1) {
      this.#log?.warn(
        { err: report.result.message, retryInMs: report.retryInMs },
        'moving spooled usage events to the billing stream failed; retrying',
      );
    }
  }

  async deadLetter(): Promise<boolean> {
    return false; // never asked: no failure of a move counts
  }

  settle(batch: SpoolBatch): void {
    this.#moved += batch.events.length;
    const at = positionAfter(batch.items[batch.items.length - 1]!);
    const next = this.#commits.then(() => batch.src.reader.commit(at, {}));
    // A checkpoint that failed is covered by the next one; without one, the batch is moved again after a
    // restart and the markers keep it off the stream.
    this.#commits = next.catch((err: unknown) =>
      this.#log?.warn({ err: errorText(err) }, 'spool checkpoint failed'),
    );
  }

  async housekeep(idle: boolean): Promise<undefined> {
    await this.#commits;
    if (idle && this.#moved > 0) {
      this.#log?.info({ moved: this.#moved }, 'spooled usage events moved to the billing stream');
      this.#moved = 0;
    }
    return undefined;
  }

  loopError(err: unknown, failures: number): { code: string; retryInMs: number } {
    const retryInMs = backoffDelay(failures, RETRY_MIN_MS, RETRY_MAX_MS);
    if (failures === 1) {
      this.#log?.warn(
        { err: errorText(err), retryInMs },
        'moving spooled usage events to the billing stream failed; retrying',
      );
    }
    return { code: 'spool_error', retryInMs };
  }

  /** A batch not on the stream is read again from the checkpoint by the next process. */
  async close(): Promise<void> {
    await this.#commits;
  }
}

/**
 * Moves a batch with one script (XADD with a marker per event, skipping events already marked), waiting
 * for Redis while it is away.
 */
function moveTransport(
  client: Redis,
  store: StoreConfig,
  target: string,
  markerTtl: string,
  closing: AbortSignal,
): Transport<SpoolBatch> {
  const markerPrefix = `${target}:moved:`;
  return {
    async send(batch) {
      if (!(await untilReady(client, closing))) {
        return {
          kind: 'retryable',
          status: undefined,
          code: 'aborted',
          message: 'closing',
          unavailable: true,
        };
      }
      try {
        const { events } = batch;
        await client.eval(
          MOVE,
          1 + events.length,
          target,
          ...events.map((e) => markerPrefix + e.event.idempotency_key),
          markerTtl,
          ...events.map((e) => queuedJson(e.event, e.traceparent)),
        );
        // As the queue's own writes: a move no replica took could be lost in a failover, so the batch
        // is moved again (the markers keep a move that did survive from doubling).
        if (store.billingWaitReplicas > 0) {
          const acknowledged = await client.wait(store.billingWaitReplicas, store.operationTimeoutMs);
          if (acknowledged < store.billingWaitReplicas) {
            throw new Error(`${acknowledged} of ${store.billingWaitReplicas} replicas took the moved events`);
          }
        }
        return { kind: 'ok' };
      } catch (err) {
        const message = errorText(err);
        return { kind: 'retryable', status: undefined, code: 'store_error', message, unavailable: true };
      }
    },
  };
}

/** Resolves true once the client is ready, false when `signal` aborts first. */
function untilReady(client: Redis, signal: AbortSignal): Promise<boolean> {
  if (client.status === 'ready') return Promise.resolve(true);
  if (signal.aborted) return Promise.resolve(false);
  return new Promise<boolean>((resolve) => {
    function done(ok: boolean): void {
      client.off('ready', onReady);
      signal.removeEventListener('abort', onAbort);
      resolve(ok);
    }
    function onReady(): void {
      done(true);
    }
    function onAbort(): void {
      done(false);
    }
    client.on('ready', onReady);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** Waits until the mover has moved everything there is, a move failed, or `ms` passed. */
async function drainWithin(mover: DeliveryLoop<SpoolBatch>, queue: SpoolQueue, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    mover.waitForDrain().catch(() => undefined),
    queue.nextFailure(),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
  ]);
  clearTimeout(timer);
}

async function closeSources(sources: readonly Source[]): Promise<void> {
  for (const s of sources) {
    await s.reader.close();
    await s.writer.close();
  }
}

/**
 * One spool per directory and process, shared by the runtimes of reloads (and by gateways started in the
 * same process); it closes when the last user releases it.
 */
const acquireShared = sharedByKey(
  (root: string, using: { store: StoreConfig; logger: Logger | undefined }) =>
    openEventSpool(root, using.store, { logger: using.logger }),
  (spool: EventSpool) => spool.close(),
);

export async function acquireEventSpool(
  root: string,
  store: StoreConfig,
  logger?: Logger,
): Promise<{ spool: EventSpool; release: () => Promise<void> }> {
  const shared = await acquireShared(root, { store, logger });
  return { spool: shared.value, release: () => shared.release() };
}
