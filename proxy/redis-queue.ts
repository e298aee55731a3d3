// The usage-event queue of shared-store mode: the billing stream (field `payload`, docs/operations.md
// "Keys in Redis"). The enqueue hook calls it just before a reply's last byte, which waits only until the
// turn's command is written (recorded(), below), never for Redis's answer; a failure never changes the
// response. An event the stream cannot take (Redis down, a refused or timed-out
// XADD) goes to the local spool (billing/event-spool.ts), which moves it to the stream once Redis answers.
// A timed-out XADD may still have been applied: the event can then reach the stream twice, and the
// billing service counts it once by its idempotency key (docs/operations.md "The spool (Redis away)").

import type { Logger } from 'pino';
import type { EventQueue } from '../billing/event/event-queue.ts';
import { type TokenEvent, usageEventOf } from '../billing/event/token-event.ts';
import type { UsageEvent } from '../billing/event/usage-event.ts';
import { queuedJson, queuedTokensJson } from '../billing/event/usage-event-json.ts';
import { acquireEventSpool, type EventSpool } from '../billing/event-spool.ts';
import type { StoreConfig } from '../common/config-types.ts';
import { StoreUnavailableError } from '../common/store-types.ts';
import { createTurnBatch } from '../common/turn-batch.ts';
import {
  closeRedisClient,
  connectRedis,
  EncodedCommand,
  isConnectionError,
  type KeyLayout,
  keySlot,
  type Redis,
  withTimeout,
} from '../store/redis-client.ts';
import { streamCommands } from './stream-commands.ts';

// Longer than a loaded Redis's usual answer on a local network, short beside an LLM reply.
const DEFAULT_HOLD_MS = 2;

export interface RedisEventQueue extends EventQueue {
  /** Resolves once every event handed over so far is on the stream, in the spool or reported failed. */
  settled(): Promise<void>;
}

