// Over 400 lines: one delivery loop whose window, retries, reclaiming and stop share the consumer's state;
// sending, counting, backoff and stop are the engine's (sidecar/delivery-engine.ts).
// Delivers the billing stream (shared-store mode) to billing ingest, at least once, with the delivery
// semantics of the file-mode worker (sidecar/delivery-worker.ts):
// - up to `window` ingests in flight; each entry is retried on its own with full-jitter exponential
//   backoff (retry_interval_ms doubling up to max_retry_interval_ms);
// - which failures count is decided by sidecar/delivery-policy.ts; uncounted ones (the service looks
//   unavailable) are retried for as long as the outage lasts, and while one is being retried no new
//   entries are read, so an outage costs one probe per backoff, not a storm; a counted failure (the
//   event is to blame) holds only its own slot;
// - counted failures go to the attempts hash (HINCRBY, shared by all consumers, so a reclaimed entry
//   keeps its count); at billing_max_attempts counted attempts the entry is moved to
//   `<stream>:dead-letter` atomically.
//
// Group semantics (docs/operations.md "Billing stream delivery"): all sidecars read with XREADGROUP in `billing_consumer_group` under a
// name unique per process. An entry stays in its consumer's pending list until it is delivered
// (XACK + XDEL + HDEL in one MULTI) or dead-lettered. A consumer that stops hands back what it had not
// delivered (re-added to the stream at once). A consumer that dies leaves its entries pending;
// once idle for reclaim_idle_ms another consumer takes them with XAUTOCLAIM. A live consumer refreshes
// the idle time of what it holds (XCLAIM JUSTID, only while it is still the owner) at a third of that
// period, so an entry has one active consumer at a time. Should two ever send the same event, the
// Idempotency-Key makes the billing service count it once.

import type { Logger } from 'pino';
import { takeTraceparent, type UsageEvent } from '../billing/event/usage-event.ts';
import type { BillingConfig, StoreConfig } from '../common/config-types.ts';
import {
  closeRedisClient,
  createKeyLayout,
  createRedisClient,
  defaultConsumerName,
  defineScript,
  type Redis,
  type StreamShardKeys,
  waitReady,
} from '../store/redis-client.ts';
import { DeliveryEngine, type DeliveryError, type IngestClient } from './delivery-engine.ts';
import { backoffDelay, errorText, type FailureClass } from './delivery-policy.ts';

export interface StreamConsumerOptions {
  readonly store: StoreConfig;
  readonly billing: Pick<BillingConfig, 'retryIntervalMs' | 'maxRetryIntervalMs'> &
    Partial<Pick<BillingConfig, 'deliveryLingerMs'>>;
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
  /** Entries in the stream: queued or being delivered (delivered entries are deleted). */
  pending: number;
  /** Entries delivered to some consumer and not yet acknowledged (XPENDING). */
  claimed: number;
  deadLetter: number;
}

export interface StreamConsumer {
  readonly name: string;
  counters(): StreamConsumerCounters;
  /** XLEN / XPENDING / XLEN of the dead-letter stream; throws when the store is down. */
  status(): Promise<StreamStatus>;
  /**
   * Lets in-flight ingests end (or aborts them), hands back the entries it held but did not deliver
   * (re-added to the stream for any consumer), then closes the connections.
   */
  stop(opts?: { abort?: boolean }): Promise<void>;
}

// Refresh the idle time of an entry only if this consumer still owns it. KEYS: stream. ARGV: group,
// consumer, id. 1 = still ours.
const TOUCH = defineScript(`
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if #p == 0 or p[1][2] ~= ARGV[2] then return 0 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'JUSTID')
return 1
`);

