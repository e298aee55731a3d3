// One shard of the billing stream (shared-store mode) as a queue of the delivery loop
// (billing/delivery/delivery-queue.ts), each entry on its own and acknowledged.
//
// Group semantics (docs/operations.md "Billing stream delivery"): all sidecars read with XREADGROUP in
// `billing_consumer_group` under a name unique per process. An entry stays in its consumer's pending
// list until it is delivered (XACK + XDEL + HDEL in one MULTI; with a ledger retention XACK + HDEL, the
// entry staying as the ledger until trimmed by age, store/stream-ledger.ts) or dead-lettered. A consumer that stops
// hands back what it had not delivered (re-added to the stream at once). A consumer that dies leaves its
// entries pending; once idle for reclaim_idle_ms another consumer takes them with XAUTOCLAIM. A live
// consumer refreshes the idle time of what it holds (XCLAIM JUSTID, only while it is still the owner) at
// a third of that period, so an entry has one active consumer at a time. Should two ever send the same
// event, the Idempotency-Key makes the billing service count it once. Counted attempts go to the
// attempts hash (HINCRBY, shared by all consumers, so a reclaimed entry keeps its count); an entry at
// billing_max_attempts moves to `<stream>:dead-letter` atomically.

import type { Logger } from 'pino';
import { abortableSleep, type IngestFailure } from '../billing/delivery/delivery-policy.ts';
import type { DeliveryQueue, FailureReport, Settlement } from '../billing/delivery/delivery-queue.ts';
import { takeTraceparent, type UsageEvent } from '../billing/event/usage-event.ts';
import { jitteredDelay } from '../common/backoff.ts';
import type { StoreConfig } from '../common/config-types.ts';
import { errorText } from '../common/errors.ts';
import { defineScript, type Redis, type StreamShardKeys } from '../store/redis-client.ts';
import { trimDelivered } from '../store/stream-ledger.ts';
import { logIngestFailure } from './ingest-transport.ts';
import { StreamAcks } from './stream-acks.ts';

interface EntryBase {
  readonly id: string;
  readonly payload: string;
  /** Counted attempts when read (from the shared attempts hash). */
  readonly attempts: number;
}

export interface EventEntry extends EntryBase {
  readonly event: UsageEvent;
  readonly traceparent: string | undefined;
  readonly invalid: undefined;
}

/** A payload that is not a usage event: dead-lettered at once. */
interface InvalidEntry extends EntryBase {
  readonly event: undefined;
  readonly invalid: IngestFailure;
}

export type StreamEntry = EventEntry | InvalidEntry;

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

type StreamEntries = [id: string, fields: string[] | null][];

export interface StreamQueueOptions {
  readonly store: StoreConfig;
  readonly keys: StreamShardKeys;
  readonly name: string;
  /** Commands. */
  readonly cmd: Redis;
  /** Blocking reads: their own connection. */
  readonly reader: Redis;
  readonly blockMs: number;
  readonly lingerMs: number;
  readonly reclaimIntervalMs: number;
  readonly random: () => number;
  readonly logger?: Logger;
  /** Records a store error among the delivery counters. */
  readonly recordError: (code: string, message: string) => void;
  /** Keep delivered entries this long as the ledger (0: deleted once delivered). */
  readonly retentionMs?: number;
  /** How often delivered entries are trimmed by age (default 60 s). */
  readonly trimIntervalMs?: number;
}

export class StreamQueue implements DeliveryQueue<StreamEntry> {
  readonly #o: StreamQueueOptions;
  readonly #group: string;
  readonly #held = new Map<string, StreamEntry>();
  readonly #acks: StreamAcks;
  readonly #heartbeat: NodeJS.Timeout;
  readonly #trimTimer: NodeJS.Timeout | undefined;
  reclaimed = 0;
  #groupReady = false;
  #ownPending = true;
  #nextReclaim = 0;
  #reclaimCursor = '0-0';
  #lingerNext = false;
  readonly #closing = new AbortController();

