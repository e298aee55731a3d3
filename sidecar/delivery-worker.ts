// Over 400 lines: one delivery loop whose window, retries, replay and stop share the worker's state;
// sending, counting, backoff and stop are the engine's (sidecar/delivery-engine.ts).
// Delivers the file-mode outbox to billing ingest, in order, at least once.
//
// Pipelining: up to `window` ingests are in flight, but the checkpoint only ever moves to the end of the
// lowest event not yet done, so a crash re-sends at most the window plus the events since the last
// checkpoint write; the billing service deduplicates them on Idempotency-Key.
//
// Failures: the head of the queue is retried after a full-jitter exponential backoff (retry_interval_ms
// doubling up to max_retry_interval_ms). Which failures count toward max_attempts is decided by
// sidecar/delivery-policy.ts. While the head's failure is not counted (the service looks unavailable), no
// new events are sent: one probe per backoff during an outage. While it is counted (the service refuses
// this event and accepts others), the events behind it keep being delivered, up to POISON_READ_AHEAD
// events past the checkpoint, which stays at the head. An event with max_attempts counted attempts goes to
// dead-letter.jsonl and the checkpoint moves on. Counted attempts are stored in the checkpoint and survive
// restarts.
//
// Replay: dead letters marked for replay (sidecar/dead-letter-file.ts) are delivered one at a time beside
// the outbox, with the same policy; delivered, their record goes; max_attempts more counted failures
// leave them in the dead letter again.

import { type FSWatcher, watch } from 'node:fs';
import type { Logger } from 'pino';
import type { IngestResult } from '../billing/billing-client.ts';
import {
  attemptKey,
  type OutboxItem,
  type OutboxPosition,
  type OutboxReader,
  type OutboxReaderOptions,
  openOutboxReader,
  positionAfter,
} from '../billing/outbox/reader.ts';
import { openOutboxStatus } from '../billing/outbox/status.ts';
import type { BillingConfig } from '../common/config-types.ts';
import {
  DeadLetterFile,
  type DeadLetterRecord,
  deadLetterId,
  type ReplayReport,
} from './dead-letter-file.ts';
import { DeliveryEngine, type DeliveryError, type IngestClient } from './delivery-engine.ts';
import { abortableSleep, errorText, type FailureClass } from './delivery-policy.ts';

export interface DeliveryWorkerOptions {
  config: Pick<BillingConfig, 'outboxDir' | 'retryIntervalMs' | 'maxRetryIntervalMs' | 'maxAttempts'> &
    Partial<Pick<BillingConfig, 'deliveryLingerMs'>>;
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

// Events read past a head that is retried for a counted failure. Delivered ones keep only their position;
// a crash re-sends them (the billing service deduplicates on Idempotency-Key).
const POISON_READ_AHEAD = 4096;

interface Slot {
  item: OutboxItem;
  /** waiting: a failed head waiting out its backoff. */
  state: 'new' | 'inflight' | 'done' | 'failed' | 'waiting';
  /** Counted attempts (durable). */
  attempts: number;
  /** Consecutive failures of any kind (backoff exponent). */
  failures: number;
  /** Class of the last failure, judged when the slot is the head. */
  failure: FailureClass | undefined;
  /** The last failure counted: the event is to blame, so the queue behind it keeps moving. */
  counted: boolean;
  lastResult: IngestResult | undefined;
  settled: Promise<void> | undefined;
}

export async function startDeliveryWorker(opts: DeliveryWorkerOptions): Promise<DeliveryWorker> {
  const { config, client, logger } = opts;
  const windowSize = Math.max(1, opts.window ?? 16);
  const checkpointEvery = opts.checkpointEvery ?? 500;
  const checkpointIntervalMs = opts.checkpointIntervalMs ?? 200;
  const pollIntervalMs = opts.pollIntervalMs ?? 1000;
  const sleep = opts.sleep ?? abortableSleep;

  const reader: OutboxReader = await openOutboxReader(config.outboxDir, opts.reader);
  const deadLetters = new DeadLetterFile(config.outboxDir, opts.reader?.onFsync);
  const status = openOutboxStatus(config.outboxDir);
  const initialAttempts = reader.initial.attempts;
  let committed: OutboxPosition = { segment: reader.initial.segment, offset: reader.initial.offset };
  let durable: OutboxPosition = committed;
  let doneSinceCheckpoint = 0;
  let firstUncheckpointedAt = 0;
  let attemptsDirty = false;

  const window: Slot[] = [];
  const engine = new DeliveryEngine({
    client,
    retryIntervalMs: config.retryIntervalMs,
    maxRetryIntervalMs: config.maxRetryIntervalMs,
    maxAttempts: config.maxAttempts,
    random: opts.random,
  });

  let stopping = false;
  let wakeResolve: (() => void) | undefined;
  let woken = false;
  let generation = 0;
  let drainWaiters: { gen: number; resolve: () => void; reject: (err: Error) => void }[] = [];

  function wake(): void {
    woken = true;
    const r = wakeResolve;
    wakeResolve = undefined;
    r?.();
  }

  // A change seen while idle is read after delivery_linger_ms, not at once: under steady load the gateway
  // appends an event every fraction of a millisecond, and reading each on its own wake-up cost the sidecar
  // (and the cores it shares with the gateway) a loop turn, a read(2) and a checkpoint per event.
  const lingerMs = config.deliveryLingerMs ?? 0;
  let lingerTimer: NodeJS.Timeout | undefined;
  function wakeSoon(): void {
    if (lingerMs <= 0) {
      wake();
      return;
    }
    lingerTimer ??= setTimeout(() => {
      lingerTimer = undefined;
      wake();
    }, lingerMs);
  }

  function waitForWake(timeoutMs: number | undefined): Promise<void> {
    if (woken || stopping) {
      woken = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const timer = timeoutMs === undefined ? undefined : setTimeout(wake, timeoutMs);
      wakeResolve = () => {
        if (timer) clearTimeout(timer);
        woken = false;
        resolve();
      };
    });
  }

