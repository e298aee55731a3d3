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
import { errorText } from '../common/errors.ts';
import { type StoreHealth, StoreUnavailableError } from '../common/store-types.ts';
import { createTurnBatch, type TurnBatch } from '../common/turn-batch.ts';
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
import { streamBacklog } from '../store/stream-ledger.ts';
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
  replication: Replication = { replicas: 0, timeoutMs: 0 },
  /** Bounds each batch by itself: for a connection made with `ownTimeouts` (no timer per command). */
  commandTimeoutMs?: number,
  /** How long events may wait for the batch ahead of them to be answered before they are written. */
  holdMs = DEFAULT_HOLD_MS,
  /** Told once per batch the stream did not take (`billingStream`): router_store_errors_total. */
  onStoreError?: (operation: string) => void,
): RedisEventQueue {
  return new StreamEventQueue(
    client,
    keys,
    spool,
    logger,
    replication,
    commandTimeoutMs,
    holdMs,
    onStoreError,
  );
}

interface Replication {
  replicas: number;
  timeoutMs: number;
}

class StreamEventQueue implements RedisEventQueue {
  readonly #client: Redis;
  readonly #spool: EventSpool | undefined;
  readonly #onStoreError: ((operation: string) => void) | undefined;
  readonly #logger: Logger | undefined;
  readonly #replication: Replication;
  readonly #commandTimeoutMs: number | undefined;
  readonly #holdMs: number;
  #sending = 0;
  #idle: (() => void)[] = [];
  // Each turn's batch goes to the next shard: the shards take equal shares of the event rate.
  #nextShard = 0;
  readonly #shards: { stream: string; slot: number; encode: ReturnType<typeof streamCommands> }[];
  // Logged once per outage: the first event spooled after a write that reached the stream.
  #spooling = false;

  // The events completed in one event-loop turn go out together: a lone event as a plain XADD, several
  // as one script call. The gateway sends a reply's last byte after recorded(); by then the command has
  // been written to the socket (the queue's connection does not auto-pipeline, which would defer the
  // write to the next turn), or, while the connection is down, the events are in the spool's write of
  // the next turn, which recorded() waits for too.
  // The events of one turn share one outcome (a promise per event cost the request path measurable CPU).
  #outcome: TurnOutcome | undefined;
  readonly #turn: TurnBatch<PendingEvent>;

  // While a batch is on its way, later turns' events wait for its answer and then go out as one command:
  // under load one write carries many turns, which saves the gateway a socket write and Redis a command
  // per turn. Their replies' last bytes wait for that write (recorded()), so the wait is bounded: after
  // holdMs the held events are written anyway, beside the batch still unanswered.
  #held: PendingEvent[] = [];
  #heldWritten: PromiseWithResolvers<void> | undefined;
  #holdTimer: NodeJS.Timeout | undefined;
  readonly #onHoldTimer = (): void => this.#release();

  // The batches in flight, oldest first, and one timer for all of them: it fails what is overdue when it
  // fires and is set again for the oldest that remains, so no timer is set or cleared per batch.
  readonly #inFlight: InFlight[] = [];
  #timer: NodeJS.Timeout | undefined;
  readonly #onTimer = (): void => this.#expire();

  // One chained promise per turn, not per reply. A turn's flush may hold its events: then they are
  // recorded once the held events are written.
  #lastFlush: Promise<void> | undefined;
  #afterFlush: Promise<void> | undefined;
  #lastTurn: Promise<void> | undefined;
  #chained: Promise<void> | undefined;