  constructor(o: StreamQueueOptions) {
    this.#o = o;
    this.#group = o.store.billingConsumerGroup;
    const retentionMs = o.retentionMs ?? 0;
    this.#acks = new StreamAcks(
      o.cmd,
      o.keys,
      this.#group,
      o.random,
      this.#closing.signal,
      o.recordError,
      retentionMs > 0,
    );
    this.#heartbeat = setInterval(
      () => {
        this.#touchAll().catch((err: unknown) =>
          o.logger?.debug({ err: errorText(err) }, 'billing entry heartbeat failed'),
        );
      },
      Math.max(10, Math.floor(o.store.reclaimIdleMs / 3)),
    );
    this.#heartbeat.unref();
    // The ledger's trim by age, beside the loop (every sidecar of the group may run it: it is one script
    // that never removes an entry still to deliver).
    this.#trimTimer =
      retentionMs > 0
        ? setInterval(() => {
            trimDelivered(o.cmd, o.keys.stream, this.#group, Date.now() - retentionMs).then(
              (removed) => {
                if (removed > 0) o.logger?.debug({ removed }, 'ledger stream entries trimmed by age');
              },
              (err: unknown) =>
                o.logger?.debug({ err: errorText(err) }, 'could not trim the ledger stream entries'),
            );
          }, o.trimIntervalMs ?? 60_000)
        : undefined;
    this.#trimTimer?.unref();
  }

  /**
   * Entries this consumer held before a restart (a fixed billing_consumer_name), then those of dead
   * consumers when a reclaim is due, else new ones (blocking up to blockMs).
   */
  async read(max: number, signal: AbortSignal): Promise<readonly StreamEntry[]> {
    const { keys } = this.#o;
    if (!this.#groupReady) {
      await this.#ensureGroup();
      this.#groupReady = true;
    }
    if (this.#ownPending) {
      this.#ownPending = false;
      const mine = await this.#readGroup(this.#o.cmd, ['COUNT', max, 'STREAMS', keys.stream, '0']);
      if (mine.length > 0) return this.#adopt(mine, false, false);
    }
    if (Date.now() >= this.#nextReclaim) {
      this.#nextReclaim = Date.now() + this.#o.reclaimIntervalMs;
      const taken = await this.#reclaim(max);
      if (taken.length > 0) return taken;
    }
    // A short read means the stream is keeping up with the gateway: let more entries gather before
    // the next read instead of one round trip (and one wake-up) per event (billing.delivery_linger_ms).
    if (this.#lingerNext) {
      this.#lingerNext = false;
      await abortableSleep(this.#o.lingerMs, signal);
    }
    const block = Math.max(1, Math.min(this.#o.blockMs, this.#nextReclaim - Date.now()));
    const args = ['COUNT', max, 'BLOCK', block, 'STREAMS', keys.stream, '>'];
    const entries = await this.#readGroup(this.#o.reader, args);
    this.#lingerNext = this.#o.lingerMs > 0 && entries.length > 0 && entries.length < max;
    return this.#adopt(entries, false, true);
  }

  attempts(entry: StreamEntry): number {
    return entry.attempts;
  }

  unsendable(entry: StreamEntry): IngestFailure | undefined {
    return entry.invalid;
  }

  async recordAttempt(entry: StreamEntry, attempts: number): Promise<number> {
    try {
      return await this.#o.cmd.hincrby(this.#o.keys.attempts, entry.id, 1);
    } catch (err) {
      // The count could not be recorded: retry without counting rather than lose the event.
      this.#o.logger?.warn({ err: errorText(err), id: entry.id }, 'could not record a delivery attempt');
      return attempts - 1;
    }
  }

  async stillHeld(entry: StreamEntry): Promise<boolean> {
    try {
      const owned =
        (await TOUCH.run(this.#o.cmd, [this.#o.keys.stream], [this.#group, this.#o.name, entry.id])) === 1;
      if (!owned)
        this.#o.logger?.info({ id: entry.id }, 'billing entry now owned by another consumer; leaving it');
      return owned;
    } catch {
      return true; // store down: keep retrying the ingest; ownership is checked again next time
    }
  }

  failed(entry: StreamEntry, report: FailureReport): void {
    if (entry.event !== undefined) logIngestFailure(this.#o.logger, entry.event, report);
  }

  async deadLetter(entry: StreamEntry, attempts: number, result: IngestFailure): Promise<boolean> {
    const { keys, cmd, name } = this.#o;
    const moved = await DEAD_LETTER.run(
      cmd,
      [keys.stream, keys.deadLetter, keys.attempts],
      [
        this.#group,
        name,
        entry.id,
        entry.payload,
        attempts,
        result.code,
        result.message,
        new Date().toISOString(),
      ],
    );
    if (moved !== 1) return false;
    this.#o.logger?.error(
      { id: entry.id, attempts, code: result.code },
      'billing event dead-lettered after max attempts',
    );
    return true;
  }

  settle(entry: StreamEntry, how: Settlement): void {
    this.#held.delete(entry.id);
    if (how === 'delivered') this.#acks.add(entry.id);
  }

  loopError(err: unknown, failures: number): { code: string; retryInMs: number } {
    const text = errorText(err);
    if (text.startsWith('NOGROUP')) this.#groupReady = false; // the store lost the group (restart)
    if (failures === 1) this.#o.logger?.warn({ err: text }, 'billing stream read failed; retrying');
    return { code: 'store_error', retryInMs: jitteredDelay(failures, 100, 2000, this.#o.random) };
  }

  /** Stop begins: ends a blocking read at once, gives up failing acknowledgements. */
  interrupt(): void {
    this.#closing.abort();
    this.#o.reader.disconnect();
  }

  /** Flushes the acknowledgements, hands back `unfinished`, closes nothing (the consumer owns the clients). */
  async close(unfinished: readonly StreamEntry[]): Promise<void> {
    clearInterval(this.#heartbeat);
    clearInterval(this.#trimTimer);
    await Promise.all([this.#acks.flush(), this.#handBack(unfinished)]);
  }

  async #ensureGroup(): Promise<void> {
    try {
      await this.#o.cmd.xgroup('CREATE', this.#o.keys.stream, this.#group, '0', 'MKSTREAM');
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('BUSYGROUP')) throw err;
    }
  }

  async #readGroup(conn: Redis, args: (string | number)[]): Promise<StreamEntries> {
    const reply = (await conn.call('XREADGROUP', 'GROUP', this.#group, this.#o.name, ...args)) as
      | [string, StreamEntries][]
      | null;
    if (reply === null || reply.length === 0) return [];
    return reply[0]![1];
  }

  async #reclaim(max: number): Promise<readonly StreamEntry[]> {
    const { cmd, keys, store, name } = this.#o;
    const reply = (await cmd.xautoclaim(
      keys.stream,
      this.#group,
      name,
      store.reclaimIdleMs,
      this.#reclaimCursor,
      'COUNT',
      max,
    )) as [string, StreamEntries, string[]?];
    this.#reclaimCursor = reply[0];
    return this.#adopt(
      reply[1].filter((e) => e !== null),
      true,
      false,
    );
  }

  /**
   * Takes entries on. `neverDelivered`: read with '>' (never delivered to any consumer of the group, so
   * no attempts can be recorded for them): the attempts lookup is skipped.
   */
  async #adopt(entries: StreamEntries, reclaimed: boolean, neverDelivered: boolean): Promise<StreamEntry[]> {
    const fresh = entries.filter(([id]) => !this.#held.has(id));
    if (fresh.length === 0) return [];
    const counts: (string | null)[] = neverDelivered
      ? []
      : await this.#o.cmd.hmget(this.#o.keys.attempts, ...fresh.map(([id]) => id));
    const out = fresh.map(([id, fields], i) => entryOf(id, fields, Number(counts[i] ?? 0)));
    for (const e of out) this.#held.set(e.id, e);
    if (reclaimed) {
      this.reclaimed += out.length;
      this.#o.logger?.info(
        { count: out.length, consumer: this.#o.name },
        'reclaimed pending billing entries',
      );
    }
    return out;
  }

  async #touchAll(): Promise<void> {
    if (this.#held.size === 0) return;
    const { cmd, keys, name } = this.#o;
    await Promise.all(
      [...this.#held.keys()].map((id) => TOUCH.run(cmd, [keys.stream], [this.#group, name, id])),
    );
  }

  /**
   * Hands back what the stop left undelivered, so a rolling restart delays no event by reclaim_idle_ms.
   * An entry whose ingest was aborted may have reached the service: sent again, it is counted once
   * (Idempotency-Key). If the store does not answer, the entries stay pending and are reclaimed later.
   */
  async #handBack(entries: readonly StreamEntry[]): Promise<void> {
    if (entries.length === 0) return;
    const { cmd, keys, name, store, logger } = this.#o;
    const results = await Promise.allSettled(
      entries.map((e) =>
        RELEASE.run(cmd, [keys.stream, keys.attempts], [this.#group, name, e.id, e.payload]),
      ),
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
}

function entryOf(id: string, fields: string[] | null, attempts: number): StreamEntry {
  const payload = payloadOf(fields) ?? '';
  try {
    const event = JSON.parse(payload) as UsageEvent;
    if (event === null || typeof event !== 'object' || typeof event.idempotency_key !== 'string') {
      throw new Error('not a usage event');
    }
    const traceparent = takeTraceparent(event as unknown as Record<string, unknown>);
    return { id, payload, event, traceparent, attempts, invalid: undefined };
  } catch (err) {
    const invalid: IngestFailure = {
      kind: 'permanent',
      status: 0,
      code: 'invalid_payload',
      message: errorText(err),
    };
    return { id, payload, event: undefined, attempts, invalid };
  }
}

function payloadOf(fields: string[] | null): string | undefined {
  if (fields === null) return undefined;
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === 'payload') return fields[i + 1];
  return undefined;
}