  let watcher: FSWatcher | undefined;
  if (opts.watch ?? true) {
    try {
      watcher = watch(config.outboxDir, { persistent: false }, (_event, name) => {
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

  function dispatch(slot: Slot): void {
    const item = slot.item;
    if (item.kind !== 'event') return;
    slot.state = 'inflight';
    slot.settled = engine.send(item.event, { traceparent: item.traceparent }).then((outcome) => {
      if (outcome.kind === 'ok') {
        slot.state = 'done';
        if (slot !== window[0]) slot.item = { ...positionOf(item), kind: 'skip' };
      } else if (outcome.kind === 'stopped') {
        slot.state = 'new'; // not an attempt: we gave up on it, it is re-sent after restart
      } else {
        const result = outcome.result;
        slot.lastResult = result;
        slot.state = 'failed';
        slot.failures++;
        slot.failure = outcome.failure;
        logger?.warn(
          {
            request_id: item.event.external_event_id,
            code: result.code,
            status: result.status,
            attempts: slot.attempts,
            failures: slot.failures,
            ...(result.kind === 'permanent' && result.hint ? { hint: result.hint } : {}),
          },
          'billing ingest failed',
        );
      }
      wake();
    });
  }

  function advance(): void {
    while (window[0]?.state === 'done') {
      const slot = window.shift() as Slot;
      committed = positionAfter(slot.item);
      if (doneSinceCheckpoint === 0) firstUncheckpointedAt = Date.now();
      doneSinceCheckpoint++;
    }
  }

  // Checkpoints are written one at a time, in order, so a slower older write can never land last.
  let checkpointChain: Promise<void> = Promise.resolve();
  function checkpoint(): Promise<void> {
    const next = checkpointChain.then(writeCheckpointNow);
    checkpointChain = next.catch(() => undefined);
    return next;
  }

  async function writeCheckpointNow(): Promise<void> {
    const attempts: Record<string, number> = {};
    for (const slot of window) {
      if (slot.attempts > 0 && slot.item.kind === 'event') attempts[attemptKey(slot.item)] = slot.attempts;
    }
    await reader.commit(committed, attempts);
    durable = committed;
    doneSinceCheckpoint = 0;
    attemptsDirty = false;
  }

  function checkpointDue(): boolean {
    if (attemptsDirty) return true;
    if (doneSinceCheckpoint === 0) return false;
    return (
      doneSinceCheckpoint >= checkpointEvery || Date.now() - firstUncheckpointedAt >= checkpointIntervalMs
    );
  }

  function settleDrainWaiters(scanGen: number): void {
    if (drainWaiters.length === 0) return;
    const still: typeof drainWaiters = [];
    for (const w of drainWaiters) {
      if (w.gen <= scanGen) w.resolve();
      else still.push(w);
    }
    drainWaiters = still;
  }

  function newSlot(item: OutboxItem): Slot {
    const attempts = item.kind === 'event' ? (initialAttempts[attemptKey(item)] ?? 0) : 0;
    return {
      item,
      state: item.kind === 'event' ? 'new' : 'done',
      attempts,
      failures: 0,
      failure: undefined,
      counted: false,
      lastResult: undefined,
      settled: undefined,
    };
  }

  /**
   * Whether the service accepts an event other than `head` right now: an ingest already in flight, or
   * one more event sent as a probe. Undefined when there is no other event to ask with.
   */
  async function othersAccepted(head: Slot): Promise<boolean | undefined> {
    let probe = window.find((s) => s !== head && s.item.kind === 'event' && s.state !== 'done');
    while (probe === undefined && window.length < windowSize * 4) {
      const item = await reader.next();
      if (!item) return undefined;
      const slot = newSlot(item);
      window.push(slot);
      if (slot.state === 'new') probe = slot;
    }
    if (probe === undefined) return undefined;
    if (probe.state !== 'inflight') dispatch(probe);
    await probe.settled;
    return probe.state === 'done';
  }

  async function handleFailedHead(head: Slot): Promise<void> {
    const item = head.item as Extract<OutboxItem, { kind: 'event' }>;
    head.counted = await engine.counts(head.failure ?? 'outage', () => othersAccepted(head));
    if (head.counted) {
      head.attempts++;
      attemptsDirty = true;
    }
    if (engine.exhausted(head.attempts)) {
      const r = head.lastResult;
      await deadLetters.append({
        dead_lettered_at: new Date().toISOString(),
        segment: item.segment,
        offset: item.offset,
        attempts: head.attempts,
        last_error:
          r && r.kind !== 'ok'
            ? { kind: r.kind, status: r.status, code: r.code, message: r.message }
            : undefined,
        event: item.event,
      });
      head.state = 'done';
      engine.deadLettered();
      logger?.error(
        {
          request_id: item.event.external_event_id,
          attempts: head.attempts,
          code: r?.kind !== 'ok' ? r?.code : undefined,
        },
        'billing event dead-lettered after max attempts',
      );
      return;
    }
    if (attemptsDirty) await checkpoint();
    const delay = engine.backoff(head.failures);
    // Waited out beside the loop, so the events behind a counted failure keep moving meanwhile.
    head.state = 'waiting';
    void sleep(delay, engine.stopSignal).then(() => {
      if (!stopping && head.state === 'waiting') dispatch(head);
      wake();
    });
  }

  async function loop(): Promise<void> {
    while (!stopping) {
      try {
        advance();
        const head = window[0];
        if (head?.state === 'failed') {
          await handleFailedHead(head);
          continue;
        }
        if (checkpointDue()) await checkpoint();
        // While the head is retried for an uncounted failure, send nothing else: one probe per backoff
        // during an outage. A counted failure is the event's own: the others go on.
        const blocked = head !== undefined && head.failures > 0 && !head.counted;
        const readAhead = head?.counted ? POISON_READ_AHEAD : windowSize * 4;
        let exhausted = false;
        const scanGen = generation;
        if (!blocked) {
          for (const slot of window) if (slot.state === 'new' && engine.inFlight < windowSize) dispatch(slot);
          while (engine.inFlight < windowSize && window.length < readAhead) {
            const item = await reader.next();
            if (!item) {
              exhausted = true;
              break;
            }
            const slot = newSlot(item);
            window.push(slot);
            if (slot.state === 'new') dispatch(slot);
          }
        }
        if (window[0]?.state === 'done') continue;
        if (window.length === 0 && exhausted) {
          if (doneSinceCheckpoint > 0 || attemptsDirty) await checkpoint();
          settleDrainWaiters(scanGen);
          await waitForWake(pollIntervalMs);
          continue;
        }
        // Something is in flight; a settled ingest wakes us. The timer only bounds checkpoint lag.
        await waitForWake(doneSinceCheckpoint > 0 ? checkpointIntervalMs : undefined);
      } catch (err) {
        engine.recordError('outbox_error', undefined, errorText(err));
        logger?.error({ err: errorText(err) }, 'billing delivery loop error; retrying');
        await sleep(pollIntervalMs, engine.stopSignal);
      }
    }
    // Stopping: let the in-flight ingests end, then record what is done.
    await Promise.all(window.map((s) => s.settled));
    advance();
    if (doneSinceCheckpoint > 0 || attemptsDirty || committed !== durable) await checkpoint();
  }

  let replayWake: (() => void) | undefined;
  let replayPoked = false;
  function pokeReplay(): void {
    replayPoked = true;
    const r = replayWake;
    replayWake = undefined;
    r?.();
  }

  async function replayLoop(): Promise<void> {
    let failures = 0;
    while (!stopping) {
      let queued: DeadLetterRecord[] = [];
      try {
        queued = await deadLetters.queued();
      } catch (err) {
        logger?.error({ err: errorText(err) }, 'could not read the dead letter for replay');
      }
      const record = queued[0];
      if (record === undefined || failures > 0) {
        if (failures > 0) {
          await sleep(engine.backoff(failures), engine.stopSignal);
        } else if (!replayPoked) {
          await new Promise<void>((resolve) => {
            replayWake = resolve;
          });
        }
        replayPoked = false;
        if (record === undefined) continue;
      }
      const id = deadLetterId(record);
      const outcome = await engine.send(record.event, { inFlight: false, countDelivered: false });
      const request_id = record.event.external_event_id;
      try {
        if (outcome.kind === 'ok') {
          failures = 0;
          await deadLetters.delivered(id);
          engine.delivered();
          logger?.info({ request_id, id }, 'dead-lettered billing event replayed');
          continue;
        }
        if (outcome.kind === 'stopped') return;
        const result = outcome.result;
        failures++;
        const counted = await engine.counts(outcome.failure, async () => undefined);
        const error = {
          kind: result.kind,
          status: result.status,
          code: result.code,
          message: result.message,
        };
        if (await deadLetters.failed(id, counted, config.maxAttempts, error)) {
          failures = 0;
          logger?.error({ request_id, id, code: result.code }, 'replayed billing event dead-lettered again');
        } else {
          logger?.warn({ request_id, id, code: result.code, counted }, 'replay of a billing event failed');
        }
      } catch (err) {
        failures++;
        logger?.error({ err: errorText(err), id }, 'could not record a replay outcome');
      }
    }
  }

  const running = Promise.all([loop(), replayLoop()]).then(() => undefined);

  let stopped: Promise<void> | undefined;
  function stop(stopOpts: { abort?: boolean } = {}): Promise<void> {
    stopped ??= (async () => {
      stopping = true;
      engine.stop(stopOpts.abort === true);
      if (lingerTimer !== undefined) clearTimeout(lingerTimer);
      wake();
      pokeReplay();
      watcher?.close();
      try {
        await running;
      } finally {
        await reader.close();
        for (const w of drainWaiters) w.reject(new Error('delivery worker stopped'));
        drainWaiters = [];
      }
    })();
    return stopped;
  }

  return {
    counters: () => ({ ...engine.counters, inFlight: engine.inFlight, quarantined: reader.quarantined() }),
    pending: async () => (await status.read(committed)).pendingEvents,
    wake,
    waitForDrain: () => {
      if (stopping) return Promise.reject(new Error('delivery worker stopped'));
      generation++;
      const gen = generation;
      const p = new Promise<void>((resolve, reject) => drainWaiters.push({ gen, resolve, reject }));
      wake();
      return p;
    },
    replayDeadLetters: async (ids, dryRun) => {
      const report = await deadLetters.markForReplay(ids, dryRun);
      if (!dryRun) pokeReplay();
      return report;
    },
    stop,
  } satisfies DeliveryWorker;
}

function positionOf(item: OutboxItem): { segment: number; offset: number; end: number } {
  return item.kind === 'sealed'
    ? { segment: item.segment, offset: 0, end: 0 }
    : { segment: item.segment, offset: item.offset, end: item.end };
}