// Move an entry to the dead-letter stream, atomically and only by its owner. KEYS: stream, dead-letter,
// attempts. ARGV: group, consumer, id, payload, attempts, error code, error message.
const DEAD_LETTER = defineScript(`
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if #p == 0 or p[1][2] ~= ARGV[2] then return 0 end
redis.call('XADD', KEYS[2], '*', 'payload', ARGV[4], 'source_id', ARGV[3], 'attempts', ARGV[5],
  'error_code', ARGV[6], 'error', ARGV[7], 'dead_lettered_at', ARGV[8])
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
redis.call('XDEL', KEYS[1], ARGV[3])
redis.call('HDEL', KEYS[3], ARGV[3])
return 1
`);

// Hand an entry back at stop: re-added at the stream's end under a new id, so any consumer reads it with
// '>' at once instead of after reclaim_idle_ms; its counted attempts move with it. Only by its owner.
// KEYS: stream, attempts. ARGV: group, consumer, id, payload. 1 = handed back.
const RELEASE = defineScript(`
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if #p == 0 or p[1][2] ~= ARGV[2] then return 0 end
local id = redis.call('XADD', KEYS[1], '*', 'payload', ARGV[4])
local n = redis.call('HGET', KEYS[2], ARGV[3])
if n then
  redis.call('HSET', KEYS[2], id, n)
  redis.call('HDEL', KEYS[2], ARGV[3])
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
redis.call('XDEL', KEYS[1], ARGV[3])
return 1
`);

interface Held {
  readonly id: string;
  readonly payload: string;
  /** Counted attempts so far (from the shared attempts hash). */
  attempts: number;
  /** Consecutive failures of any kind (backoff exponent). */
  failures: number;
  /** The last failure did not count: the service looks unavailable. */
  outage: boolean;
}

/** How an ingest of some entry ended; `seq` orders them. */
interface Outcome {
  readonly seq: number;
  readonly id: string;
  readonly ok: boolean;
  readonly failure: FailureClass | undefined;
}

const OUTCOMES_KEPT = 256;

type StreamEntries = [id: string, fields: string[] | null][];

function fieldsToPayload(fields: string[] | null): string | undefined {
  if (fields === null) return undefined;
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === 'payload') return fields[i + 1];
  return undefined;
}

