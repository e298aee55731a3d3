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

import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { StoreConfig } from '../common/config-types.ts';
import { sharedByKey } from '../common/shared-by-key.ts';
import { closeRedisClient, createKeyLayout, createRedisClient, type Redis } from '../store/redis-client.ts';
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
  /** A batch read but not yet on the stream (the reader cannot rewind): retried first. */
  held: OutboxItem[] | undefined;
}

export async function openEventSpool(
  root: string,
  store: StoreConfig,
  opts: { logger?: Logger; markerTtlMs?: number } = {},
): Promise<EventSpool> {
  const log = opts.logger;
  const spoolRoot = join(root, SPOOL_DIR);
  const onError = (err: unknown) =>
    log?.error({ err: err instanceof Error ? err.message : String(err) }, 'spool write failed');
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
    sources.push({ dir: writer.dir, writer, reader: await openOutboxReader(writer.dir), held: undefined });
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
        sources.push({ dir, writer: w, reader: await openOutboxReader(dir), held: undefined });
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
  const markerPrefix = `${target}:moved:`;
  const markerTtl = String(opts.markerTtlMs ?? MOVED_MARKER_TTL_MS);
  const client: Redis = createRedisClient(store, { logger: log, connectionName: 'router-gateway-spool' });
  const statuses = sources.map((s) => openOutboxStatus(s.dir));

  let running: Promise<void> | undefined;
  let again = false;
  let stopping = false;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let failures = 0;
  let moved = 0;

  /** Moves one batch of a source; false when it had nothing to move. */
  async function moveBatch(src: Source): Promise<boolean> {
    let batch = src.held;
    if (batch === undefined) {
      batch = [];
      let events = 0;
      while (events < MOVE_BATCH) {
        const item = await src.reader.next();
        if (item === undefined) break;
        batch.push(item);
        if (item.kind === 'event') events++;
      }
      if (batch.length === 0) return false;
      src.held = batch;
    }
    const events = batch.filter((i): i is Extract<OutboxItem, { kind: 'event' }> => i.kind === 'event');
    if (events.length > 0) {
      await client.eval(
        MOVE,
        1 + events.length,
        target,
        ...events.map((e) => markerPrefix + e.event.idempotency_key),
        markerTtl,
        ...events.map((e) => queuedJson(e.event, e.traceparent)),
      );
      // As the queue's own writes: a move no replica took could be lost in a failover, so the batch
      // stays held and is moved again (the markers keep a move that did survive from doubling).
      if (store.billingWaitReplicas > 0) {
        const acknowledged = await client.wait(store.billingWaitReplicas, store.operationTimeoutMs);
        if (acknowledged < store.billingWaitReplicas) {
          throw new Error(`${acknowledged} of ${store.billingWaitReplicas} replicas took the moved events`);
        }
      }
    }
    // A held batch is never empty (see above).
    await src.reader.commit(positionAfter(batch[batch.length - 1]!), {});
    src.held = undefined;
    moved += events.length;
    return true;
  }

  async function drain(): Promise<void> {
    do {
      again = false;
      for (const src of sources) {
        while (!stopping && client.status === 'ready' && (await moveBatch(src))) {
          // next batch
        }
      }
    } while (again && !stopping && client.status === 'ready');
  }

  function kick(): void {
    if (closed) return;
    if (running !== undefined) {
      again = true;
      return;
    }
    if (client.status !== 'ready') return; // 'ready' kicks again
    running = drain().then(
      () => {
        failures = 0;
        if (moved > 0 && sources.every((s) => s.held === undefined)) {
          log?.info({ moved }, 'spooled usage events moved to the billing stream');
          moved = 0;
        }
      },
      (err: unknown) => {
        failures++;
        const delay = Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** Math.min(failures - 1, 10));
        if (failures === 1)
          log?.warn(
            { err: err instanceof Error ? err.message : String(err), retryInMs: delay },
            'moving spooled usage events to the billing stream failed; retrying',
          );
        if (!closed) {
          timer = setTimeout(() => {
            timer = undefined;
            kick();
          }, delay);
        }
      },
    );
    running.finally(() => {
      running = undefined;
      if (again && !closed) kick();
    });
  }

  client.on('ready', kick);
  kick();

  return {
    dir: writer.dir,
    append(event, traceparent) {
      return writer.append(event, traceparent).then(kick);
    },
    recorded: () => writer.recorded(),
    async pending() {
      let n = 0;
      for (const s of statuses) n += (await s.read()).pendingEvents;
      return n + writer.pending();
    },
    async close() {
      if (closed) return;
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      await running;
      if (client.status === 'ready') {
        const bound = setTimeout(() => {
          stopping = true;
        }, CLOSE_MOVE_MS);
        kick();
        await running;
        clearTimeout(bound);
      }
      closed = true;
      stopping = true;
      if (timer !== undefined) clearTimeout(timer);
      await running;
      await closeRedisClient(client);
      await closeSources(sources);
    },
  };
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