  constructor(
    client: Redis,
    keys: Pick<KeyLayout, 'shards'>,
    spool: EventSpool | undefined,
    logger: Logger | undefined,
    replication: Replication,
    commandTimeoutMs: number | undefined,
    holdMs: number,
    onStoreError: ((operation: string) => void) | undefined,
  ) {
    this.#onStoreError = onStoreError;
    this.#client = client;
    this.#spool = spool;
    this.#logger = logger;
    this.#replication = replication;
    this.#commandTimeoutMs = commandTimeoutMs;
    this.#holdMs = holdMs;
    this.#shards = keys.shards.map(({ stream }) => ({
      stream,
      slot: keySlot(stream),
      encode: streamCommands(stream),
    }));
    this.#turn = createTurnBatch<PendingEvent>((events) => this.#flushTurn(events));
  }

  enqueue(event: UsageEvent, traceparent?: string): Promise<void> {
    return this.#queueEvent(event, traceparent, queuedJson(event, traceparent));
  }

  enqueueTokens(event: TokenEvent, traceparent?: string): Promise<void> {
    return this.#queueEvent(event, traceparent, queuedTokensJson(event, traceparent));
  }

  recorded(): Promise<void> | undefined {
    const flush = this.#turn.settled();
    let pending: Promise<void> | undefined;
    if (flush === undefined) pending = this.#heldWritten?.promise;
    else {
      if (flush !== this.#lastFlush) {
        this.#lastFlush = flush;
        this.#afterFlush = flush.then(() => this.#heldWritten?.promise);
      }
      pending = this.#afterFlush;
    }
    const spool = this.#spool;
    if (spool === undefined) return pending;
    if (pending === undefined) return spool.recorded();
    if (pending !== this.#lastTurn) {
      this.#lastTurn = pending;
      this.#chained = pending.then(() => spool.recorded());
    }
    return this.#chained;
  }

  async settled(): Promise<void> {
    await this.#turn.settled();
    if (this.#sending > 0) await new Promise<void>((resolve) => this.#idle.push(resolve));
  }

  #queueEvent(event: UsageEvent | TokenEvent, traceparent: string | undefined, payload: string) {
    this.#outcome ??= turnOutcome();
    const outcome = this.#outcome;
    outcome.left++;
    this.#turn.add({ event, traceparent, payload, outcome });
    return outcome.promise;
  }

  /** The turn batch's flush: the turn's events to the stream, held behind a batch in flight, or spooled. */
  #flushTurn(events: PendingEvent[]): void {
    this.#outcome = undefined;
    if (this.#client.status !== 'ready') this.#toSpool(events, new StoreUnavailableError('enqueue'));
    else if (this.#sending > 0) this.#hold(events);
    else this.#send(events);
  }

  #toSpool(events: PendingEvent[], cause: unknown): void {
    // One failed write of the stream (a batch refused or timed out, or a turn while the connection is down).
    this.#onStoreError?.('billingStream');
    const spool = this.#spool;
    if (spool === undefined) {
      const failure = asQueueError(cause);
      for (const e of events) failed(e, failure);
      return;
    }
    if (!this.#spooling) {
      this.#spooling = true;
      this.#logger?.warn(
        { err: errorText(cause), spool: spool.dir },
        'billing stream unavailable: usage events go to the local spool',
      );
    }
    for (const e of events)
      spool.append('raw_json' in e.event ? e.event : usageEventOf(e.event), e.traceparent).then(
        () => done(e),
        (err: unknown) => failed(e, err),
      );
  }

  #hold(events: PendingEvent[]): void {
    for (const e of events) this.#held.push(e);
    if (this.#heldWritten !== undefined) return;
    this.#heldWritten = Promise.withResolvers<void>();
    if (this.#holdTimer === undefined) this.#holdTimer = setTimeout(this.#onHoldTimer, this.#holdMs).unref();
    else this.#holdTimer.refresh();
  }

  #release(): void {
    if (this.#held.length === 0) return;
    const events = this.#held;
    const written = this.#heldWritten!;
    this.#held = [];
    this.#heldWritten = undefined;
    if (this.#client.status === 'ready') this.#send(events);
    else this.#toSpool(events, new StoreUnavailableError('enqueue'));
    written.resolve();
  }

  #send(events: PendingEvent[]): void {
    const { stream, slot, encode } = this.#shards[this.#nextShard]!;
    this.#nextShard = (this.#nextShard + 1) % this.#shards.length;
    const command =
      events.length === 1
        ? new EncodedCommand('xadd', [stream], slot, encode.xadd(events[0]!.payload))
        : new EncodedCommand('eval', [stream], slot, encode.xaddBatch(events));
    this.#client.sendCommand(command);
    const added: Promise<unknown> = command.promise;
    // WAIT goes out with the write (same turn, same connection) and covers it: a batch the replicas did
    // not take may be lost in a failover, so it is spooled, and the spool moves it to the new primary.
    const replication = this.#replication;
    const sent =
      replication.replicas === 0 ? added : Promise.all([added, waitReplicas(this.#client, replication)]);
    this.#sending++;
    const batch: InFlight = { events, deadline: 0, done: false };
    if (this.#commandTimeoutMs !== undefined) this.#watch(batch, this.#commandTimeoutMs);
    sent.then(
      () => {
        if (batch.done) return;
        batch.done = true;
        this.#spooling = false;
        for (const e of events) done(e);
        this.#answered();
      },
      (err: unknown) => {
        if (batch.done) return;
        batch.done = true;
        this.#toSpool(events, err);
        this.#answered();
      },
    );
  }

  #answered(): void {
    const inFlight = this.#inFlight;
    while (inFlight.length > 0 && inFlight[0]!.done) inFlight.shift();
    if (--this.#sending > 0) return;
    // Sent on (sending again), or spooled when the connection is down (then nothing is on its way).
    this.#release();
    if (this.#sending > 0) return;
    const waiting = this.#idle;
    this.#idle = [];
    for (const wake of waiting) wake();
  }

  #watch(batch: InFlight, timeoutMs: number): void {
    batch.deadline = Date.now() + timeoutMs;
    this.#inFlight.push(batch);
    if (this.#timer === undefined) this.#timer = setTimeout(this.#onTimer, timeoutMs).unref();
  }

  #expire(): void {
    this.#timer = undefined;
    const inFlight = this.#inFlight;
    const now = Date.now();
    while (inFlight.length > 0) {
      const batch = inFlight[0]!;
      if (!batch.done && batch.deadline > now) break;
      inFlight.shift();
      if (batch.done) continue;
      // As ioredis's own command timeout: the reply may still come, and is then ignored.
      batch.done = true;
      this.#toSpool(batch.events, new Error('Command timed out'));
      this.#answered();
    }
    if (inFlight.length > 0) this.#timer = setTimeout(this.#onTimer, inFlight[0]!.deadline - now).unref();
  }
}

async function waitReplicas(client: Redis, replication: Replication): Promise<void> {
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
  /** Entries of the stream still to deliver (store/stream-ledger.ts) and XLEN of its dead letter. */
  readiness(): Promise<{ pending: number; dead_letter: number }>;
  /** Whether the store answers a PING now (Redis sink only). */
  readonly health?: () => Promise<StoreHealth>;
  close(): Promise<void>;
}

/**
 * The gateway's side of the stream: its own connection, the queue, the spool under
 * `<spoolRoot>/spool` (billing.outbox_dir) and the counts /readyz shows.
 */
export async function openRedisBillingSink(
  store: StoreConfig,
  opts: { spoolRoot?: string; logger?: Logger; onStoreError?: (operation: string) => void } = {},
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
    DEFAULT_HOLD_MS,
    opts.onStoreError,
  );
  return {
    queue,
    async readiness() {
      // One command per key: in a cluster the shards are on different nodes (no cross-slot pipeline).
      let lengths: number[];
      try {
        lengths = await withTimeout(
          Promise.all(
            keys.shards.flatMap((shard) => [
              streamBacklog(client, shard.stream, store.billingConsumerGroup),
              client.xlen(shard.deadLetter),
            ]),
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
    async health() {
      const connected =
        client.status === 'ready' &&
        (await withTimeout(client.ping(), timeoutMs).then(
          () => true,
          () => false,
        ));
      return { connected };
    },
    async close() {
      // Events still on their way end on the stream or in the spool before either closes.
      await queue.settled();
      await closeRedisClient(client, timeoutMs);
      await shared?.release();
    },
  };
}