export async function startStreamConsumer(opts: StreamConsumerOptions): Promise<StreamConsumer> {
  const { store, billing, client, logger } = opts;
  const windowSize = Math.max(1, opts.window ?? 16);
  const blockMs = Math.max(1, opts.blockMs ?? 1000);
  const lingerMs = opts.billing.deliveryLingerMs ?? 0;
  const reclaimIntervalMs = Math.max(10, opts.reclaimIntervalMs ?? Math.floor(store.reclaimIdleMs / 2));
  const heartbeatMs = Math.max(10, Math.floor(store.reclaimIdleMs / 3));
  const random = opts.random ?? Math.random;
  const name = store.billingConsumerName === '' ? defaultConsumerName() : store.billingConsumerName;
  const group = store.billingConsumerGroup;
  const shard = opts.shard ?? 0;
  const shardKeys: StreamShardKeys | undefined = createKeyLayout(store).shards[shard];
  if (shardKeys === undefined) throw new Error(`no billing stream shard ${shard}`);
  const keys: StreamShardKeys = shardKeys;

  const cmd = createRedisClient(store, { logger, connectionName: `router-billing:${name}:${shard}` });
  // Blocking reads hold the connection for up to blockMs: their own client with a longer timeout.
  const reader = createRedisClient(store, {
    commandTimeoutMs: blockMs + store.operationTimeoutMs,
    connectionName: `router-billing-read:${name}:${shard}`,
  });
  await Promise.all([waitReady(cmd, 2000), waitReady(reader, 2000)]);

  const held = new Map<string, Held>();
  const tasks = new Set<Promise<void>>();
  // Entries whose delivery ended with the stop, neither delivered nor dead-lettered: handed back by stop().
  const unsettled: Held[] = [];
  const engine = new DeliveryEngine({
    client,
    retryIntervalMs: billing.retryIntervalMs,
    maxRetryIntervalMs: billing.maxRetryIntervalMs,
    maxAttempts: store.billingMaxAttempts,
    random: opts.random,
  });
  let reclaimedCount = 0;
  // Recent ingest outcomes: the evidence that tells an event refused alone from a service failing all.
  const outcomes: Outcome[] = [];
  let outcomeSeq = 0;
  const outcomeWaiters = new Set<(o: Outcome) => void>();
  function recordOutcome(id: string, ok: boolean, failure: FailureClass | undefined): void {
    const o: Outcome = { seq: ++outcomeSeq, id, ok, failure };
    outcomes.push(o);
    if (outcomes.length > OUTCOMES_KEPT) outcomes.shift();
    for (const w of [...outcomeWaiters]) w(o);
  }
  function blamesService(o: Outcome): boolean {
    return !o.ok && (o.failure === 'outage' || o.failure === 'server_error');
  }
  /**
   * Whether the service accepts entries other than `id`: from the other ingests that ended since
   * `sinceSeq`, else the next one to end while some are in flight, else the latest one that ended;
   * undefined when none says anything either way.
   */
  async function otherAccepted(id: string, sinceSeq: number): Promise<boolean | undefined> {
    let failed = false;
    for (const o of outcomes) {
      if (o.seq <= sinceSeq || o.id === id) continue;
      if (o.ok) return true;
      if (blamesService(o)) failed = true;
    }
    if (failed) return false;
    if (engine.inFlight > 0) {
      const next = await new Promise<Outcome>((resolve) => {
        const w = (o: Outcome): void => {
          if (o.id === id) return;
          outcomeWaiters.delete(w);
          resolve(o);
        };
        outcomeWaiters.add(w);
      });
      if (next.ok || blamesService(next)) return next.ok;
    }
    for (let i = outcomes.length - 1; i >= 0; i--) {
      const o = outcomes[i]!;
      if (o.id !== id && (o.ok || blamesService(o))) return o.ok;
    }
    return undefined;
  }
  let stopping = false;
  let wakeResolve: (() => void) | undefined;

  function wake(): void {
    const r = wakeResolve;
    wakeResolve = undefined;
    r?.();
  }
  function waitForWake(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        engine.stopSignal.removeEventListener('abort', done);
        if (wakeResolve === done) wakeResolve = undefined;
        resolve();
      }
      wakeResolve = done;
      engine.stopSignal.addEventListener('abort', done, { once: true });
    });
  }
  function sleep(ms: number): Promise<void> {
    return engine.sleep(ms);
  }
  function recordError(code: string, status: number | undefined, message: string): void {
    engine.recordError(code, status, message);
  }

  async function ensureGroup(): Promise<void> {
    try {
      await cmd.xgroup('CREATE', keys.stream, group, '0', 'MKSTREAM');
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('BUSYGROUP')) throw err;
    }
  }

  /**
   * Takes entries on. `neverDelivered`: read with '>' (never delivered to any consumer of the group, so
   * no attempts can be recorded for them): the attempts lookup is skipped.
   */
  async function adopt(entries: StreamEntries, reclaimed: boolean, neverDelivered = false): Promise<void> {
    const fresh = entries.filter(([id]) => !held.has(id));
    if (fresh.length === 0) return;
    const counts: (string | null)[] = neverDelivered
      ? []
      : await cmd.hmget(keys.attempts, ...fresh.map(([id]) => id));
    fresh.forEach(([id, fields], i) => {
      const entry: Held = {
        id,
        payload: fieldsToPayload(fields) ?? '',
        attempts: Number(counts[i] ?? 0),
        failures: 0,
        outage: false,
      };
      held.set(id, entry);
      if (reclaimed) reclaimedCount++;
      const task = deliver(entry)
        .then((settled) => {
          if (!settled) unsettled.push(entry);
        })
        .finally(() => {
          tasks.delete(task);
          held.delete(id);
          wake();
        });
      tasks.add(task);
    });
    if (reclaimed) logger?.info({ count: fresh.length, consumer: name }, 'reclaimed pending billing entries');
  }

  /**
   * One entry from first send to delivered, dead-lettered, lost to another consumer (all settled: true),
   * or stop (false: still this consumer's to hand back).
   */
  async function deliver(entry: Held): Promise<boolean> {
    let event: UsageEvent;
    let traceparent: string | undefined;
    try {
      event = JSON.parse(entry.payload) as UsageEvent;
      if (event === null || typeof event !== 'object' || typeof event.idempotency_key !== 'string') {
        throw new Error('not a usage event');
      }
      traceparent = takeTraceparent(event as unknown as Record<string, unknown>);
    } catch (err) {
      return deadLetter(entry, 'invalid_payload', errorText(err));
    }
    let sinceSeq = outcomeSeq;
    while (!stopping) {
      if (entry.failures > 0) {
        await sleep(engine.backoff(entry.failures));
        if (stopping) return false;
        if (!(await stillOwned(entry))) return true;
      }
      const outcome = await engine.send(event, { traceparent });
      if (outcome.kind === 'ok') {
        recordOutcome(entry.id, true, undefined);
        entry.outage = false;
        acknowledge(entry);
        return true;
      }
      if (outcome.kind === 'stopped') {
        recordOutcome(entry.id, false, undefined);
        return false; // not an attempt: handed back
      }
      const { result, failure } = outcome;
      recordOutcome(entry.id, false, failure);
      entry.failures++;
      const counted = await engine.counts(failure, () => otherAccepted(entry.id, sinceSeq));
      sinceSeq = outcomeSeq;
      entry.outage = !counted;
      if (counted) {
        try {
          entry.attempts = await cmd.hincrby(keys.attempts, entry.id, 1);
        } catch (err) {
          // The count could not be recorded: retry without counting rather than lose the event.
          logger?.warn({ err: errorText(err), id: entry.id }, 'could not record a delivery attempt');
        }
      }
      logger?.warn(
        {
          request_id: event.external_event_id,
          code: result.code,
          status: result.status,
          attempts: entry.attempts,
          failures: entry.failures,
        },
        'billing ingest failed',
      );
      if (!entry.outage && engine.exhausted(entry.attempts)) {
        return deadLetter(entry, result.code, result.message);
      }
    }
    return false;
  }

  async function stillOwned(entry: Held): Promise<boolean> {
    try {
      const owned = (await TOUCH.run(cmd, [keys.stream], [group, name, entry.id])) === 1;
      if (!owned) logger?.info({ id: entry.id }, 'billing entry now owned by another consumer; leaving it');
      return owned;
    } catch {
      return true; // store down: keep retrying the ingest; ownership is checked again next time
    }
  }

  // Delivered entries are acknowledged in batches: one MULTI (XACK, XDEL, HDEL with every id) at most
  // ACK_DELAY_MS after the first of them, or at ACK_BATCH ids. One MULTI per event cost the sidecar a
  // socket write and redis-server a transaction per event, about a quarter of the sidecar's CPU in the
  // bench. The slot is free as soon as the ingest succeeded; stop() flushes the last batch. An entry whose
  // acknowledgement is lost (crash, store down at stop) is sent again later and counted once by billing
  // (Idempotency-Key), as any delivered-but-unacknowledged entry always was.
  const ACK_DELAY_MS = 5;
  const ACK_BATCH = 256;
  let ackIds: string[] = [];
  let ackTimer: NodeJS.Timeout | undefined;
  const acking = new Set<Promise<void>>();

  function acknowledge(entry: Held): void {
    ackIds.push(entry.id);
    if (ackIds.length >= ACK_BATCH) flushAcks();
    else ackTimer ??= setTimeout(flushAcks, ACK_DELAY_MS);
  }

  function flushAcks(): void {
    if (ackTimer !== undefined) clearTimeout(ackTimer);
    ackTimer = undefined;
    if (ackIds.length === 0) return;
    const ids = ackIds;
    ackIds = [];
    const done: Promise<void> = acknowledgeIds(ids).finally(() => acking.delete(done));
    acking.add(done);
  }

  async function acknowledgeIds(ids: readonly string[]): Promise<void> {
    let failures = 0;
    while (true) {
      try {
        await cmd
          .multi()
          .xack(keys.stream, group, ...ids)
          .xdel(keys.stream, ...ids)
          .hdel(keys.attempts, ...ids)
          .exec();
        return;
      } catch (err) {
        // Delivered but not acknowledged: if we give up, the entries are sent again and deduplicated.
        failures++;
        recordError('store_error', undefined, errorText(err));
        if (stopping) return;
        await sleep(backoffDelay(failures, 100, 2000, random));
      }
    }
  }

  /** False when the stop came first: the entry is still held. */
  async function deadLetter(entry: Held, code: string, message: string): Promise<boolean> {
    let failures = 0;
    while (!stopping) {
      try {
        const moved = await DEAD_LETTER.run(
          cmd,
          [keys.stream, keys.deadLetter, keys.attempts],
          [group, name, entry.id, entry.payload, entry.attempts, code, message, new Date().toISOString()],
        );
        if (moved === 1) {
          engine.deadLettered();
          logger?.error(
            { id: entry.id, attempts: entry.attempts, code },
            'billing event dead-lettered after max attempts',
          );
        }
        return true;
      } catch (err) {
        failures++;
        recordError('store_error', undefined, errorText(err));
        await sleep(backoffDelay(failures, 100, 2000, random));
      }
    }
    return false;
  }

  /**
   * Hands back what the stop left undelivered, so a rolling restart delays no event by reclaim_idle_ms.
   * An entry whose ingest was aborted may have reached the service: sent again, it is counted once
   * (Idempotency-Key). If the store does not answer, the entries stay pending and are reclaimed later.
   */
  async function releaseUnsettled(): Promise<void> {
    if (unsettled.length === 0) return;
    const entries = unsettled.splice(0);
    const results = await Promise.allSettled(
      entries.map((e) => RELEASE.run(cmd, [keys.stream, keys.attempts], [group, name, e.id, e.payload])),
    );
    const released = results.filter((r) => r.status === 'fulfilled' && r.value === 1).length;
    const failed = results.filter((r) => r.status === 'rejected').length;
    if (failed > 0) {
      logger?.warn(
        { count: failed, consumer: name, reclaim_idle_ms: store.reclaimIdleMs },
        'could not hand back billing entries at stop; another consumer reclaims them after the idle time',
      );
    }
    if (released > 0)
      logger?.info({ count: released, consumer: name }, 'handed back undelivered billing entries');
  }

  async function heartbeat(): Promise<void> {
    if (held.size === 0) return;
    await Promise.all([...held.values()].map((e) => TOUCH.run(cmd, [keys.stream], [group, name, e.id])));
  }

  let reclaimCursor = '0-0';
  let nextReclaim = 0;
  async function reclaim(): Promise<void> {
    const room = windowSize - held.size;
    if (room <= 0) return;
    const reply = (await cmd.xautoclaim(
      keys.stream,
      group,
      name,
      store.reclaimIdleMs,
      reclaimCursor,
      'COUNT',
      room,
    )) as [string, StreamEntries, string[]?];
    reclaimCursor = reply[0];
    await adopt(
      reply[1].filter((e) => e !== null),
      true,
    );
  }

  function outageInProgress(): boolean {
    for (const e of held.values()) if (e.outage) return true;
    return false;
  }

  async function loop(): Promise<void> {
    let failures = 0;
    let ownPending = true;
    let groupReady = false;
    while (!stopping) {
      try {
        if (!groupReady) {
          await ensureGroup();
          groupReady = true;
        }
        if (ownPending) {
          // Entries delivered to this consumer name before a restart (a fixed billing_consumer_name).
          const mine = await readGroup(cmd, ['COUNT', windowSize, 'STREAMS', keys.stream, '0']);
          await adopt(mine, false);
          ownPending = false;
        }
        if (Date.now() >= nextReclaim) {
          nextReclaim = Date.now() + reclaimIntervalMs;
          await reclaim();
        }
        // With a linger, refill only once half the window is free: reading as each slot frees up cost a
        // XREADGROUP round trip per event or two under steady load.
        if (held.size >= (lingerMs > 0 ? Math.ceil(windowSize / 2) : windowSize) || outageInProgress()) {
          await waitForWake(Math.max(10, nextReclaim - Date.now()));
          failures = 0;
          continue;
        }
        const block = Math.max(1, Math.min(blockMs, nextReclaim - Date.now()));
        const want = windowSize - held.size;
        const entries = await readGroup(reader, ['COUNT', want, 'BLOCK', block, 'STREAMS', keys.stream, '>']);
        await adopt(entries, false, true);
        failures = 0;
        // A short read means the stream is keeping up with the gateway: let more entries gather before
        // the next read instead of one round trip (and one wake-up) per event (billing.delivery_linger_ms).
        if (lingerMs > 0 && entries.length > 0 && entries.length < want) await sleep(lingerMs);
      } catch (err) {
        if (stopping) break;
        const text = errorText(err);
        if (text.startsWith('NOGROUP')) groupReady = false; // the store lost the group (restart)
        failures++;
        recordError('store_error', undefined, text);
        if (failures === 1) logger?.warn({ err: text }, 'billing stream read failed; retrying');
        await sleep(backoffDelay(failures, 100, 2000, random));
      }
    }
  }

  async function readGroup(conn: Redis, args: (string | number)[]): Promise<StreamEntries> {
    const reply = (await conn.call('XREADGROUP', 'GROUP', group, name, ...args)) as
      | [string, StreamEntries][]
      | null;
    if (reply === null || reply.length === 0) return [];
    return reply[0]![1];
  }

  const heartbeatTimer = setInterval(() => {
    heartbeat().catch((err: unknown) =>
      logger?.debug({ err: errorText(err) }, 'billing entry heartbeat failed'),
    );
  }, heartbeatMs);
  heartbeatTimer.unref();

  const running = loop();
  logger?.info({ consumer: name, group, stream: keys.stream }, 'billing stream consumer started');

  let stopped: Promise<void> | undefined;
  return {
    name,
    counters: () => ({ ...engine.counters, reclaimed: reclaimedCount, inFlight: engine.inFlight }),
    async status() {
      const reply = await cmd
        .pipeline()
        .xlen(keys.stream)
        .xpending(keys.stream, group)
        .xlen(keys.deadLetter)
        .exec();
      const [lenR, pendR, deadR] = reply ?? [];
      if (reply === null || lenR === undefined || pendR === undefined || deadR === undefined) {
        throw new Error('store did not answer');
      }
      for (const [err] of reply) {
        if (err && !err.message.startsWith('NOGROUP')) throw err;
      }
      const pend = pendR[1] as [number, ...unknown[]] | null;
      return {
        pending: Number(lenR[1] ?? 0),
        claimed: Array.isArray(pend) ? Number(pend[0] ?? 0) : 0,
        deadLetter: Number(deadR[1] ?? 0),
      };
    },
    stop(stopOpts = {}) {
      stopped ??= (async () => {
        stopping = true;
        engine.stop(stopOpts.abort === true);
        clearInterval(heartbeatTimer);
        reader.disconnect(); // ends a blocking read at once
        wake();
        await running;
        await Promise.all([...tasks]);
        flushAcks();
        await Promise.all([...acking, releaseUnsettled()]);
        await closeRedisClient(cmd);
        logger?.info(
          { consumer: name, delivered: engine.counters.delivered },
          'billing stream consumer stopped',
        );
      })();
      return stopped;
    },
  } satisfies StreamConsumer;
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
