// The file outbox as a queue of the delivery loop (billing/delivery/delivery-queue.ts): read in order,
// checkpointed. The loop settles entries in read order, and the checkpoint moves to the end of the
// lowest entry not yet done, so a crash re-sends at most what was read past it (the billing service
// deduplicates on Idempotency-Key). Counted attempts are kept in the checkpoint, written before the
// retry, so they survive restarts. Exhausted events go to dead-letter.jsonl.

import type { Logger } from 'pino';
import type { IngestFailure } from '../billing/delivery/delivery-policy.ts';
import type { DeliveryQueue, FailureReport } from '../billing/delivery/delivery-queue.ts';
import {
  attemptKey,
  OutboxFormatError,
  type OutboxItem,
  type OutboxPosition,
  type OutboxReader,
  positionAfter,
} from '../billing/outbox/reader.ts';
import { errorText } from '../common/errors.ts';
import type { DeadLetterFile } from './dead-letter-file.ts';
import { logIngestFailure } from './ingest-transport.ts';

export type EventItem = Extract<OutboxItem, { kind: 'event' }>;

/** How often an outbox stopped at a newer line format is looked at again (the events wait meanwhile). */
const FORMAT_RECHECK_MS = 60_000;

/** How often delivered segments kept as the ledger are looked at for trimming by age. */
const TRIM_INTERVAL_MS = 60_000;

export interface OutboxQueueOptions {
  /** Write the checkpoint after this many done items ... */
  readonly checkpointEvery: number;
  /** ... or this long after the first uncheckpointed one, and whenever idle. */
  readonly checkpointIntervalMs: number;
  /** Fallback poll when fs.watch misses a change or is unavailable. */
  readonly pollIntervalMs: number;
  /** How often the reader trims the ledger by age (default 60 s; the reader knows the retention). */
  readonly trimIntervalMs?: number;
  readonly logger?: Logger;
}

export class OutboxQueue implements DeliveryQueue<OutboxItem> {
  readonly #reader: OutboxReader;
  readonly #deadLetters: DeadLetterFile;
  readonly #opts: OutboxQueueOptions;
  /** Counted attempts of the events not yet passed by the checkpoint (from the checkpoint at start). */
  readonly #attempts: Map<string, number>;
  #attemptsDirty = false;
  #committed: OutboxPosition;
  #doneSinceCheckpoint = 0;
  #firstUncheckpointedAt = 0;
  // Checkpoints are written one at a time, in order, so a slower older write can never land last.
  #checkpointChain: Promise<void> = Promise.resolve();
  /** A read failure after items were already taken: those are returned first, it is thrown next. */
  #readError: unknown;
  /** The newer line format last reported, so the stop is logged once, not at every retry. */
  #reportedFormat: string | undefined;
  #nextTrimAt = 0;
  #trimming: Promise<void> | undefined;

  constructor(reader: OutboxReader, deadLetters: DeadLetterFile, opts: OutboxQueueOptions) {
    this.#reader = reader;
    this.#deadLetters = deadLetters;
    this.#opts = opts;
    this.#attempts = new Map(Object.entries(reader.initial.attempts));
    this.#committed = { segment: reader.initial.segment, offset: reader.initial.offset };
  }

  /** Everything before this position is done (in memory; the checkpoint on disk may lag). */
  get committed(): OutboxPosition {
    return this.#committed;
  }

  async read(max: number): Promise<readonly OutboxItem[]> {
    if (this.#readError !== undefined) {
      const err = this.#readError;
      this.#readError = undefined;
      throw err;
    }
    const items: OutboxItem[] = [];
    while (items.length < max) {
      let item: OutboxItem | undefined;
      try {
        item = await this.#reader.next();
      } catch (err) {
        // The reader has moved past these items: losing them here would leave them undelivered.
        if (items.length === 0) throw err;
        this.#readError = err;
        break;
      }
      if (item === undefined) break;
      items.push(item);
    }
    return items;
  }