export function createRedisEventQueue(
  client: Redis,
  keys: Pick<KeyLayout, 'shards'>,
  spool?: EventSpool,
  logger?: Logger,
  replication: { replicas: number; timeoutMs: number } = { replicas: 0, timeoutMs: 0 },
  /** Bounds each batch by itself: for a connection made with `ownTimeouts` (no timer per command). */
  commandTimeoutMs?: number,
  /** How long events may wait for the batch ahead of them to be answered before they are written. */
  holdMs = DEFAULT_HOLD_MS,
): RedisEventQueue {
  let sending = 0;
  let idle: (() => void)[] = [];
  // Each turn's batch goes to the next shard: the shards take equal shares of the event rate.
  let nextShard = 0;
  const shards = keys.shards.map(({ stream }) => ({
    stream,
    slot: keySlot(stream),
    encode: streamCommands(stream),
  }));
  // Logged once per outage: the first event spooled after a write that reached the stream.
  let spooling = false;

  function toSpool(events: PendingEvent[], cause: unknown): void {
    if (spool === undefined) {
      const failure = asQueueError(cause);
      for (const e of events) failed(e, failure);
      return;
    }
    if (!spooling) {
      spooling = true;
      logger?.warn(
        { err: cause instanceof Error ? cause.message : String(cause), spool: spool.dir },
        'billing stream unavailable: usage events go to the local spool',
      );
    }
    for (const e of events)
      spool.append('raw_json' in e.event ? e.event : usageEventOf(e.event), e.traceparent).then(
        () => done(e),
        (err: unknown) => failed(e, err),
      );
  }

  // The events completed in one event-loop turn go out together: a lone event as a plain XADD, several
  // as one script call. The gateway sends a reply's last byte after recorded(); by then the command has
  // been written to the socket (the queue's connection does not auto-pipeline, which would defer the
  // write to the next turn), or, while the connection is down, the events are in the spool's write of
  // the next turn, which recorded() waits for too.
  // The events of one turn share one outcome (a promise per event cost the request path measurable CPU).
  let outcome: TurnOutcome | undefined;
  const turn = createTurnBatch<PendingEvent>((events) => {
    outcome = undefined;
    if (client.status !== 'ready') toSpool(events, new StoreUnavailableError('enqueue'));
    else if (sending > 0) hold(events);
    else send(events);
  });

  // While a batch is on its way, later turns' events wait for its answer and then go out as one command:
  // under load one write carries many turns, which saves the gateway a socket write and Redis a command
  // per turn. Their replies' last bytes wait for that write (recorded()), so the wait is bounded: after
  // holdMs the held events are written anyway, beside the batch still unanswered.
  let held: PendingEvent[] = [];
  let heldWritten: PromiseWithResolvers<void> | undefined;
  let holdTimer: NodeJS.Timeout | undefined;

  function hold(events: PendingEvent[]): void {
    for (const e of events) held.push(e);
    if (heldWritten !== undefined) return;
    heldWritten = Promise.withResolvers<void>();
    if (holdTimer === undefined) holdTimer = setTimeout(release, holdMs).unref();
    else holdTimer.refresh();
  }

  function release(): void {
    if (held.length === 0) return;
    const events = held;
    const written = heldWritten!;
    held = [];
    heldWritten = undefined;
    if (client.status === 'ready') send(events);
    else toSpool(events, new StoreUnavailableError('enqueue'));
    written.resolve();
  }

  function send(events: PendingEvent[]): void {
    const { stream, slot, encode } = shards[nextShard]!;
    nextShard = (nextShard + 1) % shards.length;
    const command =
      events.length === 1
        ? new EncodedCommand('xadd', [stream], slot, encode.xadd(events[0]!.payload))
        : new EncodedCommand('eval', [stream], slot, encode.xaddBatch(events));
    client.sendCommand(command);
    const added: Promise<unknown> = command.promise;
    // WAIT goes out with the write (same turn, same connection) and covers it: a batch the replicas did
    // not take may be lost in a failover, so it is spooled, and the spool moves it to the new primary.
    const sent = replication.replicas === 0 ? added : Promise.all([added, waitReplicas(client, replication)]);
    sending++;
    const batch: InFlight = { events, deadline: 0, done: false };
    if (commandTimeoutMs !== undefined) watch(batch, commandTimeoutMs);
    sent.then(
      () => {
        if (batch.done) return;
        batch.done = true;
        spooling = false;
        for (const e of events) done(e);
        answered();
      },
      (err: unknown) => {
        if (batch.done) return;
        batch.done = true;
        toSpool(events, err);
        answered();
      },
    );
  }

  function answered(): void {
    while (inFlight.length > 0 && inFlight[0]!.done) inFlight.shift();
    if (--sending > 0) return;
    // Sent on (sending again), or spooled when the connection is down (then nothing is on its way).
    release();
    if (sending > 0) return;
    const waiting = idle;
    idle = [];
    for (const wake of waiting) wake();
  }

  // The batches in flight, oldest first, and one timer for all of them: it fails what is overdue when it
  // fires and is set again for the oldest that remains, so no timer is set or cleared per batch.
  const inFlight: InFlight[] = [];
  let timer: NodeJS.Timeout | undefined;

  function watch(batch: InFlight, timeoutMs: number): void {
    batch.deadline = Date.now() + timeoutMs;
    inFlight.push(batch);
    if (timer === undefined) timer = setTimeout(expire, timeoutMs).unref();
  }

  function expire(): void {
    timer = undefined;
    const now = Date.now();
    while (inFlight.length > 0) {
      const batch = inFlight[0]!;
      if (!batch.done && batch.deadline > now) break;
      inFlight.shift();
      if (batch.done) continue;
      // As ioredis's own command timeout: the reply may still come, and is then ignored.
      batch.done = true;
      toSpool(batch.events, new Error('Command timed out'));
      answered();
    }
    if (inFlight.length > 0) timer = setTimeout(expire, inFlight[0]!.deadline - now).unref();
  }

  // One chained promise per turn, not per reply. A turn's flush may hold its events: then they are
  // recorded once the held events are written.
  let lastFlush: Promise<void> | undefined;
  let afterFlush: Promise<void> | undefined;
  let lastTurn: Promise<void> | undefined;
  let chained: Promise<void> | undefined;
  function recorded(): Promise<void> | undefined {
    const flush = turn.settled();
    let pending: Promise<void> | undefined;
    if (flush === undefined) pending = heldWritten?.promise;
    else {
      if (flush !== lastFlush) {
        lastFlush = flush;
        afterFlush = flush.then(() => heldWritten?.promise);
      }
      pending = afterFlush;
    }
    if (spool === undefined) return pending;
    if (pending === undefined) return spool.recorded();
    if (pending !== lastTurn) {
      lastTurn = pending;
      chained = pending.then(() => spool.recorded());
    }
    return chained;
  }

  function queueEvent(event: UsageEvent | TokenEvent, traceparent: string | undefined, payload: string) {
    outcome ??= turnOutcome();
    outcome.left++;
    turn.add({ event, traceparent, payload, outcome });
    return outcome.promise;
  }

  return {
    enqueue(event: UsageEvent, traceparent?: string): Promise<void> {
      return queueEvent(event, traceparent, queuedJson(event, traceparent));
    },
    enqueueTokens(event: TokenEvent, traceparent?: string): Promise<void> {
      return queueEvent(event, traceparent, queuedTokensJson(event, traceparent));
    },
    recorded,
    async settled() {
      await turn.settled();
      if (sending > 0) await new Promise<void>((resolve) => idle.push(resolve));
    },
  };
}

async function waitReplicas(
  client: Redis,
  replication: { replicas: number; timeoutMs: number },
): Promise<void> {
  const acknowledged = await client.wait(replication.replicas, replication.timeoutMs);
  if (acknowledged < replication.replicas) {
    throw new StoreUnavailableError(
      'enqueue',
      new Error(`${acknowledged} of ${replication.replicas} replicas took the batch`),
    );
  }
}

interface InFlight {
  readonly events: PendingEvent[];
  /** Date.now() past which it counts as failed. */
  deadline: number;
  /** Answered or timed out: whichever comes second is ignored. */
  done: boolean;
}

interface PendingEvent {
  /** A token event is made whole only if it has to go to the spool. */
  event: UsageEvent | TokenEvent;
  traceparent: string | undefined;
  payload: string;
  outcome: TurnOutcome;
}

/**
 * The promise the events of one turn share: resolved once every one of them is on the stream or in the
 * spool, rejected at the first that is neither (its turn's events are then all counted as failed).
 */
interface TurnOutcome extends PromiseWithResolvers<void> {
  left: number;
  settled: boolean;
}

function turnOutcome(): TurnOutcome {
  return { ...Promise.withResolvers<void>(), left: 0, settled: false };
}

function done(e: PendingEvent): void {
  const o = e.outcome;
  if (o.settled || --o.left > 0) return;
  o.settled = true;
  o.resolve();
}

function failed(e: PendingEvent, err: unknown): void {
  const o = e.outcome;
  if (o.settled) return;
  o.settled = true;
  o.reject(err);
}

function asQueueError(err: unknown): unknown {
  return isConnectionError(err) ? new StoreUnavailableError('enqueue', err) : err;
}

export interface BillingSink {
  readonly queue: EventQueue;
  /** XLEN of the stream and of its dead-letter stream. */
  readiness(): Promise<{ pending: number; dead_letter: number }>;
  close(): Promise<void>;
}

/**
 * The gateway's side of the stream: its own connection, the queue, the spool under
 * `<spoolRoot>/spool` (billing.outbox_dir) and the counts /readyz shows.
 */
export async function openRedisBillingSink(
  store: StoreConfig,
  opts: { spoolRoot?: string; logger?: Logger } = {},
): Promise<BillingSink> {
  const { spoolRoot, logger } = opts;
  const shared = spoolRoot === undefined ? undefined : await acquireEventSpool(spoolRoot, store, logger);
  // Its own connection, written at once: the queue batches per turn itself (createRedisEventQueue).
  const { client, keys } = await connectRedis(store, {
    logger,
    connectionName: 'router-gateway-queue',
    writeAtOnce: true,
    ownTimeouts: true,
  });
  const timeoutMs = store.operationTimeoutMs;
  const queue = createRedisEventQueue(
    client,
    keys,
    shared?.spool,
    logger,
    { replicas: store.billingWaitReplicas, timeoutMs },
    timeoutMs,
  );
  return {
    queue,
    async readiness() {
      // One command per key: in a cluster the shards are on different nodes (no cross-slot pipeline).
      let lengths: number[];
      try {
        lengths = await withTimeout(
          Promise.all(
            keys.shards.flatMap((shard) => [client.xlen(shard.stream), client.xlen(shard.deadLetter)]),
          ),
          timeoutMs,
        );
      } catch (err) {
        throw new StoreUnavailableError('readiness', err);
      }
      const spooled = shared === undefined ? 0 : await shared.spool.pending();
      const pending = lengths.filter((_, i) => i % 2 === 0).reduce((a, b) => a + b, 0);
      const deadLetter = lengths.filter((_, i) => i % 2 === 1).reduce((a, b) => a + b, 0);
      return { pending: pending + spooled, dead_letter: deadLetter };
    },
    async close() {
      // Events still on their way end on the stream or in the spool before either closes.
      await queue.settled();
      await closeRedisClient(client, timeoutMs);
      await shared?.release();
    },
  };
}