  attempts(item: OutboxItem): number {
    return item.kind === 'event' ? (this.#attempts.get(attemptKey(item)) ?? 0) : 0;
  }

  unsendable(item: OutboxItem): 'pass' | undefined {
    return item.kind === 'event' ? undefined : 'pass';
  }

  async recordAttempt(item: OutboxItem, attempts: number): Promise<number> {
    this.#attempts.set(attemptKey(item as EventItem), attempts);
    this.#attemptsDirty = true;
    try {
      await this.#checkpoint();
    } catch (err) {
      // Kept in memory and written at the next checkpoint (housekeep retries while it is dirty).
      this.#opts.logger?.warn({ err: errorText(err) }, 'could not write the outbox checkpoint');
    }
    return attempts;
  }

  failed(item: OutboxItem, report: FailureReport): void {
    if (item.kind === 'event') logIngestFailure(this.#opts.logger, item.event, report);
  }

  async deadLetter(item: OutboxItem, attempts: number, r: IngestFailure): Promise<boolean> {
    const { event, segment, offset } = item as EventItem;
    await this.#deadLetters.append({
      dead_lettered_at: new Date().toISOString(),
      segment,
      offset,
      attempts,
      last_error: { kind: r.kind, status: r.status, code: r.code, message: r.message },
      event,
    });
    this.#opts.logger?.error(
      { request_id: event.external_event_id, attempts, code: r.code },
      'billing event dead-lettered after max attempts',
    );
    return true;
  }

  settle(item: OutboxItem): void {
    this.#committed = positionAfter(item);
    if (item.kind !== 'sealed' && this.#attempts.size > 0) this.#attempts.delete(attemptKey(item));
    if (this.#doneSinceCheckpoint === 0) this.#firstUncheckpointedAt = Date.now();
    this.#doneSinceCheckpoint++;
  }

  /** Keeps the position only: up to the read-ahead of events may wait behind a poison head. */
  compact(item: OutboxItem): OutboxItem {
    return item.kind === 'event'
      ? { kind: 'skip', segment: item.segment, offset: item.offset, end: item.end }
      : item;
  }

  housekeep(idle: boolean): number | Promise<number> {
    this.#trimSometimes();
    const pending = this.#doneSinceCheckpoint > 0 || this.#attemptsDirty;
    if (this.#checkpointDue() || (idle && pending)) return this.#checkpoint().then(() => this.#waitBound());
    return this.#waitBound();
  }

  /**
   * The ledger's trim by age (outbox/reader.ts trim), at most once per interval, beside the loop: it
   * never holds up a delivery.
   */
  #trimSometimes(): void {
    const now = Date.now();
    if (this.#trimming !== undefined || now < this.#nextTrimAt) return;
    this.#nextTrimAt = now + (this.#opts.trimIntervalMs ?? TRIM_INTERVAL_MS);
    this.#trimming = this.#reader
      .trim(now)
      .then(
        (removed) => {
          if (removed > 0) this.#opts.logger?.debug({ removed }, 'ledger segments trimmed by age');
        },
        (err: unknown) =>
          this.#opts.logger?.warn({ err: errorText(err) }, 'could not trim the ledger segments'),
      )
      .finally(() => {
        this.#trimming = undefined;
      });
  }

  /** Something is in flight and a settled send wakes the loop: the bound only limits checkpoint lag. */
  #waitBound(): number {
    return this.#doneSinceCheckpoint > 0 ? this.#opts.checkpointIntervalMs : this.#opts.pollIntervalMs;
  }

  loopError(err: unknown): { code: string; retryInMs: number } {
    if (err instanceof OutboxFormatError) {
      // Nothing here can change while this process runs: say it once, look again now and then.
      if (this.#reportedFormat !== err.message) {
        this.#reportedFormat = err.message;
        this.#opts.logger?.error(
          { segment: err.segment, format: err.format, version: err.found, readable: err.readable ?? null },
          err.message,
        );
      }
      return { code: 'outbox_format_newer', retryInMs: FORMAT_RECHECK_MS };
    }
    this.#opts.logger?.error({ err: errorText(err) }, 'billing delivery loop error; retrying');
    return { code: 'outbox_error', retryInMs: this.#opts.pollIntervalMs };
  }

  /** Writes the checkpoint of what is done (the rest is sent again after a restart), closes the reader. */
  async close(): Promise<void> {
    try {
      if (this.#doneSinceCheckpoint > 0 || this.#attemptsDirty) await this.#checkpoint();
    } finally {
      await this.#trimming;
      await this.#reader.close();
    }
  }

  #checkpointDue(): boolean {
    if (this.#attemptsDirty) return true;
    if (this.#doneSinceCheckpoint === 0) return false;
    return (
      this.#doneSinceCheckpoint >= this.#opts.checkpointEvery ||
      Date.now() - this.#firstUncheckpointedAt >= this.#opts.checkpointIntervalMs
    );
  }

  #checkpoint(): Promise<void> {
    const next = this.#checkpointChain.then(() => this.#writeCheckpoint());
    this.#checkpointChain = next.catch(() => undefined);
    return next;
  }

  async #writeCheckpoint(): Promise<void> {
    const at = this.#committed;
    const done = this.#doneSinceCheckpoint;
    this.#attemptsDirty = false;
    try {
      await this.#reader.commit(at, Object.fromEntries(this.#attempts));
    } catch (err) {
      this.#attemptsDirty = true;
      throw err;
    }
    // What settled during the write waits for the next one, timed from now.
    this.#doneSinceCheckpoint -= done;
    this.#firstUncheckpointedAt = Date.now();
  }
}
